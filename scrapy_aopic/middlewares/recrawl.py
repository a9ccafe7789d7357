"""Downloader middleware of re-crawl mode: conditional revisits, 304s, change verdicts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest, NotConfigured

from ..frontier import Frontier
from ..meta import KEY, RECRAWL_CHANGED
from ..recrawl.change import is_not_modified
from ..recrawl.hook import RecrawlHook

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class RecrawlMiddleware:
    """Downloader middleware of re-crawl mode (the add-on puts it at 540,
    inside the retry middleware so it sees final outcomes).

    * adds ``If-None-Match`` / ``If-Modified-Since`` to revisits;
    * a ``304`` answer is settled by the frontier as a visit with nothing
      new (``Frontier.visit_not_modified``) and goes no further (the spider
      never sees an empty response);
    * on a ``2xx`` it compares the body with the previous version (checksum,
      then SimHash distance) and leaves the verdict in
      ``request.meta["aopic_recrawl_changed"]`` for the visit report;
    * a revisit ending in an error status or exception is reported to the
      planner, which retries later with back-off.

    Raises ``NotConfigured`` unless ``AOPIC_RECRAWL`` is on.
    """

    def __init__(self, hook: RecrawlHook, frontier: Frontier | None = None):
        self.hook = hook
        self.frontier = frontier

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        hook = RecrawlHook.from_crawler(crawler)
        if hook is None:
            raise NotConfigured("AOPIC_RECRAWL is off")
        frontier = Frontier.from_crawler(crawler)
        frontier.register_revisits(hook)
        return cls(hook, frontier)

    @staticmethod
    def _key(request: Request) -> str | None:
        return request.meta.get(KEY)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        key = self._key(request)
        if key is None:
            return None
        headers = self.hook.request_headers(key)
        added = False
        for name, value in headers.items():
            if name not in request.headers:
                request.headers[name] = value
                added = True
        if added:
            self.hook._inc("aopic/recrawl/conditional_requests")
        return None

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        key = self._key(request)
        if key is None:
            return response
        if is_not_modified(response.status) and key in self.hook.versions:
            self.hook.refresh_validators(key, response)
            settle = getattr(self.frontier, "visit_not_modified", None)
            if settle is not None:
                settle(request, response)  # sends page_visited: recorded there
                raise IgnoreRequest(f"not modified: {request.url}")
            # A frontier without that call fails the request; the planner
            # still learns that the page did not change.
            self.hook.record_visit(key, self._host(request), not_modified=True)
            return response
        if 200 <= response.status < 300:
            if hasattr(response, "body"):
                request.meta[RECRAWL_CHANGED] = self.hook.observe_response(key, response)
        elif response.status >= 400:
            self.hook.record_failure(key, self._host(request))
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        key = self._key(request)
        if key is not None and not isinstance(exception, IgnoreRequest):
            self.hook.record_failure(key, self._host(request))
        return None

    @staticmethod
    def _host(request: Request) -> str:
        return Frontier.host_of(request)  # the one definition of a request's politeness key
