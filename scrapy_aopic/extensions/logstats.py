"""Extension: a periodic AOPIC progress line, like Scrapy's LogStats."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from .. import settings as aopic_settings
from ..compat import create_looping_call
from ..frontier import Frontier
from ..store.base import StoreStalled

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


#: ``aopic/failed/<reason>`` of a pending URL refused when it came up for
#: fetching (the rule was learned after the link was accepted: a duplicate
#: pattern, a closed soft-404 directory, robots.txt read late). Each is one
#: distinct URL, never also counted under ``aopic/refused/``.
REFUSED_AT_FETCH = ("aopic/failed/trap/", "aopic/failed/robots", "aopic/failed/duplicate_pattern")


def refused_urls(stats: dict) -> tuple[int, int]:
    """``(refused, offsite)``: distinct URLs refused for any reason but
    ``offsite`` (``aopic/refused/<reason>``, and the refusals at fetch
    time: :data:`REFUSED_AT_FETCH`), and distinct offsite URLs."""
    offsite = stats.get("aopic/refused/offsite", 0)
    refused = sum(v for k, v in stats.items() if k.startswith(("aopic/refused/", *REFUSED_AT_FETCH))) - offsite
    return refused, offsite


class AopicLogStats:
    """Logs, every ``AOPIC_LOG_INTERVAL`` (default ``LOGSTATS_INTERVAL``)
    seconds: pages/min, frontier size, lambda cash, the richest pending URL
    and its cash, the convergence indicator (sum of history), how many URLs
    were refused (distinct URLs: traps, robots.txt, learned patterns),
    offsite URLs apart, and duplicates found; and keeps the
    ``aopic/`` gauges in the stats fresh."""

    def __init__(self, crawler: Crawler, interval: float):
        self.crawler = crawler
        self.frontier = Frontier.from_crawler(crawler)
        self.interval = interval
        self.task = None
        self._pages_before = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicLogStats:
        interval = aopic_settings.get(crawler.settings, "AOPIC_LOG_INTERVAL")
        if interval is None:
            interval = crawler.settings.getfloat("LOGSTATS_INTERVAL")
        interval = float(interval)
        if not interval:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        self.task = create_looping_call(self.log, spider)
        self.task.start(self.interval)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self.task is not None and self.task.running:
            self.task.stop()

    def progress_line(self) -> str:
        """The line :meth:`log` writes (also used by ``scrapy aopic stats``)."""
        frontier = self.frontier
        if frontier.engine is None:
            return "aopic: frontier not open"
        if frontier.store.stalled_for is not None:
            return (f"aopic: Redis not answering for {frontier.store.stalled_for:.0f} s; "
                    f"{len(frontier.held)} writes held until it does")
        try:
            return self._progress(frontier)
        except StoreStalled:
            return "aopic: Redis not answering; figures at the next line"

    def _progress(self, frontier) -> str:
        totals = frontier.engine.totals()
        stats = self.crawler.stats.get_stats()
        pages = stats.get("aopic/pages_visited", 0)
        rate = (pages - self._pages_before) * 60.0 / self.interval
        self._pages_before = pages
        refused, offsite = refused_urls(stats)
        traps = sum(v for k, v in stats.items() if k.startswith(("aopic/refused/trap/", "aopic/failed/trap/")))
        robots = stats.get("aopic/refused/robots", 0) + stats.get("aopic/failed/robots", 0)
        duplicates = stats.get("aopic/duplicates/exact", 0) + stats.get("aopic/duplicates/near", 0)
        richest = frontier.store.peek()
        richest_text = f"{richest[0]} ({richest[1]:.4g})" if richest else "-"
        return (
            f"aopic: {pages} pages visited ({rate:.0f}/min), frontier {totals.pending}, "
            f"known {totals.known}, lambda cash {totals.lambda_cash:.4g}, "
            f"richest {richest_text}, history sum {totals.history_sum:.4g}, "
            f"URLs refused {refused} (traps {traps}, robots {robots}), offsite {offsite}, "
            f"duplicates {duplicates}"
        )

    def log(self, spider: Spider) -> None:
        if self.frontier.engine is None:
            return
        try:
            self.frontier.update_stats()
        except StoreStalled:
            # Redis is not answering: the line says so, the gauges wait for
            # the next tick (raising here would stop this looping call, and
            # with it the live line, for the rest of the crawl).
            pass
        logger.info(self.progress_line(), extra={"spider": spider})
