"""Downloader middleware: the crawler-trap guard (``docs/hygiene.rst``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from ..frontier import Frontier
from ..hygiene.traps import TrapGuard, TrapLimits

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class TrapGuardMiddleware:
    """Refuses trap URLs (:mod:`scrapy_aopic.hygiene.traps`) at two points.

    * **Before they get cash.** It registers the rules as a frontier link
      filter: a trapped link gets no share of its page's cash (it is not
      counted in ``m``) and never enters the frontier; a trapped start
      request or redirect target is not queued (a redirect's cash goes to
      lambda). The frontier counts ``aopic/refused/trap/<rule>``.
    * **Before they are fetched.** A request leased by the frontier that a
      rule refuses now (a host budget spent since it was queued, limits
      changed on resume) is settled with its cash to lambda, its account
      marked refused (``aopic/failed/trap/<rule>``), and dropped with
      :class:`~scrapy.exceptions.IgnoreRequest`.

    Requests the frontier did not hand out (robots.txt, a spider's own
    ``engine.download``) pass untouched. The add-on puts it at 60: after
    Scrapy's offsite check (50) and before robots.txt (100), so a trapped
    URL does not make Scrapy fetch its host's robots.txt.
    """

    def __init__(self, frontier: Frontier, guard: TrapGuard, stats=None):
        self.frontier = frontier
        self.guard = guard
        self.stats = stats
        frontier.link_filters.register(self.link_filter)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TrapGuardMiddleware:
        limits = TrapLimits.from_settings(crawler.settings)
        return cls(Frontier.from_crawler(crawler), TrapGuard(limits), crawler.stats)

    def link_filter(self, url: str, canonical: str, request: Request, depth: int) -> str | None:
        """Frontier link filter: ``"trap/<rule>"`` for a trapped URL."""
        rule = self.guard.rule(url, canonical, depth)
        if rule is None:
            return None
        return f"trap/{rule}"

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        lease = self.frontier.lease_of(request)
        if lease is None:
            return None
        rule = self.guard.rule(request.url, lease.url, lease.depth, fetching=True)
        if rule is None:
            return None
        self.frontier.fail(request, f"trap/{rule}", refuse=True)
        raise IgnoreRequest(f"aopic trap rule {rule}: {request.url}")
