"""The direct lane: requests fetched as the spider made them, not by cash.

Most requests a spider yields are links: they get an account, a share of
their page's cash, and are fetched once, richest first. Some requests must
be fetched as they are, and promptly, whatever cash says:

* ``meta={"aopic_link": False}``: API calls, form posts, pagination the
  spider needs (they get no cash);
* ``dont_filter=True`` requests for a URL already fetched or being fetched
  (Scrapy's meaning: fetch it again, each time it is asked for);
* requests with a positive ``priority`` (the spider wants them soon; a link
  among them keeps its account and its cash, it is only fetched earlier);
* requests a persistent store cannot hold (a callback that is not a spider
  method, a body that is not text): kept in memory, as Scrapy's own
  scheduler does.

The lane is ordered by ``priority`` (highest first), then first in, first
out. It is in memory: with ``JOBDIR`` what is still queued at close is saved
and read back on resume (see :class:`~scrapy_aopic.frontier.Frontier`);
what a ``SIGKILL`` catches in it is lost, like Scrapy's memory queues.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from scrapy import Request


class LaneEntry(NamedTuple):
    """One request waiting in the lane."""

    request: Request
    host: str  #: its download slot key
    key: str | None  #: its canonical URL when it is a link with an account


class DirectLane:
    """Requests by priority, then first in first out, skipping busy hosts."""

    #: Entries looked at per :meth:`pop` before giving up on busy hosts.
    MAX_SKIPS = 64

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, LaneEntry]] = []
        self._order = itertools.count()
        self._front = itertools.count(-1, -1)  # given back: before every pushed entry

    def push(self, request: Request, host: str, key: str | None = None) -> None:
        heapq.heappush(self._heap, (-request.priority, next(self._order), LaneEntry(request, host, key)))

    def push_front(self, entry: LaneEntry) -> None:
        """Give back an entry :meth:`pop` returned, first in line again."""
        heapq.heappush(self._heap, (-entry.request.priority, next(self._front), entry))

    def pop(self, ready: Callable[[str], bool]) -> LaneEntry | None:
        """The first entry whose host is ready (``None``: none, or all busy)."""
        skipped = []
        found = None
        heap = self._heap
        while heap and len(skipped) < self.MAX_SKIPS:
            item = heapq.heappop(heap)
            if ready(item[2].host):
                found = item[2]
                break
            skipped.append(item)
        for item in skipped:
            heapq.heappush(heap, item)
        return found

    def drain(self) -> Iterator[LaneEntry]:
        """Every entry, in lane order, emptying the lane."""
        while self._heap:
            yield heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)
