"""Writes a crawl holds while its shared store does not answer.

A worker whose Redis stalls must neither sleep on the reactor (downloads in
flight would time out) nor lose what its pages taught it. Each write the
frontier could not make (a visit with its links, a failure, a transfer, a
request to enqueue) is held here, in order, and made as soon as the store
answers again; nothing reaches Redis out of order, since while anything is
held, later writes queue behind it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ..store.base import StoreStalled, StoreUnavailable

logger = logging.getLogger(__name__)


class HeldWrites:
    """An ordered queue of writes to make once the store is back.

    Stats: ``aopic/redis_stall/held`` (writes held), ``.../replayed``
    (made later), ``.../dropped`` (a held write that failed for another
    reason when made: logged with its traceback).
    """

    def __init__(self, stats) -> None:
        self.stats = stats
        self._writes: deque[tuple[str, Callable[[], Any]]] = deque()

    def __len__(self) -> int:
        return len(self._writes)

    def hold(self, what: str, write: Callable[[], Any]) -> None:
        """Keep ``write`` (no arguments) to make after those held before it."""
        self._writes.append((what, write))
        self.stats.inc_value("aopic/redis_stall/held")

    def run(self, what: str, write: Callable[[], Any]) -> bool:
        """Make ``write`` now, or hold it when writes are held already or
        the store stalls; ``True`` when it was made now."""
        if self._writes:
            self.hold(what, write)
            return False
        try:
            write()
        except StoreStalled:
            self.hold(what, write)
            return False
        return True

    def replay(self) -> int:
        """Make the held writes in order; the first that stalls again stays
        first (:class:`StoreStalled` propagates). Returns how many were made."""
        made = 0
        try:
            while self._writes:
                what, write = self._writes[0]
                try:
                    write()
                except (StoreStalled, StoreUnavailable):
                    raise  # stalled again, or gone for good: the caller decides
                except Exception:
                    logger.exception("aopic: a held write (%s) failed when made; dropped", what)
                    self.stats.inc_value("aopic/redis_stall/dropped")
                self._writes.popleft()
                made += 1
        finally:
            if made:
                self.stats.inc_value("aopic/redis_stall/replayed", made)
                logger.info("aopic: %d held writes made, %d still held", made, len(self._writes))
        return made
