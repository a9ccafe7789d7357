"""``benchmarks/bench_recrawl_cost.py --instructions``: the planner's
instructions per visit counted under callgrind (issue 17's cost target;
CPU time on a shared machine moves 10 % from run to run)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import types

from tests.support.simdrive import BENCHMARKS, load_benchmark


def load(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # its siblings (arglists), as when run as a script
    return load_benchmark("bench_recrawl_cost")


def test_instructions_per_visit_are_the_two_prefixes_difference(monkeypatch, capsys):
    bench = load(monkeypatch)
    short = str(bench.BASE_YEARS)
    # Each side's count at the long and the short prefix, its visits, its
    # decisions: per visit = (long - short) / (visits long - visits short).
    counts = {("/a", "0.3"): (9_000_000, 1_100, "d1"), ("/a", short): (2_000_000, 100, "d0"),
              ("/b", "0.3"): (6_500_000, 1_100, "d1"), ("/b", short): (2_000_000, 100, "d0")}  # fmt: skip
    seen = []

    def fake_run(cmd, **kwargs):
        assert cmd[:2] == ["valgrind", "--tool=callgrind"]
        side, years = cmd[cmd.index("--worker") + 1], cmd[cmd.index("--years") + 1]
        total, visits, digest = counts[(side, years)]
        seen.append((side, years))
        with open(cmd[2].split("=", 1)[1], "w") as f:
            f.write(f"events: Ir\nsummary: {total}\ntotals: {total}\n")
        return types.SimpleNamespace(stdout=json.dumps({"visits": visits, "digest": digest}))

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(subprocess, "run", fake_run)
    args = argparse.Namespace(trace="rust-book", years=0.3, last_modified=False, timetable=None, burst=None,
                              set=[], fixture=None)  # fmt: skip
    assert bench.count_instructions(args, {"other": "/a", "this": "/b"}) == 0
    printed = capsys.readouterr().out
    assert sorted(seen) == sorted(counts)
    assert "other       7.0 thousand instructions per visit  (1000 visits" in printed
    assert "this        4.5 thousand instructions per visit" in printed
    assert "this / other = 0.643; decisions identical" in printed


def test_instructions_without_valgrind_say_so(monkeypatch, capsys):
    bench = load(monkeypatch)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert bench.main(["--instructions", "--years", "0.3"]) == 2
    assert "needs valgrind" in capsys.readouterr().out
