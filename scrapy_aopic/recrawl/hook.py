"""Scrapy glue of the revisit planner (``AOPIC_RECRAWL = True``).

The planning code (:mod:`~scrapy_aopic.recrawl.planner`) knows nothing of
Scrapy; this module connects it to a crawl:

* :class:`RecrawlHook`, one per crawler (like the frontier), owns the
  :class:`~scrapy_aopic.recrawl.planner.RecrawlPlanner` and

  - learns from every visit through the ``page_visited`` signal of
    :mod:`scrapy_aopic.signals` (new links, changed or not, 304s);
  - puts due pages back into the frontier (``store.repend``) and hands out
    the most overdue one whose host is ready ahead of the cash order
    (:meth:`RecrawlHook.next_lease`, called by the frontier);
  - keeps the spider open while revisits are planned (``spider_idle``);
  - saves and restores its state in ``JOBDIR``;
  - publishes ``aopic/recrawl/...`` stats.

* :class:`~scrapy_aopic.middlewares.recrawl.RecrawlMiddleware`, a
  downloader middleware, registers the hook with the frontier, makes
  revisits conditional (``If-None-Match`` / ``If-Modified-Since``), turns a
  ``304`` into a visit that found nothing new, tells changed pages from
  unchanged ones (checksum, then SimHash distance), and reports failed
  revisits.

What the frontier calls is listed in :meth:`RecrawlHook.from_crawler`'s
docstring and in ``docs/recrawl.rst``.
"""

from __future__ import annotations

import json
import logging
from email.utils import parsedate_to_datetime
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider

from .. import settings as aopic_settings
from ..compat import call_later
from ..meta import RECRAWL_CHANGED, SIMHASH
from ..settings import recrawl_enabled
from .. import signals as aopic_signals
from ..store.base import ALIAS, CRAWLED, REFUSED, FrontierStore, Lease, Link
from . import checks
from .change import (
    PageVersion,
    Validators,
    conditional_headers,
    content_checksum,
    detect_change,
    is_not_modified,
    text_fingerprint,
    validators_from_headers,
    visible_text,
)
from .planner import OverdueQueue, RecrawlPlanner

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


def _bound(settings: Any, name: str) -> int | None:
    """A size bound in bytes; 0 (or empty) means none."""
    value = aopic_settings.get_optional_float(settings, name)
    if value is not None and value < 0:
        raise ValueError(f"{name} must be a number of bytes >= 0 (0: no bound), got {value!r}")
    return int(value) if value else None


STATE_FILE = "aopic-recrawl.json"

_hooks: weakref.WeakKeyDictionary[Crawler, RecrawlHook] = weakref.WeakKeyDictionary()


def planner_from_settings(settings) -> RecrawlPlanner:
    """A :class:`RecrawlPlanner` configured by the ``AOPIC_RECRAWL_*`` settings.

    Raises :class:`ImportError` (with the install hint) for the forest model
    without scikit-learn, :class:`ValueError` for inconsistent values.
    """
    get = aopic_settings.get
    model = get(settings, "AOPIC_RECRAWL_MODEL")
    budget = aopic_settings.get_optional_float(settings, "AOPIC_RECRAWL_BUDGET")
    budget_share = aopic_settings.get_optional_float(settings, "AOPIC_RECRAWL_BUDGET_SHARE")
    # Judged with a budget only (docs/recrawl.rst): without one the hints
    # and the activity model are off, and from_crawler says so.
    has_budget = budget is not None or budget_share is not None
    if model == "forest":
        from .forest import INSTALL_HINT, forest_available

        if not forest_available():
            raise ImportError(INSTALL_HINT)
    return RecrawlPlanner(
        min_interval=aopic_settings.get_float(settings, "AOPIC_RECRAWL_MIN_INTERVAL"),
        max_interval=aopic_settings.get_float(settings, "AOPIC_RECRAWL_MAX_INTERVAL"),
        initial_interval=aopic_settings.get_optional_float(
            settings, "AOPIC_RECRAWL_INITIAL_INTERVAL"
        ),
        rule=get(settings, "AOPIC_RECRAWL_RULE"),
        fetch_cost=aopic_settings.get_float(settings, "AOPIC_RECRAWL_FETCH_COST"),
        target_yield=aopic_settings.get_float(settings, "AOPIC_RECRAWL_TARGET_YIELD"),
        model=model,
        forget=aopic_settings.get_optional_float(settings, "AOPIC_RECRAWL_PROFILE_WINDOW"),
        key_min_events=aopic_settings.get_float(settings, "AOPIC_RECRAWL_KEY_MIN_EVENTS"),
        change_weight=aopic_settings.get_float(settings, "AOPIC_RECRAWL_CHANGE_WEIGHT"),
        change_window=aopic_settings.get_float(settings, "AOPIC_RECRAWL_CHANGE_WINDOW"),
        budget=budget,
        budget_share=budget_share,
        host_gap=_host_gap(settings),
        timetable=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_TIMETABLE"),
        explore=aopic_settings.get_float(settings, "AOPIC_RECRAWL_EXPLORE"),
        likely_first=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_LIKELY_FIRST"),
        burst=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_BURST"),
        burst_window=aopic_settings.get_float(settings, "AOPIC_RECRAWL_BURST_WINDOW"),
        cochange=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_COCHANGE") and has_budget,
        cochange_share=aopic_settings.get_float(settings, "AOPIC_RECRAWL_COCHANGE_SHARE"),
        cochange_chance=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_COCHANGE_CHANCE"),
        activity=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_ACTIVITY") and has_budget,
        new_pages=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_NEW_PAGES"),
        new_page_window=aopic_settings.get_float(settings, "AOPIC_RECRAWL_NEW_PAGE_WINDOW"),
        forest_retrain=aopic_settings.get_float(settings, "AOPIC_RECRAWL_FOREST_RETRAIN"),
    )


def _host_gap(settings) -> float | None:
    gap = aopic_settings.get_optional_float(settings, "AOPIC_RECRAWL_HOST_GAP")
    if gap is None:
        try:
            delay = float(settings.get("DOWNLOAD_DELAY") or 0.0)
        except (TypeError, ValueError):
            delay = 0.0
        gap = delay if delay > 0 else None
    return gap


def _http_time(value: str | None) -> float | None:
    """An HTTP date as Unix time (``None`` if absent or unreadable)."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class RecrawlHook:
    """The planner of one crawler and everything that feeds it.

    Get it with :meth:`from_crawler` (one per crawler, ``None`` when
    ``AOPIC_RECRAWL`` is off). It connects its own signal handlers; the
    frontier makes three calls (see :meth:`from_crawler`).
    """

    def __init__(
        self,
        crawler: Crawler | None,
        planner: RecrawlPlanner,
        *,
        due_first: bool = True,
        conditional: bool = True,
        change_distance: int = 3,
        state_path: str | os.PathLike | None = None,
        state_interval: float = 300.0,
        clock: Callable[[], float] = time.time,
        validator_max_bytes: int | None = 256,
    ):
        self.crawler = crawler
        self.stats = crawler.stats if crawler is not None else None
        self.planner = planner
        self.due_first = due_first
        self.conditional = conditional
        self.change_distance = change_distance
        self.validator_max_bytes = validator_max_bytes
        self._oversized_logged = False
        self.state_path = Path(state_path) if state_path else None
        self.state_interval = state_interval
        self.clock = clock
        self.overdue = OverdueQueue()
        #: url -> what the last version of the page looked like
        self.versions: dict[str, PageVersion] = {}
        self.store: FrontierStore | None = None
        self._saved_at = clock()
        self._timer = None
        if crawler is not None:
            connect = crawler.signals.connect
            connect(self._page_visited, signal=aopic_signals.page_visited)
            connect(self._spider_idle, signal=signals.spider_idle)
            connect(self._spider_closed, signal=signals.spider_closed)
            connect(self._jobdir_refused, signal=aopic_signals.jobdir_refused)

    def _jobdir_refused(self, reason: str) -> None:
        self.state_path = None  # never loaded: not saved over

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlHook | None:
        """The hook of ``crawler`` (created on first use), or ``None`` when
        ``AOPIC_RECRAWL`` is off.

        The frontier owning the engine makes three calls::

            # Frontier.__init__
            self.recrawl = RecrawlHook.from_crawler(crawler)
            # Frontier.open, once the store exists
            if self.recrawl: self.recrawl.open(self.store)
            # Frontier.next_request, instead of a bare store.pop(ready)
            lease = self.recrawl.next_lease(self.store, ready) if self.recrawl else None
            if lease is None: lease = self.store.pop(ready)

        and sends ``new_links=`` (links unknown to the frontier before the
        visit) with the ``page_visited`` signal.
        """
        if not recrawl_enabled(crawler.settings):
            return None
        hook = _hooks.get(crawler)
        if hook is None:
            settings = crawler.settings
            jobdir = settings.get("JOBDIR")
            hook = cls(
                crawler,
                planner_from_settings(settings),
                due_first=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_DUE_FIRST"),
                conditional=aopic_settings.get_bool(settings, "AOPIC_RECRAWL_CONDITIONAL"),
                change_distance=aopic_settings.get_int(settings, "AOPIC_RECRAWL_CHANGE_DISTANCE"),
                state_path=Path(jobdir, STATE_FILE) if jobdir else None,
                state_interval=aopic_settings.get_float(settings, "AOPIC_RECRAWL_STATE_INTERVAL"),
                validator_max_bytes=_bound(settings, "AOPIC_RECRAWL_VALIDATOR_MAX_BYTES"),
            )
            _hooks[crawler] = hook
            if hook.planner.cochange is None and aopic_settings.get_bool(settings, "AOPIC_RECRAWL_COCHANGE"):
                logger.info("aopic: co-change hints (AOPIC_RECRAWL_COCHANGE) need a revisit budget "
                            "(AOPIC_RECRAWL_BUDGET or AOPIC_RECRAWL_BUDGET_SHARE): off for this crawl")
                hook._set("aopic/recrawl/cochange_off", 1)
            if hook.planner.activity is None and aopic_settings.get_bool(settings, "AOPIC_RECRAWL_ACTIVITY"):
                logger.info("aopic: host activity (AOPIC_RECRAWL_ACTIVITY) needs a revisit budget "
                            "(AOPIC_RECRAWL_BUDGET or AOPIC_RECRAWL_BUDGET_SHARE): off for this crawl")
                hook._set("aopic/recrawl/activity_off", 1)
            if hook.planner.cochange is None and aopic_settings.get_bool(settings, "AOPIC_RECRAWL_COCHANGE_CHANCE"):
                logger.info("aopic: AOPIC_RECRAWL_COCHANGE_CHANCE ignored: the co-change hints are off")
                hook._set("aopic/recrawl/cochange_chance_ignored", 1)
        return hook

    # -- stats ----------------------------------------------------------------------

    def _inc(self, name: str, count: float = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(name, count)

    def _set(self, name: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(name, value)

    def update_stats(self, *, top_hubs: bool = True) -> None:
        """Set the gauges: pages planned, new links per revisit and (a scan
        of all pages, so not too often) the top hubs."""
        p = self.planner
        self._set("aopic/recrawl/pages_planned", len(p))
        self._set("aopic/recrawl/profiles", len(p.profiles))
        self._set(
            "aopic/recrawl/new_links_per_revisit",
            p.new_links_on_revisits / p.revisits if p.revisits else 0.0,
        )
        self._set("aopic/recrawl/bursts", p.bursts)
        self._set("aopic/recrawl/explored", p.explored)
        if p.burst_model is not None:
            self._set("aopic/recrawl/hot_revisits", p.burst_model.hot_intervals)
            self._set("aopic/recrawl/hot_changes", p.burst_model.hot_changes)
        if p.young is not None:
            self._set("aopic/recrawl/young_pages", p.young.young_pages)
            self._set("aopic/recrawl/young_revisits", p.young.young_intervals)
            self._set("aopic/recrawl/young_changes", p.young.young_changes)
        if p.cochange is not None:
            self._set("aopic/recrawl/cochange_hints", p.hints)
            self._set("aopic/recrawl/cochange_hints_changed", p.hints_changed)
            self._set("aopic/recrawl/cochange_hints_skipped", p.hints_skipped)
        if p.activity is not None:
            self._set("aopic/recrawl/activity_spells", p.activity.spells_started)
            self._set("aopic/recrawl/activity_replanned", p.activity_replanned)
        if not top_hubs:
            return
        self._set(
            "aopic/recrawl/top_hubs",
            [
                f"{e.url} {e.links_per_hour:.3g} links/h, every {e.interval or 0:.0f} s"
                for e in p.top_hubs(10)
            ],
        )

    # -- what the frontier calls --------------------------------------------------------

    def open(self, store: FrontierStore) -> None:
        """Start working on ``store``: load the saved state (``JOBDIR``) and
        plan every crawled page the planner does not know (state lost in a
        crash, or a crawl that ran without re-crawl before)."""
        self.store = store
        if self.state_path is not None and self.state_path.exists():
            try:
                self.load_state(self.state_path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # load() installs nothing unless all of it reads: afresh means afresh
                self._set("aopic/recrawl/state_refused", 1)
                logger.warning("aopic: recrawl state %s unreadable (%s); starting afresh",
                               self.state_path, exc)  # fmt: skip
        now = self.clock()
        adopted = 0
        for view in store.iter_accounts():
            if view.state == CRAWLED and view.url not in self.planner.pages:
                self.planner.adopt(view.url, view.host, view.last_visit, now)
                adopted += 1
        if adopted:
            self._inc("aopic/recrawl/adopted", adopted)

    def release_due(self, store: FrontierStore, now: float | None = None) -> int:
        """Put the pages due at ``now`` back into the frontier; returns how
        many were queued."""
        now = self.clock() if now is None else now
        queued = 0
        pages = self.planner.pages
        for url in self.planner.due(now):
            record = pages[url]  # due() returns planned pages only
            host = record.host or ""
            if store.repend(Link(url, host, 0)):
                queued += 1
                self.overdue.push(url, host, self.planner.queue_key(record, now))
                continue
            view = store.get(url)
            if view is None or view.state in (ALIAS, REFUSED):
                # Gone for good (an alias after a redirect, refused since).
                self.planner.forget_page(url)
                self.overdue.discard(url)
        if queued:
            self._inc("aopic/recrawl/released", queued)
        if now - self._saved_at >= self.state_interval:
            self.update_stats()
            if self.state_path is not None:
                self.save_state(self.state_path)
            self._saved_at = now
        return queued

    def next_lease(self, store: FrontierStore, ready: Callable[[str], bool]) -> Lease | None:
        """Release due pages, then lease the most overdue one whose host is
        ``ready`` (with ``AOPIC_RECRAWL_DUE_FIRST``). ``None``: take the
        richest pending URL as usual."""
        now = self.clock()
        # The frontier asks at every request, and most of the time nothing
        # is due, nothing is overdue and no save is due: answer that from
        # the two heaps' tops without the calls (release_due and pop do
        # the same checks first; this only skips the calls).
        heap = self.planner._heap
        if (heap and heap[0][0] <= now) or now - self._saved_at >= self.state_interval:
            self.release_due(store, now)
        if not self.due_first or not self.overdue.maybe_due(now):
            return None
        for _ in range(16):
            url = self.overdue.pop(now, ready)
            if url is None:
                return None
            lease = store.take(url)
            if lease is not None:
                if self.stats is not None:
                    self._inc("aopic/recrawl/due_first")
                return lease
        return None

    # -- what visits report ---------------------------------------------------------------

    def record_visit(
        self,
        url: str,
        host: str,
        *,
        changed: bool | None = None,
        new_links: int | None = None,
        not_modified: bool = False,
        depth: int = 0,
        now: float | None = None,
        last_modified: float | None = None,
        importance: float | None = None,
    ) -> float:
        """Tell the planner about a visit; returns when the page is due again.

        ``last_modified`` (Unix time; default: the page's last
        ``Last-Modified`` header, kept by :meth:`observe_response`) dates a
        change; ``importance`` weighs the page in the budget's split."""
        now = self.clock() if now is None else now
        self.overdue.discard(url)
        revisit = url in self.planner.pages and self.planner.pages[url].last_visit is not None
        if last_modified is None and changed:
            version = self.versions.get(url)
            if version is not None:
                last_modified = _http_time(version.validators.last_modified)
        due = self.planner.on_visit(
            url, host, now, changed=changed, new_links=new_links,
            not_modified=not_modified, depth=depth, last_modified=last_modified,
            importance=importance,
        )  # fmt: skip
        if revisit and self.stats is not None:
            self._inc("aopic/recrawl/revisits")
            if not_modified:
                self._inc("aopic/recrawl/not_modified")
            if changed is True or (changed is None and new_links):
                self._inc("aopic/recrawl/changed")
            elif changed is False or not_modified or new_links == 0:
                self._inc("aopic/recrawl/unchanged")
            if new_links:
                self._inc("aopic/recrawl/new_links", new_links)
            if self.planner.revisits % 100 == 0:
                self.update_stats(top_hubs=False)
        return due

    def record_failure(self, url: str, host: str, now: float | None = None) -> None:
        """A revisit failed: try again later (backing off)."""
        if url not in self.planner.pages:
            return  # not a revisit: the page was never visited
        self.overdue.discard(url)
        self.planner.on_failure(url, host, self.clock() if now is None else now)
        self._inc("aopic/recrawl/failures")

    def _page_visited(self, url, links, lease, response, spider=None, new_links=None, **kwargs):
        meta = getattr(response, "meta", None) or {}
        status = getattr(response, "status", 200)
        self.record_visit(
            url,
            lease.host,
            changed=meta.get(RECRAWL_CHANGED),
            new_links=new_links,
            not_modified=is_not_modified(status),
            depth=lease.depth,
            # AOPIC's importance estimate is proportional to history + cash.
            importance=(getattr(lease, "history", 0.0) or 0.0) + (getattr(lease, "cash", 0.0) or 0.0) + 1e-12,
        )

    # -- change detection ---------------------------------------------------------------------

    def request_headers(self, url: str) -> dict[str, str]:
        """Conditional headers for a revisit of ``url`` (empty if unknown)."""
        if not self.conditional:
            return {}
        version = self.versions.get(url)
        return conditional_headers(version.validators if version else None)

    def observe_response(self, url: str, response: Response) -> bool | None:
        """Compare a fetched version of ``url`` with the previous one and
        remember it; returns changed / unchanged / ``None`` (first visit).

        The SimHash is computed only when the checksum differs (or taken
        from ``response.meta["aopic_simhash"]`` if another component set it).
        """
        previous = self.versions.get(url)
        checksum = content_checksum(response.body)
        fingerprint = None
        if previous is not None and previous.checksum != checksum:
            meta = getattr(response, "meta", None) or {}
            fingerprint = meta.get(SIMHASH)
            if fingerprint is None:
                text = getattr(response, "text", None)
                if text is not None:
                    fingerprint = text_fingerprint(visible_text(text))
        version = PageVersion(checksum, fingerprint, self._validators(url, response.headers))
        changed = detect_change(previous, version, self.change_distance)
        if fingerprint is None and previous is not None and changed is False:
            version = version._replace(fingerprint=previous.fingerprint)
        self.versions[url] = version
        return changed

    def _validators(self, url: str, headers: Any) -> Validators:
        """The response's validators, each at most ``validator_max_bytes``
        (``AOPIC_RECRAWL_VALIDATOR_MAX_BYTES``): a longer one is not kept
        (that page's revisits are not conditional on it), counted in
        ``aopic/recrawl/validators_dropped``, the first one logged."""
        oversized: list[tuple[str, int]] = []
        validators = validators_from_headers(headers, self.validator_max_bytes, oversized)
        if oversized:
            self._drop_oversized(url, oversized)
        return validators

    def _drop_oversized(self, url: str, oversized: list[tuple[str, int]]) -> None:
        self._inc("aopic/recrawl/validators_dropped", len(oversized))
        if not self._oversized_logged:
            self._oversized_logged = True
            name, size = oversized[0]
            logger.warning(
                "aopic: the %s header of %s is %d bytes, more than AOPIC_RECRAWL_VALIDATOR_MAX_BYTES=%d: not "
                "kept (revisits of such a page are not conditional on it); every one dropped is counted in "
                "aopic/recrawl/validators_dropped", name, url, size, self.validator_max_bytes,
            )

    def refresh_validators(self, url: str, response: Response) -> None:
        """A 304 may carry a new ETag / Last-Modified: keep them."""
        previous = self.versions.get(url)
        if previous is None:
            return
        validators = self._validators(url, response.headers)
        merged = Validators(
            validators.etag or previous.validators.etag,
            validators.last_modified or previous.validators.last_modified,
        )
        self.versions[url] = previous._replace(validators=merged)

    # -- signals ------------------------------------------------------------------------------

    def _spider_idle(self, spider) -> None:
        # A continuous crawl ends only when told to: revisits are planned.
        wake = self.planner.next_wakeup()
        if wake is None:
            return
        if self.store is not None:
            self.release_due(self.store)
        self._arm_wakeup(wake)
        raise DontCloseSpider

    #: Scrapy asks an idle scheduler again every 5 s (its heartbeat); a
    #: revisit due sooner than that wakes the engine itself.
    HEARTBEAT = 5.0

    def _arm_wakeup(self, wake: float) -> None:
        delay = wake - self.clock()
        if delay >= self.HEARTBEAT or self._timer is not None:
            return
        self._timer = call_later(max(0.0, delay), self._wake)

    def _wake(self) -> None:
        self._timer = None
        engine = getattr(self.crawler, "engine", None)
        # Scrapy has no public "poll the scheduler now"; its engine slot's
        # nextcall is what engine.crawl() uses. Without it, the heartbeat
        # still comes within 5 s.
        nextcall = getattr(getattr(engine, "_slot", None), "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    def _spider_closed(self, spider, reason: str = "") -> None:
        self.update_stats()
        if self.state_path is not None:
            self.save_state(self.state_path)

    # -- persistence -----------------------------------------------------------------------------

    def to_state(self) -> dict:
        """JSON-able state: the planner's and the page versions."""
        return {
            "planner": self.planner.to_state(),
            "versions": {
                url: [v.checksum, v.fingerprint, v.validators.etag, v.validators.last_modified]
                for url, v in self.versions.items()
            },
        }

    def load(self, state: dict) -> None:
        """Restore :meth:`to_state`: all or nothing (the page versions and
        the planner's state checked whole before anything is installed; a
        bad value raises :class:`ValueError` naming it)."""
        state = checks.mapping(state, "state")
        versions = checks.mapping(state.get("versions", {}), "page versions")
        for url, v in versions.items():
            if not (isinstance(v, list) and len(v) == 4 and (v[0] is None or isinstance(v[0], str))
                    and (v[1] is None or type(v[1]) is int and 0 <= v[1] < 2**64)  # a 64-bit SimHash
                    and all(x is None or isinstance(x, str) for x in v[2:])):
                raise ValueError(f"recrawl state: the page version of {url} is {v!r}"[:300])
        self.planner.load_state(state.get("planner"))
        self.versions = {}
        for url, v in versions.items():
            # A state saved without the bound (or edited) is held to it too.
            headers = {"ETag": v[2], "Last-Modified": v[3]}
            self.versions[url] = PageVersion(v[0], v[1], self._validators(url, {k: x for k, x in headers.items() if x}))

    def save_state(self, path: str | os.PathLike) -> None:
        """Write the state atomically (a crash mid-write keeps the old file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_state()), encoding="utf-8")
        os.replace(tmp, path)
        self._saved_at = self.clock()

    def load_state(self, path: str | os.PathLike) -> None:
        self.load(json.loads(Path(path).read_text(encoding="utf-8")))


__all__ = ["RecrawlHook", "planner_from_settings"]
