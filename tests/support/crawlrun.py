"""Run one real crawl with the add-on in this process; write a JSON report.

Usage: python crawlrun.py CONFIG.json — CONFIG has ``seeds`` (URLs),
``settings`` (Scrapy settings), ``out`` (report path) and optionally
``check_greedy`` (verify every pop hands out the richest ready URL) and
``spider_args`` (spider attributes, e.g. ``allowed_domains``).
Run in a subprocess: a Twisted reactor cannot be started twice.
"""

from __future__ import annotations

import json
import sys

from scrapy import Spider
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse

from scrapy_aopic.store.base import PENDING
from scrapy_aopic.store.memory import MemoryStore


class FollowAllSpider(Spider):
    name = "followall"

    def __init__(self, seeds=(), **kwargs):
        super().__init__(**kwargs)
        self.seeds = list(seeds)

    async def start(self):
        for url in self.seeds:
            yield self.make_request(url) if hasattr(self, "make_request") else _request(url)

    def parse(self, response):
        if isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)
        yield {"url": response.url, "status": response.status}


class KeepOpen:
    """An extension keeping the spider open when idle, as spiders fed from
    a queue do (scrapy-redis): ``EXTENSIONS = {"__main__.KeepOpen": 0}``."""

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy import signals

        ext = cls()
        crawler.signals.connect(ext.spider_idle, signal=signals.spider_idle)
        return ext

    def spider_idle(self, spider):
        from scrapy.exceptions import DontCloseSpider

        raise DontCloseSpider


def _request(url):
    from scrapy import Request

    return Request(url)


def install_greedy_check(violations: list, fetched_cash: list) -> None:
    """Wrap MemoryStore.pop: the lease must hold at least as much cash as
    every pending account on a ready host, or with AOPIC_PRIORITY_HORIZON at
    least as high a priority (O(n) per pop: tests only)."""
    original = MemoryStore.pop

    def checked_pop(self, ready, min_share=0.0):
        def order(view):
            return self._seq_order(self._table.find_seq(view.url)) if self.priority_horizon else view.cash

        pending = {
            v.url: order(v) for v in self.iter_accounts() if v.state == PENDING and ready(v.host)
        }
        lease = original(self, ready, min_share)
        if lease is not None:
            fetched_cash.append(lease.cash)
            first = max(pending.values(), default=-float("inf"))
            if lease.order < first - 1e-12:
                violations.append([lease.url, lease.order, first])
        return lease

    MemoryStore.pop = checked_pop


def main(config_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    violations: list = []
    fetched_cash: list = []
    if config.get("check_greedy"):
        install_greedy_check(violations, fetched_cash)
    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(FollowAllSpider)
    process.crawl(crawler, seeds=config["seeds"], **config.get("spider_args", {}))
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(config["out"], "w") as f:
        json.dump({"stats": stats, "greedy_violations": violations, "fetched_cash": fetched_cash,
                   "numpy_imported": "numpy" in sys.modules}, f)


if __name__ == "__main__":
    main(sys.argv[1])
