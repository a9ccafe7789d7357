"""Where a crawled URL's bytes go in the memory store: ``tracemalloc``.

    python benchmarks/bench_crawled_memory.py [--pages 100000] [--trees . /path/to/other/tree]

Drives the engine over a fixed graph of ``--pages`` pages (URLs of
``bench_scheduler.py``, about 55 characters, over ``--hosts`` hosts; page
``i`` links to its 10 children ``10i+1 .. 10i+10`` and to 5 pages drawn at
random among all of them) until nothing is pending, so every account ends
CRAWLED, with ``tracemalloc`` on from the empty store. Prints the bytes the
store holds per crawled URL, without and with link memory
(``AOPIC_LINK_MEMORY``), the largest source lines, and a digest of the fetch
order (the order must not depend on how crawled accounts are stored).

With ``--trees``, each tree (a checkout of scrapy-aopic) runs in its own
subprocess in the same run, so a change is measured side by side with the
code before it.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve()


def _url(i: int, hosts: int) -> str:  # as bench_scheduler._url
    return f"http://host{i % hosts}.example.com/section/{i // hosts}/page-{i}.html"


def graph(pages: int, hosts: int):
    """``links(i)``: the out-links of page ``i`` (deterministic)."""

    def links(i: int) -> list[int]:
        rng = random.Random(i)
        out = [j for j in range(10 * i + 1, 10 * i + 11) if j < pages]
        out += [rng.randrange(pages) for _ in range(5)]
        return out

    return links


def crawl(pages: int, hosts: int, link_memory: bool, trace: bool) -> dict:
    from scrapy_aopic.engine import AopicEngine
    from scrapy_aopic.store.base import CRAWLED, Link
    from scrapy_aopic.store.memory import MemoryStore

    links_of = graph(pages, hosts)
    tick = [0.0]

    def clock() -> float:
        tick[0] += 1.0
        return tick[0]

    gc.collect()
    if trace:
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
    cpu = time.process_time()
    store = MemoryStore("pending")
    engine = AopicEngine(store, clock=clock, link_memory=link_memory)
    engine.add_seed(Link(_url(0, hosts), f"host{0}", 0))
    order = hashlib.sha256()
    fetched = 0
    while True:
        lease = engine.next()
        if lease is None:
            break
        i = int(lease.url.rsplit("-", 1)[1][:-5])
        order.update(lease.url.encode() + b"\n")
        engine.visit(lease, [Link(_url(j, hosts), f"host{j % hosts}", lease.depth + 1) for j in links_of(i)])
        fetched += 1
    cpu = time.process_time() - cpu
    result = {"pages": pages, "fetched": fetched, "link_memory": link_memory, "order": order.hexdigest()[:16],
              "cpu_us_per_fetch": cpu / fetched * 1e6,
              "crawled": sum(1 for v in store.iter_accounts() if v.state == CRAWLED),
              "error": engine.conservation_error()}
    if trace:
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        by_line: dict[str, int] = defaultdict(int)
        total = 0
        for stat in after.compare_to(before, "lineno"):
            frame = stat.traceback[0]
            by_line[f"{Path(frame.filename).name}:{frame.lineno}"] += stat.size_diff
            total += stat.size_diff
        result["bytes_per_crawled"] = total / result["crawled"]
        result["lines"] = sorted(((size / result["crawled"], where) for where, size in by_line.items()), reverse=True)[:12]
    del engine, store
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[100_000])
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--trees", nargs="+", default=[str(HERE.parents[1])],
                        help="scrapy-aopic checkouts to compare, each in its own process")
    parser.add_argument("--cpu-only", action="store_true", help="no tracemalloc: time the fetches only")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        pages, memory, trace = int(args.one[0]), args.one[1] == "1", args.one[2] == "1"
        print(json.dumps(crawl(pages, args.hosts, memory, trace)))
        return
    print(f"memory store, every account crawled at the end; {args.hosts} hosts; tracemalloc bytes per crawled URL")
    for pages in args.pages:
        for memory in (False, True):
            for tree in args.trees:
                env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
                out = subprocess.run(
                    [sys.executable, str(HERE), "--hosts", str(args.hosts), "--one", str(pages),
                     "1" if memory else "0", "0" if args.cpu_only else "1"],
                    check=True, capture_output=True, text=True, env=env,
                ).stdout
                r = json.loads(out.strip().splitlines()[-1])
                size = f"{r['bytes_per_crawled']:7.1f} B" if "bytes_per_crawled" in r else "      -  "
                print(f"{pages:>9,} link memory {'on ' if memory else 'off'} {tree:<28} {size} per crawled URL, "
                      f"{r['cpu_us_per_fetch']:6.1f} µs CPU per fetch, order {r['order']}, "
                      f"{r['crawled']:,} crawled, books {r['error']:.1e}", flush=True)
                for size_, where in r.get("lines", [])[:8]:
                    print(f"        {size_:7.1f}  {where}")


if __name__ == "__main__":
    main()
