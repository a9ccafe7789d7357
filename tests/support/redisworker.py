"""One worker of a shared (Redis) crawl, or a single-process crawl: a real
Scrapy crawl with the add-on in this process; writes a JSON report.

Usage: python redisworker.py CONFIG.json — CONFIG has ``seeds`` (URLs, may be
empty), ``settings`` (Scrapy settings; ``AOPIC_BACKEND = "redis"`` and
``REDIS_URL`` make it a worker), ``out`` (report path), optionally ``name``
(the spider's name: it names the Redis frontier), ``go_file`` (``start()``
waits until this file exists, then yields the seeds) and ``timings`` (record
how long each frontier call blocks the reactor: ``next_request``,
``enqueue``, ``visit``; ``"samples"`` also writes every measurement). Run in a subprocess: a Twisted reactor cannot be
started twice. Used by tests/test_redis_crawl.py and benchmarks/bench_redis.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse

from scrapy_aopic.frontier import Frontier

TIMED = ("next_request", "enqueue", "visit")
GO: dict[str, float] = {}  #: process CPU time when the barrier opened


class FollowAllSpider(Spider):
    """Follows every link; seeds come from the config (or from Redis)."""

    name = "followall"

    def __init__(self, seeds=(), go_file=None, **kwargs):
        super().__init__(**kwargs)
        self.seeds = list(seeds)
        self.go_file = go_file

    async def start(self):
        # A barrier: the test starts every worker, then lets them go at once
        # (until then start() is running, so the worker does not close).
        while self.go_file and not os.path.exists(self.go_file):
            await asyncio.sleep(0.05)
        GO["cpu"] = time.process_time()
        for url in self.seeds:
            yield Request(url)

    def parse(self, response):
        if isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)


def install_timers(samples: dict[str, list[float]]) -> None:
    """Wrap the frontier calls the reactor waits on; record seconds per call."""
    clock = time.perf_counter
    for name in TIMED:
        original = getattr(Frontier, name)
        bucket = samples.setdefault(name, [])

        def timed(self, *args, _original=original, _bucket=bucket, **kwargs):
            start = clock()
            try:
                return _original(self, *args, **kwargs)
            finally:
                _bucket.append(clock() - start)

        setattr(Frontier, name, timed)


def summary(values: list[float]) -> dict:
    """count, mean, p50, p99 and max in microseconds."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "mean_us": sum(ordered) / len(ordered) * 1e6,
        "p50_us": ordered[len(ordered) // 2] * 1e6,
        "p99_us": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6,
        "max_us": ordered[-1] * 1e6,
    }


def main(config_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    samples: dict[str, list[float]] = {}
    if config.get("timings"):
        install_timers(samples)
    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **config.get("settings", {}),
    }
    spider_class = type("Worker", (FollowAllSpider,), {"name": config.get("name", "followall")})
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider_class)
    process.crawl(crawler, seeds=config.get("seeds", []), go_file=config.get("go_file"))
    started = time.monotonic()
    process.start()
    elapsed = time.monotonic() - started
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    report = {
        "stats": stats,
        "elapsed": elapsed,
        # CPU seconds of this process from the barrier to the end
        "cpu_after_go": time.process_time() - GO.get("cpu", 0.0),
        "timings": {k: summary(v) for k, v in samples.items()},
    }
    if config.get("timings") == "samples":
        report["samples"] = samples
    with open(config["out"], "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
