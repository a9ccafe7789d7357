"""Extension for ``bench_e2e.py``: records the URL of every response.

Enabled with ``-s EXTENSIONS={"e2e_fetched.FetchedUrls": 0}`` and
``-s E2E_FETCHED_FILE=PATH``; at close it writes one URL per line, so the
benchmark can check that the crawls it compares fetched the same pages.
"""

from __future__ import annotations

from pathlib import Path

from scrapy import signals
from scrapy.exceptions import NotConfigured


class FetchedUrls:
    """Writes the URLs of all responses received to ``E2E_FETCHED_FILE``."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.urls: list[str] = []

    @classmethod
    def from_crawler(cls, crawler):
        path = crawler.settings.get("E2E_FETCHED_FILE")
        if not path:
            raise NotConfigured("E2E_FETCHED_FILE is not set")
        extension = cls(path)
        crawler.signals.connect(extension.response_received, signal=signals.response_received)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def response_received(self, response, request, spider):
        self.urls.append(response.url)

    def spider_closed(self, spider):
        self.path.write_text("".join(url + "\n" for url in self.urls))
