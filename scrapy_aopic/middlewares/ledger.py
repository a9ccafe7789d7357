"""Downloader middleware: a request that fails to download returns its cash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from ..frontier import Frontier

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class CashLedgerMiddleware:
    """Settles the lease of a request whose download ends in an exception
    (network error after retries, timeout, ``IgnoreRequest`` from robots.txt,
    offsite or any other middleware): its cash goes to lambda.

    It is the outermost downloader middleware (the add-on puts it at 1), so it
    sees every exception the others did not turn into a response or a retry.
    Requests turned into new requests (redirects, retries) are settled by the
    scheduler, which receives them with the lease still open.
    """

    def __init__(self, frontier: Frontier):
        self.frontier = frontier

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CashLedgerMiddleware:
        return cls(Frontier.from_crawler(crawler))

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        if isinstance(exception, IgnoreRequest):
            reason = "ignored"
        else:
            reason = type(exception).__name__
        self.frontier.fail(request, reason)
        return None
