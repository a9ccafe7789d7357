"""The learnt shape revisits are placed on is believed as far as the
profile's hour-of-day rhythm persisted from one period to the next
(issue 17: Debian's rhythm lasts, the pip and Sphinx sources' moves)."""

from __future__ import annotations

import json
import random

import pytest

from scrapy_aopic.recrawl.profile import DAY, HOUR, RateProfile
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY
from tests.unit.test_recrawl import poisson_count


def _fed(busy_start, weeks: int = 10, step: float = HOUR, seed: int = 3) -> RateProfile:
    """A profile (default 28-day forgetting: 14-day periods) fed visits
    every ``step`` of a process with ~80 changes a week, six times as
    frequent in the 8 busy hours starting at ``busy_start(t)`` (UTC) as in
    the others. Visits one hour apart say when (``at``); longer ones do
    not, so the counts are spread over the interval."""
    profile = RateProfile()
    rng = random.Random(seed)
    base = 80 / (7 * (8 * 6 + 16))
    t = MONDAY
    while t < MONDAY + weeks * 7 * DAY:
        mean, u = 0.0, t
        while u < t + step:
            start = busy_start(u)
            mean += base * (6.0 if (int(u // HOUR) - start) % 24 < 8 else 1.0)
            u += HOUR
        n = poisson_count(rng, mean)
        profile.observe(t, t + step, n, at=t + HOUR / 2 if step == HOUR else None)
        t += step
    return profile


def _busy_over_quiet(profile: RateProfile, busy_start: int) -> float:
    shape = profile.shape()
    day = [shape.rate_at(MONDAY + 2 * DAY + h * HOUR) for h in range(24)]
    busy = [day[(busy_start + i) % 24] for i in range(8)]
    quiet = [day[(busy_start + 8 + i) % 24] for i in range(16)]
    return (sum(busy) / 8) / (sum(quiet) / 16)


@pytest.mark.parametrize("step", [HOUR, 3 * HOUR])
def test_a_rhythm_that_lasts_is_kept(step):
    profile = _fed(lambda t: 9, step=step)
    assert _busy_over_quiet(profile, 9) > 3.0
    assert profile._belief is not None and profile._belief > 0.8


@pytest.mark.parametrize("step", [HOUR, 3 * HOUR])
def test_a_rhythm_that_moves_every_period_is_flattened(step):
    # The busy hours move by 8 hours every two weeks (one period): the
    # learnt shape is a real rhythm (main placed revisits on it), but what
    # it says about the next weeks is wrong.
    def moving(t):
        return 8 * int((t - MONDAY) // (14 * DAY)) % 24

    profile = _fed(moving, step=step)
    learnt = profile.weekly().shape().rates  # what main placed revisits on
    assert max(learnt) > 2.0
    rates = profile.shape().rates
    assert max(rates) == pytest.approx(1.0) and min(rates) == pytest.approx(1.0)
    assert profile._belief == 0.0


def test_a_young_profile_keeps_the_learnt_shape():
    # Less than two periods: no verdict, the shape is main's.
    profile = _fed(lambda t: 9, weeks=3)
    assert profile._belief is None
    assert profile.shape().rates == profile.weekly().shape().rates


def test_daily_visits_carry_no_hour_and_give_no_verdict():
    # Each interval is a whole day: spread by time, the hours all get the
    # same, so there is nothing to correlate (not a rounding error's r).
    profile = _fed(lambda t: 9, step=DAY)
    assert profile._belief is None


def test_the_periods_survive_a_restart_and_are_checked():
    def moving(t):
        return 8 * int((t - MONDAY) // (14 * DAY)) % 24

    profile = _fed(moving)
    state = json.loads(json.dumps(profile.to_state()))
    restored = RateProfile.from_state(state)
    assert restored.shape().rates == profile.shape().rates
    assert restored._current == profile._current and restored._previous == profile._previous
    # Both go on alike.
    for p in (profile, restored):
        p.observe(MONDAY + 70 * DAY, MONDAY + 85 * DAY, 3)
    assert restored.to_state() == profile.to_state()
    # A state saved before the periods loads as a young profile.
    del state["periods"]
    old = RateProfile.from_state(state)
    assert old._belief is None and old._previous is None
    assert old.shape().rates == old.weekly().shape().rates
    for bad in ([None, None, [0.0] * 23, None], [0.0, None, [0.0] * 24, 1.5],
                [0.0, [-1.0] * 24, [0.0] * 24, None], [0.0, None, ["1"] * 24, None],
                ["x", None, [0.0] * 24, None], [0.0, None, [0.0] * 24, float("nan")], "x"):
        state["periods"] = bad
        with pytest.raises(ValueError):
            RateProfile.from_state(state)


def test_a_planner_state_saved_before_the_periods_still_loads():
    from scrapy_aopic.recrawl.planner import RecrawlPlanner

    planner = RecrawlPlanner(budget=50.0)
    t = MONDAY
    for i in range(400):
        url = f"https://example.com/docs/p{i % 20}"
        planner.on_visit(url, "example.com", t, changed=(i % 3 == 0), new_links=i % 2)
        t += 2 * HOUR
    state = json.loads(json.dumps(planner.to_state()))
    assert state["profiles"] and all("periods" in p for p in state["profiles"].values())
    again = RecrawlPlanner(budget=50.0)
    again.load_state(state)
    assert json.loads(json.dumps(again.to_state())) == state
    for p in state["profiles"].values():
        del p["periods"]
    old = RecrawlPlanner(budget=50.0)
    old.load_state(state)
    assert all(p._belief is None and p._period_start is None for p in old.profiles.values())
