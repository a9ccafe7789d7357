"""The discounted-priority prototype of ``benchmarks/bench_ordering_gap.py``
(issue 18): it moves cash exactly as the engine does, only the order differs."""

from __future__ import annotations

import math
import random

import pytest

from scrapy_aopic.sim.synthetic import scale_free_web
from tests.support.simdrive import crawl, load_benchmark

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def gap():
    return load_benchmark("bench_ordering_gap")


@pytest.mark.parametrize("tau", [30.0, math.inf])
def test_prototype_conserves_cash_and_fetches_each_page_once(gap, tau):
    graph = scale_free_web(3000, seed=2)
    policy = gap.DiscountedOpic(tau)
    seen = set()
    seeds = len(set(graph.seeds.tolist()))
    for node in crawl(policy, graph, 1500):
        assert node not in seen
        seen.add(node)
        assert policy.books() == pytest.approx(seeds, abs=1e-9)
    assert len(seen) == 1500


def test_recent_inflow_outranks_older_larger_cash(gap):
    """The mechanism: a credit of 0.5 made 100 fetches after a credit of
    1.0 outranks it with tau = 100 (0.5 e > 1), not without a discount."""
    graph = scale_free_web(200, seed=3)
    for tau, first in ((100.0, 2), (math.inf, 1)):
        policy = gap.DiscountedOpic(tau)
        policy.start(graph, [], random.Random(0))
        policy._credit(1, 1.0)
        policy.now = 100
        policy._credit(2, 0.5)
        assert policy._top() == first
        assert policy.cash[1] == 1.0 and policy.cash[2] == 0.5  # the books are untouched
