"""``benchmarks/recrawl_rhythm.py`` (issue 17): the rhythm figures of a
trace, on traces made by hand."""

from __future__ import annotations

import random

import pytest

from tests.support.simdrive import load_benchmark

HOUR, DAY = 3600.0, 86400.0
MONDAY = 4 * DAY  # 1970-01-05, a Monday 00:00 UTC


@pytest.fixture(scope="module")
def rhythm():
    return load_benchmark("recrawl_rhythm")


def trace_of(times, pages=10):
    from recrawl_traces import Page, Trace  # on sys.path once recrawl_rhythm is loaded

    return Trace("t", MONDAY, MONDAY + 3 * 365.25 * DAY,
                 [Page(f"http://h.example/s/{i}", "h.example", sorted(times[i::pages])) for i in range(pages)])  # fmt: skip


def test_a_working_day_rhythm_is_measured(rhythm):
    rng = random.Random(1)
    # 2,000 changes on weekdays only, 09-17 h UTC: every figure at its extreme.
    times = [MONDAY + rng.randrange(150) * 7 * DAY + rng.randrange(5) * DAY + (9 + 8 * rng.random()) * HOUR
             for _ in range(2000)]  # fmt: skip
    r = rhythm.rhythm(trace_of(times))
    assert r["busiest_8h"] == 1.0 and r["weekend"] == 0.0
    assert r[24]["phi2"] == pytest.approx(24 / 8 - 1, rel=0.05)  # 8 of 24 hours: phi2 = 2
    assert r[7]["phi2"] == pytest.approx(7 / 5 - 1, rel=0.1)
    assert r[24]["p"] < 1e-100 and r["corr_next"] > 0.9


def test_a_flat_process_has_no_rhythm(rhythm):
    rng = random.Random(2)
    times = [MONDAY + rng.random() * 3 * 365 * DAY for _ in range(2000)]
    r = rhythm.rhythm(trace_of(times))
    assert 0.28 < r["busiest_8h"] < 0.40 and 0.25 < r["weekend"] < 0.32
    for k in (24, 7, 168):
        assert r[k]["p"] > 0.001 and r[k]["phi2"] < 0.02
    assert r[24]["w180"] < 0.3  # what a James-Stein factor would believe of it
