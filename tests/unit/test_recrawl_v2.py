"""Re-crawl planner v2 (issue 17): change history in time, content changes
as events, Last-Modified, the freshness-optimal budget split."""

from __future__ import annotations

import json
import math
import random

import pytest

from scrapy_aopic.recrawl.budget import FreshnessAllocator, freshness, g_inverse
from scrapy_aopic.recrawl.estimators import TimedChangeHistory
from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR, WeeklyRates, hour_of_week
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY


def test_timed_history_is_unbiased_on_irregular_visits():
    rng = random.Random(2)
    rate = 1 / DAY
    ratios = []
    for _ in range(200):
        history = TimedChangeHistory(window=1e12)
        t = 0.0
        for _ in range(100):
            step = rng.uniform(0.2, 1.8) * DAY
            t += step
            history.add(t, step, rng.random() < -math.expm1(-rate * step))
        ratios.append(history.rate(t) / rate)
    assert sum(ratios) / len(ratios) == pytest.approx(1.0, abs=0.05)


def test_quick_unchanged_revisits_do_not_push_out_long_intervals():
    history = TimedChangeHistory(window=365 * DAY)
    t = 0.0
    for _ in range(20):  # a change every 10 days, seen on 10-day visits
        t += 10 * DAY
        history.add(t, 10 * DAY, True)
    before = history.rate(t)
    for _ in range(200):  # then 200 quick unchanged revisits (a minute each)
        t += 60
        history.add(t, 60, False)
    # 200 minutes without a change barely move a rate of ~0.1 a day.
    assert history.rate(t) == pytest.approx(before, rel=0.1)


def test_last_modified_dates_the_change():
    plain, dated = TimedChangeHistory(), TimedChangeHistory()
    t = 0.0
    for _ in range(30):
        t += DAY
        plain.add(t, DAY, True)
        dated.add(t, DAY, True, last_change=t - DAY + 60)  # changed just after each visit
    # Every interval saw a change: without dates the rate is only bounded
    # below; the dates say one change a day, a minute after each visit.
    assert dated.rate(t) == pytest.approx(1 / DAY, rel=0.3)
    assert plain.rate(t) > 2 / DAY


def test_history_shrinks_to_the_pool_and_round_trips():
    history = TimedChangeHistory()
    assert history.rate(0.0, prior_rate=1 / DAY) == 1 / DAY
    history.add(DAY, DAY, False)
    assert 0 < history.rate(DAY, prior_rate=1 / DAY) < 1 / DAY
    copy = TimedChangeHistory.from_state(json.loads(json.dumps(history.to_state())))
    assert copy.rate(DAY, prior_rate=1 / DAY) == pytest.approx(history.rate(DAY, prior_rate=1 / DAY))


def test_allocator_spends_the_budget_and_is_not_proportional():
    rates = [1 / (30 * DAY), 1 / DAY, 1 / HOUR, 100 / HOUR]
    allocator = FreshnessAllocator(1 / (7 * DAY), 1 / 60)
    budget = 10 / DAY
    allocator.solve(rates, [1.0] * 4, budget)
    freq = [allocator.frequency(r) for r in rates]
    assert sum(freq) == pytest.approx(budget, rel=0.01)
    # Cho & Garcia-Molina: the page changing far faster than it can be
    # revisited gets the floor; the moderate ones get the most.
    assert freq[3] == pytest.approx(1 / (7 * DAY))
    assert freq[1] > freq[0] and freq[1] > freq[3]
    # Better than spreading the same budget evenly.
    even = [budget / 4] * 4
    assert sum(freshness(r, f) for r, f in zip(rates, freq)) > sum(
        freshness(r, f) for r, f in zip(rates, even)
    )
    assert g_inverse(1 - (1 + 2.0) * math.exp(-2.0)) == pytest.approx(2.0, rel=1e-3)


def test_allocator_respects_a_host_cap_and_importance():
    allocator = FreshnessAllocator(1e-9, 1.0)
    rates = [1 / HOUR] * 4
    allocator.solve(rates, [1.0, 1.0, 1.0, 4.0], 8 / HOUR, hosts=[0, 0, 1, 1], host_cap=3 / HOUR)
    freq = [allocator.frequency(r, w) for r, w in zip(rates, [1.0, 1.0, 1.0, 4.0])]
    assert freq[3] > freq[2]  # more important, more often


def test_content_changes_count_and_teach_the_profile():
    planner = RecrawlPlanner(min_interval=60, max_interval=7 * DAY, key_min_events=20)
    url = "http://docs.example/guide/page"
    t = MONDAY
    planner.on_visit(url, "docs.example", t)
    for _ in range(24 * 28):  # hourly for four weeks; edits only 09:00-17:00 UTC
        t += HOUR
        planner.on_visit(url, "docs.example", t, changed=9 < hour_of_week(t) % 24 <= 17)
    profile = planner.profiles["docs.example/guide"]
    shape = profile.shape()
    assert shape.rate_at(MONDAY + 13 * HOUR) > 5 * shape.rate_at(MONDAY + 3 * HOUR)
    # The change is an event (default change weight): the page is planned
    # from its change rate, not backed off to the maximum.
    assert planner.pages[url].interval < DAY


def test_budget_split_follows_the_change_rates():
    planner = RecrawlPlanner(min_interval=60, max_interval=30 * DAY, budget=30.0)
    rng = random.Random(1)
    rates = {"http://a.example/fast": 2 / DAY, "http://a.example/slow": 0.1 / DAY,
             "http://b.example/never": 0.0}  # fmt: skip
    due = {url: MONDAY for url in rates}
    last = dict.fromkeys(rates)
    fetches = dict.fromkeys(rates, 0)
    t = MONDAY
    while t < MONDAY + 60 * DAY:
        url = min(due, key=due.get)
        t = due[url]
        changed = None
        if last[url] is not None:
            changed = rng.random() < -math.expm1(-rates[url] * (t - last[url]))
            fetches[url] += 1
        last[url] = t
        due[url] = planner.on_visit(url, url.split("/")[2], t, changed=changed)
    per_day = sum(fetches.values()) / 60
    assert per_day == pytest.approx(30.0, rel=0.25)
    assert fetches["http://a.example/fast"] > fetches["http://a.example/slow"] > fetches["http://b.example/never"]


def test_fast_time_to_delay_matches_the_hourly_walk():
    rng = random.Random(3)
    rates = [rng.random() * (hour % 24 > 7) / HOUR for hour in range(168)]
    shape = WeeklyRates(rates)

    def walk(t0, target, horizon):
        owed = count = 0.0
        t = t0
        while t < t0 + horizon:
            step_end = min((math.floor(t / HOUR) + 1) * HOUR, t0 + horizon)
            d, r = step_end - t, shape.rate_at(t)
            if owed + count * d + 0.5 * r * d * d >= target:
                need = target - owed
                return t + ((-count + math.sqrt(count * count + 2 * r * need)) / r if r else need / count)
            owed += count * d + 0.5 * r * d * d
            count += r * d
            t = step_end
        return t0 + horizon

    for _ in range(300):
        t0 = MONDAY + rng.uniform(0, 30 * DAY)
        target = 10 ** rng.uniform(0, 5)
        assert shape.time_to_delay(t0, target, 7 * DAY) == pytest.approx(walk(t0, target, 7 * DAY), abs=1e-3)


def test_budget_probes_end_where_the_plain_bisection_does():
    # The probes around the last multiplier only skip midpoints whose outcome
    # they imply: the multiplier is bit for bit the plain bisection's, from
    # any starting multiplier (near the answer, far from it, on either side).
    rng = random.Random(7)
    for trial in range(30):
        n = rng.randint(5, 300)
        rates = [rng.random() ** 4 / HOUR * (rng.random() > 0.1) for _ in range(n)]
        weights = [rng.uniform(0.1, 3.0) for _ in range(n)]
        hosts = [rng.randrange(4) for _ in range(n)]
        budget = rng.uniform(0.05, 3.0) * n / DAY
        plain = FreshnessAllocator(1 / (7 * DAY), 1 / 60)
        plain.solve(rates, weights, budget, hosts, 1 / 600)
        for start in (plain.mu, plain.mu * 1.003, plain.mu * 0.97, plain.mu * 50, plain.mu / 50):
            probed = FreshnessAllocator(1 / (7 * DAY), 1 / 60)
            probed.mu = start
            probed.solve(rates, weights, budget, hosts, 1 / 600)
            assert probed.mu == plain.mu

