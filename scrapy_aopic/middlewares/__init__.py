"""The documented import paths of the scrapy-aopic middlewares."""

from .cash import CashMiddleware
from .ledger import CashLedgerMiddleware

__all__ = ["CashLedgerMiddleware", "CashMiddleware"]
