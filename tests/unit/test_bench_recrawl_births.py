"""Pages born inside a change trace (issue 17): a page created inside the
trace's window is found at its birth, never fetched before, its creation
is not a change, and it is scored only while it exists, by the planner's
replay and by the baselines alike."""

from __future__ import annotations

import random

import pytest

from tests.support.simdrive import load_benchmark

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
MONDAY = 4 * DAY  # 1970-01-05 00:00 UTC


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_recrawl_traces")


def trace_with_births():
    from recrawl_traces import Page, Trace  # on sys.path once the benchmark is loaded

    rng = random.Random(3)
    start, end = MONDAY, MONDAY + 60 * WEEK
    pages = []
    for i in range(12):
        born = None if i < 6 else start + (10 + 4 * (i - 6)) * WEEK + 7 * HOUR
        first = born or start
        changes = sorted(first + rng.random() * (end - first) for _ in range(4 + i))
        pages.append(Page(f"http://h.example/p{i}", "h.example", changes, born))
    return Trace("t", start, end, pages)


def test_births_round_trip_through_the_fixture(bench, tmp_path):
    from recrawl_traces import load, save

    trace = trace_with_births()
    save([trace], tmp_path / "t.json.gz")
    (loaded,) = load(tmp_path / "t.json.gz")
    for a, b in zip(loaded.pages, trace.pages):
        assert (a.url, a.born) == (b.url, b.born)  # whole seconds, kept exactly
        assert a.changes == pytest.approx(b.changes, abs=1.0)  # rounded to the second
    assert sum(p.born is not None for p in loaded.pages) == 6


def test_the_replay_finds_a_page_at_its_birth_and_never_fetches_it_before(bench):
    trace = trace_with_births()
    fetches, _, _ = bench.run_planner(trace, {"AOPIC_RECRAWL_BUDGET": 12.0}, False)
    for page in trace.pages:
        times = fetches[page.url]
        if page.born is None:
            assert times[0] < trace.start + DAY
        else:
            assert times[0] == pytest.approx(page.born)  # found then, not before
            assert min(times) >= page.born
    for times in (bench.periodic(trace, [DAY] * 12, [0.0] * 12)[p.url] for p in trace.pages if p.born):
        assert times == sorted(times)
    grid = bench.periodic(trace, [DAY] * 12, [5 * HOUR] * 12)
    for page in trace.pages:
        times = grid[page.url]
        if page.born is not None:
            assert times[0] == page.born and all(t > page.born for t in times[1:])
            # after the birth, on the same hours as a page that always existed
            assert {round((t - trace.start) % DAY) for t in times[1:]} == {5 * HOUR}


def test_a_page_is_scored_only_while_it_exists(bench):
    from recrawl_traces import Page, Trace

    start, end = MONDAY, MONDAY + 10 * DAY
    # born on day 5, changes on day 7 at 06:00, fetched at birth and on day 8
    page = Page("http://h.example/new", "h.example", [start + 7 * DAY + 6 * HOUR], start + 5 * DAY)
    old = Page("http://h.example/old", "h.example", [])
    trace = Trace("t", start, end, [old, page])
    fetches = {old.url: [start], page.url: [start + 5 * DAY, start + 8 * DAY]}
    score = bench.score(trace, fetches, start, end)
    assert score.changes == 1 and score.hits == 1
    assert score.delay == pytest.approx(18 * HOUR)
    # stale from the change to the fetch (18 h), of 10 + 5 page-days alive
    assert 1 - score.freshness == pytest.approx(18 * HOUR / (15 * DAY))
    # the baselines' interval spends the cost over page-seconds alive, the
    # birth's fetch apart
    assert bench.alive(trace, start, end) == (15 * DAY, 1)


def test_every_baseline_spends_the_planners_cost_when_pages_are_born(bench):
    trace = trace_with_births()
    a, b = trace.start + 8 * WEEK, trace.end
    cost = 3_000
    rows = bench.baselines(trace, cost, a, b, max_interval=7 * DAY, min_interval=HOUR)
    for name, row in rows.items():
        # (an oracle solved for sum(f) = budget, as without births, spends
        # about a sixth less here, 2,527 of 3,000: the pages born late are alive a part of it)
        assert row.fetches == pytest.approx(cost, rel=0.03), name
