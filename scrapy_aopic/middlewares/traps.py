"""Downloader middleware: the crawler-trap guard (``docs/hygiene.rst``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import logging

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, TextResponse

from ..frontier import Frontier
from ..store.base import PENDING
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
#: Request meta key: the undecided directories a request holds in the
#: first-answer gate (released when it comes back to Soft404Middleware).
GATE = "_aopic_soft404_gate"


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

    **One fetch at a time into an undecided directory**
    (``AOPIC_TRAP_SOFT404_GATE``): a request whose directory has a sibling in
    flight and is not decided yet (:class:`~scrapy_aopic.hygiene.soft404.FirstAnswerGate`)
    waits for that sibling's answer, which :class:`Soft404Middleware` reads
    first, and is refused unfetched if the answer closed the directory.

    Requests the frontier did not hand out (robots.txt, a spider's own
    ``engine.download``) pass untouched. The add-on puts it at 60: after
    Scrapy's offsite check (50) and before robots.txt (100), so a trapped
    URL does not make Scrapy fetch its host's robots.txt.
    """

    def __init__(self, frontier: Frontier, guard: TrapGuard, stats=None, gate_timeout: float = 180.0):
        self.frontier = frontier
        self.guard = guard
        self.stats = stats
        # Only with the soft-404 middleware installed (it answers the gate).
        self.gate = guard.gate if guard.limits.soft404_pages and guard.gate.answers else None
        #: seconds a request waits for a sibling that never comes back
        self.gate_timeout = gate_timeout
        self._held_logged = False
        frontier.link_filters.register(self.link_filter)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TrapGuardMiddleware:
        return cls(Frontier.from_crawler(crawler), guard_of(crawler), crawler.stats,
                   crawler.settings.getfloat("DOWNLOAD_TIMEOUT", 180.0))

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
            if self.gate is None or GATE in request.meta:  # (holds its directories already)
                return None
            keys = self._enter_gate(request, lease.url)
            return None if keys is None else self._wait_gate(request, lease, keys)
        self.frontier.fail(request, f"trap/{rule}", refuse=True)
        raise IgnoreRequest(f"aopic trap rule {rule}: {request.url}")

    async def _wait_gate(self, request: Request, lease, keys: tuple[str, ...]) -> None:
        """Hold ``request`` until its undecided directories' child in flight
        comes back; then refuse it if that answer closed the directory, else
        let it go (taking the gate when the directory is still undecided).
        Counted ``aopic/trap/soft404_gate_held``; a sibling that does not come
        back within the download timeout frees the gate
        (``aopic/trap/soft404_gate_expired``)."""
        from scrapy.utils.defer import maybe_deferred_to_future
        from twisted.internet import defer, reactor

        gate = self.gate
        self._count("aopic/trap/soft404_gate_held")
        if not self._held_logged:
            self._held_logged = True
            logger.info("aopic: %s waits for its directory's first answers (a sibling is in flight); "
                        "stat aopic/trap/soft404_gate_held; logged once", request.url)
        while True:
            woken = defer.Deferred()

            def wake(value: bool = True, woken=woken) -> None:
                if not woken.called:
                    woken.callback(value)

            gate.wait(keys, wake)
            timer = reactor.callLater(self.gate_timeout, wake, False)
            answered = await maybe_deferred_to_future(woken)
            if timer.active():
                timer.cancel()
            if not answered:
                self._count("aopic/trap/soft404_gate_expired")
                gate.leave(keys, answered=False)
            rule = self.guard.rule(request.url, lease.url, lease.depth)  # the host budget was charged
            if rule is not None:
                self.frontier.fail(request, f"trap/{rule}", refuse=True)
                raise IgnoreRequest(f"aopic trap rule {rule}: {request.url}")
            keys = self._enter_gate(request, lease.url)
            if keys is None:
                return None

    def _enter_gate(self, request: Request, url: str) -> tuple[str, ...] | None:
        """None when ``request`` may go (no undecided directory, or it took
        the gate of its directories); else the directories to wait on."""
        keys = self.gate.keys(url)
        if not keys:
            return None
        if self.gate.enter(keys):
            request.meta[GATE] = keys
            return None
        return keys

    def _count(self, stat: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(stat)


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

    A page that passes whatever its shape
    (:meth:`~scrapy_aopic.hygiene.soft404.Soft404Detector.passes_unread`: a
    directory of real pages, a host with no error shape yet) is not read:
    counted ``aopic/trap/soft404_unread``, logged once.
    """

    #: URLs of pages of an error shape remembered (as fetched), to know
    #: what they link to; the memo starts over when full.
    MAX_ERROR_URLS = 1 << 16

    def __init__(self, frontier: Frontier, guard: TrapGuard, stats=None):
        self.frontier = frontier
        self.guard = guard
        self.stats = stats
        self._spared_logged = False
        self._unread_logged = False
        self._shape_logged = False
        self._error_urls: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Soft404Middleware:
        mw = cls(Frontier.from_crawler(crawler), guard_of(crawler), crawler.stats)
        # A redirect or a retry goes back to the scheduler with the meta of
        # the request that held the gate (and may be dropped there, or wait
        # long): the gate is freed then, and the follow-up takes it anew.
        mw.frontier.watch_follow_ups(GATE, mw._leave_gate)
        return mw

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        try:
            return self._process_response(request, response)
        finally:
            # After the detector saw the answer: what waited for its directory
            # finds it decided.
            self._leave_gate(request)

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        self._leave_gate(request)
        return None

    def _leave_gate(self, request: Request, spider: Spider | None = None) -> None:
        keys = request.meta.pop(GATE, None)
        if keys:
            self.guard.gate.leave(keys)

    def _process_response(self, request: Request, response: Response) -> Response:
        if response.status != 200 or not self.guard.limits.soft404_pages or not isinstance(response, TextResponse):
            return response
        lease = self.frontier.lease_of(request)
        if lease is None:
            return response
        detector = self.guard.soft404
        shapes, closed, spared = len(detector.error_shapes), len(detector.closed), detector.counts["spared"]
        one_shape = detector.counts["dir_one_shape"]
        referer = request.headers.get("Referer")
        # (None without a Referer: a start URL, or REFERER_ENABLED = False)
        linked_by_soft404 = referer.decode("latin-1").partition("#")[0] in self._error_urls if referer else None
        if detector.passes_unread(lease.url, linked_by_soft404=linked_by_soft404):
            # Its directory is settled as real pages and its host has no
            # error shape: it passes whatever it holds, and reading its facts
            # (a copy of the tree, a walk, a tokenizer: about 0.4 ms on a
            # page of the PostgreSQL manual) would only count its shape.
            self._count("aopic/trap/soft404_unread")
            if not self._unread_logged:
                self._unread_logged = True
                logger.info("aopic: %s not read for its soft-404 shape: its directory holds pages of %d "
                            "distinct shapes and its host no error shape (stat aopic/trap/soft404_unread; "
                            "logged once)", request.url, detector.REAL_SHAPES)
            return response
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
        passed = detector.take_passed()
        if passed:
            self._withdraw_links(passed)
        if len(detector.error_shapes) > shapes:
            # A documentation site has hundreds of templates answered by
            # sibling pages (rustdoc: 190 in 5,500 pages): counted, said once.
            self._count("aopic/trap/soft404_shapes")
            if not self._shape_logged:
                self._shape_logged = True
                logger.info("aopic: soft 404s found: %d distinct URLs answered the page of %s; pages of that "
                            "shape are refused from now on unless their directory spares them (stat "
                            "aopic/trap/soft404_shapes counts such shapes; logged once)",
                            self.guard.limits.soft404_pages, request.url)
        if detector.counts["dir_one_shape"] > one_shape and self.stats is not None:
            self.stats.inc_value("aopic/trap/soft404_dir_one_shape", detector.counts["dir_one_shape"] - one_shape)
        for parent in list(detector.closed)[closed:]:
            logger.info("aopic: soft-404 directory %s: its first fetched children were all soft 404s; "
                        "links into it are refused from now on", parent)
        if rule is None:
            return response
        self.frontier.fail(request, f"trap/{rule}", refuse=True)
        raise IgnoreRequest(f"aopic trap rule {rule}: {request.url}")

    def _count(self, stat: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(stat)

    def _withdraw_links(self, passed: list[str]) -> None:
        """Pages found to be soft 404s after they passed (the first ones of
        their shape): they are remembered as such (what they link is not
        spared), and their links still pending that lead into a directory
        where nothing has answered yet are refused with their cash to
        lambda (``aopic/refused/trap/soft404_link``), as the links of a
        soft 404 refused on arrival are never followed. A link into a
        directory that answered pages (a real article a "not found" page
        suggests) keeps its place. Needs the store's link memory
        (``AOPIC_LINK_MEMORY``, the memory backend)."""
        store = self.frontier.store
        detector = self.guard.soft404
        for url in passed:
            if len(self._error_urls) >= self.MAX_ERROR_URLS:
                self._error_urls.clear()
            self._error_urls.add(url)
            for link in store.remembered_links(url) or ():
                view = store.get(link.url)
                if view is not None and view.state == PENDING and detector.unanswered(link.url):
                    self.frontier.refuse_url(link.url, link.host, "trap/soft404_link", link.depth)

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
