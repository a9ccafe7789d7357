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
    * extension :class:`scrapy_aopic.extensions.AopicLogStats`

    Every ``AOPIC_*`` setting keeps its documented default unless the project
    sets it.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        from .downloadermiddlewares.ledger import CashLedgerMiddleware
        from .extensions import AopicLogStats
        from .scheduler import AopicScheduler
        from .spidermiddlewares import CashMiddleware

        settings.set("SCHEDULER", AopicScheduler, "addon")
        settings.set_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", CashMiddleware, CASH_MIDDLEWARE_ORDER
        )
        settings.set_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", CashLedgerMiddleware, LEDGER_MIDDLEWARE_ORDER
        )
        settings.set_in_component_priority_dict("EXTENSIONS", AopicLogStats, 0)
