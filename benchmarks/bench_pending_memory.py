"""Where a pending URL's bytes go: ``tracemalloc`` by source line.

    python benchmarks/bench_pending_memory.py [--urls 100000] [--hosts 5000] [--top 15]

Fills scrapy-aopic's scheduler (memory backend) through the public Scrapy
API, as ``bench_scheduler.py`` does (``enqueue_request`` of N new links over
H hosts, URLs of about 60 characters), with ``tracemalloc`` on, and prints
the bytes per pending URL that each source line still holds once the fill is
done (grouped by line, then by file), largest first. Scrapy's default
scheduler is measured the same way in the same run for comparison (its
memory queues hold the ``Request`` objects themselves).

The figures are allocations Python makes through its allocator, so they
add up to a little less than the resident-set growth that
``bench_scheduler.py`` reports (allocator slack and freed-but-kept pages are
not in them).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_scheduler import _scheduler, _url  # noqa: E402

ROOT = str(Path(__file__).resolve().parents[1])


def _short(filename: str) -> str:
    for marker in ("site-packages/", ROOT + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename.rsplit("/", 2)[-1] if "/lib/python" in filename else filename


def measure(kind: str, urls: int, hosts: int) -> tuple[dict[str, int], dict[str, int], int]:
    """(bytes by line, bytes by file, total bytes) held after the fill."""
    from scrapy import Request

    scheduler, _ = _scheduler(kind)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    for i in range(urls):
        scheduler.enqueue_request(Request(_url(i, hosts)))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(scheduler) == urls, (len(scheduler), urls)
    by_line: dict[str, int] = {}
    by_file: dict[str, int] = defaultdict(int)
    total = 0
    for stat in after.compare_to(before, "lineno"):
        frame = stat.traceback[0]
        where = f"{_short(frame.filename)}:{frame.lineno}"
        by_line[where] = stat.size_diff
        by_file[_short(frame.filename)] += stat.size_diff
        total += stat.size_diff
    scheduler.close("finished")
    return by_line, dict(by_file), total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    n = args.urls
    print(f"bytes held per pending URL after enqueue_request of {n:,} new links over {args.hosts:,} hosts")
    for kind in ("aopic", "scrapy"):
        by_line, by_file, total = measure(kind, n, args.hosts)
        print(f"\n{kind}: {total / n:,.0f} B per pending URL in all")
        print("  by file:")
        for where, size in sorted(by_file.items(), key=lambda item: -item[1])[: args.top]:
            if size / n >= 0.5:
                print(f"    {size / n:8.1f}  {where}")
        print("  by line:")
        for where, size in sorted(by_line.items(), key=lambda item: -item[1])[: args.top]:
            if size / n >= 0.5:
                print(f"    {size / n:8.1f}  {where}")


if __name__ == "__main__":
    main()
