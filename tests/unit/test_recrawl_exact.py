"""The planner's shortcuts (issue 17, cost per visit) compute bit for bit
what the plain code computes: the decisions must not move.

Each test compares a fast path with a reference written out plainly (the
code the shortcut replaced), on random and on adversarial (tied) inputs.
"""

from __future__ import annotations

import math
import random

import pytest

from scrapy_aopic.recrawl.profile import BINS, HOUR, RateProfile, WeeklyRates


def _plain_product_model(profile: RateProfile, hour_rate, flat, beta):
    """RateProfile._product_model as it was: every boundary summed exactly."""
    counts, exposure = profile.counts, profile.exposure
    events = profile.prior_events
    best = None
    for shift in range(24):
        day_counts = [0.0] * 7
        day_exposure = [0.0] * 7
        for b in range(BINS):
            d = ((b + shift) // 24) % 7
            day_counts[d] += counts[b]
            day_exposure[d] += exposure[b]
        day_rate = [
            (day_counts[d] + events) / (day_exposure[d] + beta) if day_exposure[d] + beta > 0 else flat
            for d in range(7)
        ]
        model = [hour_rate[b % 24] * day_rate[((b + shift) // 24) % 7] / flat for b in range(BINS)]
        likelihood = 0.0
        for b in range(BINS):
            mean = model[b] * exposure[b]
            if mean > 0:
                likelihood += counts[b] * math.log(mean) - mean
        if best is None or likelihood > best[0]:
            best = (likelihood, model)
    return best[1]


def _random_profile(rng: random.Random) -> RateProfile:
    profile = RateProfile()
    t = 1.7e9 + rng.random() * 1e6
    mean_gap = rng.choice([0.3, 6.0, 30.0]) * HOUR
    for _ in range(rng.choice([3, 20, 200, 2000])):
        step = rng.expovariate(1 / mean_gap)
        busy = (t // HOUR) % 24 > 12
        count = rng.choice([0, 0, 1, 2, 0.5]) if rng.random() < (0.4 if busy else 0.1) else 0
        profile.observe(t, t + step, count)
        t += step
    profile._flush()
    return profile


@pytest.mark.parametrize("seed", range(6))
def test_product_model_is_the_plain_loops(seed):
    rng = random.Random(seed)
    for _ in range(15):
        profile = _random_profile(rng)
        flat = math.fsum(profile.counts) / math.fsum(profile.exposure)
        if flat <= 0:
            continue
        hour_rate = [flat * rng.uniform(0.1, 3.0) for _ in range(24)]
        beta = profile.prior_events / flat
        assert profile._product_model(hour_rate, flat, beta) == _plain_product_model(
            profile, hour_rate, flat, beta
        )


def test_product_model_ties_keep_the_first_boundary():
    # Every bin alike: all 24 boundaries have the same likelihood (up to
    # rounding); the plain loop keeps the first of the highest.
    profile = RateProfile()
    profile.counts = [3.0] * BINS
    profile.exposure = [HOUR] * BINS
    hour_rate = [3.0 / HOUR] * 24
    flat = 3.0 / HOUR
    assert profile._product_model(hour_rate, flat, 0.5 / flat) == _plain_product_model(
        profile, hour_rate, flat, 0.5 / flat
    )
    # Weekdays alike but for one hour of Monday: boundaries differ by one bin.
    profile.counts[5] = 3.0 + 1e-12
    assert profile._product_model(hour_rate, flat, 0.5 / flat) == _plain_product_model(
        profile, hour_rate, flat, 0.5 / flat
    )


def test_boundary_table_is_the_general_formula():
    rng = random.Random(4)
    for trial in range(300):
        scale = 10 ** rng.uniform(-9, 2)
        rates = [rng.random() * scale if trial % 3 or rng.random() < 0.5 else 0.0 for _ in range(BINS)]
        weekly = WeeklyRates(rates)
        table = weekly._two_weeks()
        general = [weekly._boundary(k) for k in range(2 * BINS)]
        assert [x.hex() for x in table] == [x.hex() for x in general]
