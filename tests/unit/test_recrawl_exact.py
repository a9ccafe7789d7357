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


def _plain_place(rates, k, sweeps=12):
    """timetable.place as it was: every cost through the helper."""
    from scrapy_aopic.recrawl.timetable import GREEDY_MAX, _prefix

    if k == BINS:
        return list(range(BINS))
    p1, p2 = _prefix(rates)

    def cost(a, b):
        shift = (a // BINS) * BINS
        a -= shift
        b -= shift
        return b * (p1[b] - p1[a]) - (p2[b] - p2[a])

    best = min(range(BINS), key=lambda a: (cost(a, a + BINS), a))
    if k == 1:
        return [best]

    def descend(slots):
        for _ in range(sweeps):
            moved = False
            for i in range(k):
                prev = slots[i - 1] if i else slots[-1] - BINS
                nxt = slots[i + 1] if i + 1 < k else slots[0] + BINS
                here = slots[i]
                top = cost(prev, here) + cost(here, nxt)
                for b in range(prev + 1, nxt):
                    c = cost(prev, b) + cost(b, nxt)
                    if c < top - 1e-12:
                        top, here = c, b
                if here != slots[i]:
                    slots[i] = here
                    moved = True
            if not moved:
                break
        return sum(cost(slots[i - 1] if i else slots[-1] - BINS, slots[i]) for i in range(k)), slots

    found = descend([best + (i * BINS) // k for i in range(k)])
    if k <= GREEDY_MAX:
        greedy = [best]
        while len(greedy) < k:
            ring = sorted(greedy)
            gain, pick = -1.0, None
            for j, a in enumerate(ring):
                b = ring[j + 1] if j + 1 < len(ring) else ring[0] + BINS
                whole = cost(a, b)
                for c in range(a + 1, b):
                    saved = whole - cost(a, c) - cost(c, b)
                    if saved > gain:
                        gain, pick = saved, c % BINS
            greedy.append(pick)
        ring = sorted(greedy)
        found = min(found, descend([b if b >= ring[0] else b + BINS for b in ring]))
    return sorted(b % BINS for b in found[1])


def test_place_is_the_plain_descent():
    from scrapy_aopic.recrawl.timetable import LEVELS, place

    rng = random.Random(5)
    profiles = [[1.0] * BINS, [1.0 if 9 <= b % 24 < 17 else 0.05 for b in range(BINS)]]
    profiles += [[rng.random() ** rng.choice([1, 3, 8]) for _ in range(BINS)] for _ in range(6)]
    for rates in profiles:
        for k in LEVELS:
            assert place(rates, k) == _plain_place(rates, k), k
