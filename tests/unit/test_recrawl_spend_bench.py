"""``benchmarks/recrawl_spend.py`` (issue 17): the spend of each block of
days as a share of the budget, on revisit times made by hand."""

from __future__ import annotations

import pytest

from tests.support.simdrive import load_benchmark

DAY = 86400.0


@pytest.fixture(scope="module")
def spend():
    return load_benchmark("recrawl_spend")


def test_blocks_count_each_whole_block_against_the_budget(spend):
    # 10 pages, budget 1 a page a day: 10 revisits a day, 5 days a block;
    # the third block spends twice as much, the partial last block is left out
    times = [d * DAY + i * 60.0 for d in range(25) for i in range(20 if 10 <= d < 15 else 10)]
    times += [25 * DAY + i for i in range(3)]
    shares, whole = spend.blocks(times, pages=10, budget=1.0, days=5)
    assert shares == pytest.approx([1.0, 2.0, 1.0, 1.0])  # blocks 1..4 (block 0 and 5 left out)
    assert whole == pytest.approx(303 / (10 * (25 * DAY + 2) / DAY))  # first to last revisit
    # half the budget: every share doubles
    assert spend.blocks(times, pages=10, budget=0.5, days=5)[0] == pytest.approx([2.0, 4.0, 2.0, 2.0])
