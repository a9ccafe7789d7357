"""Storage backends of the AOPIC engine (see :mod:`scrapy_aopic.store.base`)."""

from .base import (
    ALIAS,
    CRAWLED,
    FAILED,
    LEASED,
    PENDING,
    REFUSED,
    STATE_NAMES,
    AccountView,
    Credit,
    FrontierStore,
    Lease,
    Link,
    Totals,
)
from .memory import MemoryStore

__all__ = [
    "ALIAS",
    "CRAWLED",
    "FAILED",
    "LEASED",
    "PENDING",
    "REFUSED",
    "STATE_NAMES",
    "AccountView",
    "Credit",
    "FrontierStore",
    "Lease",
    "Link",
    "MemoryStore",
    "Totals",
]
