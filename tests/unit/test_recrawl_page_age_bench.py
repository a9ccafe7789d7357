"""``benchmarks/recrawl_page_age.py`` (issue 17): the change rate of pages
born inside a trace by their age, over the settled pages' rate, on a trace
made by hand."""

from __future__ import annotations

import pytest

from tests.support.simdrive import load_benchmark

HOUR, DAY = 3600.0, 86400.0


@pytest.fixture(scope="module")
def page_age():
    return load_benchmark("recrawl_page_age")


def test_each_band_counts_the_born_pages_changes_against_the_settled_rate(page_age):
    from recrawl_traces import Page, Trace  # on the path once the benchmark is loaded

    span = 100 * DAY
    # Two settled pages, 10 changes each over 100 days: 0.1 a day a page.
    settled = [Page(f"http://a.example/s{i}", "a.example", [k * 10 * DAY + i for k in range(10)]) for i in range(2)]
    # One page born on day 50: a change at 30 min, two at 2 h and 5 h, one at 3 days.
    birth = 50 * DAY
    born = Page("http://a.example/new", "a.example",
                [birth + 0.5 * HOUR, birth + 2 * HOUR, birth + 5 * HOUR, birth + 3 * DAY], birth)  # fmt: skip
    pages, cells = page_age.age_ratios(Trace("t", 0.0, span, settled + [born]))
    assert pages == 1
    per_second = 0.1 / DAY
    assert cells[0] == (pytest.approx(1 / HOUR / per_second), 1)
    assert cells[1] == (pytest.approx(2 / (23 * HOUR) / per_second), 2)
    assert cells[2] == (pytest.approx(1 / (6 * DAY) / per_second), 1)
    assert cells[3] == (0.0, 0)
    # After four weeks: 50 - 28 days watched, nothing changed.
    assert cells[4] == (0.0, 0)
    # A trace with nobody born has nothing to say in any band.
    assert page_age.age_ratios(Trace("t", 0.0, span, settled))[1] == [(None, 0)] * 5


def test_the_command_prints_a_row_per_trace(page_age, tmp_path, capsys):
    import gzip
    import json

    fixture = tmp_path / "births.json.gz"
    pages = [["http://a.example/s", "a.example", [86400, 172800]],
             ["http://a.example/n", "a.example", [3600 * 25], 3600 * 24]]  # fmt: skip
    with gzip.open(fixture, "wt") as f:
        json.dump({"tiny": {"start": 0, "end": 10 * 86400, "pages": pages}}, f)
    assert page_age.main(["--fixture", str(fixture)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == ["tiny", "1/2"]
