"""The documented import paths of the scrapy-aopic middlewares."""

from .downloadermiddlewares.ledger import CashLedgerMiddleware
from .spidermiddlewares import CashMiddleware

__all__ = ["CashLedgerMiddleware", "CashMiddleware"]
