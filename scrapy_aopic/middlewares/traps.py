"""Downloader middleware: the crawler-trap guard (``docs/hygiene.rst``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import logging

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, TextResponse

from ..frontier import Frontier
from ..hygiene.traps import TrapGuard, TrapLimits
from ..hygiene.soft404 import page_facts, shared_tree_facts

_GUARDS: WeakKeyDictionary = WeakKeyDictionary()


def guard_of(crawler: Crawler) -> TrapGuard:
    """The crawl's one :class:`TrapGuard` (both middlewares share it),
    its limits read from the settings once."""
    guard = _GUARDS.get(crawler)
    if guard is None:
        guard = _GUARDS[crawler] = TrapGuard(TrapLimits.from_settings(crawler.settings))
    return guard


if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: Characters of a page's HTML its shape is taken from.
SHAPE_CHARS = 200_000


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

    Links into a directory that only answered soft 404s
    (:class:`Soft404Middleware`) are refused by the same two checks
    (``trap/soft404_dir``).

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
        return cls(Frontier.from_crawler(crawler), guard_of(crawler), crawler.stats)

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


class Soft404Middleware:
    """Refuses soft 404s as they come back (:mod:`scrapy_aopic.hygiene.soft404`).

    Every page the frontier handed out that comes back with status 200 is
    shown to the crawl's soft-404 detector. One whose shape is an error
    shape of its host is settled like a request refused at fetch time
    (cash to lambda, account refused, ``aopic/failed/trap/soft404``) and
    dropped: its links are not followed, as those of a 404 are not. The
    add-on puts it at 547, once responses are decompressed (590),
    redirects resolved (600, 580) and retries done (550), and before the
    near-duplicate check (545): a soft 404 is not a page of the index.

    A page of an error shape in a directory of real pages (pages of
    distinct shapes) passes: counted ``aopic/trap/soft404_spared``, logged
    once; unless the page that linked it (its ``Referer``, set by Scrapy's
    ``RefererMiddleware``) was of an error shape too: a soft-404 space inside
    a real directory is then refused one hop after its entry.
    """

    #: URLs of pages of an error shape remembered (as fetched), to know
    #: what they link to; the memo starts over when full.
    MAX_ERROR_URLS = 1 << 16

    def __init__(self, frontier: Frontier, guard: TrapGuard, stats=None):
        self.frontier = frontier
        self.guard = guard
        self.stats = stats
        self._spared_logged = False
        self._error_urls: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Soft404Middleware:
        return cls(Frontier.from_crawler(crawler), guard_of(crawler), crawler.stats)

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        if response.status != 200 or not self.guard.limits.soft404_pages or not isinstance(response, TextResponse):
            return response
        lease = self.frontier.lease_of(request)
        if lease is None:
            return response
        detector = self.guard.soft404
        shapes, closed, spared = len(detector.error_shapes), len(detector.closed), detector.counts["spared"]
        referer = request.headers.get("Referer")
        # (None without a Referer: a start URL, or REFERER_ENABLED = False)
        linked_by_soft404 = referer.decode("latin-1").partition("#")[0] in self._error_urls if referer else None
        rule = self.guard.page_fetched(lease.url, *self._facts(response), linked_by_soft404=linked_by_soft404)
        if rule is not None or detector.counts["spared"] > spared:
            if len(self._error_urls) >= self.MAX_ERROR_URLS:
                self._error_urls.clear()
            self._error_urls.add(response.url.partition("#")[0])
        if detector.counts["spared"] > spared:
            if self.stats is not None:
                self.stats.inc_value("aopic/trap/soft404_spared")
            if not self._spared_logged:
                self._spared_logged = True
                logger.info("aopic: %s answered a soft-404 shape but its directory holds pages of their own "
                            "or mints no URLs: passed (pages of one template; stat aopic/trap/soft404_spared; "
                            "logged once)", request.url)
        if len(detector.error_shapes) > shapes:
            logger.info("aopic: soft 404s found: %d distinct URLs answered the page of %s; "
                        "pages of that shape are refused from now on", self.guard.limits.soft404_pages, request.url)
        for parent in list(detector.closed)[closed:]:
            logger.info("aopic: soft-404 directory %s: its first fetched children were all soft 404s; "
                        "links into it are refused from now on", parent)
        if rule is None:
            return response
        self.frontier.fail(request, f"trap/{rule}", refuse=True)
        raise IgnoreRequest(f"aopic trap rule {rule}: {request.url}")

    @staticmethod
    def _facts(response: TextResponse) -> tuple[str, frozenset[str]]:
        """The page's soft-404 facts, read from the tree Scrapy's selector
        parses for an HTML page (the near-duplicate check and the spider
        read it next): one parse per page instead of two."""
        root = None
        if isinstance(response, HtmlResponse):
            try:
                selector = response.selector
                if selector.type == "html":
                    root = selector.root
            except Exception:  # text lxml cannot parse at all: page_facts says so
                root = None
        if root is None or not hasattr(root, "iter"):
            return page_facts(response.url, response.text[:SHAPE_CHARS])
        return shared_tree_facts(response.url, response.text, root, SHAPE_CHARS)
