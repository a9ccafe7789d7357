"""The ledger: the only path by which cash and leases move in a crawl.

Every request the frontier hands out holds a :class:`~scrapy_aopic.store.base.Lease`
on its URL's cash. The ledger keeps the open leases of this process and
settles each exactly once, whatever happens to its request:

============================  ===============================================
what happens                  where the lease's cash goes
============================  ===============================================
parsed by a callback          its links and lambda (:meth:`Ledger.visit`)
non-2xx, not text, dropped,   lambda (:meth:`Ledger.fail`)
download error, IgnoreRequest
redirect, alias, duplicate    the target URL's account (:meth:`Ledger.transfer`)
retry                         back to the same account (:meth:`Ledger.transfer`)
in flight at shutdown         back to the same account (:meth:`Ledger.requeue`)
============================  ===============================================

A settlement the store rejects (a shared store's lease that expired and was
handed to another worker) moves nothing: the other worker's visit settles
that cash.

A request that leaves the crawl without reaching any of the hooks that
settle (a downloader middleware raising ``IgnoreRequest`` in
``process_response``, an exception Scrapy swallows) is noticed when its
last reference goes: the ledger watches every request it leases out and
settles a lease whose request is gone as ``vanished`` (its cash to lambda)
at the next :meth:`Ledger.sweep`. Nothing is settled from inside the
garbage collector itself, which may run in the middle of a store change.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..meta import LEASE
from ..store.base import Lease, StoreStalled

if TYPE_CHECKING:
    from scrapy import Request

    from ..engine import AopicEngine, VisitResult
    from ..store.base import Link

logger = logging.getLogger(__name__)


class _Watch(weakref.ref):
    """A weak reference to a leased request that knows its lease."""

    __slots__ = ("lease_id",)


class Ledger:
    """Open leases of one process and their settlement, counted in stats
    (``aopic/<stat>`` once per settlement the store accepted)."""

    def __init__(self, engine: AopicEngine, stats) -> None:
        self.engine = engine
        self.stats = stats
        #: lease id -> the lease's fields as a plain tuple: the garbage
        #: collector stops tracking a tuple of strings and numbers, not a
        #: NamedTuple, and every request in flight holds one (the watch
        #: below is the other object its lease costs the collector)
        self._leases: dict[int, tuple] = {}
        #: lease id -> weak reference to its request (dropped at settlement,
        #: so that a settled request's end calls nothing)
        self._watches: dict[int, _Watch] = {}
        #: lease ids whose request was garbage-collected (see :meth:`sweep`;
        #: callers test it before calling, once per request in and out)
        self.gone: list[int] = []
        # One callback for every watch (a bound method made per request
        # would be one more object for the garbage collector to track).
        self._on_gone = self._request_gone
        self._said_vanished = False

    # -- leases -------------------------------------------------------------------

    def open(self, lease: Lease, request: Request | None = None) -> None:
        """``lease`` was handed out with ``request`` (watched: see :meth:`sweep`)."""
        self._leases[lease.lease_id] = tuple(lease)
        if request is not None:
            watch = _Watch(request, self._on_gone)
            watch.lease_id = lease.lease_id
            self._watches[lease.lease_id] = watch

    def _request_gone(self, watch: _Watch) -> None:
        # Called by the garbage collector: only note it (see sweep).
        self.gone.append(watch.lease_id)

    def sweep(self) -> int:
        """Settle the leases whose request is gone without a settlement
        (cash to lambda); returns how many."""
        if not self.gone:
            return 0
        gone, self.gone = self.gone, []
        settled = 0
        for i, lease_id in enumerate(gone):
            fields = self._leases.get(lease_id)
            if fields is None:
                continue
            lease = Lease._make(fields)
            try:
                settled += self.vanished(lease)
            except StoreStalled:
                self.gone = gone[i:] + self.gone  # swept again once the store answers
                raise
        return settled

    def vanished(self, lease: Lease) -> bool:
        """Settle ``lease`` as ``vanished`` (cash to lambda). Said at
        WARNING once: a site's redirect loops (Scrapy's redirect middleware
        gives up by raising in ``process_response``) make many, and the
        stat counts them all."""
        settled = self.fail(lease, "vanished")
        level = logging.DEBUG if self._said_vanished else logging.WARNING
        self._said_vanished = True
        logger.log(
            level, "aopic: request for %s vanished without reaching a hook (e.g. a redirect loop that Scrapy's "
            "redirect middleware gave up on); its cash went to lambda (stat aopic/failed/vanished; "
            "said once, the others at DEBUG)", lease.url,
        )
        return settled

    def lease_of(self, request: Request) -> Lease | None:
        """The open lease ``request`` holds, if any."""
        lease_id = request.meta.get(LEASE)
        if lease_id is None:
            return None
        fields = self._leases.get(lease_id)
        return None if fields is None else Lease._make(fields)

    def open_leases(self) -> list[Lease]:
        return [Lease._make(fields) for fields in self._leases.values()]

    def __len__(self) -> int:
        return len(self._leases)

    # -- settlements ----------------------------------------------------------------

    def _settle(self, lease: Lease, action: Callable[[Lease], Any], stat: str | None) -> Any:
        lease_id = lease.lease_id
        known = self._leases.pop(lease_id, None)
        watch = self._watches.pop(lease_id, None)
        try:
            done = action(lease)
        except StoreStalled:
            # Nothing was settled: the lease stays open here too, so a write
            # held until the store answers finds it as it was.
            if known is not None:
                self._leases[lease_id] = known
            if watch is not None:
                self._watches[lease_id] = watch
            raise
        if done and stat:
            self.stats.inc_value(f"aopic/{stat}")
        return done

    def visit(self, lease: Lease, links: Iterable[Link]) -> VisitResult | None:
        """The page of ``lease`` was parsed: pay its links and lambda."""
        return self._settle(lease, lambda l: self.engine.visit(l, links), None)

    def fail(self, lease: Lease, reason: str, *, refuse: bool = False) -> bool:
        """No page: the cash goes to lambda (``refuse``: never fetch the URL)."""
        done = self._settle(lease, lambda l: self.engine.fail(l, refuse=refuse), f"failed/{reason}")
        if done:
            self.stats.inc_value("aopic/cash_to_lambda_failed", lease.cash)
        return done

    def transfer(self, lease: Lease, target: Link, stat: str | None) -> bool:
        """The cash (and future credit) of ``lease`` goes to ``target``
        (``stat``: counted as ``aopic/<stat>``; ``None``: the caller counts)."""
        return self._settle(lease, lambda l: self.engine.transfer(l, target), stat)

    def requeue(self, lease: Lease, stat: str) -> bool:
        """The request was not fetched: the URL is pending again with its cash."""
        return self._settle(lease, self.engine.requeue, stat)
