"""``python -m demosite``: describe or serve the demo site.

Run from ``example_project/`` (or with it on ``PYTHONPATH``)::

    python -m demosite --serve --pages 300 --seed 42
    python -m demosite --seeds-file seeds.txt --serve   # also write the seeds
    python -m demosite                                   # summary and reference crawls only
"""

from __future__ import annotations

import argparse
import sys
import threading

from .generator import generate
from .reference import ORDERS, reference_crawl
from .server import serve


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m demosite", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300, help="number of articles (default 300)")
    parser.add_argument("--hosts", type=int, default=8, help="number of hosts, >= 4 (default 8)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    parser.add_argument("--serve", action="store_true", help="serve the site until Ctrl-C")
    parser.add_argument("--port", type=int, default=0, help="port shared by all hosts (default: a free one)")
    parser.add_argument("--slow-seconds", type=float, default=10.0, help="delay of the slow page (default 10)")
    parser.add_argument("--seeds-file", help="write the seed URLs to this file, one per line")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)

    site = generate(pages=args.pages, hosts=args.hosts, seed=args.seed)
    summary = site.summary()
    print("demo site:", ", ".join(f"{k}={v}" for k, v in summary.items() if not k.startswith("kind_")))
    for info in site.hosts:
        print(f"  host {info.index}: {info.ip:<12} {info.role:<9} {info.name}"
              + (f"  [{', '.join(info.features)}]" if info.features else ""))
    budget = int(0.6 * summary["real_pages"])
    refs = [reference_crawl(site, order, budget) for order in ORDERS]
    print(f"reference crawls, {budget} fetches (60 % of the real pages), share of true PageRank captured: "
          + ", ".join(f"{r.order} {r.captured_pagerank:.1%} ({r.trap_fetches} in traps)" for r in refs))
    if not args.serve:
        return 0
    with serve(site, port=args.port, slow_seconds=args.slow_seconds, verbose=args.verbose) as served:
        print("serving; seed URLs:")
        for url in served.seeds:
            print("  " + url)
        if args.seeds_file:
            with open(args.seeds_file, "w", encoding="utf-8") as handle:
                handle.write("\n".join(served.seeds) + "\n")
            print(f"seeds written to {args.seeds_file}")
        print(f"crawl with: scrapy crawl broad -a seeds={','.join(served.seeds)}")
        print("Ctrl-C to stop", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        print(f"\nserved {served.total_requests()} requests, "
              f"{len(served.fetched_real_urls())} of {summary['real_pages']} real pages, "
              f"{served.captured_pagerank():.1%} of PageRank")
    return 0


if __name__ == "__main__":
    sys.exit(main())
