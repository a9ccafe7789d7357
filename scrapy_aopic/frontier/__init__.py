"""The AOPIC frontier of one crawler: the engine plus what Scrapy needs.

One :class:`Frontier` per crawler, shared by the scheduler and the
middlewares (:meth:`Frontier.from_crawler` returns the same object to all of
them). It is a facade over four parts, one job each:

* the **store** (:mod:`scrapy_aopic.store`) and the **engine**
  (:mod:`scrapy_aopic.engine`): accounts, lambda, greedy order;
* the **ledger** (:mod:`.ledger`): the only path to cash and leases; every
  lease handed out is settled exactly once (its table says where the cash
  goes on each path);
* the **link filter chain** (:mod:`.linkfilters`): offsite, trap, robots.txt
  and pattern rules that hygiene components register;
* the **probe** (:mod:`.probe`): download-slot occupancy and wake-ups, the
  one adapter to Scrapy internals.

Cash never rides on a request: a visit credits its links' accounts in one
store change (creating them with their requests), so a crawl killed at any
moment loses neither cash nor discovered links. A lease still open when the
spider goes idle belongs to a request that vanished without reaching a hook:
its cash goes to lambda then.
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import ParseResult, urlparse

from scrapy import Request, signals
from scrapy.http import TextResponse
from scrapy.utils.httpobj import urlparse_cached

from .. import settings as aopic_settings
from .. import signals as aopic_signals
from ..engine import AopicEngine, RankedPage
from ..hygiene.canonical import build_canonicalizer
from ..hygiene.domains import scheme_origin_of
from ..meta import CASH, DOWNLOAD_SLOT, DUPLICATE_DISTANCE, DUPLICATE_OF, KEY, LEASE, LINK, REGISTERED
from ..compat import close_spider, keep_cookie_domains_offline, scrapy_urlparse_cache
from ..store.base import STATE_NAMES, FrontierCorrupt, FrontierLost, FrontierStore, Lease, Link, StoreStalled, StoreUnavailable
from ..store.journal import JournaledStore
from ..store.memory import MemoryStore
from .lane import DirectLane, LaneEntry
from .held import HeldWrites
from .ledger import Ledger
from .linkfilters import LinkFilter, LinkFilterChain
from .offsite import OffsiteLinkFilter
from .probe import DownloadProbe
from .requestcodec import (
    StoredRequestPolicy,
    UndecodableRequest,
    UnserializableRequest,
    decode_request,
    encode_request,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

__all__ = ["Frontier", "LinkFilter", "RevisitSource", "export_record"]

_frontiers: weakref.WeakKeyDictionary[Crawler, Frontier] = weakref.WeakKeyDictionary()

#: Keys the frontier issues to one request: a spider that copies a
#: response's meta into a new request (``meta=response.meta``) must not
#: carry them along.
ISSUED_META = frozenset((LEASE, KEY, REGISTERED, CASH, DUPLICATE_OF, DUPLICATE_DISTANCE))


def _forget_issued(meta: dict) -> None:
    """Remove the :data:`ISSUED_META` keys from ``meta`` (most requests
    have none: one set test, no pops)."""
    if not ISSUED_META.isdisjoint(meta):
        for name in ISSUED_META:
            meta.pop(name, None)


#: File in ``JOBDIR`` holding the direct lane between runs.
LANE_FILE = Path("aopic", "lane.jsonl")
#: Leases refused by ``Frontier.lease_refusals`` in one ``next_request``
#: call at most (each is one store settle: the call stays short).
MAX_REFUSED_PER_CALL = 100


class RevisitSource(Protocol):
    """What a re-crawl planner gives the frontier (see
    :meth:`Frontier.register_revisits`)."""

    def open(self, store: FrontierStore) -> None: ...

    def next_lease(self, store: FrontierStore, ready: Callable[[str], bool]) -> Lease | None: ...


def _duplicate_links_mode(value) -> str:
    """``AOPIC_DUPLICATE_FOLLOW_LINKS`` as one of "new", "none", "all" (the
    booleans of earlier releases, and their command-line spellings, mean
    "all" and "none")."""
    if isinstance(value, bool):
        return "all" if value else "none"
    mode = str(value).strip().lower()
    mode = {"true": "all", "1": "all", "false": "none", "0": "none"}.get(mode, mode)
    if mode not in ("new", "none", "all"):
        raise ValueError(f"AOPIC_DUPLICATE_FOLLOW_LINKS must be 'new', 'none' or 'all', got {value!r}")
    return mode


class Frontier:
    """AOPIC accounts, leases and settlement for one crawler.

    Settings are read once here; the store is built when the spider opens
    (it may need ``JOBDIR`` or the spider's name).
    """

    #: The last :meth:`next_request` found nothing to hand out here (the
    #: scheduler then polls: another worker may free a host or add links).
    starved = False
    #: lease ids open while Scrapy held no request (:meth:`settle_unheld_leases`)
    _unheld: frozenset[int] | None = None

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        settings = crawler.settings
        self.stats = crawler.stats
        self.seed_cash = aopic_settings.get_float(settings, "AOPIC_SEED_CASH")
        self.lambda_tax = aopic_settings.get_optional_float(settings, "AOPIC_LAMBDA_TAX")
        self.lambda_targets = aopic_settings.get(settings, "AOPIC_LAMBDA_TARGETS")
        # A continuous crawl needs a window (AOPIC_RECRAWL_HISTORY_WINDOW by default).
        self.history_window = aopic_settings.effective_history_window(settings)
        #: pages due for a revisit (the re-crawl planner registers itself)
        self.recrawl: RevisitSource | None = None
        self.link_memory = aopic_settings.get_bool(settings, "AOPIC_LINK_MEMORY")
        self.priority_horizon = aopic_settings.get_float(settings, "AOPIC_PRIORITY_HORIZON")
        #: discovery cash per new URL: chosen at open when the setting is
        #: None (by the spider: a site crawl or an open one)
        self.discovery_cash = 0.0
        self._discovery_chosen = settings.get("AOPIC_DISCOVERY_CASH") is not None
        self.backend = aopic_settings.get(settings, "AOPIC_BACKEND")
        self.export_path = aopic_settings.get(settings, "AOPIC_EXPORT_IMPORTANCE")
        self.journal_sync = aopic_settings.get_bool(settings, "AOPIC_JOURNAL_SYNC")
        self.journal_roll = aopic_settings.get_int(settings, "AOPIC_JOURNAL_ROLL_ENTRIES")
        self.jobdir_recovery = aopic_settings.get(settings, "AOPIC_JOBDIR_RECOVERY") or None
        self.jobdir = settings.get("JOBDIR")
        self.min_share = aopic_settings.get_float(settings, "AOPIC_MIN_CASH_SHARE")
        if not 0.0 <= self.min_share <= 1.0:
            raise ValueError(f"AOPIC_MIN_CASH_SHARE must be in [0, 1], got {self.min_share!r}")
        self.min_share_delayed = aopic_settings.get_float(settings, "AOPIC_MIN_CASH_SHARE_DELAYED")
        if not 0.0 <= self.min_share_delayed <= 1.0:
            raise ValueError(
                f"AOPIC_MIN_CASH_SHARE_DELAYED must be in [0, 1], got {self.min_share_delayed!r}")
        # A page budget: a URL handed out to a free slot below the richest
        # must be among the pages the budget can still pay for.
        self.spare_within_budget = aopic_settings.get_bool(settings, "AOPIC_SPARE_WITHIN_BUDGET")
        self.page_budget = settings.getint("CLOSESPIDER_PAGECOUNT", 0) if self.spare_within_budget else 0
        self._budget_cut: tuple[int, int, float] | None = None  # (pages left, uses, order) last computed
        self.duplicate_links = _duplicate_links_mode(aopic_settings.get(settings, "AOPIC_DUPLICATE_FOLLOW_LINKS"))
        self.lane_share = aopic_settings.get_float(settings, "AOPIC_DIRECT_LANE_SHARE")
        if not 0.0 <= self.lane_share <= 1.0:
            raise ValueError(f"AOPIC_DIRECT_LANE_SHARE must be in [0, 1], got {self.lane_share!r}")
        self.refetch_seeds = aopic_settings.get_bool(settings, "AOPIC_REFETCH_SEEDS")
        self.stored_policy = StoredRequestPolicy.from_settings(settings)
        self.lane = DirectLane()
        self._lane_seen: set[bytes] = set()  # fingerprints of non-link requests queued
        self._handed_out = 0
        self._handed_out_lane = 0
        self._warned: set[str] = set()
        #: why the store was lost (the spider is closing), or None
        self.lost: str | None = None
        keep_cookie_domains_offline()  # no public-suffix download at run time
        unknown = aopic_settings.unknown_names(settings)
        if unknown:
            self.stats.set_value("aopic/unknown_settings", len(unknown))
            logger.warning(
                "aopic: unknown settings ignored: %s (the documented ones are in docs/settings.md)",
                ", ".join(f"{name} (did you mean {close}?)" if close else name for name, close in unknown.items()),
            )
        # Validate early: a bad setting should stop the crawl before it starts.
        AopicEngine(MemoryStore(self.lambda_targets), lambda_tax=self.lambda_tax,
                    history_window=self.history_window, seed_cash=self.seed_cash,
                    priority_horizon=self.priority_horizon,
                    discovery_cash=aopic_settings.discovery_cash(settings, allowed_domains=None))
        self.link_filters = LinkFilterChain()
        #: Checks of a leased request before it is handed to Scrapy: each
        #: returns True when it refused (and settled) the request itself.
        #: Refusing here costs no pass through Scrapy's downloader slots
        #: (a hostile site's 20,000 queued URLs of a learned duplicate
        #: pattern were refused one per engine tick, nothing else fetched).
        self.lease_refusals: list[Callable[[Request], bool]] = []
        self._refused_keys: set[int] = set()  # hashes of refused canonical URLs
        self.canonicalize: Callable[[str], str | None] = build_canonicalizer(settings)
        self.probe = DownloadProbe(crawler)
        self.engine: AopicEngine | None = None
        self.store: FrontierStore | None = None
        self.ledger: Ledger | None = None
        #: writes waiting for a shared store that stalled (see :mod:`.held`)
        self.held = HeldWrites(self.stats)
        self.spider = None
        self._upkeep_due = True  # see next_request
        # Portable request data (JSON) is needed whenever another process or
        # a later run reads the store; one process alone can keep objects.
        self._portable = False
        crawler.signals.connect(self._on_spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self._on_request_dropped, signal=signals.request_dropped)
        #: (meta key, hook) of other components (:meth:`watch_follow_ups`)
        self._follow_up_hooks: list[tuple[str, Callable[[Request], None]]] = []
        #: meta keys that make a scheduled request one to look at
        self._watched: tuple[str, ...] = (LEASE,)

        # Scrapy sends request_scheduled for every link of every page (20
        # to 200 a page). A receiver costs a PyDispatcher call: a plain
        # function taking **kwargs is the cheapest kind (1.7 microseconds
        # where a bound method naming its arguments costs 2.9), and a link
        # carries none of the watched keys. Held here: the dispatcher keeps
        # only a weak reference.
        def on_request_scheduled(request: Request, **_: Any) -> None:
            meta = request.meta
            for key in self._watched:
                if key in meta:
                    self._on_request_scheduled(request)
                    return

        self._request_scheduled_receiver = on_request_scheduled
        crawler.signals.connect(on_request_scheduled, signal=signals.request_scheduled)
        self._offsite: LinkFilter | None = None
        self._shared = False
        #: Scrapy's ``urlparse_cached`` memo, filled for the links passed on
        #: while its OffsiteMiddleware is on (see ``_visit``), else None
        self._scrapy_parses: weakref.WeakKeyDictionary | None = None
        #: URL -> ``urlparse(URL)``: a site's navigation links repeat on every page
        self._parsed_urls: dict[str, ParseResult] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Frontier:
        """The frontier of ``crawler`` (created on first use)."""
        frontier = _frontiers.get(crawler)
        if frontier is None:
            frontier = _frontiers[crawler] = cls(crawler)
        return frontier

    def register_revisits(self, source: RevisitSource) -> None:
        """Let ``source`` (the re-crawl planner) hand out pages due for a
        revisit ahead of the cash order."""
        self.recrawl = source
        if self.store is not None:
            source.open(self.store)

    @property
    def shared(self) -> bool:
        """Other processes share the store (the Redis backend)."""
        return self._shared

    # -- life cycle -----------------------------------------------------------

    def open(self, spider) -> None:
        """Build the store (resuming ``JOBDIR`` state if any) and the engine."""
        if self.engine is not None:
            return
        self.spider = spider
        self.store = self._build_store(spider)
        self._shared = self.store.shared  # fixed per store; read on every request out
        if self._shared and self.page_budget:
            logger.info("aopic: AOPIC_SPARE_WITHIN_BUDGET is not applied with a shared store "
                        "(it ranks pending URLs in the memory store only)")
        if self.recrawl is not None:
            self.recrawl.open(self.store)
        allowed_domains = getattr(spider, "allowed_domains", None)
        self.discovery_cash = aopic_settings.discovery_cash(self.crawler.settings, allowed_domains)
        if not self._discovery_chosen:
            if allowed_domains:
                logger.info("aopic: a site crawl (the spider sets allowed_domains): each URL a fetched page "
                            "makes known brings %g of a seed's cash (AOPIC_DISCOVERY_CASH = 0 turns it off)",
                            self.discovery_cash)
            else:
                logger.info("aopic: an open crawl (the spider sets no allowed_domains): URLs a fetched page "
                            "makes known bring no cash of their own (AOPIC_DISCOVERY_CASH)")
        self.engine = AopicEngine(
            self.store,
            lambda_tax=self.lambda_tax,
            history_window=self.history_window,
            seed_cash=self.seed_cash,
            link_memory=self.link_memory,
            priority_horizon=self.priority_horizon,
            discovery_cash=self.discovery_cash,
        )
        if self.engine.discovery_cash != self.discovery_cash:
            # A store that cannot bring cash in on a visit (Redis Cluster) brings none.
            self.stats.set_value("aopic/discovery_cash_ignored", 1)
            chosen = self._discovery_chosen
            logger.log(logging.WARNING if chosen else logging.INFO,
                       "aopic: AOPIC_DISCOVERY_CASH=%g%s is not available with the %s backend: "
                       "URLs discovered bring no cash", self.discovery_cash,
                       "" if chosen else " (the default for a site crawl)",
                       self.backend)
        if self.engine.priority_horizon != self.priority_horizon:
            # A store that cannot order by priority (Redis) keeps the cash order.
            self.stats.set_value("aopic/priority_horizon_ignored", 1)
            logger.warning("aopic: AOPIC_PRIORITY_HORIZON=%g is not available with the %s backend: "
                           "pending URLs stay in cash order", self.priority_horizon, self.backend)
        if self.store.priority_fallbacks:  # logged by the store that found them
            self.stats.set_value("aopic/priority_fallback", self.store.priority_fallbacks)
        self.ledger = Ledger(self.engine, self.stats)
        self.probe.attach()
        offsite = OffsiteLinkFilter.for_middlewares(self.probe.downloader_middlewares(), spider)
        self._offsite = offsite
        if offsite is not None:
            self.link_filters.register(offsite, first=True)  # the cheapest and most common refusal
            self._scrapy_parses = scrapy_urlparse_cache()
        if isinstance(self.store, JournaledStore):
            if self.store.requeued_on_open:
                self.stats.inc_value("aopic/resumed_in_flight", self.store.requeued_on_open)
            if self.store.entries_lost:
                self.stats.set_value("aopic/jobdir/entries_lost", self.store.entries_lost)
            if self.store.recovered:
                self.stats.set_value(f"aopic/jobdir/recovered/{self.store.recovered}", 1)
            if self.store.records_lost:
                self.stats.set_value("aopic/jobdir/records_lost", self.store.records_lost)
            if self.store.memory.unused_seqs:  # logged by the store
                self.stats.set_value("aopic/jobdir/unused_seqs", self.store.memory.unused_seqs)
            if self.store.header_lost:
                self.stats.set_value("aopic/jobdir/header_lost", 1)
            if self.store.cash_lost:
                self.stats.set_value("aopic/jobdir/cash_lost", self.store.cash_lost)
            if self.store.discovery_cash_change:  # logged by the store
                self.stats.set_value("aopic/jobdir/discovery_cash_changed", 1)
        self._load_lane()
        if self.jobdir and getattr(spider, "name", None):
            from ..commands import remember_jobdir  # `scrapy aopic top SPIDER` finds it

            try:
                remember_jobdir(spider.name, self.jobdir)
            except OSError as exc:
                logger.info("aopic: could not note the JOBDIR for scrapy aopic: %s", exc)

    def _build_store(self, spider) -> FrontierStore:
        if self.backend == "memory":
            if self.jobdir:
                self._portable = True
                return JournaledStore(
                    Path(self.jobdir, "aopic"), self.lambda_targets, sync=self.journal_sync,
                    roll_entries=self.journal_roll, recovery=self.jobdir_recovery,
                    priority_horizon=self.priority_horizon,
                )
            return MemoryStore(self.lambda_targets, priority_horizon=self.priority_horizon)
        if self.backend == "redis":
            from ..store.redis import RedisStore

            self._portable = True
            targets = self.lambda_targets
            if targets == "pending-cash":
                # The Redis store's Lua pays every pending URL alike; paying
                # by cash there is not implemented (docs/concepts.rst).
                targets = "pending"
                self.stats.set_value("aopic/lambda_targets_fallback", 1)
                chosen = self.crawler.settings.get("AOPIC_LAMBDA_TARGETS") is not None
                logger.log(
                    logging.WARNING if chosen else logging.INFO,
                    "aopic: AOPIC_LAMBDA_TARGETS='pending-cash'%s is not available with the Redis "
                    "backend: lambda pays every pending URL alike ('pending')",
                    "" if chosen else " (the default)",
                )
            if aopic_settings.get_bool(self.crawler.settings, "AOPIC_REDIS_CLUSTER"):
                from ..store.redis.cluster import RedisClusterStore

                return RedisClusterStore.from_crawler(self.crawler, spider, lambda_targets=targets)
            return RedisStore.from_crawler(self.crawler, spider, lambda_targets=targets)
        raise ValueError(f"AOPIC_BACKEND must be 'memory' or 'redis', got {self.backend!r}")

    def close(self, reason: str) -> None:
        """Give in-flight leases back, record the final figures, export, close."""
        if self.engine is None:
            return
        if self.lost is not None:
            # The store is gone: nothing to give back to, no books to check.
            logger.error("aopic: the frontier's books were not checked at close: %s%s", self.lost,
                         f"; {len(self.held)} writes held for it were not made" if self.held else "")
            self.store.close()
            return
        try:
            # Closing: waiting for the store is right now (the writes held
            # while it stalled are made, retried for AOPIC_REDIS_RETRY_TIMEOUT).
            self.store.fail_fast = False
            self.store.end_stall()
            self.held.replay()
            for lease in self.ledger.open_leases():
                self.ledger.requeue(lease, "requeued_at_close")
        except StoreUnavailable as exc:
            self.store_lost(exc)
            self.store.close()
            return
        self._save_lane()
        try:
            self.update_stats()
            self._check_books()
        except StoreUnavailable as exc:  # FrontierCorrupt: a total or record the recount refused
            self.store_lost(exc)
            logger.error("aopic: the frontier's books were not checked at close: %s", self.lost)
            self.store.close()
            return
        if self.export_path:
            path = self.export_importance(self.export_path)
            logger.info("aopic: importance ranking written to %s", path)
        self.crawler.signals.send_catch_log(aopic_signals.frontier_closing, frontier=self, reason=reason)
        self.store.close()

    def _check_books(self) -> None:
        """Recount the books (``aopic/conservation_error``), unless the
        store leaves that to another worker of a shared crawl."""
        if not self.store.claim_books_check():
            self.stats.set_value("aopic/books_left_to_last_worker", 1)
            logger.info(
                "aopic: the books are recounted by the crawl's last worker, not at this "
                "worker's close (another worker holds leases or is recounting); "
                "`scrapy aopic stats` recounts them on demand"
            )
            return
        error = self.engine.conservation_error()
        injected = self.engine.totals().injected
        self.stats.set_value("aopic/conservation_error", error)
        self._count_corrupt()  # the recount names what it could not sum
        if isinstance(getattr(self.store, "rolled_back", None), list):
            # a sharded store: what its recount found between the shards
            # (the part of the error a failover that lost writes made)
            self.stats.set_value("aopic/cluster/transit_error", self.store.transit_error)
            self.stats.set_value("aopic/cluster/shards_rolled_back", len(self.store.rolled_back))
            credits, cash = self.store.alias_to_lambda
            self.stats.set_value("aopic/cluster/alias_credits_to_lambda", credits)
            self.stats.set_value("aopic/cluster/alias_cash_to_lambda", cash)
        if error > 1e-9 * max(injected, 1.0):
            logger.error("aopic: cash conservation broken: error %.3g of %.6g injected", error, injected)

    # -- keys -----------------------------------------------------------------

    @staticmethod
    def host_of(request: Request) -> str:
        """The politeness key of ``request``: Scrapy's download slot key."""
        slot = request.meta.get(DOWNLOAD_SLOT)
        if slot is not None:
            return slot
        return urlparse_cached(request).hostname or ""

    def _drop_scrapy_slot(self, meta: dict, origin: str | None) -> None:
        """Remove from ``meta`` a ``download_slot`` that Scrapy's downloader
        wrote on the request it was copied from (``origin``: that request's
        URL): it is Scrapy's bookkeeping for that fetch, not the spider's
        choice for this one. A slot the spider set is kept."""
        slot = meta.get(DOWNLOAD_SLOT)
        if slot is not None and origin is not None and self.probe.is_default_slot(slot, origin):
            del meta[DOWNLOAD_SLOT]

    def _request_data(self, request: Request, key: str) -> Any:
        return encode_request(request, key, self.spider, portable=self._portable)

    #: Refused canonical URLs remembered (as hashes, about 60 bytes each)
    #: so that ``aopic/refused/<reason>`` counts each once; the memo is
    #: emptied when full.
    REFUSED_MEMO_SIZE = 1 << 20

    def _count_refusal(self, reason: str, key: str | None = None) -> None:
        """Count a refusal: every link occurrence in ``aopic/refused_links``,
        each distinct URL (``key``: canonical, or as written when it has
        none) once in ``aopic/refused/<reason>``."""
        self.stats.inc_value("aopic/refused_links")
        if key is not None:
            seen = self._refused_keys
            digest = hash(key)
            if digest in seen:
                return
            if len(seen) >= self.REFUSED_MEMO_SIZE:
                seen.clear()
            seen.add(digest)
        self.stats.inc_value(f"aopic/refused/{reason}")

    # -- requests in ------------------------------------------------------------

    def enqueue(self, request: Request) -> bool:
        """A request reaches the scheduler. ``False``: it is not queued
        (a duplicate, refused or unfetchable); any cash it stood for is
        settled, never lost.

        What each kind of request means is in ``docs/concepts.rst``
        ("Your spider's requests"): links are accounts ordered by cash;
        non-links, ``dont_filter`` requests for known URLs and positive
        priorities go through the direct lane."""
        if self.ledger.gone:
            self.ledger.sweep()
        meta = request.meta
        copied = LEASE in meta  # a request made from one this frontier handed out
        lease = self.ledger.lease_of(request) if copied else None
        if lease is not None:
            return self._enqueue_follow_up(request, lease)
        if meta.get(REGISTERED):
            # A link of a visited page: its account exists already.
            del meta[REGISTERED]
            if request.priority > 0 and not request.dont_filter:
                return self._to_lane(request, meta.get(KEY))
            return True
        if copied:
            self._drop_scrapy_slot(meta, meta.get(KEY))
        _forget_issued(meta)  # copied from another request: not this one's
        if meta.get(LINK) is False:
            return self._to_lane(request, None)  # any URL Scrapy may download (data:, file:...)
        key = self.canonicalize(request.url)
        if key is None:
            if meta.get("is_start_request") and not copied:
                return self._schedule_without_account(request)
            self._refuse_unfetchable(request.url)
            return False
        depth = meta.get("depth", 0)
        reason = self.link_filters.refusal(request.url, key, request, depth)
        if reason:
            self._count_refusal(reason, key)
            return False
        try:
            data = self._request_data(request, key)
        except UnserializableRequest as exc:
            return self._hold_unserializable(request, exc)
        link = Link(key, self.host_of(request), depth, data)
        # A copy of a handed-out start request (an errback's retry) carries
        # is_start_request along: it is not a seed.
        if meta.get("is_start_request") and not copied:
            if self.engine.add_seed(link):
                self.stats.inc_value("aopic/seeds")
                self.stats.inc_value("aopic/cash_injected", self.seed_cash)
                return self._to_lane(request, key) if request.priority > 0 else True
            if not (self.refetch_seeds and request.dont_filter):
                # Scrapy's default start requests carry dont_filter=True: a
                # resumed or shared crawl would fetch every seed again.
                self.stats.inc_value("aopic/seeds_known")
                return False
            return self._to_lane(request, None)
        before = self.engine.discover(link)
        if before is None:
            return self._to_lane(request, key) if request.priority > 0 else True
        if request.dont_filter:
            return self._to_lane(request, None)  # fetched again, without cash
        if request.priority > 0:
            return self._to_lane(request, key)
        self.stats.inc_value("aopic/duplicates_merged")
        return False

    def _schedule_without_account(self, request: Request) -> bool:
        """A start request whose URL has no canonical form (``data:``,
        ``file:``, ``ftp:``, ``s3:``...): Scrapy may download it, the
        frontier cannot give it an account. It is fetched as it is from the
        direct lane, holding no cash (no seed cash is injected for it, so
        the books are unaffected; its page's links get no share from it)."""
        if not self._to_lane(request, None):
            return False
        self.stats.inc_value("aopic/lane/not_http")
        self._warn_once(
            "not_http", "aopic: %s has no canonical http(s) URL: fetched as it is from the direct lane, "
            "without cash (its links get no share from it; stat aopic/lane/not_http; said once)",
            request, level=logging.INFO,
        )
        return True

    def _refuse_unfetchable(self, url: str) -> None:
        """A link whose URL has no canonical http(s) form: not followed."""
        self._count_refusal("unfetchable_url", url)
        self._warn_once(
            "unfetchable_link", "aopic: links without a canonical http(s) URL (%s) are not followed "
            "(stat aopic/refused/unfetchable_url; a request with meta={'aopic_link': False} is "
            "fetched as it is; said once)", url[:200],
        )

    def _to_lane(self, request: Request, key: str | None) -> bool:
        """Queue ``request`` in the direct lane. With ``key``, the lane takes
        that account's lease when it hands the request out (a link fetched
        early); without, the request is fetched as it is, holding no cash."""
        if key is None and not request.dont_filter:
            fingerprint = self.crawler.request_fingerprinter.fingerprint(request)
            if fingerprint in self._lane_seen:
                self.stats.inc_value("aopic/lane/duplicates")
                return False
            self._lane_seen.add(fingerprint)
        self.lane.push(request, self.host_of(request), key)
        self.stats.inc_value("aopic/lane/enqueued")
        return True

    def _hold_unserializable(self, request: Request, exc: Exception) -> bool:
        """A request a persistent store cannot hold unchanged: kept in memory
        (the direct lane), as Scrapy's scheduler does; lost if the process is
        killed."""
        self.stats.inc_value("scheduler/unserializable")
        self._warn_once(
            "unserializable",
            "aopic: %s cannot be stored as data (%s); it is kept in memory and "
            "fetched from the direct lane, and is lost if the crawl is killed "
            "(stat scheduler/unserializable; said once)",
            request, exc,
        )
        self.lane.push(request, self.host_of(request), None)
        self.stats.inc_value("aopic/lane/enqueued")
        return True

    def _save_lane(self) -> None:
        """With ``JOBDIR``, write what is still in the direct lane, so that a
        resumed crawl fetches it (requests that cannot be written as data
        are counted and named in the log)."""
        if not self.jobdir or self.backend != "memory" or not len(self.lane):
            return
        path = Path(self.jobdir, LANE_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        saved = lost = 0
        with tmp.open("w", encoding="utf-8") as out:
            for entry in self.lane.drain():
                try:
                    data = encode_request(entry.request, entry.key or "", self.spider, portable=True)
                except UnserializableRequest as exc:
                    lost += 1
                    logger.warning("aopic: %s not saved for the next run: %s", entry.request, exc)
                    continue
                record = {"url": entry.request.url, "key": entry.key, "host": entry.host, "request": data}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                saved += 1
        os.replace(tmp, path)
        self.stats.set_value("aopic/lane/saved", saved)
        if lost:
            self.stats.set_value("aopic/lane/lost", lost)

    def _load_lane(self) -> None:
        """Read back the direct lane a previous run saved (checked: a line
        that is not a request is skipped with a warning)."""
        if not self.jobdir or self.backend != "memory":
            return
        path = Path(self.jobdir, LANE_FILE)
        if not path.exists():
            return
        loaded = 0
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    url, key, host = record["url"], record["key"], record["host"]
                    if not isinstance(url, str) or not isinstance(host, str) or not isinstance(key, (str, type(None))):
                        raise ValueError("bad field types")
                    # A request without an account is one the spider made (it
                    # may be data:, file:...); a link's must be http(s).
                    request = decode_request(url, record["request"], self.spider, self.stored_policy,
                                             any_scheme=key is None)
                except (ValueError, KeyError, TypeError) as exc:
                    self.stats.inc_value("aopic/lane/unreadable")
                    logger.warning("aopic: %s line %d skipped: %s", path, number, exc)
                    continue
                self.lane.push(request, host, key)
                loaded += 1
        path.unlink()
        if loaded:
            self.stats.set_value("aopic/lane/resumed", loaded)

    def store_lost(self, exc: StoreUnavailable) -> None:
        """The shared store is gone: close the spider with a reason that
        says so (``frontier_lost`` or ``redis_unavailable``), never let the
        crawl end as ``finished``."""
        if self.lost is not None:
            return
        if isinstance(exc, FrontierCorrupt):
            self.lost = "frontier_corrupt"
        else:
            self.lost = "frontier_lost" if isinstance(exc, FrontierLost) else "redis_unavailable"
        self.stats.set_value(f"aopic/{self.lost}", 1)
        logger.error("aopic: %s; closing the spider (reason %s)", exc, self.lost)
        try:
            close_spider(self.crawler, self.lost)
        except (AttributeError, RuntimeError):  # no engine: a scheduler used on its own
            pass

    def _warn_once(self, topic: str, message: str, *args: Any, level: int = logging.WARNING) -> None:
        if topic not in self._warned:
            self._warned.add(topic)
            logger.log(level, message, *args)

    def _enqueue_follow_up(self, request: Request, lease: Lease) -> bool:
        """A request derived from a leased one (redirect, retry, a
        middleware's replacement) carries the lease's cash to its URL."""
        self._drop_scrapy_slot(request.meta, lease.url)
        key = self.canonicalize(request.url)
        if key is None:
            self.ledger.fail(lease, "unfetchable_redirect")
            return False
        try:
            data = self._request_data(request, key)
        except UnserializableRequest as exc:
            # The follow-up goes on from memory, without the lease's cash.
            self.ledger.fail(lease, "unserializable_follow_up")
            _forget_issued(request.meta)
            return self._hold_unserializable(request, exc)
        target = Link(key, self.host_of(request), lease.depth, data)
        if key == lease.url:
            # A retry: queue the URL again with the new request, which carries
            # the retry count (the stored one would retry forever).
            self.ledger.transfer(lease, target, "retried")
            return True
        reason = self.link_filters.refusal(request.url, key, request, lease.depth)
        if reason:
            self._count_refusal(reason, key)
            self.ledger.fail(lease, "refused_redirect")
            return False
        before = self.store.get(key)
        self.ledger.transfer(lease, target, "redirected")
        if before is None:
            return True  # the transfer opened a pending account for the target
        self.stats.inc_value("aopic/redirects_to_known")
        return False

    # -- requests out -----------------------------------------------------------

    def next_request(self) -> Request | None:
        """The next request to fetch: from the direct lane while it holds
        less than its share (``AOPIC_DIRECT_LANE_SHARE``) of what was handed
        out, else the richest pending URL whose host can be fetched now,
        leased; the lane again when nothing cash-ordered can go."""
        if self.ledger.gone:
            self.ledger.sweep()
        lane_first = len(self.lane) and self._handed_out_lane < self.lane_share * (self._handed_out + 1)
        request = self._next_from_lane() if lane_first else None
        if request is None:
            refused = 0
            while True:
                try:
                    request = self._next_by_cash()
                except UndecodableRequest:
                    continue  # settled (its cash went to lambda): try the next URL
                # Bounded per call so one call cannot sweep a whole host's
                # backlog; past the bound the download-time check refuses.
                if request is not None and refused < MAX_REFUSED_PER_CALL and self._refused_at_lease(request):
                    refused += 1
                    continue
                break
        if request is None and len(self.lane) and not lane_first:
            request = self._next_from_lane()
        if request is not None:
            self._handed_out += 1
            self.probe.handed_out(request, self.host_of(request))
        return request

    def _refused_at_lease(self, request: Request) -> bool:
        for refuse in self.lease_refusals:
            if refuse(request):
                return True
        return False

    def _next_from_lane(self) -> Request | None:
        while True:
            entry = self.lane.pop(self.probe.host_ready)
            if entry is None:
                return None
            request = self._lane_request(entry)
            if request is not None:
                self._handed_out_lane += 1
                self.stats.inc_value("aopic/lane/dequeued")
                return request

    def _lane_request(self, entry: LaneEntry) -> Request | None:
        """The request of a lane entry, holding its account's lease when the
        account is pending; ``None`` for a link fetched meanwhile."""
        request = entry.request
        if entry.key is not None:
            try:
                lease = self.store.take(entry.key)
            except StoreStalled:
                self.lane.push_front(entry)  # not taken: its turn comes again
                raise
            if lease is not None:
                self._mark(request, lease)
                return request
            if not request.dont_filter:
                self.stats.inc_value("aopic/duplicates_merged")
                return None
        _forget_issued(request.meta)
        return request

    def _next_by_cash(self) -> Request | None:
        """The richest pending URL whose host can be fetched now, leased."""
        if self._shared:
            return self._next_request_shared()
        if self._upkeep_due:
            # Once per request handed out, not per call: the engine asks
            # again and again while the download slots are full, and nothing
            # has changed between those calls that a revisit would fix.
            self._upkeep_due = False
            upkeep = self.engine.upkeep()  # lambda's visit, virtual revisits
            if upkeep.lambda_visits:
                self.stats.inc_value("aopic/lambda_visits", upkeep.lambda_visits)
                self.stats.inc_value("aopic/lambda_paid", upkeep.lambda_paid)
            if upkeep.revisits:
                self.stats.inc_value("aopic/virtual_revisits", upkeep.revisits)
        lease = None
        if self.recrawl is not None:  # pages due for a revisit go back in first
            lease = self.recrawl.next_lease(self.store, self.probe.host_ready)
        if lease is None:
            min_share = self._min_share()
            lease = self.store.pop(self.probe.host_ready, min_share)
            if lease is not None and min_share > 0 and self.page_budget and not self._within_budget(lease):
                # Not among the pages the budget can still pay for: back in
                # its place (nothing changed: no lease was handed out), and
                # the free slot waits as it does under the min-share rule.
                self.store.settle_requeue(lease.url, lease.lease_id)
                self.stats.inc_value("aopic/spare_beyond_budget")
                return None
        if lease is None:
            return None
        self._upkeep_due = True
        return self._hand_out(lease)

    #: Pages left in the budget below which :meth:`_within_budget` ranks
    #: (its cost grows with them; earlier, a URL a free slot can take is
    #: almost always among them).
    BUDGET_RANKS = 4096

    def _within_budget(self, lease: Lease) -> bool:
        """Whether ``lease`` ranks among the first ``left`` pending URLs in
        the store's order (by cash, or by priority: ``Lease.order``),
        ``left`` being the pages ``CLOSESPIDER_PAGECOUNT`` still allows (responses received and requests in flight deducted): in
        cash order nothing poorer is fetched before the budget runs out, so
        a free slot given to it spends a page of the budget on a URL the
        crawl would never reach (a link farm's pages, late in a crawl whose
        real pages are all poorer than the richest by less than
        ``AOPIC_MIN_CASH_SHARE``). The rank's cash is recomputed when the
        pages left moved or after 16 checks."""
        received = self.stats.get_value("response_received_count", 0)
        left = self.page_budget - received - len(self.ledger)
        if left > self.BUDGET_RANKS or 0 < left and self.store.pending_count() < left:
            return True
        top = self.store.order_at_rank(1)
        if top is None or lease.order is None or lease.order >= top:
            return True  # the first URL: what the budget buys next (as ever, also past its end)
        if left <= 0:
            # The budget is spent once what is in flight comes back (the
            # spider is closing): a free slot below the richest would only
            # add fetches past it.
            return False
        cut = self._budget_cut
        if cut is None or cut[1] >= 16 or abs(cut[0] - left) > max(1, left // 32):
            order = self.store.order_at_rank(left)
            if order is None:
                return True  # (a store that cannot rank: the memory stores can)
            cut = (left, 0, order)
        self._budget_cut = (cut[0], cut[1] + 1, cut[2])
        return lease.order >= cut[2]

    def _min_share(self) -> float:
        """The min-share rule now: ``AOPIC_MIN_CASH_SHARE`` while waiting
        for a busy host can pay (some full slot has no delay: its next fetch
        competes with a poor one for the process), else
        ``AOPIC_MIN_CASH_SHARE_DELAYED`` (every full slot is throttled by a
        delay and frees on its own clock: a free slot left idle would be a
        fetch lost for good)."""
        if self.min_share == self.min_share_delayed or self.probe.busy_unthrottled():
            return self.min_share
        return self.min_share_delayed

    def _next_request_shared(self) -> Request | None:
        """:meth:`next_request` on a shared store in one round trip: lambda's
        visit when due, expired leases reclaimed, the hosts whose download
        slot is full here skipped, the cross-worker host cap, the lease.
        (The store has no link memory, so there are no virtual revisits; a
        re-crawl hook, if on, costs its own round trips.)"""
        store = self.store
        lease = None
        if self.recrawl is not None:  # pages due for a revisit (this worker's plan) first
            lease = self.recrawl.next_lease(store, self.probe.host_ready)
        if lease is None:
            lease = store.pop(self.probe.host_ready, self._min_share(), busy=self.probe.busy_hosts(),
                              visit_lambda=True)
            paid = store.last_lambda_payout
            if paid:
                self.stats.inc_value("aopic/lambda_visits")
                self.stats.inc_value("aopic/lambda_paid", paid)
            if store.last_reclaimed:
                self.stats.inc_value("aopic/leases_reclaimed", store.last_reclaimed)
        self.starved = lease is None
        if lease is None:
            return None
        return self._hand_out(lease)

    def _hand_out(self, lease: Lease) -> Request:
        """The request of ``lease``, marked with it, its URL and its cash.
        Raises :class:`UndecodableRequest` (after settling the lease) when
        the stored request cannot be read back."""
        try:
            request = decode_request(lease.url, lease.request, self.spider, self.stored_policy)
        except UndecodableRequest as exc:
            self._fail_lease(lease, "undecodable")
            logger.warning("aopic: %s; its cash goes to lambda (stat aopic/failed/undecodable)", exc)
            raise
        self._mark(request, lease)
        return request

    def _mark(self, request: Request, lease: Lease) -> None:
        meta = request.meta
        _forget_issued(meta)
        meta[LEASE] = lease.lease_id
        meta[KEY] = lease.url
        meta[CASH] = lease.cash
        meta.setdefault("depth", lease.depth)
        self.ledger.open(lease, request)

    def has_pending(self) -> bool:
        # A shared store answers without a round trip after a pop; whether
        # *other* workers still have work is the idle handler's question
        # (see SharedCrawl).
        return len(self.lane) > 0 or self.store.pending_count() > 0

    def __len__(self) -> int:
        return len(self.lane) + self.store.pending_count()

    # -- settling ---------------------------------------------------------------

    def lease_of(self, request: Request) -> Lease | None:
        """The open lease ``request`` holds, if any."""
        return None if self.ledger is None else self.ledger.lease_of(request)

    def fail(self, request: Request, reason: str, *, refuse: bool = False) -> bool:
        """``request`` yielded no page: its cash goes to lambda."""
        lease = self.lease_of(request)
        if lease is None:
            return False
        return self._fail_lease(lease, reason, refuse=refuse)

    def _fail_lease(self, lease: Lease, reason: str, *, refuse: bool = False) -> bool:
        try:
            self.held.run("fail", lambda: self.ledger.fail(lease, reason, refuse=refuse))
        except StoreUnavailable as exc:
            self.store_lost(exc)
            return False
        return True

    def transfer(self, request: Request, target_url: str, stat: str | None = "aliased") -> bool:
        """``request``'s URL is another name of ``target_url`` (canonical):
        its cash, and future credit, go to the target's account."""
        lease = self.lease_of(request)
        if lease is None:
            return False
        target = Link(target_url, self.host_of(request), lease.depth, None)
        self.held.run("transfer", lambda: self.ledger.transfer(lease, target, stat))
        return True

    def refuse_url(self, url: str, host: str, reason: str, depth: int = 0) -> None:
        """Mark canonical ``url`` as never to be fetched (its pending cash
        goes to lambda)."""
        self.held.run("refuse", lambda: self.store.refuse(url, host, depth))
        self._count_refusal(reason, url)

    def visit(self, response: Response, requests: Iterable[Request]) -> list[Request]:
        """:meth:`_visit`, with a store that went away closing the spider
        (the requests then go on to the scheduler, which drops them)."""
        requests = list(requests)
        # Taken now: a held visit is made after the ledger let the lease go.
        lease = self.lease_of(response.request) if response.request is not None else None
        if self.held:
            self.held.hold("visit", lambda: self._visit_later(response, requests, lease))
            return []
        try:
            return self._visit(response, requests, lease)
        except StoreStalled:
            # Nothing was written (a visit is one script): the whole visit,
            # links included, is made when the store answers again.
            self.held.hold("visit", lambda: self._visit_later(response, requests, lease))
            return []
        except StoreUnavailable as exc:
            self.store_lost(exc)
            return requests

    def _visit_later(self, response: Response, requests: list[Request], lease: Lease | None) -> None:
        """A held visit, made: what it passes on is scheduled from here."""
        for request in self._visit(response, requests, lease):
            self.crawler.engine.crawl(request)

    def _visit(self, response: Response, requests: list[Request], lease: Lease | None) -> list[Request]:
        """``response`` was parsed and produced ``requests``.

        Pays the page's cash to its links and lambda, puts the links
        in the frontier, and returns the requests to pass on: links (marked as
        registered), and requests that are not links (``meta["aopic_link"] =
        False``). Refused links are left out.

        Keys the frontier issued to the response's request
        (:data:`ISSUED_META`) are removed from the output first: a spider
        that builds requests with ``meta=response.meta`` copies them, and
        they count only for the request they were issued to. So does the
        ``download_slot`` Scrapy's downloader wrote on the response's
        request (a slot the spider set there is copied as Scrapy would).
        """
        scrapy_slot = response.meta.get(DOWNLOAD_SLOT)
        if scrapy_slot is not None and not self.probe.is_default_slot(scrapy_slot, response.request.url):
            scrapy_slot = None  # the spider's own
        for request in requests:
            meta = request.meta
            _forget_issued(meta)
            if scrapy_slot is not None and meta.get(DOWNLOAD_SLOT) == scrapy_slot:
                del meta[DOWNLOAD_SLOT]
            # What a callback or errback yields is never a start request,
            # whatever meta it copied (a retry of a start request).
            meta.pop("is_start_request", None)
        # Set by the duplicate filter during this fetch (hand-out clears it).
        if response.meta.get(DUPLICATE_OF) and self.duplicate_links != "all":
            return self._duplicate_links(requests, response.meta.get(DUPLICATE_DISTANCE, 0))
        if lease is None:
            return requests  # not fetched through this frontier (or settled)
        if not (200 <= response.status < 300):
            self._fail_lease(lease, f"http_{response.status}")
            return requests
        if not isinstance(response, TextResponse):
            self._fail_lease(lease, "not_text")
            return requests
        depth = lease.depth + 1
        links: list[Link] = []
        passed: list[Request] = []
        # Every link of every page comes through here (about 150 per page on
        # a documentation site): locals instead of attribute look-ups.
        canonicalize = self.canonicalize
        refusal = self.link_filters.refusal
        link_host = self._link_host
        request_data = self._request_data
        # A known URL's stored request is never replaced by a later link's,
        # so only new URLs are encoded (a shared store would cost a round
        # trip to ask: it gets every link's data).
        knows = None if self._shared else self.store.knows
        scrapy_parses, parsed_urls = self._scrapy_parses, self._parsed_urls
        dont_filter_keys: set[str] = set()  # the same dont_filter link twice: two fetches
        for request in requests:
            meta = request.meta
            if meta.get(LINK) is False:
                passed.append(request)
                continue
            url = request.url
            key = canonicalize(url)
            if key is None:
                self._refuse_unfetchable(url)
                continue
            reason = refusal(url, key, request, depth)
            if reason:
                self._count_refusal(reason, key)
                continue
            if knows is not None:
                known = knows(key)
            elif request.dont_filter:
                known = self.store.knows(key)  # a round trip, for dont_filter links only
            else:
                known = False
            if request.dont_filter and (known or key in dont_filter_keys):
                # Fetch it again (the direct lane, at enqueue); it still gets its share.
                links.append(Link(key, link_host(request, meta), depth, None))
                passed.append(request)
                continue
            try:
                data = None if known else request_data(request, key)
            except UnserializableRequest:
                passed.append(request)  # no account: kept in memory at enqueue
                continue
            meta[REGISTERED] = True
            meta[KEY] = key
            links.append(Link(key, link_host(request, meta), depth, data))
            passed.append(request)
            if request.dont_filter:
                dont_filter_keys.add(key)
            elif scrapy_parses is not None and "#" not in url:
                # Scrapy's OffsiteMiddleware parses every scheduled link's URL
                # (``urlparse_cached``: 3-4 microseconds) to ask the rule this
                # link just passed; the parse of an equal URL string is the
                # same value, so a memo per URL gives it, about 0.7. Not for
                # URLs with a fragment: each section of a page is another
                # string (Python's manual: 65,000 memo misses in 96,000
                # links), and Scrapy parses those itself as before.
                parsed = parsed_urls.get(url)
                if parsed is None:
                    parsed = self._parse_url(url)
                scrapy_parses[request] = parsed
        new_links = None
        if self.recrawl is not None:  # a hub's worth is the links it had never shown
            distinct = dict.fromkeys(link.url for link in links)
            new_links = len(distinct) - self.store.count_known(distinct)
        result = self.ledger.visit(lease, links)
        if result is None:
            # The store refused the settlement (a shared lease that expired
            # and went to another worker): no account was made for these
            # links, so they go the whole way through enqueue.
            for request in passed:
                request.meta.pop(REGISTERED, None)
                request.meta.pop(KEY, None)
            self.stats.inc_value("aopic/visit_rejected")
            return passed
        stats = self.stats
        stats.inc_value("aopic/pages_visited")
        stats.inc_value("aopic/cash_to_links", lease.cash - result.lambda_amount)
        stats.inc_value("aopic/cash_to_lambda_tax", result.lambda_amount)
        self.crawler.signals.send_catch_log(
            aopic_signals.page_visited,
            url=lease.url,
            # The links that got a share: distinct, the page itself excluded.
            links=[url for url in dict.fromkeys(link.url for link in links) if url != lease.url],
            lease=lease,
            response=response,
            spider=self.spider,
            new_links=new_links,
        )
        return passed

    #: URLs whose parse is memoized (about 500 bytes each); emptied when full.
    PARSED_URLS = 4096

    def _parse_url(self, url: str) -> ParseResult:
        parsed = urlparse(url)
        if len(self._parsed_urls) >= self.PARSED_URLS:
            self._parsed_urls.clear()
        self._parsed_urls[url] = parsed
        return parsed

    def _duplicate_links(self, requests: list[Request], distance: int) -> list[Request]:
        """The links of a page flagged as a duplicate: its cash went to the
        original, so none is paid here. When its text differs from the
        original's (``distance`` > 0: a merge that may be false), links to
        URLs the frontier does not know are passed on as ordinary requests
        (an account with no cash at enqueue), so a false merge does not lose
        the pages only this page links to; links to known URLs (the
        original's) are dropped. A page with the original's body or words
        (``distance`` 0: a print view, a session-id copy, a calendar's empty
        months) has the original's links: all are dropped, which also keeps
        copy traps from growing. A shared store would cost a round trip per
        link to ask: there every link is passed on and enqueue merges the
        known ones."""
        kept: list[Request] = []
        dropped = passed = 0
        knows = None if self._shared else self.store.knows
        canonicalize = self.canonicalize
        for request in requests:
            if request.meta.get(LINK) is False:
                kept.append(request)
                continue
            if self.duplicate_links == "new" and distance > 0:
                key = canonicalize(request.url)
                if key is not None and (knows is None or not knows(key)):
                    kept.append(request)
                    passed += 1
                    continue
            dropped += 1
        if dropped:
            self.stats.inc_value("aopic/duplicate_links_dropped", dropped)
        if passed:
            self.stats.inc_value("aopic/duplicate_links_passed", passed)
        return kept

    def visit_not_modified(self, request: Request, response: Response) -> bool:
        """A re-crawl answered "304 Not Modified": a visit that found the
        page as it was. Its cash goes to the links it had (remembered, with
        link memory) and lambda; the planner learns there was nothing new."""
        lease = self.lease_of(request)
        if lease is None:
            return False
        links = self.store.remembered_links(lease.url) or []
        if self.ledger.visit(lease, links) is None:
            return False
        self.stats.inc_value("aopic/pages_visited")
        self.crawler.signals.send_catch_log(
            aopic_signals.page_visited,
            url=lease.url,
            links=[link.url for link in links],
            lease=lease,
            response=response,
            spider=self.spider,
            new_links=0,
        )
        return True

    #: scheme://netloc of a link -> its host name (Scrapy's download slot
    #: key), shared by all frontiers: a pure function, bounded.
    _hostnames: dict[str, str] = {}

    @classmethod
    def _link_host(cls, request: Request, meta: dict) -> str:
        """:meth:`host_of` for a page's links, without a full ``urlparse``
        per link (and without caching it on every request): the host name
        depends only on the URL's ``scheme://netloc``, memoized."""
        slot = meta.get(DOWNLOAD_SLOT)
        if slot is not None:
            return slot
        origin = scheme_origin_of(request.url)
        if origin is None:
            return cls.host_of(request)
        host = cls._hostnames.get(origin)
        if host is None:
            host = urlparse(origin).hostname or ""
            if len(cls._hostnames) >= 4096:
                cls._hostnames.clear()
            cls._hostnames[origin] = host
        return host

    def watch_follow_ups(self, key: str, hook: Callable[[Request], None]) -> None:
        """Call ``hook(request)`` whenever a request whose meta holds ``key``
        is scheduled or dropped (Scrapy's ``request_scheduled`` and
        ``request_dropped``): a redirect or a retry that copied the meta of
        a request a component marked. Every link of every page is
        scheduled, and each receiver of a Scrapy signal costs about 3
        microseconds a call (PyDispatcher's ``robustApply``; 0.6 ms a page
        on the Python manual's 200 links a page): the frontier's one
        receiver asks for the components."""
        self._follow_up_hooks.append((key, hook))
        if key not in self._watched:
            self._watched += (key,)

    def _follow_ups(self, request: Request) -> None:
        meta = request.meta
        for key, hook in self._follow_up_hooks:
            if key in meta:
                try:
                    hook(request)
                except Exception:  # as a receiver of its own: logged, the others still called
                    logger.exception("aopic: error in a follow-up hook for %s", request)

    def _on_request_scheduled(self, request: Request) -> None:
        """A request carrying a watched meta key was scheduled."""
        try:
            self._settle_offsite_follow_up(request)
        finally:
            if self._follow_up_hooks:
                self._follow_ups(request)

    def _settle_offsite_follow_up(self, request: Request) -> None:
        """A follow-up of a leased request (a redirect) that Scrapy's offsite
        rule will drop before it reaches the scheduler (Scrapy sends no
        signal for that): its lease is settled now, cash to lambda."""
        if LEASE not in request.meta or self.ledger is None:
            return
        lease = self.ledger.lease_of(request)
        if lease is None or request.dont_filter or request.meta.get("allow_offsite"):
            return
        key = self.canonicalize(request.url)
        if key is None or key == lease.url:
            return
        offsite = self._offsite
        if offsite is not None and offsite(request.url, key, request, lease.depth):
            self._count_refusal("offsite", key)
            self.ledger.fail(lease, "offsite_redirect")

    def _on_request_dropped(self, request: Request, spider=None) -> None:
        """Scrapy dropped ``request`` before it reached the scheduler (e.g.
        its ``OffsiteMiddleware`` refused a redirect to another host): a
        lease it carries is settled now, its cash to lambda."""
        try:
            lease = self.lease_of(request)
            if lease is not None:
                self.ledger.fail(lease, "dropped")
        finally:
            if self._follow_up_hooks:
                self._follow_ups(request)

    def _on_spider_idle(self, spider) -> None:
        """Nothing is downloading or being parsed: every lease still open
        belongs to a request that vanished without reaching a hook (e.g. a
        downloader middleware raised in ``process_response``). Its cash goes
        to lambda so that the books stay exact."""
        if self.ledger is None or not len(self.ledger):
            return
        self.ledger.sweep()
        for lease in self.ledger.open_leases():
            self.ledger.vanished(lease)

    def settle_unheld_leases(self) -> int:
        """Settle as vanished the leases whose requests nothing in Scrapy
        holds any more, seen so at two calls in a row (a response between
        the downloader and the scraper is in neither for a moment); returns
        how many. For a shared crawl while it has nothing to hand out: such a
        lease counts against its host's cap across workers, and the engine
        never goes idle (URLs are pending), so without this a request lost
        in a middleware (e.g. Scrapy's redirect middleware raising on
        ``Location: javascript:...``) held its host for the lease timeout."""
        ledger = self.ledger
        if ledger is None or not len(ledger) or not self.probe.holds_no_request():
            self._unheld = None
            return 0
        if ledger.gone:
            ledger.sweep()
        leases = ledger.open_leases()
        seen = frozenset(lease.lease_id for lease in leases)
        if seen != self._unheld:
            self._unheld = seen or None
            return 0
        self._unheld = None
        for lease in leases:
            ledger.vanished(lease)
        return len(leases)

    # -- figures ------------------------------------------------------------------

    def update_stats(self) -> None:
        """Set the gauges (sizes, lambda, convergence) in ``crawler.stats``."""
        t = self.engine.totals()
        stats = self.stats
        stats.set_value("aopic/frontier_size", t.pending)
        stats.set_value("aopic/known_urls", t.known)
        stats.set_value("aopic/lambda_cash", t.lambda_cash)
        stats.set_value("aopic/history_sum", t.history_sum)
        stats.set_value("aopic/in_flight_cash", t.in_flight)
        stats.set_value("aopic/cash_injected_total", t.injected)
        self._count_corrupt()

    def _count_corrupt(self) -> None:
        """``aopic/redis_corrupt``: records in Redis this crawl's store
        skipped as not its own (each named in a warning when met)."""
        corrupt = getattr(self.store, "corrupt_seen", 0)
        if corrupt:
            self.stats.set_value("aopic/redis_corrupt", corrupt)

    def export_importance(self, path: str | os.PathLike) -> Path:
        """Write the importance ranking as JSON Lines, most important first."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            for page in self.engine.ranking():
                out.write(json.dumps(export_record(page), ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        return path


def export_record(page: RankedPage) -> dict:
    """One line of the importance export (``AOPIC_EXPORT_IMPORTANCE``,
    ``scrapy aopic export``)."""
    return {
        "url": page.url,
        "importance": page.importance,
        "cash": page.cash,
        "history": page.history,
        "visits": page.visits,
        "depth": page.depth,
        "state": STATE_NAMES.get(page.state, str(page.state)),
    }
