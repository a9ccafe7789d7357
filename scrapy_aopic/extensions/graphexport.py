"""Extension: record the link graph a crawl discovers (``AOPIC_EXPORT_GRAPH``).

One JSON line per visited page, written as the crawl goes (nothing is kept
in memory, a killed crawl keeps what it wrote)::

    {"url": "https://a.example/", "host": "a.example", "links": ["https://a.example/x", ...]}

URLs are canonical; ``links`` are the distinct links that received cash.
``scrapy aopic replay FILE`` (or ``python -m scrapy_aopic.sim replay FILE``)
runs every ordering policy on the recorded graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from .. import settings as aopic_settings
from .. import signals as aopic_signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class GraphExport:
    """Appends each visited page and its links to ``AOPIC_EXPORT_GRAPH``."""

    def __init__(self, crawler: Crawler, path: str):
        self.crawler = crawler
        self.path = Path(path)
        self._file = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GraphExport:
        path = aopic_settings.get(crawler.settings, "AOPIC_EXPORT_GRAPH")
        if not path:
            raise NotConfigured
        ext = cls(crawler, path)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.page_visited, signal=aopic_signals.page_visited)
        return ext

    def spider_opened(self, spider) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Append: a resumed JOBDIR crawl continues the same graph.
        self._file = self.path.open("a", encoding="utf-8", buffering=1)

    def page_visited(self, url, links, lease, response, spider) -> None:
        if self._file is None:
            return
        record = {"url": url, "host": lease.host, "links": links}
        self._file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.crawler.stats.inc_value("aopic/graph_pages_recorded")

    def spider_closed(self, spider, reason) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
