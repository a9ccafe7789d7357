"""``benchmarks/recrawl_host_queue.py`` (issue 17): how late revisits come
after their planned time and what moving them back would save, on fetch
times made by hand."""

from __future__ import annotations

import pytest

from tests.support.simdrive import load_benchmark

HOUR, DAY, YEAR = 3600.0, 86400.0, 365.25 * 86400.0
MONDAY = 4 * DAY  # 1970-01-05 00:00 UTC


@pytest.fixture(scope="module")
def queue():
    return load_benchmark("recrawl_host_queue")


def test_lateness_and_the_delay_on_time(queue):
    from recrawl_traces import Page, Trace  # on sys.path once the benchmark is loaded

    start = MONDAY
    a = start + queue.brt.WARMUP
    # One page, a change at 10:00 on ten days of the scored period; each
    # revisit planned for 12:00 and fetched at 15:00 (3 h late).
    days = [a + d * DAY for d in range(1, 11)]
    changes = [d + 10 * HOUR for d in days]
    trace = Trace("t", start, a + 20 * DAY, [Page("http://h.example/s/0", "h.example", changes)])
    fetches = {"http://h.example/s/0": [start] + [d + 15 * HOUR for d in days]}
    planned = {"http://h.example/s/0": [d + 12 * HOUR for d in days]}
    lines = queue.report(trace, fetches, planned)
    assert "mean 3.00, median 3.00, 90 % 3.00, largest 3.00" in lines[1]
    assert "more than an hour late 100 %" in lines[1]
    assert lines[-1].startswith("mean delay of a change: 5.00 h; each fetch at its planned time: 2.00 h")
