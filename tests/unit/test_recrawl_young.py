"""New pages (issue 17): a page found after its host was first revisited is
planned young, at its section's rate times a multiplier learnt from the
crawl, for ``new_page_window``; then as any page."""

from __future__ import annotations

import json
import random

import pytest

from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY
from tests.unit.test_recrawl_burst import drive as burst_drive

OLD_PAGES = 40
SPAN = 200 * DAY


def site(seed: int, edits_when_new: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Forty pages there from the start, each changing every 10 days on
    average (Poisson), and a page born every two days (Poisson) on one of
    four hosts, changing ``edits_when_new`` times in its first three days
    and then like the others. Returns (changes, births)."""
    rng = random.Random(seed)
    changes: dict[str, list[float]] = {}
    births: dict[str, float] = {}

    def poisson(t: float) -> list[float]:
        times = []
        t += rng.expovariate(1 / (10 * DAY))
        while t < MONDAY + SPAN:
            times.append(t)
            t += rng.expovariate(1 / (10 * DAY))
        return times

    for i in range(OLD_PAGES):
        changes[f"http://h{i % 4}.example/docs/p{i}"] = poisson(MONDAY)
    t, i = MONDAY + 2 * DAY, 0
    while t < MONDAY + SPAN - 10 * DAY:
        url = f"http://h{i % 4}.example/docs/new{i}"
        births[url] = t
        early = [t + rng.uniform(HOUR, 3 * DAY) for _ in range(edits_when_new)]
        changes[url] = sorted(early + poisson(t + 3 * DAY))
        t += rng.expovariate(1 / (2 * DAY))
        i += 1
    return changes, births


def drive(planner: RecrawlPlanner, changes, births, until: float = MONDAY + SPAN):
    """Visit each page from its birth on, when the planner says; returns
    (revisits, mean delay of the changes after day 60, seconds)."""
    return burst_drive(planner, changes, until, births=births)


def planner(new_pages: bool, budget: float = 60.0) -> RecrawlPlanner:
    return RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=budget, new_pages=new_pages)


def test_only_pages_found_after_their_host_was_revisited_are_young():
    p = planner(True)
    p.on_visit("http://a.example/x", "a.example", MONDAY)
    p.on_visit("http://a.example/y", "a.example", MONDAY + HOUR)  # still the first crawl
    p.on_visit("http://a.example/x", "a.example", MONDAY + DAY, changed=False)  # a revisit
    p.on_visit("http://a.example/z", "a.example", MONDAY + 2 * DAY)  # found late
    p.on_visit("http://b.example/z", "b.example", MONDAY + 2 * DAY)  # its host never revisited
    assert p.pages["http://a.example/y"].young_until is None
    assert p.pages["http://a.example/z"].young_until == MONDAY + 2 * DAY + p.young.window
    assert p.pages["http://b.example/z"].young_until is None
    assert p.young.young_pages == 1


def test_the_young_multiplier_is_learnt_from_new_pages_edits():
    changes, births = site(1, edits_when_new=4)
    p = planner(True)
    drive(p, changes, births)
    young = p.young
    assert young.young_intervals > 100
    record = p.pages[next(iter(births))]
    # Four edits in three days against one in ten: far above the section's rate.
    assert young.multiplier(record, MONDAY + SPAN) > 3
    # A page found late is planned sooner than the same page settled.
    url = max(births, key=births.get)
    record = p.pages[url]
    now = record.last_visit
    settled = p.plan_interval(url, now)
    record.young_until = now + DAY
    assert p.plan_interval(url, now) < 0.9 * settled


def test_new_pages_like_the_others_learn_a_multiplier_near_one():
    changes, births = site(2, edits_when_new=0)
    p = planner(True)
    drive(p, changes, births)
    record = p.pages[next(iter(births))]
    assert p.young.young_intervals > 50
    assert 0.4 < p.young.multiplier(record, MONDAY + SPAN) < 2.0


def test_young_pages_cut_the_delay_at_the_same_budget():
    changes, births = site(6, edits_when_new=8)
    off_revisits, off_delay = drive(planner(False), changes, births)
    on_revisits, on_delay = drive(planner(True), changes, births)
    # The budget is kept (about 60 a day once the pages are there: both spend alike).
    assert on_revisits == pytest.approx(off_revisits, rel=0.05)
    assert on_delay < 0.95 * off_delay  # 0.89 with this seed


def test_youth_ends_and_young_intervals_stay_out_of_the_section_rate():
    p = planner(True)
    for url in ("http://a.example/x", "http://a.example/y"):
        p.on_visit(url, "a.example", MONDAY)
    p.on_visit("http://a.example/x", "a.example", MONDAY + DAY, changed=False)
    pools_before = json.dumps(p._pools)
    new = "http://a.example/new"
    t = MONDAY + 2 * DAY
    p.on_visit(new, "a.example", t)
    for k in range(1, 6):
        p.on_visit(new, "a.example", t + k * HOUR, changed=True)
    assert json.dumps(p._pools) == pools_before  # young intervals: not pooled
    assert p.young.young_changes == 5
    record = p.pages[new]
    assert record.history is not None
    p.on_visit(new, "a.example", t + p.young.window + HOUR, changed=False)
    # Grown up: no longer young, its young history forgotten.
    assert record.young_until is None
    assert record.history is None
    p.on_visit(new, "a.example", t + p.young.window + DAY, changed=True)
    assert len(record.history) == 1
    assert json.dumps(p._pools) != pools_before


def test_without_pages_found_late_the_plans_are_the_same():
    changes, _ = site(4, edits_when_new=4)
    old = {url: c for url, c in changes.items() if "/new" not in url}
    assert drive(planner(True), old, {}) == drive(planner(False), old, {})


def test_young_state_is_saved_restored_and_checked_on_load():
    changes, births = site(5, edits_when_new=3)
    p = planner(True)
    cut = MONDAY + 100 * DAY
    drive(p, changes, births, until=cut)
    state = json.loads(json.dumps(p.to_state()))
    q = planner(True)
    q.load_state(state)
    assert q.young.pools == p.young.pools
    assert q._revisited_sites == p._revisited_sites
    young = [u for u, r in p.pages.items() if r.young_until is not None]
    assert young
    assert all(q.pages[u].young_until == p.pages[u].young_until for u in young)
    p.rebalance_now(cut)
    q.rebalance_now(cut)
    for url in young[:5]:
        assert q.plan_interval(url, cut) == pytest.approx(p.plan_interval(url, cut))
    bad = json.loads(json.dumps(state))
    bad["young"]["pools"]["*"] = [1.0, float("inf")]
    with pytest.raises(ValueError, match="new-page pool"):
        planner(True).load_state(bad)
    bad = json.loads(json.dumps(state))
    bad["pages"][young[0]][21] = "soon"
    with pytest.raises(ValueError, match="young until"):
        planner(True).load_state(bad)
    # Loaded with new pages off: every page settled, planned as without them.
    off = planner(False)
    off.load_state(json.loads(json.dumps(state)))
    assert off.young is None and all(r.young_until is None for r in off.pages.values())
    # A state saved before new pages (version 6) loads: nobody young yet.
    old = json.loads(json.dumps(state))
    old["version"] = 6
    for fields in old["pages"].values():
        del fields[21:]
    del old["young"]
    q = planner(True)
    q.load_state(old)
    assert all(r.young_until is None for r in q.pages.values())
    assert q.young.young_intervals == 0


def test_the_window_must_be_positive():
    with pytest.raises(ValueError, match="AOPIC_RECRAWL_NEW_PAGE_WINDOW"):
        RecrawlPlanner(budget=10.0, new_pages=True, new_page_window=0)


def test_the_crawl_hook_reads_the_settings_and_counts_young_pages(clock):
    from scrapy.utils.test import get_crawler

    from scrapy_aopic import signals as aopic_signals
    from scrapy_aopic.meta import RECRAWL_CHANGED as CHANGED
    from scrapy_aopic.recrawl.hook import RecrawlHook
    from scrapy_aopic.store.base import Lease
    from tests.unit.test_recrawl import response_for

    crawler = get_crawler(settings_dict={
        "AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": 10.0,
        "AOPIC_RECRAWL_NEW_PAGES": True, "AOPIC_RECRAWL_NEW_PAGE_WINDOW": 3 * DAY,
    })  # fmt: skip
    hook = RecrawlHook.from_crawler(crawler)
    hook.clock = clock
    assert hook.planner.young.window == 3 * DAY
    visits = [("http://h.example/", None), ("http://h.example/a", None),
              ("http://h.example/", True), ("http://h.example/new", None), ("http://h.example/new", True)]  # fmt: skip
    for step, (url, changed) in enumerate(visits):
        clock.now = MONDAY + HOUR * step
        lease = Lease(url, 1, 0.5, "h.example", 0, None, 0.0, None, 0)
        _, response = response_for(url, meta={CHANGED: changed})
        crawler.signals.send_catch_log(
            aopic_signals.page_visited, url=url, links=[], lease=lease, response=response,
            spider=None, new_links=None,
        )  # fmt: skip
    hook.update_stats()
    stats = crawler.stats
    assert stats.get_value("aopic/recrawl/young_pages") == 1
    assert stats.get_value("aopic/recrawl/young_revisits") == 1
    assert stats.get_value("aopic/recrawl/young_changes") == 1
    assert hook.planner.pages["http://h.example/a"].young_until is None
