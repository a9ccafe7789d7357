"""Weekly timetables: the budget says how many revisits, the section's
profile says when (issue 17)."""

from __future__ import annotations

import bisect
import math
import random

import pytest

from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR, WEEK, hour_of_week
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY
from scrapy_aopic.recrawl.timetable import Timetable, place, waiting

#: a working week: busy 09-17 h UTC Monday to Friday, 5 % of that otherwise
WORKDAY = [1.0 if 9 <= b % 24 < 17 and b < 120 else 0.05 for b in range(168)]


def test_one_fetch_a_day_lands_at_the_end_of_the_working_day():
    assert place(WORKDAY, 1) == [4 * 24 + 17]  # Friday 17:00
    assert place(WORKDAY, 5) == [d * 24 + 17 for d in range(5)]  # every weekday at 17:00


@pytest.mark.parametrize("k", [2, 3, 5, 7, 10, 14, 30, 84])
def test_placement_beats_every_evenly_spaced_schedule(k):
    best_even = min(
        waiting(WORKDAY, sorted((p + i * 168 // k) % 168 for i in range(k))) for p in range(168)
    )
    assert waiting(WORKDAY, place(WORKDAY, k)) <= best_even + 1e-9
    flat = [1.0] * 168  # no rhythm: nothing to gain, nothing lost
    assert waiting(flat, place(flat, k)) == pytest.approx(
        waiting(flat, sorted(i * 168 // k for i in range(k))), rel=0.02
    )


def test_timetable_skips_a_slot_too_soon_after_an_off_timetable_visit():
    table = Timetable([17, 41])  # Monday and Tuesday 17:00, then a week's gap
    assert table.guard == 12 * HOUR  # half the shortest gap (24 h)
    assert table.next_after(MONDAY + 16 * HOUR) == MONDAY + 41 * HOUR
    assert table.next_after(MONDAY + 2 * HOUR) == MONDAY + 17 * HOUR
    assert table.next_after(MONDAY + 41 * HOUR) == MONDAY + WEEK + 17 * HOUR
    assert table.next_after(MONDAY + 16 * HOUR, guard=0) == MONDAY + 17 * HOUR


def crawl(planner, rates, weeks, gap=60.0, seed=3):
    """Pages of one host changing as Poisson processes of ``rate x
    WORKDAY``, fetched when due but one ``gap`` apart (the download slot);
    returns {url: fetch times}, {url: change times}."""
    rng = random.Random(seed)
    end = MONDAY + weeks * WEEK
    changes = {}
    for url, rate in rates.items():
        times, t = [], MONDAY
        peak = rate * max(WORKDAY) / (sum(WORKDAY) / 168)
        while t < end:  # thinning
            t += rng.expovariate(peak) if peak > 0 else end
            if t < end and rng.random() < WORKDAY[hour_of_week(t)] / max(WORKDAY):
                times.append(t)
        changes[url] = times
    fetches = {url: [] for url in rates}
    due = {}
    free = MONDAY
    for i, url in enumerate(rates):
        fetches[url].append(MONDAY + i)
        due[url] = planner.on_visit(url, "docs.example", MONDAY + i, changed=None)
    while True:
        url = min(due, key=lambda u: (due[u], u))
        t = max(due[url], free)
        if t >= end:
            return fetches, changes
        free = t + gap
        page, last = changes[url], fetches[url][-1]
        j = bisect.bisect_right(page, t)
        changed = j > bisect.bisect_right(page, last)
        fetches[url].append(t)
        # The server's Last-Modified dates the change: revisits at the same
        # hour every day could not tell when in the day changes come.
        lm = page[j - 1] if changed else None
        due[url] = planner.on_visit(url, "docs.example", t, changed=changed, last_modified=lm)


def mean_delay(fetches, changes, start):
    total = n = 0
    for url, page in changes.items():
        for c in page:
            if c >= start:
                i = bisect.bisect_left(fetches[url], c)
                if i < len(fetches[url]):
                    total += fetches[url][i] - c
                    n += 1
    return total / n


def test_planner_revisits_after_the_busy_hours_within_budget_and_host_gap():
    rng = random.Random(7)
    rates = {f"http://docs.example/guide/p{i}": rng.choice([0.3, 1.0, 3.0]) / DAY for i in range(30)}
    budget = 30.0  # a revisit per page per day
    runs = {}
    for timetable in (True, False):
        planner = RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=budget,
                                 host_gap=60.0, timetable=timetable)  # fmt: skip
        runs[timetable] = crawl(planner, rates, weeks=10)
    fetches, changes = runs[True]
    scored = MONDAY + 4 * WEEK
    late = [t for times in fetches.values() for t in times if t >= scored]
    # The budget: revisits a day as asked (dithering keeps the mean).
    assert len(late) / (6 * 7) == pytest.approx(budget, rel=0.1)
    # The host gap: one fetch a minute at most, and the bunch that falls due
    # at a slot is done within the half hour (30 pages, 60 s apart); the
    # learnt profile is smoothed, so the slot is 17:00 or 18:00.
    ordered = sorted(late)
    assert min(b - a for a, b in zip(ordered, ordered[1:])) >= 60.0 - 1e-6
    # When: just after the busy hours, not at night.
    hours = [(t % DAY) / HOUR for t in late]
    after = sum(17 <= h < 19.5 for h in hours) / len(hours)
    assert after > 0.6, after
    # And what it buys: a shorter mean delay than spreading the same budget
    # by the waiting rule (which drifts to the night).
    with_table = mean_delay(*runs[True], scored)
    without = mean_delay(*runs[False], scored)
    assert with_table < 0.8 * without, (with_table / HOUR, without / HOUR)


def test_timetables_are_on_by_default_with_a_budget():
    """The default settings plus a budget place revisits on the section's
    timetable (issue 17's judgement switched ``AOPIC_RECRAWL_TIMETABLE``
    on): after the busy hours, as ``timetable=True`` above; switched off,
    the same planner spreads them by the waiting rule instead."""
    from scrapy.settings import Settings

    from scrapy_aopic import settings as aopic_settings
    from scrapy_aopic.recrawl.hook import planner_from_settings

    assert aopic_settings.get_bool(Settings(), "AOPIC_RECRAWL_TIMETABLE") is True
    rng = random.Random(7)
    rates = {f"http://docs.example/guide/p{i}": rng.choice([0.3, 1.0, 3.0]) / DAY for i in range(30)}
    scored = MONDAY + 4 * WEEK
    share = {}
    for name, extra in (("default", {}), ("off", {"AOPIC_RECRAWL_TIMETABLE": False})):
        planner = planner_from_settings(Settings({"AOPIC_RECRAWL_BUDGET": 30.0, "AOPIC_RECRAWL_HOST_GAP": 60.0,
                                                  **extra}))  # fmt: skip
        fetches, _ = crawl(planner, rates, weeks=10)
        late = [t for times in fetches.values() for t in times if t >= scored]
        share[name] = sum(17 <= (t % DAY) / HOUR < 19.5 for t in late) / len(late)
        # Timetables were built for the section (or its host) only when on.
        assert bool(planner._timetables) is (name == "default")
    assert share["default"] > 0.6, share
    assert share["off"] < 0.5 * share["default"], share


def test_overdue_queue_matches_a_plain_scan_with_many_pages_per_host():
    from scrapy_aopic.recrawl.planner import OverdueQueue

    rng = random.Random(5)
    queue, live = OverdueQueue(), {}
    for step in range(4000):
        now = step * 1.0
        action = rng.random()
        if action < 0.5:
            url = f"u{rng.randrange(300)}"
            host, deadline = f"h{rng.randrange(4)}", now + rng.uniform(-50, 50)
            queue.push(url, host, deadline)
            live[url] = (deadline, host)
        elif action < 0.6 and live:
            url = rng.choice(sorted(live))
            queue.discard(url)
            del live[url]
        else:
            busy = {f"h{i}" for i in range(4) if rng.random() < 0.5}
            got = queue.pop(now, lambda h: h not in busy)
            due = [(d, u) for u, (d, h) in live.items() if d <= now and h not in busy]
            if got is None:
                assert not due
            else:
                assert live[got][0] == min(due)[0]
                del live[got]
    assert len(queue) == len(live)


@pytest.mark.parametrize("k, level", [(7.4, 7), (7.6, 8), (1.4, 1), (1.5, 2), (10.9, 10), (11.0, 12)])
def test_a_page_between_two_levels_keeps_the_nearest_one(k, level):
    # Not dithered visit by visit between the two timetables around k: two
    # tables of unrelated slots make irregular gaps (a page waits
    # sum g^2 / 2 sum g), while a frequency off the budget's costs only to
    # second order. The nearest level in ratio: 7.4 -> 7, 7.6 -> 8
    # (sqrt(56) = 7.48), 10.9 -> 10, 11 -> 12 (sqrt(120) = 10.95).
    rates = {f"http://docs.example/guide/p{i}": 1.0 / DAY for i in range(30)}
    planner = RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=30.0,
                             host_gap=60.0, timetable=True)  # fmt: skip
    crawl(planner, rates, weeks=4)
    url = next(iter(rates))
    record = planner.pages[url]
    source, shape = planner.shape_of(record)
    assert source != "flat"  # the section's profile is learnt: timetables are used
    now = MONDAY + 4 * WEEK
    seen = set()
    for visit in range(40):
        # main drew the level from the page's visit count: the same page
        # got the 7 and the 8 timetable at k = 7.4
        record.visits = visit
        table = planner._timetable_for(source, shape, WEEK / k, now + visit * DAY)
        seen.add(tuple(table.slots))
    assert [len(s) for s in seen] == [level]


class _Store:
    """The least of a frontier store the hook uses: every page can be
    re-pended and taken."""

    def __init__(self):
        self.pending = set()

    def repend(self, link):
        self.pending.add(link.url)
        return True

    def take(self, url):
        from scrapy_aopic.store.base import Lease

        if url not in self.pending:
            return None
        self.pending.discard(url)
        return Lease(url, 0, 1.0, "docs.example", 0, None, 0.0, None, 1)

    def get(self, url):
        return None

    def iter_accounts(self):
        return iter(())


def _queued_order(likely_first, tmp_path=None):
    """A host's pages all due at one instant: the order the hook leases
    them in. Pages ``p0``-``p8`` never changed in their history, ``p9``
    (last by URL, so last by a plain deadline order) changed at every
    visit; with ``tmp_path`` the state goes through a JOBDIR save and load
    before the release."""
    from scrapy_aopic.recrawl.hook import RecrawlHook

    def planner():
        return RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=10.0, host_gap=60.0,
                              timetable=True, likely_first=likely_first)  # fmt: skip

    now = [MONDAY]
    hook = RecrawlHook(None, planner(), clock=lambda: now[0])
    urls = [f"http://docs.example/guide/p{i}" for i in range(10)]
    for day in range(30):
        for url in urls:
            hook.record_visit(url, "docs.example", changed=url.endswith("p9") if day else None,
                              now=MONDAY + day * DAY)  # fmt: skip
    slot = MONDAY + 31 * DAY
    for url in urls:
        record = hook.planner.pages[url]
        hook.planner._set_due(url, record, slot, slot)
    if tmp_path is not None:
        hook.save_state(tmp_path / "s.json")
        hook = RecrawlHook(None, planner(), clock=lambda: now[0])
        hook.load_state(tmp_path / "s.json")
    now[0] = slot + 1
    store = _Store()
    leased = []
    while (lease := hook.next_lease(store, lambda host: True)) is not None:
        leased.append(lease.url.rsplit("/", 1)[1])
    return leased


def test_the_host_queue_serves_the_page_most_likely_changed_first(tmp_path):
    # Ten pages of one host fall due at one timetable slot; the host fetches
    # one a host gap, so the last waits nine gaps. With likely_first the
    # page that changes at every visit goes first, not last by its URL.
    assert _queued_order(False) == [f"p{i}" for i in range(10)]
    assert _queued_order(True)[0] == "p9"
    # The order comes from the page's saved fields (rate, planned interval,
    # deadline): it is the same after a JOBDIR save and load.
    assert _queued_order(True, tmp_path) == _queued_order(True)
