"""What the frontier asks of Scrapy's engine and downloader.

The one place that reads Scrapy internals (download slots, the engine's
wake-up call), as Scrapy's own ``DownloaderInterface`` in ``pqueues.py``
does: everything else in scrapy-aopic uses public APIs. Each look-up
degrades to "every host is ready" / "no wake-up" when the attribute is not
there (a scheduler used on its own, another Scrapy release).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _slot_full(slot: Any) -> bool:
    # A slot with a delay sends one request at a time: anything queued
    # there would only wait, holding a global concurrency place.
    limit = 1 if slot.delay else slot.concurrency
    return len(slot.active) >= limit


class DownloadProbe:
    """Download-slot occupancy and engine wake-ups for one crawler."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self._downloader: Any = None

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
