"""``benchmarks/recrawl_fetch_hours.py`` (issue 17): where the fetches land
against the changes, on a trace and fetch times made by hand, and one real
planner run whose figures must add up; and the trace summary's figures
of the held-out regime (how many pages change at most 3 times a year)."""

from __future__ import annotations

import pytest

from tests.support.simdrive import load_benchmark

HOUR, DAY, YEAR = 3600.0, 86400.0, 365.25 * 86400.0
MONDAY = 4 * DAY  # 1970-01-05 00:00 UTC


@pytest.fixture(scope="module")
def hours():
    return load_benchmark("recrawl_fetch_hours")


def make_trace(pages):
    from recrawl_traces import Page, Trace  # on sys.path once the benchmark is loaded

    return Trace("t", MONDAY, MONDAY + 3 * YEAR, [Page(f"http://h.example/s/{i}", "h.example", c) for i, c in enumerate(pages)])


def test_changes_fetches_and_delays_go_to_their_hours_and_classes(hours):
    # Page 0: 40 changes (13 a year) at 10:00, each fetched at 18:00 the same
    # day (delay 8 h). Page 1: 2 changes (under 1 a year) at 03:00, fetched
    # at 05:00 the next day (26 h). Fetches at 18:00 outside [a, b) and a
    # change after the last fetch do not count.
    a, b = MONDAY + 10 * DAY, MONDAY + 100 * DAY
    hot = [a + d * DAY + 10 * HOUR for d in range(40)]
    cold = [a + d * DAY + 3 * HOUR for d in (50, 70)] + [b - DAY]
    trace = make_trace([hot, cold])
    fetches = {
        "http://h.example/s/0": [MONDAY] + [t + 8 * HOUR for t in hot] + [b + 8 * HOUR],
        "http://h.example/s/1": [MONDAY] + [t + 26 * HOUR for t in cold[:2]],
    }
    found = hours.where_fetches_land(trace, fetches, a, b)
    assert found["hours"][10] == {"changes": 40, "fetches": 0, "delay": 40 * 8 * HOUR}
    assert found["hours"][18]["fetches"] == 40 and found["hours"][18]["changes"] == 0
    assert found["hours"][3] == {"changes": 2, "fetches": 0, "delay": 2 * 26 * HOUR}
    assert found["hours"][5]["fetches"] == 2
    assert sum(row["fetches"] for row in found["hours"].values()) == 42
    classes = found["classes"]
    assert classes["> 10 a year"] == {"pages": 1, "fetches": 40, "changes": 40, "delay": 40 * 8 * HOUR}
    assert classes["<= 1 a year"] == {"pages": 1, "fetches": 2, "changes": 2, "delay": 2 * 26 * HOUR}
    lines = hours.report("t", found)
    assert any(line.split()[:4] == ["10", "40", "0", "8.0"] for line in lines)


def test_a_real_planner_run_adds_up(hours):
    # Ten pages changing on weekday afternoons for a year: every change in
    # [a, b) is counted once, and the fetches by hour are the fetches by class.
    import random

    rng = random.Random(3)
    pages = [sorted(MONDAY + rng.randrange(150) * 7 * DAY + rng.randrange(5) * DAY + (13 + 3 * rng.random()) * HOUR
                    for _ in range(4 + 10 * i)) for i in range(10)]  # fmt: skip
    trace = make_trace(pages)
    from bench_recrawl_traces import run_planner

    fetches, _, visits = run_planner(trace, {"AOPIC_RECRAWL_BUDGET": 10.0}, last_modified=False)
    a, b = trace.start + 0.5 * YEAR, trace.end
    found = hours.where_fetches_land(trace, fetches, a, b)
    by_hour = sum(row["fetches"] for row in found["hours"].values())
    assert by_hour == sum(row["fetches"] for row in found["classes"].values()) > 0
    in_window = sum(a <= c < b for p in trace.pages for c in p.changes)
    counted = sum(row["changes"] for row in found["hours"].values())
    assert 0.95 * in_window <= counted <= in_window
    assert all(found["hours"][h]["changes"] == 0 for h in range(24) if not 13 <= h < 16)


def test_trace_summary_says_how_many_pages_rarely_change(hours):
    # Ten pages over three years with 1, 4, ..., 28 changes (1/3 to 9.3 a
    # year): pages 0-2 change at most 3 times a year (at most 9 in three years).
    trace = make_trace([[MONDAY + DAY * (k + 1) for k in range(1 + 3 * i)] for i in range(10)])
    s = trace.summary()
    assert s["share_3_per_year"] == pytest.approx(0.3)  # 1, 4 and 7 changes; 10 is 3.3 a year
    assert s["median_changes_per_year"] == pytest.approx(16 / 3)
    assert s["p90_changes_per_year"] == pytest.approx(25 / 3)  # the 9th of 10 (index int(0.9 * 9) = 8)
    assert s["max_changes_per_year"] == pytest.approx(28 / 3)
