"""The AOPIC scheduler: Scrapy asks it for the richest page to fetch next."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import CloseSpider, DontCloseSpider

from . import settings as aopic_settings
from . import signals as aopic_signals
from .compat import call_later, close_spider_when_running, mark_crawl_failed
from .frontier import Frontier
from .meta import DOWNLOAD_SLOT, REGISTERED
from .store.base import StoreStalled, StoreUnavailable
from .store.journal import JobdirError, JobdirInUse
from .frontier.requestcodec import DEFAULT_POLICY, MAX_BYTES as MAX_REQUEST_BYTES, TRANSIENT_META, StoredRequestPolicy

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class AopicScheduler(BaseScheduler):
    """A Scrapy scheduler that orders requests by AOPIC cash.

    ``next_request`` hands out the pending URL with the most cash among the
    hosts whose download slot has room, in O(log n) however many hosts are
    queued (lambda is visited first when it is the richest page).
    ``enqueue_request`` never silently drops a URL that is already known: the
    request merges into that URL's account (the frontier is the dupe filter;
    ``dont_filter=True`` requests are queued again). With ``JOBDIR`` the
    frontier is journaled and survives even ``SIGKILL``; with
    ``AOPIC_BACKEND = "redis"`` it is shared by every process of the crawl
    (see :class:`SharedCrawl` for what a worker does besides).

    Cash is the priority: a negative ``Request.priority`` (and so
    ``DEPTH_PRIORITY``) does not change the order, a positive one sends the
    request through the direct lane, ahead of the cash order (see
    :mod:`scrapy_aopic.frontier.lane`). Scrapy settings of the scheduler it
    replaces (:data:`REPLACED_SETTINGS`) are not used: each one a project
    sets is named in one WARNING at start and counted in
    ``aopic/ignored_setting/<NAME>``.
    """

    def __init__(self, frontier: Frontier, crawler: Crawler | None = None):
        self.frontier = frontier
        self.crawler = crawler
        self.stats = crawler.stats if crawler is not None else None
        # Bound once: a stats method look-up costs more than the count
        # itself (Scrapy >= 2.14 wraps each one), twice per request in and out.
        self._inc_stat = self.stats.inc_value if self.stats is not None else None
        self.spider: Spider | None = None
        #: the Redis backend's cross-worker duties, while the spider is open
        self.shared: SharedCrawl | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicScheduler:
        warn_replaced_settings(crawler)
        return cls(Frontier.from_crawler(crawler), crawler)

    def open(self, spider: Spider) -> None:
        self.spider = spider
        try:
            self.frontier.open(spider)
        except JobdirError as exc:
            self._refuse_jobdir(exc)
            return None
        if self.crawler is not None:
            warn_scrapy_queue(self.crawler)
        if self.frontier.shared and self.crawler is not None:
            self.shared = SharedCrawl(self.crawler, self.frontier, spider)
            self.shared.start()
        return None

    def _refuse_jobdir(self, error: JobdirError) -> None:
        """A ``JOBDIR`` this crawl cannot use (damaged, or held by another
        process): one ERROR that names the file and the way out, then a
        clean close with reason ``jobdir_damaged`` or ``jobdir_in_use`` and
        a non-zero exit status.

        Raising from :meth:`open` would leave Scrapy half-open: its cleanup
        then fails in turn (scraper, core stats, spider state), each with a
        traceback after the one message that matters. So the frontier stays
        closed (``lost``: nothing queued, nothing handed out), the spider
        opens and is closed as soon as the engine runs, and the crawl is
        marked as failed to start."""
        reason = "jobdir_in_use" if isinstance(error, JobdirInUse) else "jobdir_damaged"
        self.frontier.lost = reason
        logger.error("%s", error)
        if self.crawler is None:  # a scheduler used on its own: the caller sees the state
            return
        self.crawler.stats.set_value(f"aopic/{reason}", 1)
        crawler = self.crawler
        crawler.signals.send_catch_log(aopic_signals.jobdir_refused, reason=reason)
        crawler.signals.connect(lambda: mark_crawl_failed(crawler), signal=signals.engine_stopped, weak=False)
        crawler.signals.connect(_close_idle(reason), signal=signals.spider_idle, weak=False)
        call_later(0, close_spider_when_running, crawler, reason)

    def close(self, reason: str) -> None:
        if self.shared is not None:
            self.shared.stop()
        self.frontier.close(reason)
        return None

    def has_pending_requests(self) -> bool:
        if self.frontier.lost is not None:
            return False
        try:
            return self.frontier.has_pending()
        except StoreStalled:
            return True  # unknown until the store answers: keep the engine asking
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            return False

    def enqueue_request(self, request: Request) -> bool:
        registered = request.meta.get(REGISTERED)
        if self.frontier.lost is not None:
            return False
        try:
            if self.frontier.held:
                raise StoreStalled("writes held before this one")
            queued = self.frontier.enqueue(request)
        except StoreStalled:
            # Enqueued when the store answers again, in order (nothing of
            # this call was written: each path writes in one store call).
            self.frontier.held.hold("enqueue", lambda: self._enqueue_held(request))
            queued = True
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            return False
        # Links were put in the frontier (or merged) when their page was
        # visited; count only requests this call queued.
        if queued and not registered and self._inc_stat is not None:
            self._inc_stat("scheduler/enqueued/aopic")
            self._inc_stat("scheduler/enqueued")
        return queued

    def next_request(self) -> Request | None:
        if self.frontier.lost is not None:
            return None
        try:
            request = self.frontier.next_request()
        except StoreStalled:
            return None  # nothing to hand out until the store answers
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            return None
        if request is not None:
            if self.shared is not None:
                self.shared.idle_since = None
            if self._inc_stat is not None:
                self._inc_stat("scheduler/dequeued/aopic")
                self._inc_stat("scheduler/dequeued")
        return request

    def __len__(self) -> int:
        if self.frontier.lost is not None:
            return 0
        try:
            return len(self.frontier)
        except StoreStalled:
            return len(self.frontier.held)
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            return 0

    def _enqueue_held(self, request: Request) -> None:
        """A request held while the store stalled, enqueued now (what the
        frontier does with it is counted by the frontier, as at once)."""
        self.frontier.enqueue(request)


def _close_idle(reason: str) -> Callable[..., None]:
    """A spider_idle handler closing the spider with ``reason``: the spider
    goes idle at once (nothing is queued, each start request is refused),
    maybe before :func:`~scrapy_aopic.compat.close_spider_when_running` sees the engine run, and
    would close as ``finished``."""

    def close(spider: Spider | None = None) -> None:
        raise CloseSpider(reason)

    return close


#: Scrapy settings of its own scheduler that mean nothing to this one: name
#: -> why (the value the frontier uses instead).
REPLACED_SETTINGS = {
    "DUPEFILTER_CLASS": "the frontier deduplicates by canonical URL (AOPIC_CANONICAL_*); "
                        "a custom duplicate filter is not consulted",
    "DEPTH_PRIORITY": "cash is the priority; limit depth with DEPTH_LIMIT or AOPIC_TRAP_MAX_HOPS",
    "SCHEDULER_PRIORITY_QUEUE": "the frontier orders by cash",
    "SCHEDULER_DISK_QUEUE": "the frontier keeps its own JOBDIR journal",
    "SCHEDULER_MEMORY_QUEUE": "the frontier keeps its own queues",
    "SCHEDULER_START_MEMORY_QUEUE": "start requests are ordered by their cash like every request",
    "SCHEDULER_START_DISK_QUEUE": "start requests are ordered by their cash like every request",
}


def warn_replaced_settings(crawler: Crawler) -> None:
    """One WARNING naming every replaced scheduler setting the project set."""
    from scrapy.settings import SETTINGS_PRIORITIES, default_settings

    settings = crawler.settings
    ignored = []
    for name, why in REPLACED_SETTINGS.items():
        # None is a meaningful value for some (Scrapy's start queues: "share
        # the other queues"), so "set" means set above Scrapy's defaults.
        priority = settings.getpriority(name)
        value = settings.get(name)
        if priority is None or priority <= SETTINGS_PRIORITIES["default"]:
            continue
        if value == getattr(default_settings, name, None):
            continue
        ignored.append(f"{name}={value!r} ({why})")
        crawler.stats.set_value(f"aopic/ignored_setting/{name}", 1)
    if ignored:
        logger.warning("aopic: the AOPIC scheduler does not use these settings: %s", "; ".join(ignored))


def warn_scrapy_queue(crawler: Crawler) -> None:
    """One WARNING when ``JOBDIR`` holds requests queued by Scrapy's own
    scheduler (``requests.queue``): the frontier does not read them, so
    they are fetched only if the spider yields them again."""
    jobdir = crawler.settings.get("JOBDIR")
    if not jobdir:
        return
    queue_dir = os.path.join(jobdir, "requests.queue")
    if not os.path.isdir(queue_dir) or not os.listdir(queue_dir):
        return
    crawler.stats.set_value("aopic/ignored_scrapy_queue", 1)
    logger.warning(
        "aopic: %s holds requests queued by Scrapy's own scheduler; the AOPIC scheduler "
        "does not read them (they are fetched only if the spider yields them again). "
        "Move the directory away to silence this.", queue_dir)


# -- the Redis backend: one crawl, many workers -----------------------------------------


def _setting_or_none(settings: Any, name: str) -> Any:
    """``name``'s value, where an explicit ``None`` (or ``-s NAME=None``,
    which arrives as text) stays ``None`` (``Settings.get`` would give the
    default instead)."""
    value = settings[name] if name in settings else aopic_settings.SETTINGS[name].default
    if isinstance(value, str) and value.strip().lower() in ("", "none"):
        return None
    return value


def _idle_close_after(settings: Any) -> float | None:
    """``AOPIC_IDLE_CLOSE_AFTER`` in seconds, ``None`` for never."""
    value = _setting_or_none(settings, "AOPIC_IDLE_CLOSE_AFTER")
    if value is None or (isinstance(value, str) and value.strip().lower() == "never"):
        return None
    seconds = float(value)
    if not seconds >= 0:
        raise ValueError(f"AOPIC_IDLE_CLOSE_AFTER must be >= 0 seconds or None, got {value!r}")
    return seconds


def parse_seed_entry(raw: bytes | str, policy: StoredRequestPolicy = DEFAULT_POLICY) -> tuple[str, dict]:
    """``(url, meta)`` of one entry of the start-URLs key.

    An entry is a URL (``http://...``) or a JSON object ``{"url": ...,
    "meta": {...}}``. Raises :class:`ValueError` (with the reason) for
    anything else: bytes that are not UTF-8, bad JSON, no http(s) URL, meta
    that is not an object, JSON nested or sized beyond the bounds, a meta key
    that changes where or how a request is sent (``policy``, see
    ``AOPIC_STORED_META_REFUSED``). Meta keys the frontier or Scrapy manage
    per fetch (``aopic_*``, ``depth``...) are dropped.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    text = text.strip()
    meta: dict = {}
    if len(text) > MAX_REQUEST_BYTES:
        raise ValueError(f"{len(text)} characters, more than {MAX_REQUEST_BYTES}")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"bad JSON ({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        url = data.get("url")
        meta = data.get("meta") or {}
        if not isinstance(meta, dict):
            raise ValueError("'meta' is not a JSON object")
        meta = {
            key: value for key, value in meta.items()
            if key not in TRANSIENT_META and not key.startswith("aopic_")
        }
        for key in meta:
            if policy.meta_refused(key):
                raise ValueError(f"meta key {key!r} is refused (AOPIC_STORED_META_REFUSED)")
        if not isinstance(meta.get(DOWNLOAD_SLOT, ""), str):
            raise ValueError(f"meta {DOWNLOAD_SLOT!r} is not a string")
    else:
        url = text
    if not isinstance(url, str):
        raise ValueError("no 'url' string")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"bad URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError("not an http(s) URL")
    return url, meta


class SharedCrawl:
    """What a worker of a shared (Redis) crawl does besides scheduling.

    * **Seeds through Redis**: entries of the start-URLs key
      (``AOPIC_REDIS_START_URLS_KEY``, a list, set or sorted set any process
      can push to) are taken in batches — when this worker is idle or
      starved, and once a second while it is busy — and scheduled as seeds
      (``AOPIC_SEED_CASH`` each, canonicalized and filtered like any start
      request). Malformed entries are logged and skipped.
    * **Idle means the whole crawl is idle**: on ``spider_idle`` the worker
      closes only when nothing is pending, no worker holds a lease (its page
      may yield new links) and the start-URLs key is empty — for
      ``AOPIC_IDLE_CLOSE_AFTER`` seconds in a row (``None``: never).
    * **No 5 s naps**: Scrapy asks the scheduler again only when one of
      this worker's own requests finishes, or every 5 s. When the last
      ``next_request`` found nothing (the best hosts were at their cap on
      other workers, or the frontier was empty), the worker asks again every
      :attr:`TICK` seconds, so that work freed or found elsewhere is picked
      up at once.
    """

    #: seconds between polls while starved or idle
    TICK = 0.2
    #: seconds between start-URLs polls while busy
    SEED_POLL = 1.0

    def __init__(self, crawler: Crawler, frontier: Frontier, spider: Spider):
        from .connection import format_key

        self.crawler = crawler
        self.frontier = frontier
        self.spider = spider
        settings = crawler.settings
        self.store = frontier.store
        template = _setting_or_none(settings, "AOPIC_REDIS_START_URLS_KEY")
        self.seeds_key: str | None = format_key(template, spider) if template else None
        # scrapy-redis' setting and default: as many as can be downloaded at once
        self.seeds_batch = settings.getint(
            "REDIS_START_URLS_BATCH_SIZE", settings.getint("CONCURRENT_REQUESTS", 16)
        ) or 16
        self.close_after = _idle_close_after(settings)
        #: monotonic time the whole crawl was first seen idle (None: busy)
        self.idle_since: float | None = None
        self._next_seed_poll = 0.0
        self._task = None
        self._probing = False

    def start(self) -> None:
        from .compat import create_looping_call

        self.crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        try:
            has_engine = self.crawler.engine is not None
        except RuntimeError:  # Crawler.engine not set: a scheduler used on its own
            has_engine = False
        if has_engine:
            try:
                self._task = create_looping_call(self.tick)
            except RuntimeError:  # no reactor or event loop: not a real crawl
                self._task = None
            else:
                self._task.start(self.TICK, now=False)
                # The tick probes a stalled Redis and makes the held writes:
                # from now on no Redis call waits on the reactor.
                self.store.fail_fast = True
        if self.close_after is None:
            closing = "never closing on its own"
        elif self.close_after:
            closing = f"closing once the whole crawl has been idle for {self.close_after:g} s"
        else:
            closing = "closing as soon as the whole crawl is idle"
        logger.info("aopic: shared crawl: seeds key %s, %s", self.seeds_key or "(none)", closing)

    def stop(self) -> None:
        self.crawler.signals.disconnect(self.spider_idle, signal=signals.spider_idle)
        if self._task is not None and self._task.running:
            self._task.stop()
        self._task = None

    # -- polling ------------------------------------------------------------------

    def tick(self) -> None:
        """Every :attr:`TICK` s: take seeds when due, check once a second
        that the frontier is still there, wake the engine when starved."""
        if self.frontier.lost is not None:
            return
        if self.store.stalled_for is not None:
            self._probe()
            return
        try:
            starved = self.frontier.starved
            now = time.monotonic()
            if now >= self._next_seed_poll:
                self._next_seed_poll = now + self.SEED_POLL
                self.store.check_epoch()
                if self.seeds_key and self.feed_seeds():
                    starved = True  # new requests: ask for them now
            elif self.seeds_key and starved and self.feed_seeds():
                starved = True
            if starved:
                # A lease nothing holds any more frees its host's shared cap.
                self.frontier.settle_unheld_leases()
                self.frontier.probe.wake()
        except StoreStalled:
            pass  # the next tick probes
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
        except Exception:  # a looping call that raises stops for good
            logger.exception("aopic: shared crawl poll failed; retrying in %.1fs", self.TICK)

    def _probe(self) -> None:
        """Ask a stalled Redis whether it is back, from a thread (a ping to
        a stopped server blocks for the socket timeout), one probe at a time."""
        if self._probing:
            return
        stalled = self.store.stalled_for or 0.0
        if stalled >= self.store.retry_timeout:
            self.frontier.store_lost(StoreUnavailable(
                f"Redis at {self.store._where()} unreachable for {stalled:.0f}s "
                f"(AOPIC_REDIS_RETRY_TIMEOUT {self.store.retry_timeout:.0f}s); "
                f"{len(self.frontier.held)} writes held were not made"
            ))
            return
        from twisted.internet.threads import deferToThread

        self._probing = True
        deferToThread(self.store.probe).addBoth(self._probed)

    def _probed(self, answered) -> None:
        self._probing = False
        if answered is not True or self.frontier.lost is not None:
            return  # still stalled (or a failure, logged by the store): the next tick probes
        self.store.end_stall()
        try:
            # A Redis back empty must not take the held writes as a new crawl.
            self.store.check_epoch()
            self.frontier.held.replay()
        except StoreStalled:
            return
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            return
        self.frontier.probe.wake()

    def feed_seeds(self) -> int:
        """Take one batch from the start-URLs key and schedule it as seeds;
        returns how many requests were scheduled."""
        if not self.seeds_key:
            return 0
        entries = self.store.take_seeds(self.seeds_key, self.seeds_batch)
        if not entries:
            return 0
        try:
            return self._schedule_seeds(entries)
        finally:
            self.store.seeds_scheduled(self.seeds_key)

    def _schedule_seeds(self, entries: list[bytes]) -> int:
        scheduled = 0
        stats = self.crawler.stats
        for raw in entries:
            try:
                url, meta = parse_seed_entry(raw, self.frontier.stored_policy)
                request = Request(url, meta={**meta, "is_start_request": True})
            except (TypeError, ValueError) as exc:  # malformed entry, or a URL Scrapy refuses
                logger.warning("aopic: entry of %s skipped: %s (%r)", self.seeds_key, exc, raw[:80])
                stats.inc_value("aopic/redis_seeds_malformed")
                continue
            self.crawler.engine.crawl(request)
            stats.inc_value("aopic/redis_seeds")
            scheduled += 1
        return scheduled

    # -- idle -----------------------------------------------------------------------

    def spider_idle(self, spider: Spider) -> None:
        """This worker has nothing to do: keep it open while the crawl has
        work anywhere (or may get some: ``AOPIC_IDLE_CLOSE_AFTER``). A
        frontier that is gone closes it with ``frontier_lost``, never
        ``finished``."""
        if self.frontier.lost is not None:
            return  # closing already, with the reason that says why
        if self.store.stalled_for is not None or self.frontier.held:
            raise DontCloseSpider  # nothing is known until Redis answers (see tick)
        try:
            self.store.check_epoch()
            if self.feed_seeds():
                self.idle_since = None
                raise DontCloseSpider
            pending, leases, seeds = self.store.activity(self.seeds_key)
        except StoreStalled:
            raise DontCloseSpider from None
        except StoreUnavailable as exc:
            self.frontier.store_lost(exc)
            raise DontCloseSpider from None  # the close asked for carries the reason
        if pending or leases or seeds:
            # Other workers' pages may still yield links, an expired lease
            # will come back, seeds are waiting: poll until then.
            self.idle_since = None
            self.frontier.starved = True
            raise DontCloseSpider
        if self.close_after is None:
            self.frontier.starved = True  # keep polling for seeds
            raise DontCloseSpider
        now = time.monotonic()
        if self.idle_since is None:
            self.idle_since = now
        if now - self.idle_since < self.close_after:
            self.frontier.starved = True  # keep looking
            raise DontCloseSpider
        logger.info(
            "aopic: the shared crawl is idle (nothing pending, no open lease, no seeds waiting)%s; "
            "closing this worker",
            f" for {now - self.idle_since:.1f} s" if self.close_after else "",
        )
