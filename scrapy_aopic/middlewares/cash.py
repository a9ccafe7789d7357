"""Spider middleware: a parsed page pays its cash to its links and lambda."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from ..frontier import Frontier

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class CashMiddleware:
    """Distributes a visited page's cash over the links it produced (``docs/concepts.rst``).

    Items pass through at once. Requests are held until the callback is done
    (the share depends on how many distinct links there are), then the page's
    cash is paid: ``c/(m+1)`` to each of the ``m`` distinct canonical links
    and to lambda by default (see ``AOPIC_LAMBDA_TAX``). A spider marks
    requests that are not links (API calls, forms) with
    ``meta["aopic_link"] = False``: they get no share.

    It must see the output last, after every middleware that may drop
    requests, so it sits closest to the engine (the add-on puts it at 10).
    If the callback raises, the links produced so far are paid and kept.
    """

    def __init__(self, frontier: Frontier):
        self.frontier = frontier

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CashMiddleware:
        return cls(Frontier.from_crawler(crawler))

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterator[Any]:
        requests: list[Request] = []
        try:
            for obj in result:
                if isinstance(obj, Request):
                    requests.append(obj)
                else:
                    yield obj
        finally:
            passed = self.frontier.visit(response, requests)
        yield from passed

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        requests: list[Request] = []
        try:
            async for obj in result:
                if isinstance(obj, Request):
                    requests.append(obj)
                else:
                    yield obj
        finally:
            passed = self.frontier.visit(response, requests)
        for request in passed:
            yield request
