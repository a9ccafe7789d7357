"""A page's links through the spider middlewares and the scheduler, in-process (issue 18, item 4).

    python benchmarks/bench_links.py [--root DIR ...] [--rounds 3] [--base CHECKOUT]

Crawls a documentation tree (default: the PostgreSQL 15 manual, as
``bench_e2e.py`` does) in-process, without a network or downloader: the
example project's ``broad`` spider, Scrapy's own spider middlewares in
their order and the scheduler, driven as Scrapy's engine drives them
(``request_scheduled``, ``enqueue_request``, ``request_dropped``,
``next_request``), each page built from its file. The spider's callback
is run outside the timed parts (its requests are built either way), so
the figures are what happens to a page's links after the spider made
them, in CPU milliseconds per page:

* ``spidermw``: Scrapy's spider middlewares (depth, URL length, referer...)
  and, with the add-on, its ``CashMiddleware`` (the frontier's visit:
  canonical keys, link filters, crediting the links' accounts);
* ``schedule``: ``request_scheduled`` (every receiver, Scrapy's offsite
  check among them) and ``enqueue_request`` for every request that comes
  out, ``request_dropped`` for the refused;
* ``next``: ``next_request`` once per page.

Each crawl runs twice, plain Scrapy (its scheduler and duplicate filter)
and with the add-on, and prints the ratio. With ``--base CHECKOUT`` (e.g.
``git archive main | tar -x -C /tmp/e2e-base``) the add-on is also measured
with that checkout's code in the same rounds (separate processes,
alternating order), and it says whether both fetched the same pages in the
same order with the same books (a digest of the order and of the engine's
totals): a speed-up must not change a decision.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITES = ["/usr/share/doc/postgresql-doc-15/html", "/usr/share/doc/python3.11/html"]
PARTS = ("spidermw", "schedule", "next")
BASE_URL = "http://127.0.0.1:8000/"


def crawl(root: str, addon: bool) -> dict:
    """Run in a child process whose ``sys.path`` starts with the checkout measured."""
    sys.path.insert(0, str(ROOT / "example_project"))
    from scrapy import Request, signals
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import Response
    from scrapy.responsetypes import responsetypes
    from scrapy.utils.test import get_crawler
    from twisted.python.failure import Failure

    from example_project.spiders.broad import BroadSpider

    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0} if addon else {},
        "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False,
        "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "DOWNLOAD_HANDLERS": {"http": None, "https": None},  # nothing is downloaded
    }  # fmt: skip
    crawler = get_crawler(BroadSpider, settings)
    crawler.spider = spider = crawler._create_spider(seeds=BASE_URL + "index.html", allowed_domains="127.0.0.1")
    crawler._apply_settings()
    crawler.engine = engine = crawler._create_engine()
    engine.spider = spider
    from scrapy.utils.misc import build_from_crawler, load_object

    scheduler = build_from_crawler(load_object(crawler.settings["SCHEDULER"]), crawler)
    crawler.signals.send_catch_log(signals.spider_opened, spider=spider)
    scheduler.open(spider)
    # Scrapy's spider middlewares see the output from the highest order down.
    chain = [mw for mw in reversed(engine.scraper.spidermw.middlewares)
             if hasattr(mw, "process_spider_output")]  # fmt: skip
    send = crawler.signals.send_catch_log
    base = Path(root)

    def schedule(request: Request) -> None:  # ExecutionEngine._schedule_request
        results = send(signals.request_scheduled, request=request, spider=spider, dont_log=IgnoreRequest)
        for _, result in results:
            if isinstance(result, Failure) and isinstance(result.value, IgnoreRequest):
                return
        if not scheduler.enqueue_request(request):
            send(signals.request_dropped, request=request, spider=spider)

    def response_of(request: Request) -> Response:
        path = base / request.url[len(BASE_URL):].split("?")[0].split("#")[0]
        request.meta.setdefault("download_slot", "127.0.0.1")  # as Scrapy's downloader does
        if not path.is_file():
            return Response(request.url, status=404, request=request)
        body = path.read_bytes()
        cls = responsetypes.from_args(filename=str(path), body=body)
        return cls(request.url, body=body, request=request, headers={"Content-Type": "text/html; charset=utf-8"}
                   if path.suffix == ".html" else {})  # fmt: skip

    schedule(Request(BASE_URL + "index.html", callback=spider.parse, meta={"is_start_request": True}))
    spent = dict.fromkeys(PARTS, 0.0)
    clock = time.process_time
    order = hashlib.sha256()
    pages = links = 0
    while True:
        t0 = clock()
        request = scheduler.next_request()
        spent["next"] += clock() - t0
        if request is None:
            break
        order.update(request.url.encode() + b"\n")
        response = response_of(request)
        pages += 1
        # The spider's own work (and HttpErrorMiddleware's refusal of a 404), not timed.
        output = list(spider.parse(response)) if response.status == 200 else []
        links += sum(isinstance(obj, Request) for obj in output)
        t0 = clock()
        result = iter(output)
        for mw in chain:
            result = mw.process_spider_output(response, result)
        passed = [obj for obj in result if isinstance(obj, Request)]
        t1 = clock()
        for out in passed:
            schedule(out)
        spent["spidermw"] += t1 - t0
        spent["schedule"] += clock() - t1
    books = ""
    if addon:
        t = scheduler.frontier.engine.totals()
        books = repr((t.pending, t.known, t.lambda_cash, t.history_sum, t.in_flight, t.injected))
        order.update(books.encode())
    return {"ms": {part: spent[part] / pages * 1000 for part in PARTS}, "pages": pages, "links": links,
            "digest": order.hexdigest()}  # fmt: skip


def run(tree: Path, root: str, addon: bool) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", root] + (["--addon"] if addon else [])
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}).stdout  # fmt: skip
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", help="documentation tree; repeat for several")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout, its add-on measured in the same rounds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--addon", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(crawl(args.child, args.addon)))
        return
    setups = {"plain": (ROOT, False), "this": (ROOT, True)}
    if args.base is not None:
        setups["base"] = (args.base.resolve(), True)
    roots = args.root or [site for site in SITES[:1] if Path(site).is_dir()]
    if not roots:
        sys.exit("no documentation tree: apt-get install postgresql-doc-15, or pass --root DIR")
    for root in roots:
        results: dict[str, list[dict]] = {name: [] for name in setups}
        for round_number in range(args.rounds):
            for name in (list(setups) if round_number % 2 == 0 else list(reversed(setups))):
                tree, addon = setups[name]
                results[name].append(run(tree, root, addon))
        first = results["this"][0]
        print(f"{root}: {first['pages']} pages, {first['links']} links; CPU ms per page, median of {args.rounds} rounds")
        print(f"  {'':6}" + "".join(f"{part:>10}" for part in PARTS) + f"{'total':>10}{'/ plain':>9}")
        total = {name: statistics.median(sum(r["ms"].values()) for r in runs) for name, runs in results.items()}
        for name, runs in results.items():
            ms = {part: statistics.median(r["ms"][part] for r in runs) for part in PARTS}
            print(f"  {name:6}" + "".join(f"{ms[part]:10.3f}" for part in PARTS)
                  + f"{total[name]:10.3f}{total[name] / total['plain']:9.2f}   pages {runs[0]['pages']}")  # fmt: skip
        if "base" in results:
            same = {r["digest"] for name in ("this", "base") for r in results[name]}
            print(f"  same pages, order and books as base: {'yes' if len(same) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
