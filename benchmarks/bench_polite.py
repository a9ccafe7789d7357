"""Polite broad crawl: pages/s and PageRank captured per minute, add-on vs plain Scrapy.

    python benchmarks/bench_polite.py [--rounds 2] [--pages 1200] [--set AOPIC_MIN_CASH_SHARE=0]

A broad crawl is throttled by politeness, not by CPU: each host takes one
request per ``DOWNLOAD_DELAY``, and a download slot left idle while a URL of
its host is pending is a fetch lost for good. This benchmark serves the demo
site (``example_project/demosite``: ``--hosts 8`` loopback hosts, 6 content
hosts plus a URL shortener and a link farm, ``--articles 3000`` articles,
about 3,300 real pages, traps, duplicates, dead links; its true PageRank is
known) and crawls it with the example project's ``broad`` spider, politely:
``CONCURRENT_REQUESTS_PER_DOMAIN=2``, ``DOWNLOAD_DELAY=0.1`` (Scrapy's
default jitter, 0.05-0.15 s), ``CONCURRENT_REQUESTS=16``, a budget of
``--pages`` responses (``CLOSESPIDER_PAGECOUNT``). Each round runs one crawl
with the add-on (the ADDONS line of example_project/settings.py, defaults
plus ``--set``) and one with plain Scrapy (``-s ADDONS={}``), alternating
which goes first.

Printed per crawl: responses, seconds (Scrapy's ``elapsed_time_seconds``),
pages/s, the share of the site's true PageRank held by the real pages
fetched, that share per minute, and the share captured after 10 s, 20 s and
30 s of crawling (server clock, from the crawl's first request): importance
per unit of time. Then, per round, the pages/s ratio add-on / plain and the
PageRank-per-minute ratio, and their medians.

The crawler is a subprocess, the server threads run in this process; on a
shared 2-core machine other jobs move wall-clock figures a little, but a
polite crawl waits on its delays, not on the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "example_project"
sys.path.insert(0, str(PROJECT))

from demosite import generate, serve  # noqa: E402
from run_demo import read_stats  # noqa: E402

CHECKPOINTS = (10.0, 20.0, 30.0)


def crawl(served, pages: int, aopic: bool, workdir: Path, extra: list[str]) -> dict:
    served.reset_counts()
    log = workdir / f"crawl-{'aopic' if aopic else 'plain'}-{time.monotonic_ns()}.log"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad", "-a", "seeds=" + ",".join(served.seeds),
        "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "CONCURRENT_REQUESTS=16",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2", "-s", "DOWNLOAD_DELAY=0.1",
        "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={log}",
    ]
    command += extra if aopic else ["-s", "ADDONS={}"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    subprocess.run(command, cwd=PROJECT, check=True, stdout=subprocess.DEVNULL, env=env, timeout=900)
    stats = read_stats(log)
    ranks = served.pagerank()
    fetches = [f for f in served.log if f.kind != "robots"]
    start = fetches[0].time if fetches else 0.0
    seen: set[str] = set()
    captured = 0.0
    at = {}
    marks = list(CHECKPOINTS)
    per_host: dict[str, int] = defaultdict(int)
    for f in fetches:
        while marks and f.time - start > marks[0]:
            at[marks.pop(0)] = captured
        per_host[f.url.split("/")[2].split(":")[0]] += 1
        if f.page is not None and f.page not in seen:
            seen.add(f.page)
            captured += ranks.get(f.page, 0.0)
    for mark in marks:
        at[mark] = captured
    responses = int(stats.get("response_received_count", 0))
    elapsed = float(stats["elapsed_time_seconds"])
    return {
        "responses": responses,
        "elapsed": elapsed,
        "pages_per_s": responses / elapsed,
        "captured": captured,
        "per_minute": captured / (elapsed / 60),
        "at": at,
        "real_pages": len(seen),
        "traps": sum(1 for f in fetches if f.kind.startswith("trap:")),
        "per_host": dict(sorted(per_host.items())),
        "finish": stats.get("finish_reason"),
        "conservation": stats.get("aopic/conservation_error"),
    }


def line(label: str, r: dict) -> str:
    at = ", ".join(f"{r['at'][m]:.1%} at {m:g} s" for m in CHECKPOINTS)
    return (f"  {label:<13} {r['responses']:5d} responses in {r['elapsed']:5.1f} s = {r['pages_per_s']:5.1f} pages/s; "
            f"PageRank {r['captured']:.1%} ({r['real_pages']} real pages, {r['traps']} trap fetches) "
            f"= {r['per_minute']:.1%}/min; {at}")


def main() -> None:
    from arglists import setting  # benchmarks/, the directory of the script run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1200, help="responses per crawl (default 1200)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of one crawl each (default 2)")
    parser.add_argument("--hosts", type=int, default=8, help="demo-site hosts (default 8: 6 content hosts)")
    parser.add_argument("--articles", type=int, default=3000, help="demo-site articles (default 3000)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(),
                        help="a setting for the add-on crawl only (repeatable)")
    parser.add_argument("--aopic-only", action="store_true", help="skip the plain-Scrapy crawls")
    parser.add_argument("--per-host", action="store_true", help="print requests per host")
    args = parser.parse_args()
    extra = [x for s in args.set for x in ("-s", s)]
    site = generate(pages=args.articles, hosts=args.hosts, seed=args.seed)
    results: dict[bool, list[dict]] = {True: [], False: []}
    with serve(site, slow_seconds=8.0) as served, tempfile.TemporaryDirectory() as tmp:
        print(f"demo site: {len(site.hosts)} hosts, {len(site.real_pages())} real pages; {args.pages} responses "
              f"per crawl, 2 requests per host, DOWNLOAD_DELAY 0.1 s; add-on settings: {args.set or 'defaults'}; "
              f"{args.rounds} rounds (shared machine)", flush=True)
        for n in range(args.rounds):
            order = (True,) if args.aopic_only else ((False, True) if n % 2 == 0 else (True, False))
            for aopic in order:
                r = crawl(served, args.pages, aopic, Path(tmp), extra)
                results[aopic].append(r)
                print(line("scrapy-aopic" if aopic else "plain Scrapy", r), flush=True)
                if args.per_host:
                    print(f"                requests per host: {r['per_host']}", flush=True)
    if args.aopic_only:
        return
    speed = [a["pages_per_s"] / p["pages_per_s"] for a, p in zip(results[True], results[False])]
    rank = [a["per_minute"] / p["per_minute"] for a, p in zip(results[True], results[False])]
    for n, (s, k) in enumerate(zip(speed, rank), 1):
        print(f"  round {n}: pages/s ratio {s:.2f}, PageRank-per-minute ratio {k:.2f}")
    print(f"pages/s ratio scrapy-aopic / plain Scrapy (median of {args.rounds}): {statistics.median(speed):.2f}")
    print(f"PageRank captured per minute, scrapy-aopic / plain Scrapy (median): {statistics.median(rank):.2f} "
          f"({statistics.median(r['per_minute'] for r in results[True]):.1%}/min vs "
          f"{statistics.median(r['per_minute'] for r in results[False]):.1%}/min)")


if __name__ == "__main__":
    main()
