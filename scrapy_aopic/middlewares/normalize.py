"""Downloader middleware: every request entering the downloader is keyed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from ..frontier import Frontier
from ..meta import KEY
from ..store.base import StoreStalled

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class UrlNormalizeMiddleware:
    """Keys requests canonically and keeps one page one fetch.

    * Every request entering the downloader, from any path (start requests,
      redirects, other middlewares, a spider's own ``engine.download``),
      gets its canonical URL in ``request.meta["aopic_key"]`` (requests the
      frontier handed out already carry their account key). The URL fetched
      is left as the site wrote it.
    * Redirects (3xx through ``RedirectMiddleware``, ``<meta http-equiv=
      refresh>`` through ``MetaRefreshMiddleware``) come back to the
      scheduler with the lease of the request they replace: the frontier
      moves its cash to the target's account, records the redirecting URL as
      an ``ALIAS`` of the target, and queues the target only if it was
      unknown. A target already queued, being fetched or crawled is not
      fetched again (``aopic/redirects_to_known``).
    * A leased request whose URL no longer matches its account (a middleware
      replaced it in place and sent it on) is treated the same way: if the
      new URL's page is already known, the cash moves there
      (``aopic/normalize/aliased_known``) and the request is dropped.

    The add-on puts it at 5, just inside the cash ledger (1).
    """

    def __init__(self, frontier: Frontier, stats=None):
        self.frontier = frontier
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UrlNormalizeMiddleware:
        return cls(Frontier.from_crawler(crawler), crawler.stats)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        frontier = self.frontier
        lease = frontier.lease_of(request)
        if lease is None:
            if KEY not in request.meta:
                key = frontier.canonicalize(request.url)
                if key is not None:
                    request.meta[KEY] = key
            return None
        key = frontier.canonicalize(request.url)
        if key is None or key == lease.url:
            request.meta[KEY] = lease.url
            return None
        # The URL changed under the lease: the request now fetches another page.
        try:
            view = frontier.store.get(key) if frontier.store is not None else None
        except StoreStalled:
            view = None  # unknown for now: fetched under its lease, merged later if it is an alias
            self.stats.inc_value("aopic/normalize/unchecked_stalled")
        if view is not None:
            frontier.transfer(request, key, "normalize/aliased_known")
            raise IgnoreRequest(f"aopic: {request.url} is already known as {key}")
        request.meta[KEY] = lease.url
        return None
