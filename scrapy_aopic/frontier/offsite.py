"""Scrapy's offsite rule, applied to links as they come in.

Scrapy's ``OffsiteMiddleware`` drops a request outside the spider's
``allowed_domains`` when it is scheduled. In an AOPIC crawl the link would
already have an account by then, take a share of its page's cash and, once
the richest, a turn to be handed out only to be dropped. Refused when it
comes in, it is no link of the crawl's graph at all, like any refused link
(``aopic/refused/offsite``).
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware

from ..hygiene.domains import origin_of

#: Hosts remembered per filter before the memo starts over.
MEMO_SIZE = 1 << 16


class OffsiteLinkFilter:
    """A frontier link filter (``Frontier.link_filters``) that refuses what
    ``middleware`` (an enabled ``OffsiteMiddleware``) would drop.

    The stock rule depends only on the host and ``allowed_domains``, so its
    answer is memoized per ``scheme://netloc`` (forgotten whenever
    ``allowed_domains`` changes). A subclass that overrides
    ``should_follow`` is asked about every link. ``dont_filter`` and
    ``meta["allow_offsite"]`` pass, as in Scrapy.
    """

    def __init__(self, middleware: OffsiteMiddleware, spider: Spider):
        self.middleware = middleware
        self.spider = spider
        self._per_link = type(middleware).should_follow is not OffsiteMiddleware.should_follow
        self._domains: Any = None
        self._follow: dict[str, bool] = {}

    @classmethod
    def for_middlewares(cls, middlewares: Any, spider: Spider) -> OffsiteLinkFilter | None:
        """The filter for the first ``OffsiteMiddleware`` in ``middlewares``
        (a downloader middleware manager's list), or ``None``."""
        for middleware in middlewares:
            if isinstance(middleware, OffsiteMiddleware):
                return cls(middleware, spider)
        return None

    def __call__(self, url: str, key: str, request: Request, depth: int) -> str | None:
        if request.dont_filter or request.meta.get("allow_offsite"):
            return None
        if self._per_link:
            return None if self.middleware.should_follow(request, self.spider) else "offsite"
        domains = getattr(self.spider, "allowed_domains", None)
        if domains != self._domains:
            self._domains = list(domains) if domains else domains
            self._follow.clear()
        origin = origin_of(url)  # the host depends on nothing else
        follow = self._follow.get(origin)
        if follow is None:
            follow = self.middleware.should_follow(request, self.spider)
            if len(self._follow) >= MEMO_SIZE:
                self._follow.clear()
            self._follow[origin] = follow
        return None if follow else "offsite"

