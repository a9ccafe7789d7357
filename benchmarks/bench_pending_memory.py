"""Where a pending URL's bytes go: ``tracemalloc`` by source line.

    python benchmarks/bench_pending_memory.py [--urls 100000] [--hosts 5000] [--top 15]
        [--referer] [--trees . /path/to/other/checkout] [--no-scrapy] [--set NAME=VALUE]

Fills scrapy-aopic's scheduler (memory backend) through the public Scrapy
API, as ``bench_scheduler.py`` does (``enqueue_request`` of N new links over
H hosts, URLs of about 60 characters), with ``tracemalloc`` on, and prints
the bytes per pending URL that each source line still holds once the fill is
done (grouped by line, then by file), largest first. Scrapy's default
scheduler is measured the same way in the same run for comparison (its
memory queues hold the ``Request`` objects themselves).

``--referer``: every link carries a ``Referer`` header naming an earlier
link (link ``i`` names ``i // 10``, as a page's links name the page), as
Scrapy's ``RefererMiddleware`` gives every followed link in a crawl; without
it the links are bare requests.

``--set NAME=VALUE``: a setting for every scrapy-aopic run (a checkout
that does not know it warns and ignores it).

``--trees``: each checkout of scrapy-aopic runs in its own process, one
after the other in the same run, so that a change is measured side by side
with the code before it.

The figures are allocations Python makes through its allocator, so they
add up to a little less than the resident-set growth that
``bench_scheduler.py`` reports (allocator slack and freed-but-kept pages are
not in them). They include the canonicalizer's memo
(``hygiene/canonical.py`` and the URL strings ``w3lib`` made for it): a
fixed 32,768 entries, about 7 MB however many URLs are pending (about 70 B
per URL at 10^5, 7 B at 10^6).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tracemalloc
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

import bench_scheduler  # noqa: E402
from bench_scheduler import _scheduler, _url  # noqa: E402

ROOT = str(HERE.parents[1])


def _short(filename: str) -> str:
    for marker in ("site-packages/", "scrapy_aopic/"):
        if marker in filename:
            return (marker if marker == "scrapy_aopic/" else "") + filename.split(marker, 1)[1]
    return filename.rsplit("/", 2)[-1] if "/lib/python" in filename else filename


def measure(kind: str, urls: int, hosts: int, referer: bool) -> tuple[dict[str, int], dict[str, int], int]:
    """(bytes by line, bytes by file, total bytes) held after the fill."""
    from scrapy import Request

    scheduler, _ = _scheduler(kind)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    for i in range(urls):
        headers = {"Referer": _url(i // 10, hosts)} if referer else None
        scheduler.enqueue_request(Request(_url(i, hosts), headers=headers))
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


def _print(label: str, n: int, top: int, by_line: dict, by_file: dict, total: int) -> None:
    print(f"\n{label}: {total / n:,.0f} B per pending URL in all")
    print("  by file:")
    for where, size in sorted(by_file.items(), key=lambda item: -item[1])[:top]:
        if size / n >= 0.5:
            print(f"    {size / n:8.1f}  {where}")
    print("  by line:")
    for where, size in sorted(by_line.items(), key=lambda item: -item[1])[:top]:
        if size / n >= 0.5:
            print(f"    {size / n:8.1f}  {where}")


def main() -> None:
    from arglists import setting  # benchmarks/, the directory of the script run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--referer", action="store_true", help="every link carries a Referer header")
    parser.add_argument("--trees", nargs="+", default=[ROOT],
                        help="scrapy-aopic checkouts to compare, each in its own process")
    parser.add_argument("--no-scrapy", action="store_true", help="skip Scrapy's default scheduler")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(),
                        help="a setting for the scrapy-aopic runs")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.urls
    if args.one:
        sys.path.insert(0, args.code)  # before bench_scheduler's own tree
        import scrapy_aopic

        bench_scheduler.EXTRA.update(item.split("=", 1) for item in args.set)
        by_line, by_file, total = measure(args.one, n, args.hosts, args.referer)
        print(json.dumps({"code": scrapy_aopic.__file__, "by_line": by_line, "by_file": by_file, "total": total}))
        return
    print(f"bytes held per pending URL after enqueue_request of {n:,} new links over {args.hosts:,} hosts"
          f" ({'each with a Referer' if args.referer else 'no Referer'})")
    runs = [("aopic", tree) for tree in args.trees] + ([] if args.no_scrapy else [("scrapy", ROOT)])
    for kind, tree in runs:
        tree = str(Path(tree).resolve())
        command = [sys.executable, str(HERE), "--urls", str(n), "--hosts", str(args.hosts), "--one", kind,
                   "--code", tree] + [f"--set={item}" for item in args.set]
        out = subprocess.run(command + (["--referer"] if args.referer else []),
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        if not Path(r["code"]).resolve().is_relative_to(tree):
            raise SystemExit(f"{tree} ran {r['code']}")
        _print(f"{kind} ({tree})" if kind == "aopic" else kind, n, args.top, r["by_line"], r["by_file"], r["total"])


if __name__ == "__main__":
    main()
