"""The AOPIC scheduler: Scrapy asks it for the richest page to fetch next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.core.scheduler import BaseScheduler

from .frontier import REGISTERED, Frontier

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class AopicScheduler(BaseScheduler):
    """A Scrapy scheduler that orders requests by AOPIC cash.

    ``next_request`` hands out the pending URL with the most cash among the
    hosts whose download slot has room, in O(log n) however many hosts are
    queued (lambda is visited first when it is the richest page).
    ``enqueue_request`` never silently drops a URL that is already known: the
    request merges into that URL's account (the frontier is the dupe filter;
    ``dont_filter=True`` requests are queued again). With ``JOBDIR`` the
    frontier is journaled and survives even ``SIGKILL``; with
    ``AOPIC_BACKEND = "redis"`` it is shared by every process of the crawl.

    Request ``priority`` is not used for ordering: cash is the priority.
    """

    def __init__(self, frontier: Frontier, crawler: Crawler | None = None):
        self.frontier = frontier
        self.stats = crawler.stats if crawler is not None else None
        self.spider: Spider | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicScheduler:
        return cls(Frontier.from_crawler(crawler), crawler)

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.frontier.open(spider)
        return None

    def close(self, reason: str) -> None:
        self.frontier.close(reason)
        return None

    def has_pending_requests(self) -> bool:
        return self.frontier.has_pending()

    def enqueue_request(self, request: Request) -> bool:
        registered = request.meta.get(REGISTERED)
        queued = self.frontier.enqueue(request)
        # Links were put in the frontier (or merged) when their page was
        # visited; count only requests this call queued.
        if queued and not registered and self.stats is not None:
            self.stats.inc_value("scheduler/enqueued/aopic")
            self.stats.inc_value("scheduler/enqueued")
        return queued

    def next_request(self) -> Request | None:
        request = self.frontier.next_request()
        if request is not None and self.stats is not None:
            self.stats.inc_value("scheduler/dequeued/aopic")
            self.stats.inc_value("scheduler/dequeued")
        return request

    def __len__(self) -> int:
        return len(self.frontier)
