"""Run one crawl of the Scrapy scheduler contract suite with the add-on (in
this process: a reactor runs once per process) and write a JSON report.

Usage: python contractrun.py CONFIG.json — CONFIG has ``spider`` (a key of
:data:`SPIDERS`), ``base`` (the local site's URL), ``settings`` and ``out``.
The report has ``stats``, ``items`` and ``order`` (the URLs in the order
they reached the downloader).
"""

from __future__ import annotations

import json
import sys
from collections import deque
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import CrawlerProcess


class PathsSpider(Spider):
    """Scrapy's tests/test_scheduler_base.py::PathsSpider, on the local site."""

    name = "paths"

    def __init__(self, base="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base + path for path in ("/p0", "/p1", "/p2")]

    def parse(self, response):
        return {"path": urlsplit(response.url).path}


class LazySpider(Spider):
    """Scrapy's tests/test_engine_loop.py::TestRequestSendOrder::test_lazy:
    the next start request only once the scheduler is empty; the first
    response's callback yields one more request."""

    name = "lazy"
    start_nums = (1, 2, 4)

    def __init__(self, base="", **kwargs):
        super().__init__(**kwargs)
        self.base = base
        self.cb_requests = deque([Request(f"{base}/p3")])

    async def start(self):
        for num in self.start_nums:
            if self.crawler.engine.needs_backout():
                await self.crawler.signals.wait_for(signals.scheduler_empty)
            yield Request(f"{self.base}/p{num}")

    def parse(self, response):
        while self.cb_requests:
            yield self.cb_requests.popleft()


class SchemesSpider(Spider):
    """Start requests Scrapy downloads without HTTP (``data:``, ``file:``
    — ``base`` then names a local file too, after a space); the http page's
    callback yields a non-link ``data:`` request, a ``data:`` link and an
    http link."""

    name = "schemes"

    def __init__(self, base="", **kwargs):
        super().__init__(**kwargs)
        self.base, _, self.file_url = base.partition(" ")
        self.start_urls = ["data:text/html,start", self.file_url, self.base + "/p0"]

    def parse(self, response):
        yield {"url": response.url}
        if response.url == self.base + "/p0":
            yield Request("data:,non-link", meta={"aopic_link": False})
            yield Request("data:,link")
            yield response.follow("/p1")


SPIDERS = {spider.name: spider for spider in (PathsSpider, LazySpider, SchemesSpider)}


def main(config_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SPIDERS[config["spider"]])
    order: list[str] = []
    items: list = []
    crawler.signals.connect(lambda request, spider: order.append(request.url), signals.request_reached_downloader, weak=False)
    crawler.signals.connect(lambda item, response, spider: items.append(dict(item)), signals.item_scraped, weak=False)
    process.crawl(crawler, base=config["base"])
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(config["out"], "w") as f:
        json.dump({"stats": stats, "items": items, "order": order}, f)


if __name__ == "__main__":
    main(sys.argv[1])
