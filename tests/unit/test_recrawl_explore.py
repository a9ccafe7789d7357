"""Timetables that keep learning *when* in the day changes come (issue 17):
the hour-of-day profile fitted on every interval (DayProfile), and revisits
explored at other hours."""

from __future__ import annotations

import bisect
import math
import random

import pytest

from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR, WEEK, DayProfile, RateProfile, hour_of_week
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY

#: a working day, busy 09-17 h UTC, 5 % of that otherwise (every day)
WORKDAY = [1.0 if 9 <= b % 24 < 17 else 0.05 for b in range(168)]
#: the wrong start: busy 00-08 h UTC
NIGHT = [1.0 if b % 24 < 8 else 0.05 for b in range(168)]


def changes_of(rates, switch, start, end, seed):
    """Poisson change times per page: ``NIGHT`` before ``switch``,
    ``WORKDAY`` after (thinning)."""
    rng = random.Random(seed)
    out = {}
    for url, rate in rates.items():
        times, t = [], start
        peak = rate * 168 / sum(WORKDAY)  # both shapes have the same mass
        while t < end:
            t += rng.expovariate(peak)
            shape = NIGHT if t < switch else WORKDAY
            if t < end and rng.random() < shape[hour_of_week(t)]:
                times.append(t)
        out[url] = times
    return out


def crawl(weeks, switch_weeks=8, gap=60.0, pages=60, **options):
    """``pages`` pages of one section changing a few times a month, a
    revisit per page per day, one host gap apart, told only changed /
    unchanged (no Last-Modified). The site changes in the night for
    ``switch_weeks``, then in the working day. Returns the fetch times
    and the planner."""
    rng = random.Random(7)
    rates = {f"http://docs.example/guide/p{i}": rng.choice([0.1, 0.2, 0.4]) / DAY for i in range(pages)}
    planner = RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=float(pages), host_gap=gap,
                             timetable=True, **options)  # fmt: skip
    end = MONDAY + weeks * WEEK
    changes = changes_of(rates, MONDAY + switch_weeks * WEEK, MONDAY, end, seed=3)
    fetches = {url: [MONDAY + i] for i, url in enumerate(rates)}
    due = {url: planner.on_visit(url, "docs.example", MONDAY + i) for i, url in enumerate(rates)}
    free = MONDAY
    while True:
        url = min(due, key=lambda u: (due[u], u))
        t = max(due[url], free)
        if t >= end:
            return fetches, planner
        free = t + gap
        page, last = changes[url], fetches[url][-1]
        changed = bisect.bisect_right(page, t) > bisect.bisect_right(page, last)
        fetches[url].append(t)
        due[url] = planner.on_visit(url, "docs.example", t, changed=changed)


def fetch_hours(fetches, since):
    return [(t % DAY) / HOUR for times in fetches.values() for t in times if t >= since]


def test_timetable_moves_to_the_new_busy_hours_without_last_modified():
    """The site's busy hours move from the night to the working day; the
    timetable follows (fetches in the evening, after them), though no revisit is told
    when a change happened. The weekly profile's hours did not: once the
    revisits come a day apart, each change is "somewhere in the last 24
    hours" and was spread by the old estimate, so the old hour stayed."""
    fetches, planner = crawl(weeks=30)
    hours = fetch_hours(fetches, MONDAY + 26 * WEEK)  # the last four weeks
    after = sum(17 <= h < 23 for h in hours) / len(hours)
    assert after > 0.5, after
    assert len(hours) / 28 == pytest.approx(60.0, rel=0.1)  # the budget
    day = planner.day_profiles["docs.example/guide"].fit()
    assert sum(day[9:17]) > 0.5, day  # the working day holds most of the mass


def test_day_profile_learns_the_hour_that_whole_days_cannot_tell():
    """A wrong start (changes dated at 03 h), then revisits a day apart that
    all see a change (they say nothing about the hour) and revisits 6 h
    apart (12-18 h with a change, 18-12 h without): the fit moves to
    12-18 h. The weekly profile, fed the same, keeps its wrong hour."""
    day, week = DayProfile(forget=None), RateProfile(forget=None)
    for profile in (day, week):
        for d in range(30):
            t = MONDAY + d * DAY
            profile.observe(t, t + DAY, 1.0, at=t + 3 * HOUR)
        for d in range(30, 230):
            t = MONDAY + d * DAY + 2 * HOUR
            profile.observe(t, t + DAY, 1.0)
        for d in range(230, 290):
            t = MONDAY + d * DAY
            profile.observe(t + 12 * HOUR, t + 18 * HOUR, 1.0)
            profile.observe(t + 18 * HOUR, t + DAY + 12 * HOUR, 0.0)
    fitted = day.fit(iterations=200)
    assert sum(fitted) == pytest.approx(1.0)
    assert sum(fitted[12:18]) > 0.5, fitted
    assert sum(fitted[12:18]) > 1.5 * sum(fitted[0:6])
    rates = week.shape().rates
    by_hour = [sum(rates[h::24]) for h in range(24)]
    assert max(range(24), key=by_hour.__getitem__) == 3  # stuck


def test_day_profile_is_flat_without_data_and_forgets():
    assert DayProfile().fit() == pytest.approx([1 / 24] * 24)
    profile = DayProfile(forget=10 * DAY)
    for d in range(60):
        t = MONDAY + d * DAY
        at = t + (3 if d < 30 else 15) * HOUR  # the hour moves
        profile.observe(t, t + DAY, 1.0, at=at)
    fitted = profile.fit()
    assert fitted[15] > 3 * fitted[3]  # the last ten days weigh most


def test_exploring_moves_revisits_and_keeps_the_budget():
    plain, _ = crawl(weeks=14, pages=30)
    explored, planner = crawl(weeks=14, pages=30, explore=0.2)
    since = MONDAY + 10 * WEEK
    assert planner.explored > 0
    a, b = fetch_hours(plain, since), fetch_hours(explored, since)
    assert len(b) == pytest.approx(len(a), rel=0.03)  # moved, not added
    # More distinct hours are watched (the timetable's own are few).
    assert len({int(h) for h in b}) > len({int(h) for h in a})
    with pytest.raises(ValueError, match="AOPIC_RECRAWL_EXPLORE"):
        RecrawlPlanner(budget=10.0, timetable=True, explore=1.0)


def test_day_profiles_are_saved_and_restored():
    _, planner = crawl(weeks=6, pages=20)
    twin = RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=20.0, host_gap=60.0, timetable=True)
    twin.load_state(planner.to_state())
    assert twin.day_profiles.keys() == planner.day_profiles.keys()
    for name, profile in planner.day_profiles.items():
        assert twin.day_profiles[name].fit() == pytest.approx(profile.fit())
    assert not math.isnan(sum(twin.day_profiles["docs.example/guide"].fit()))
