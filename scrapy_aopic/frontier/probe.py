"""What the frontier asks of Scrapy's engine and downloader.

The one place that reads Scrapy internals (download slots, the engine's
wake-up call), as Scrapy's own ``DownloaderInterface`` in ``pqueues.py``
does: everything else in scrapy-aopic uses public APIs. Each look-up
degrades to "every host is ready" / "no wake-up" when the attribute is not
there (a scheduler used on its own, another Scrapy release).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _slot_full(slot: Any) -> bool:
    """Whether one more request in ``slot`` would only wait there.

    Scrapy sends a slot's requests at most ``concurrency`` at a time and,
    with a delay, one per delay. Any slot is full at ``concurrency``
    requests; a slot with a delay is full as soon as one request waits for
    its turn (a second one would only wait too, holding a global concurrency
    place and a URL a richer one may overtake meanwhile). A request still
    downloading does not fill a delayed slot: Scrapy sends the next one
    after the delay whatever the first one does, so a slow page must not
    stop its host (it does not with Scrapy's own scheduler either).
    """
    if len(slot.active) >= slot.concurrency:
        return True
    if not slot.delay:
        return False
    queue = getattr(slot, "queue", None)
    if queue is None:  # another Scrapy: one request at a time
        return len(slot.active) >= 1
    return len(queue) > 0


class DownloadProbe:
    """Download-slot occupancy and engine wake-ups for one crawler."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self._downloader: Any = None
        self._per_ip = bool(crawler.settings.getint("CONCURRENT_REQUESTS_PER_IP"))

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

    def attach(self) -> None:
        """Find the downloader (once the engine exists: at spider open)."""
        try:
            self._downloader = self.crawler.engine.downloader
        except (AttributeError, RuntimeError):  # no engine: a scheduler used on its own
            self._downloader = None

    def host_ready(self, host: str) -> bool:
        """Whether the download slot ``host`` has room for one more request."""
        slots = getattr(self._downloader, "slots", None)
        if not slots:
            return True
        slot = slots.get(host)
        return slot is None or not _slot_full(slot)

    def busy_hosts(self) -> list[str]:
        """Download slots that are full now.

        Only slots with a request inside can be full, and the downloader
        holds at most ``CONCURRENT_REQUESTS`` requests, so this walks its
        active requests rather than every slot it knows (thousands in a broad
        crawl: slots are kept a minute after their last request)."""
        downloader = self._downloader
        slots = getattr(downloader, "slots", None)
        if not slots:
            return []
        active = getattr(downloader, "active", None)
        if active is None or len(active) >= len(slots):
            candidates = slots
        else:
            candidates = {request.meta.get("download_slot") for request in active}
            candidates.discard(None)
        busy = []
        for key in candidates:
            slot = slots.get(key)
            if slot is not None and _slot_full(slot):
                busy.append(key)
        return busy

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
        downloader = self._downloader
        slots = getattr(downloader, "slots", None)
        if slots is None:
            return True
        if not slots:
            return False
        active = getattr(downloader, "active", None)
        if active is None or len(active) >= len(slots):
            candidates = slots
        else:
            candidates = {request.meta.get("download_slot") for request in active}
            candidates.discard(None)
        for key in candidates:
            slot = slots.get(key)
            if slot is not None and not slot.delay and _slot_full(slot):
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
