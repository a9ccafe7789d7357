"""``ADDONS = {"scrapy_aopic.Addon": 0}``: switches scrapy-aopic on."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Spider middleware order: lowest, so it sees the output after every other
#: spider middleware has had a chance to drop requests.
CASH_MIDDLEWARE_ORDER = 10
#: Downloader middleware order: outermost, so it sees every final exception.
LEDGER_MIDDLEWARE_ORDER = 1


class Addon:
    """Enables the AOPIC scheduler, its middlewares and extension.

    * ``SCHEDULER`` = :class:`scrapy_aopic.scheduler.AopicScheduler`
    * spider middleware :class:`scrapy_aopic.middlewares.CashMiddleware` (10)
    * downloader middleware :class:`scrapy_aopic.middlewares.CashLedgerMiddleware` (1)
    * downloader middlewares for crawl hygiene: URL normalization, trap
      guard, robots.txt-aware cash, SimHash near-duplicates
    * extensions :class:`scrapy_aopic.extensions.logstats.AopicLogStats` (the
      progress line), :class:`scrapy_aopic.extensions.report.AopicReport`
      (``AOPIC_REPORT``) and :class:`scrapy_aopic.extensions.graphexport.GraphExport`
      (``AOPIC_EXPORT_GRAPH``); the last two stay off until their setting is set

    Every ``AOPIC_*`` setting keeps its documented default unless the project
    sets it.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        from . import settings as aopic_settings

        from .middlewares.ledger import CashLedgerMiddleware
        from .extensions.logstats import AopicLogStats
        from .extensions.graphexport import GraphExport
        from .extensions.report import AopicReport
        from .scheduler import AopicScheduler
        from .middlewares.cash import CashMiddleware

        settings.set("SCHEDULER", AopicScheduler, "addon")
        settings.set_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", CashMiddleware, CASH_MIDDLEWARE_ORDER
        )
        settings.set_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", CashLedgerMiddleware, LEDGER_MIDDLEWARE_ORDER
        )
        # Hygiene: keys inside the ledger, traps after Scrapy's
        # offsite check (50) and before robots.txt (100), robots cash next to it.
        from .middlewares.normalize import UrlNormalizeMiddleware
        from .middlewares.traps import Soft404Middleware, TrapGuardMiddleware
        from .middlewares.robots import RobotsCashMiddleware

        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", UrlNormalizeMiddleware, 5)
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", TrapGuardMiddleware, 60)
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", RobotsCashMiddleware, 90)
        # Soft 404s: once responses are decompressed, redirected and
        # retried, before the near-duplicate check (545).
        if aopic_settings.get_int(settings, "AOPIC_TRAP_SOFT404_PAGES") > 0:
            settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", Soft404Middleware, 547)
        # Near-duplicates, only when they are on (the middleware loads numpy):
        # responses come back in decreasing order, so at 545 they are
        # decompressed (590), redirects and meta refreshes are resolved (600,
        # 580) and retries done (550).
        if aopic_settings.get_bool(settings, "AOPIC_SIMHASH_ENABLED"):
            from .middlewares.simhash import SimhashDedupMiddleware

            settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", SimhashDedupMiddleware, 545)
        # Re-crawl, only when it is on (a disabled middleware would say so
        # in a warning on every run): conditional requests and change
        # detection, just inside the dedup.
        if settings.getbool("AOPIC_RECRAWL"):
            from .middlewares.recrawl import RecrawlMiddleware

            settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", RecrawlMiddleware, 540)
        settings.set_in_component_priority_dict("EXTENSIONS", AopicLogStats, 0)
        settings.set_in_component_priority_dict("EXTENSIONS", GraphExport, 0)
        settings.set_in_component_priority_dict("EXTENSIONS", AopicReport, 0)
