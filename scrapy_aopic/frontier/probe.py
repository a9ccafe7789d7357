"""What the frontier asks of Scrapy's engine and downloader.

The one place that reads Scrapy internals (download slots, the engine's
wake-up call), as Scrapy's own ``DownloaderInterface`` in ``pqueues.py``
does: everything else in scrapy-aopic uses public APIs. Each look-up
degrades to "every host is ready" / "no wake-up" when the attribute is not
there (a scheduler used on its own, another Scrapy release).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..meta import DOWNLOAD_SLOT

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler


def _slot_full(slot: Any, unplaced: Callable[[], int]) -> bool:
    """Whether one more request in ``slot`` would only wait there.

    Scrapy sends a slot's requests at most ``concurrency`` at a time and,
    with a delay, one per delay. Any slot is full at ``concurrency``
    requests; a slot with a delay is full as soon as one request waits for
    its turn (a second one would only wait too, holding a global concurrency
    place and a URL a richer one may overtake meanwhile). A request still
    downloading does not fill a delayed slot: Scrapy sends the next one
    after the delay whatever the first one does, so a slow page must not
    stop its host (it does not with Scrapy's own scheduler either).

    ``unplaced()`` counts the requests of the slot on their way to it
    (handed out, not in it yet). They fill a slot without a delay as if they
    were in it. A slot with a delay keeps its rule, and they are not
    counted for it (next_request asks for every candidate host): the
    requests on their way are what its queue holds next, so that it sends
    one per delay without waiting for the engine to ask again (counting
    them there slowed a polite crawl).
    """
    if not slot.delay:
        return len(slot.active) + unplaced() >= slot.concurrency
    if len(slot.active) >= slot.concurrency:
        return True
    queue = getattr(slot, "queue", None)
    if queue is None:  # another Scrapy: one request at a time
        return len(slot.active) >= 1
    return len(queue) > 0


class DownloadProbe:
    """Download-slot occupancy and engine wake-ups for one crawler.

    With Scrapy's asyncio reactor the engine pulls up to
    ``CONCURRENT_REQUESTS`` requests from the scheduler in one go, and each
    reaches its download slot only on a later turn of the event loop (the
    downloader middlewares run in between, and may hold it: the soft-404
    gate). Read from the slots alone, a host would look free for every one
    of them: the probe also counts the requests handed out for a slot that
    are still in the downloader (``Downloader.active``: from the engine's
    pull until the download is done, middlewares included) and not in the
    slot yet. Read from Scrapy's own sets, the count cannot drift: a
    request a middleware answered or dropped is out of the downloader.
    """

    #: Hand-outs between two sweeps of every slot's requests on their way
    #: (each slot's are swept whenever it is looked at).
    SWEEP_EVERY = 1024

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self._downloader: Any = None
        settings = crawler.settings
        self._per_ip = bool(settings.getint("CONCURRENT_REQUESTS_PER_IP"))
        # What Scrapy gives a slot it creates (Downloader._get_slot): a slot
        # not created yet is judged by it.
        self._slot_settings: dict[str, Any] = settings.getdict("DOWNLOAD_SLOTS")
        self._concurrency = (settings.getint("CONCURRENT_REQUESTS_PER_IP")
                             or settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"))
        self._delayed = bool(settings.getfloat("DOWNLOAD_DELAY") or settings.getbool("AUTOTHROTTLE_ENABLED"))
        #: slot key -> the requests handed out for it, not yet seen in it or done (weakly held)
        self._on_the_way: dict[str, list[weakref.ref]] = {}
        self._handed_since_sweep = 0

    def is_default_slot(self, slot: Any, url: str) -> bool:
        """Whether ``slot`` is the key Scrapy's downloader gives ``url`` by
        itself (its host name; its IP with ``CONCURRENT_REQUESTS_PER_IP``),
        the value it writes to ``meta["download_slot"]`` of every request
        it fetches without one."""
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return False
        if slot == host:
            return True
        if self._per_ip:
            from scrapy.resolver import dnscache

            return slot == dnscache.get(host, host)
        return False

    def handed_out(self, request: Any, key: str) -> None:
        """Note ``request``, just handed out for the slot ``key``: it counts
        against that slot until it is in it (``slot.active``) or out of the
        downloader (answered, dropped or failed on the way)."""
        self._on_the_way.setdefault(key, []).append(weakref.ref(request))
        self._handed_since_sweep += 1
        if self._handed_since_sweep >= self.SWEEP_EVERY:
            self._handed_since_sweep = 0
            slots = getattr(self._downloader, "slots", None) or {}
            for slot_key in list(self._on_the_way):
                self._unplaced(slot_key, slots)

    def _unplaced(self, key: str, slots: dict) -> int:
        """How many requests handed out for ``key`` are in the downloader
        but not in their slot yet (the others are forgotten)."""
        refs = self._on_the_way.get(key)
        if not refs:
            return 0
        active = getattr(self._downloader, "active", None)
        on_the_way = []
        if active is not None:
            for ref in refs:
                request = ref()
                if request is None or request not in active:
                    continue  # done, or gone
                slot = slots.get(request.meta.get(DOWNLOAD_SLOT, key))
                if slot is None or request not in slot.active:
                    on_the_way.append(ref)
        if not on_the_way:
            del self._on_the_way[key]
        elif len(on_the_way) < len(refs):
            self._on_the_way[key] = on_the_way
        return len(on_the_way)

    def attach(self) -> None:
        """Find the downloader (once the engine exists: at spider open)."""
        try:
            self._downloader = self.crawler.engine.downloader
        except (AttributeError, RuntimeError):  # no engine: a scheduler used on its own
            self._downloader = None

    def host_ready(self, host: str) -> bool:
        """Whether the download slot ``host`` has room for one more request."""
        slots = getattr(self._downloader, "slots", None)
        if slots is None:
            return True
        slot = slots.get(host)
        if slot is not None:
            return not _slot_full(slot, lambda: self._unplaced(host, slots))
        unplaced = self._unplaced(host, slots)
        if not unplaced:
            return True
        # The slot Scrapy will create for them: full at its concurrency,
        # unless a delay will throttle it (see _slot_full).
        slot_settings = self._slot_settings.get(host) or {}
        if self._delayed or slot_settings.get("delay"):
            return True
        return unplaced < slot_settings.get("concurrency", self._concurrency)

    def _maybe_full(self, slots: dict) -> set[str]:
        """The slot keys that can be full now: those with a request inside
        or on its way. The downloader holds at most ``CONCURRENT_REQUESTS``
        requests, so this walks its active requests rather than every slot
        it knows (thousands in a broad crawl: slots are kept a minute after
        their last request)."""
        active = getattr(self._downloader, "active", None)
        if active is None or len(active) >= len(slots):
            keys = set(slots)
        else:
            keys = {request.meta.get(DOWNLOAD_SLOT) for request in active}
            keys.discard(None)
        keys.update(self._on_the_way)
        return keys

    def busy_hosts(self) -> list[str]:
        """Download slots that are full now (see :meth:`host_ready`)."""
        slots = getattr(self._downloader, "slots", None)
        if slots is None:
            return []
        return [key for key in self._maybe_full(slots) if not self.host_ready(key)]

    def busy_unthrottled(self) -> bool:
        """Whether some full download slot has no delay.

        Such a slot frees when its responses come back, and those are
        processed by the same process as any other fetch: a poor page
        fetched elsewhere meanwhile takes time from it (CPU, bandwidth). A
        slot throttled by a delay (``DOWNLOAD_DELAY``, AutoThrottle, a
        robots.txt ``Crawl-delay``) sends one request per delay whatever the
        other slots do, and the global concurrency place its request frees
        is the one its next request takes: a fetch elsewhere takes nothing
        from it. ``True`` (the rule for unthrottled slots) when there is no
        downloader to look at."""
        slots = getattr(self._downloader, "slots", None)
        if slots is None:
            return True
        for key in self._maybe_full(slots):
            slot = slots.get(key)
            # a slot to be made is full only without a delay (see host_ready)
            if (slot is None or not slot.delay) and not self.host_ready(key):
                return True
        return False

    def holds_no_request(self) -> bool:
        """Whether Scrapy holds no request at all now: none in the
        downloader (its middlewares and slot queues included) and none being
        parsed: the engine's own idle test without its scheduler part.
        ``False`` when there is no engine to look at."""
        engine = getattr(self.crawler, "engine", None)
        active = getattr(getattr(engine, "downloader", None), "active", None)
        slot = getattr(getattr(engine, "scraper", None), "slot", None)
        if active is None or slot is None or not hasattr(slot, "is_idle"):
            return False
        return not active and slot.is_idle()

    def downloader_middlewares(self) -> list[Any]:
        """The downloader middleware instances, outermost first."""
        manager = getattr(self._downloader, "middleware", None)
        return list(getattr(manager, "middlewares", ()))

    def wake(self) -> None:
        """Make the engine ask the scheduler again now (Scrapy has no public
        call for this; without it the engine's 5 s heartbeat does it)."""
        try:
            engine = self.crawler.engine
        except (AttributeError, RuntimeError):
            return
        slot = getattr(engine, "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None and getattr(slot, "closing", None) is None:
            nextcall.schedule()
