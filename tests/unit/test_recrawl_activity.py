"""Host activity (issue 17): a change found makes a host active for a day;
its pages are revisited more often while it is active and less while it is
quiet, by how much likelier its pages change while active, at the same
budget."""

from __future__ import annotations

import json
import math
import random

import pytest

from scrapy_aopic.recrawl.activity import HostActivity
from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY

from .test_recrawl_cochange import PAGES, SPAN, drive, each_refused, round_trip


def spells(seed: int, every: float = 20 * DAY, length: float = 2 * DAY, hot: float = 1 / DAY,
           quiet: float = 1 / (60 * DAY)) -> dict[str, list[float]]:
    """Pages on 4 hosts, each host at work in spells of ``length`` starting
    every ``every`` on average (Poisson): its pages change at rate ``hot``
    in a spell, ``quiet`` outside, each page on its own (no commits)."""
    rng = random.Random(seed)
    pages = {}
    for h in range(4):
        starts, t = [], MONDAY + rng.expovariate(1 / every)
        while t < MONDAY + SPAN:
            starts.append(t)
            t += length + rng.expovariate(1 / every)
        for i in range(PAGES // 4):
            times = []
            for s in starts:
                c = s + rng.expovariate(hot)
                while c < s + length:
                    times.append(c)
                    c += rng.expovariate(hot)
            c = MONDAY + rng.expovariate(quiet)
            while c < MONDAY + SPAN:
                times.append(c)
                c += rng.expovariate(quiet)
            pages[f"http://h{h}.example/docs/p{i}"] = sorted(times)
    return pages


def planner(activity: bool, budget: float = float(PAGES), **options) -> RecrawlPlanner:
    options.setdefault("cochange", False)
    return RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=budget, activity=activity, **options)


def test_a_change_found_opens_a_spell_that_further_changes_extend():
    a = HostActivity(window=DAY)
    assert a.observe("h", None, MONDAY, None) is False
    assert a.observe("h", MONDAY, MONDAY + DAY, True) is True  # turned active
    assert a.hosts["h"].spells == [[MONDAY + DAY, MONDAY + 2 * DAY]]
    assert a.observe("h", MONDAY, MONDAY + 1.5 * DAY, True) is False  # extended
    assert a.hosts["h"].spells == [[MONDAY + DAY, MONDAY + 2.5 * DAY]]
    assert a.observe("h", MONDAY, MONDAY + 3 * DAY, True) is True  # a new spell
    assert len(a.hosts["h"].spells) == 2 and a.spells_started == 2
    # an interval's seconds are split by the spells: 1.5 days active of 3
    assert a.hosts["h"].overlap(MONDAY, MONDAY + 3 * DAY) == pytest.approx(1.5 * DAY)


def test_the_multipliers_keep_the_hosts_share_of_the_budget():
    a = HostActivity()
    rng = random.Random(2)
    t = MONDAY
    while t < MONDAY + 100 * DAY:
        spell = (t - MONDAY) % (20 * DAY) < 2 * DAY  # 10 % of the time
        last = t - DAY
        a.observe("h", last, t, rng.random() < (0.5 if spell else 0.002))
        t += DAY / 24
    ratio = a.ratio("h")
    assert 2.0 < ratio <= a.max_ratio  # changes come in spells
    until = a.hosts["h"].until
    share = a.share_active("h", until + 1.0)
    assert 0.05 < share < 0.4
    quiet = a.multiplier("h", until + 1.0)
    assert quiet < 1.0
    # active, M_a = ratio * M_q; the time-weighted mean is the host's share
    assert share * ratio * quiet + (1 - share) * quiet == pytest.approx(1.0)
    assert a.multiplier("h", until - 1.0) == pytest.approx(
        ratio / (a.share_active("h", until - 1.0) * ratio + 1 - a.share_active("h", until - 1.0)))
    # unknown hosts and hosts never active are planned as before
    assert a.multiplier("other", t) == 1.0


def test_a_host_whose_changes_do_not_come_in_spells_is_planned_as_before():
    a = HostActivity()
    rng = random.Random(3)
    t = MONDAY
    while t < MONDAY + 200 * DAY:
        a.observe("h", t - DAY / 4, t, rng.random() < 0.05)
        t += DAY / 4
    assert abs(math.log(a.ratio("h"))) < math.log(1.25)
    assert a.multiplier("h", t) == pytest.approx(1.0, abs=0.2)


def test_activity_cuts_the_delay_at_the_same_budget():
    budget = PAGES * (SPAN / DAY)
    for seed in (1, 2):
        pages = spells(seed)
        off = planner(False)
        off_revisits, off_delay = drive(off, pages, until=MONDAY + SPAN)
        on = planner(True)
        on_revisits, on_delay = drive(on, pages, until=MONDAY + SPAN)
        assert off_revisits == pytest.approx(budget, rel=0.03)
        # the spend check keeps it (slowly: it measures a week, moves daily)
        assert on_revisits == pytest.approx(budget, rel=0.05)
        assert on.activity.spells_started > 20 and on.activity_replanned > 100
        assert on_delay < 0.9 * off_delay, (seed, on_delay / off_delay)


def test_without_the_spend_check_the_budget_is_missed():
    """Why the check is there: switching hosts between frequencies plans
    revisits at other times than the split's, so what is spent drifts."""
    pages = spells(1)
    budget = PAGES * (SPAN / DAY)
    p = planner(True)
    p.spend_check.bounds = (1.0, 1.0)
    revisits, _ = drive(p, pages, until=MONDAY + SPAN)
    q = planner(True)
    checked, _ = drive(q, pages, until=MONDAY + SPAN)
    assert abs(checked / budget - 1) < abs(revisits / budget - 1)


def test_activity_state_is_saved_restored_and_checked_on_load():
    pages = spells(3)
    now = MONDAY + 120 * DAY
    p, q, state = round_trip(lambda: planner(True), pages, now)
    assert q.activity.to_state() == p.activity.to_state() and q.spend_check.to_state() == p.spend_check.to_state()
    assert q.activity_replanned == p.activity_replanned
    assert q.activity.pages_of("h1.example") == p.activity.pages_of("h1.example")
    later = MONDAY + 140 * DAY
    assert drive(p, pages, later, now) == drive(q, pages, later, now)
    host = next(iter(state["activity"]["hosts"]))
    each_refused(state, lambda: planner(True), [
        (("activity", "hosts", host, 0), [[2.0, 1.0]], "spells of"),
        (("activity", "hosts", host, 3), [1.0], "exposure"),
        (("activity", "hosts", host), [1.0], "not a host record"),
        (("activity", "spells_started"), -1, "spells started"),
        (("spend",), [0.0, None, 99.0, None, None], "spend factor"),
        (("spend", 3), None, "go together"),  # found by the state fuzz
    ])


def test_state_saved_before_activity_still_loads():
    p = planner(False, cochange=True)
    drive(p, spells(4), until=MONDAY + 30 * DAY)
    state = p.to_state()
    state["version"] = 5
    del state["activity"], state["spend"]
    state["counters"] = state["counters"][:9]
    q = planner(True, cochange=True)
    q.load_state(json.loads(json.dumps(state)))
    assert len(q.pages) == len(p.pages) and not q.activity.hosts
    assert sum(len(q.activity.pages_of(f"h{h}.example")) for h in range(4)) == len(q.pages)


def test_a_forgotten_page_leaves_its_hosts_pages():
    p = planner(True)
    p.on_visit("http://h0.example/a", "h0.example", MONDAY)
    p.on_visit("http://h0.example/b", "h0.example", MONDAY)
    p.forget_page("http://h0.example/a")
    assert p.activity.pages_of("h0.example") == {"http://h0.example/b"}


def test_the_setting_turns_it_on_and_the_stats_count_it(caplog):
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.recrawl.hook import RecrawlHook

    crawler = get_crawler(settings_dict={
        "AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": float(PAGES), "AOPIC_RECRAWL_ACTIVITY": True,
    })  # fmt: skip
    hook = RecrawlHook.from_crawler(crawler)
    assert isinstance(hook.planner.activity, HostActivity)
    drive(hook.planner, spells(1), until=MONDAY + 60 * DAY)
    hook.update_stats(top_hubs=False)
    p = hook.planner
    assert crawler.stats.get_value("aopic/recrawl/activity_spells") == p.activity.spells_started > 0
    assert crawler.stats.get_value("aopic/recrawl/activity_replanned") == p.activity_replanned > 0
    # without a budget: off, said once
    crawler = get_crawler(settings_dict={"AOPIC_RECRAWL": True, "AOPIC_RECRAWL_ACTIVITY": True})
    with caplog.at_level("INFO", logger="scrapy_aopic.recrawl.hook"):
        hook = RecrawlHook.from_crawler(crawler)
        RecrawlHook.from_crawler(crawler)
    assert hook.planner.activity is None
    assert crawler.stats.get_value("aopic/recrawl/activity_off") == 1
    assert sum("AOPIC_RECRAWL_ACTIVITY" in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(ValueError, match="ACTIVITY needs"):
        RecrawlPlanner(activity=True)
