"""The five-budget judgement of ``benchmarks/bench_recrawl_budgets.py``
(issue 17), on runs written by hand: the summary figures and the rule that
decides whether a variant becomes the default."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.support.simdrive import load_benchmark

HOUR = 3600.0


@pytest.fixture(scope="module")
def budgets():
    return load_benchmark("bench_recrawl_budgets")


def write_run(work, side, trace, budget, delay_h, fresh, fixed_h=10.0, oracle_h=8.0, fetches=1000):
    out = work / f"{side}-{trace}-{budget}"
    out.mkdir(parents=True)
    rows = {
        "fixed (best phase)": {"delay": fixed_h * HOUR, "freshness": 0.99, "fetches": fetches},
        "oracle (true rates)": {"delay": oracle_h * HOUR, "freshness": 0.99, "fetches": fetches},
        "planner": {"delay": delay_h * HOUR, "freshness": 0.99 + fresh, "fetches": fetches},
    }
    (out / "recrawl-traces.json").write_text(json.dumps({trace: rows}))


def traces_of(budgets):
    with gzip.open(budgets.FIXTURE, "rt", encoding="utf-8") as f:
        return list(json.load(f))


def judge(budgets, work, tmp_path, capsys, variant):
    """Main at 9 h (+-0.1 h over the budgets) everywhere; ``variant(i)``
    gives the variant's (delay, freshness minus the oracle's) on trace i."""
    for i, trace in enumerate(traces_of(budgets)):
        for k, budget in enumerate(budgets.BUDGETS):
            write_run(work, "main", trace, budget, 9.0 + 0.1 * (k - 2), 0.0001 * (k - 2))
            delay, fresh = variant(i)
            write_run(work, "var", trace, budget, delay + 0.1 * (k - 2), fresh + 0.0001 * (k - 2))
    out = tmp_path / "table.txt"
    budgets.main(["--work", str(work), "--jobs", "0", "--side", "main", "--side", "var=--burst", "--out", str(out)])
    printed = capsys.readouterr().out
    assert out.read_text() == printed
    return printed


def test_one_side_summary_and_verdicts(budgets, tmp_path, capsys):
    traces = traces_of(budgets)
    for trace in traces:
        for k, budget in enumerate(budgets.BUDGETS):
            # delay / best fixed 0.70 +- 0.01: met; freshness -0.001 +- 0.0001: missed
            write_run(tmp_path, "main", trace, budget, 7.0 + 0.1 * (k - 2), -0.001 + 0.0001 * (k - 2))
    budgets.main(["--work", str(tmp_path), "--jobs", "0", "--out", str(tmp_path / "t.txt")])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(traces[0]))
    assert "7.00 ± 0.16" in row and "0.700 ± 0.016 met" in row
    assert "0.800 ± 0.000" in row  # the oracle's delay / best fixed
    assert "-0.00100 ± 0.00016 MISSED" in row


def test_a_variant_lower_on_six_of_eight_becomes_the_default(budgets, tmp_path, capsys):
    printed = judge(budgets, tmp_path / "w", tmp_path, capsys, lambda i: (8.5 if i < 6 else 9.05, 0.0))
    assert "var lower on 6 of 8" in printed and "var becomes the default" in printed


def test_ties_higher_delays_and_staler_pages_keep_a_variant_off(budgets, tmp_path, capsys):
    # Lower on five, tied (float rounding) on three: not six.
    printed = judge(budgets, tmp_path / "a", tmp_path, capsys, lambda i: (8.5 if i < 5 else 9.0 - 1e-12, 0.0))
    assert "var lower on 5 of 8" in printed and "var stays off" in printed
    # Lower on seven, longer than main's sd (0.16 h) on one.
    names = traces_of(budgets)
    printed = judge(budgets, tmp_path / "b", tmp_path, capsys, lambda i: (8.5 if i < 7 else 9.3, 0.0))
    assert f"higher by more than main's sd on: {names[7]};" in printed and "var stays off" in printed
    # Lower everywhere, but staler than main by more than its sd on one.
    printed = judge(budgets, tmp_path / "c", tmp_path, capsys, lambda i: (8.5, -0.0003 if i == 0 else 0.0))
    assert f"freshness lower by more than main's sd on: {names[0]} ->" in printed and "var stays off" in printed


def test_the_two_standard_error_rule(budgets, tmp_path, capsys):
    # main and the variant both spread 0.16 h and 0.00016 over the five
    # budgets: two standard errors of a difference are 0.2 h and 0.0002.
    names = traces_of(budgets)
    pip = names.index("pip-src")

    def verdict(variant, work):
        printed = judge(budgets, tmp_path / work, tmp_path, capsys, variant)
        return next(line for line in printed.splitlines() if line.startswith("by two standard errors"))

    line = verdict(lambda i: (9.0, 0.0003 if i == pip else 0.0), "a")
    assert "fresher on pip-src (+0.00030" in line and line.endswith("var ships (needs none longer or staler, "
                                                                    "pip-src or sphinx-src fresher)")
    # Fresher there, but longer beyond two standard errors on another trace.
    line = verdict(lambda i: (9.25 if i == 0 else 9.0, 0.0003 if i == pip else 0.0), "b")
    assert f"longer on {names[0]} (+0.25 h" in line and "var does not ship" in line
    # Within two standard errors (0.15 h longer) is not worse.
    line = verdict(lambda i: (9.15 if i == 0 else 9.0, 0.0003 if i == pip else 0.0), "c")
    assert "longer on none" in line and "var ships" in line
    # Fresher only on a trace that is not the pip or Sphinx sources; staler on one.
    line = verdict(lambda i: (9.0, 0.0003 if i == 0 else -0.00025 if i == 1 else 0.0), "d")
    assert f"staler on {names[1]}" in line and "var does not ship" in line
    # pip fresher, but within two standard errors.
    line = verdict(lambda i: (9.0, 0.00015 if i == pip else 0.0), "e")
    assert "fresher on none" in line and "var does not ship" in line
