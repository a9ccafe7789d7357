"""The burst model (issue 17): a detected change makes another change soon
more likely; learnt from change events, spent under the budget."""

from __future__ import annotations

import bisect
import json
import random

import pytest

from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY

PAGES = 40
SPAN = 200 * DAY


def bursty_changes(seed: int, follow_ups: int, gap: float = 8 * HOUR) -> dict[str, list[float]]:
    """Each page starts a burst every 10 days on average (Poisson); a burst
    is a change and ``follow_ups`` more, each 1 hour to ``gap`` after the
    one before (a burst outlasts a day's revisit interval).
    ``follow_ups = 0``: a plain Poisson process."""
    rng = random.Random(seed)
    pages = {}
    for i in range(PAGES):
        times = []
        t = MONDAY + rng.expovariate(1 / (10 * DAY))
        while t < MONDAY + SPAN:
            times.append(t)
            u = t
            for _ in range(follow_ups):
                u += rng.uniform(HOUR, gap)
                times.append(u)
            t += rng.expovariate(1 / (10 * DAY))
        pages[f"http://h{i % 4}.example/docs/p{i}"] = sorted(times)
    return pages


def drive(planner: RecrawlPlanner, pages: dict[str, list[float]], until: float = MONDAY + SPAN, start=MONDAY,
          births: dict[str, float] | None = None):
    """Visit every page from ``start`` (or its time in ``births``) on, when
    the planner says; returns (revisits, mean delay of the changes after the
    first 60 days, seconds)."""
    due = {url: (births or {}).get(url, start) for url in pages}
    fetched: dict[str, list[float]] = {url: [] for url in pages}
    t = MONDAY
    while True:
        url = min(due, key=due.get)
        t = due[url]
        if t >= until:
            break
        times = fetched[url]
        changed = None
        if times:
            c = pages[url]
            changed = bisect.bisect_right(c, t) > bisect.bisect_right(c, times[-1])
        times.append(t)
        due[url] = planner.on_visit(url, url.split("/")[2], t, changed=changed)
    delays = []
    for url, changes in pages.items():
        times = fetched[url]
        for c in changes:
            if MONDAY + 60 * DAY <= c < until:
                i = bisect.bisect_left(times, c)
                delays.append((times[i] if i < len(times) else until + DAY) - c)
    revisits = sum(max(len(times) - 1, 0) for times in fetched.values())
    return revisits, sum(delays) / max(len(delays), 1)


def planner(burst: bool) -> RecrawlPlanner:
    # Hot for a day: about how long the bursts of ``bursty_changes`` last.
    return RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=float(PAGES), burst=burst, burst_window=DAY)


def test_a_burst_is_learnt_from_change_events_and_shortens_the_next_revisit():
    pages = bursty_changes(1, follow_ups=4)
    p = planner(True)
    drive(p, pages)
    model = p.burst_model
    assert model.hot_intervals > 100
    url = next(iter(pages))
    record = p.pages[url]
    # Four of five changes follow another within hours: far above what the
    # quiet rate (a burst every 10 days) expects of a few hours.
    assert model.multiplier(record, MONDAY + SPAN) > 3
    # The same page, just seen changed, is planned sooner than when quiet.
    now = record.last_visit
    record.hot_until = None
    quiet = p.plan_interval(url, now)
    record.hot_until = now + DAY
    hot = p.plan_interval(url, now)
    assert hot < 0.5 * quiet


def test_no_burst_is_learnt_from_a_poisson_process():
    p = planner(True)
    drive(p, bursty_changes(2, follow_ups=0))
    record = next(iter(p.pages.values()))
    assert p.burst_model.hot_intervals > 50
    assert 0.3 < p.burst_model.multiplier(record, MONDAY + SPAN) < 2.0


def test_bursts_cut_the_delay_at_the_same_budget():
    pages = bursty_changes(3, follow_ups=4)
    off_revisits, off_delay = drive(planner(False), pages)
    on_revisits, on_delay = drive(planner(True), pages)
    budget = PAGES * (SPAN / DAY)
    # The budget is kept, bursts on or off (the solve counts hot pages' rates).
    assert off_revisits == pytest.approx(budget, rel=0.05)
    assert on_revisits == pytest.approx(budget, rel=0.05)
    assert on_delay < 0.9 * off_delay


def test_burst_state_is_saved_restored_and_checked_on_load():
    pages = bursty_changes(4, follow_ups=4)
    p = planner(True)
    drive(p, pages, until=MONDAY + 120 * DAY)
    state = json.loads(json.dumps(p.to_state()))
    q = planner(True)
    q.load_state(state)
    assert q.burst_model.pools == p.burst_model.pools
    assert q.burst_model.hot_intervals == p.burst_model.hot_intervals
    now = MONDAY + 120 * DAY
    hot = [u for u, r in p.pages.items() if r.burst is not None]
    assert hot
    # The budget's split is re-solved on load (its solve time is not saved).
    p.rebalance_now(now)
    q.rebalance_now(now)
    for url in hot[:5]:
        p.pages[url].hot_until = q.pages[url].hot_until = now + DAY
        assert q.plan_interval(url, now) == pytest.approx(p.plan_interval(url, now))
        assert q.pages[url].base_rate == p.pages[url].base_rate
    # Both go on identically.
    later = MONDAY + 140 * DAY
    assert drive(p, pages, later, now) == drive(q, pages, later, now)
    bad = json.loads(json.dumps(state))
    bad["burst"]["pools"]["*"] = [-1.0, 2.0]
    with pytest.raises(ValueError, match="burst pool"):
        planner(True).load_state(bad)
    bad = json.loads(json.dumps(state))
    first = next(iter(bad["pages"]))
    bad["pages"][first][18] = float("nan")
    with pytest.raises(ValueError, match="quiet rate"):
        planner(True).load_state(bad)


def test_bursts_need_a_budget():
    with pytest.raises(ValueError, match="AOPIC_RECRAWL_BURST needs"):
        RecrawlPlanner(burst=True)


def test_state_saved_before_bursts_still_loads():
    p = planner(False)
    drive(p, bursty_changes(5, follow_ups=1), until=MONDAY + 30 * DAY)
    state = p.to_state()
    state["version"] = 3
    for fields in state["pages"].values():
        del fields[18:]
    del state["burst"], state["cochange"], state["hint_clock"]
    state["counters"] = state["counters"][:6]
    q = planner(True)
    q.load_state(json.loads(json.dumps(state)))
    assert len(q.pages) == len(p.pages) and not q.burst_model.pools
