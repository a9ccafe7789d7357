"""The in-memory store: the books of one process, fast and compact.

Selection structure. Each host has a heap of its pending URLs keyed by
``(-key, seq)``, each entry one int (:func:`~scrapy_aopic.store.compact.heap_entry`:
about 44 bytes instead of a tuple and a float, about 88; the URL is read
back from the seq); a second heap orders hosts by their best entry. Popping the
richest URL of a host that can be fetched now skips only the hosts that are
busy (at most the crawl's concurrency), so a request costs O(log n) whatever
the number of hosts. Cash arriving for a pending URL pushes a fresh entry and
leaves the old one to be discarded when it surfaces (lazy increase-key); the
heaps are compacted when stale entries outnumber live ones.

Lambda dividend. A lambda payout adds ``amount / N`` to a cumulative
``dividend``; every target account remembers the dividend it was last settled
at (``mark``) and is settled when touched. A pending account's heap key is
``cash - mark``: payouts add the same amount to every target, so keys (and
the order) never change when lambda pays out.

Lambda by cash (``"pending-cash"``). A payout multiplies every pending
account's cash by the same factor ``1 + amount / P`` (``P``: cash held by all
pending accounts), so each gets a share in proportion to what its in-links
paid, and a trap that mints N new URLs per fetch draws a share bounded by
the cash its pages pass on, not by N (``docs/concepts.rst``). Lazily: a
cumulative ``scale`` replaces the dividend, an account's cash is stored as of
the scale it was settled at (``mark``), its effective cash is
``cash * scale / mark`` and its heap key ``-cash / mark``; payouts multiply
every key by the same factor, so the order never changes either. The sum of
``cash / mark`` over pending accounts is kept up to date, so a payout is
O(1): the sum is kept exactly (Shewchuk's partials, as ``math.fsum``), and
a bound on what the accounts' own roundings (settling multiplies) made it
drift by is kept too; when the bound passes 1e-13 of the sum, the sum is
recounted (O(n), rare) before a payout, so the books stay balanced to
1e-13 of each payout. ``scale`` is brought back to 1 (an O(n) pass) when it
passes 1e12. The sum is recounted then and at a rebase only, never when
the heaps are compacted: that depends on stale heap entries, which a
``JOBDIR`` snapshot does not keep, and a resumed store must recount when
the stopped one would have (:meth:`MemoryStore.snapshot`, ``exact``).

Priority order (``AOPIC_PRIORITY_HORIZON`` > 0). Cash accumulates: a URL
found early keeps every credit it ever got, so the cash order favours old
URLs over ones the recent pages point to. With a horizon ``tau`` each
pending account also keeps a log priority, ``log(sum(credit * exp(t /
tau)))`` over the credits it received while pending (``t``: the store's
visit count then; :func:`~scrapy_aopic.store.base.raise_priority`), and the
heap key is ``-priority`` instead of the cash key. A credit raises it (a new
entry, as for cash); lambda's dividends do not (the same for every pending
URL); a requeue keeps it (the lease's cash was the account's own); a
re-pended account starts from its cash as if credited now. (Past ``20 *
tau`` fetches the horizon grows with the crawl:
:func:`~scrapy_aopic.store.base.priority_clock`.) Cash and every move
of it are the same in both orders.

Rows. A pending account that was never fetched is a row of flat columns
(:class:`~scrapy_aopic.store.compact.AccountTable`: cash, mark, depth, host
and request in 28 bytes, its URL stored once by sequence number,
``seq``); once leased it becomes a Python object (``_Account``), as it stays
while leased, failed, refused, an alias or pending again after a fetch; once
its page is crawled it moves to a crawled row (about 100 bytes instead of
about 390), and comes back as an object if it is re-pended or refused.
Every account is found by URL exactly through the table's index of names.
Moving an account between a row and an object changes nothing in its books
or its heap entry: only where they are kept.

Link memory. Each crawled account remembers the accounts its last visit
credited, as their ``seq`` (4 bytes a link, whatever state the target moves
to). A third lazy heap orders the CRAWLED accounts whose links are
remembered by cash, for virtual revisits (:meth:`MemoryStore.revisit`); an
entry is one int packing ``(key, seq)``
(:func:`~scrapy_aopic.store.compact.heap_entry`). Its key is ``mark - cash``
when crawled accounts share lambda payouts (``"all"``: the key, like a
pending key, does not change when lambda pays out) and ``-cash`` otherwise
(crawled accounts then hold plain cash).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator

from .base import (
    ALIAS,
    CRAWLED,
    FAILED,
    LEASED,
    MAX_ALIAS_HOPS,
    PENDING,
    REFUSED,
    AccountView,
    Credit,
    FrontierStore,
    Lease,
    Link,
    Referred,
    Totals,
    lambda_split,
    priority_clock,
    raise_priority,
)
from .compact import NO_ROW, AccountTable, entry_seq, heap_entry

_ALL_TARGET_STATES = (PENDING, LEASED, CRAWLED)
#: Values of ``AOPIC_LAMBDA_TARGETS``.
LAMBDA_TARGETS = ("pending", "all", "pending-cash")
#: ``"pending-cash"``: past this scale, rebase every pending account to 1.
_MAX_SCALE = 1e12
#: ``"pending-cash"``: rounding error bound per update of the pending sum,
#: relative to the account's value (a few ulps: settling its cash since it
#: was added; the sum itself is exact).
_ROUNDING = 1e-15
#: ``"pending-cash"``: recount the pending sum before a payout when its error
#: bound passes this share of it.
_MAX_NORM_ERROR = 1e-13


def exact_add(partials: list[float], x: float) -> None:
    """Add ``x`` to the exact sum held as non-overlapping ``partials``
    (Shewchuk's algorithm, the one ``math.fsum`` uses; usually 1-3 entries)."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


class _Account:
    """One page's books. ``request`` holds the alias target for ALIAS."""

    __slots__ = (
        "cash",
        "mark",
        "prio",
        "history",
        "last_visit",
        "visits",
        "depth",
        "seq",
        "state",
        "host",
        "request",
        "url",
        "links",
    )

    def __init__(self, cash, mark, depth, seq, host, request, url):
        self.cash = cash
        self.mark = mark
        self.prio = -math.inf  # log priority (priority order only)
        self.history = 0.0
        self.last_visit = None
        self.visits = 0
        self.depth = depth
        self.seq = seq
        self.state = PENDING
        self.host = host
        self.request = request
        self.url = url  # the dict key itself: heap entries point here
        self.links = None  # seqs credited by the last visit (link memory), if re-pended


class _HostQueue:
    """Pending entries of one host and the entry advertised for it."""

    __slots__ = ("heap", "advertised")

    def __init__(self):
        self.heap: list[int] = []  # heap_entry(key, seq)
        self.advertised: int | None = None


class MemoryStore(FrontierStore):
    """:class:`~scrapy_aopic.store.base.FrontierStore` in Python objects.

    ``link_memory``: remember the out-links of crawled accounts (see
    :meth:`keep_links`; on by default so that a journal replay rebuilds them,
    an engine without link memory switches it off).
    """

    supports_link_memory = True

    supports_priority = True

    supports_discovery_cash = True

    def __init__(
        self, lambda_targets: str = "pending", *, link_memory: bool = True, priority_horizon: float = 0.0
    ):
        if lambda_targets not in LAMBDA_TARGETS:
            raise ValueError(
                f"AOPIC_LAMBDA_TARGETS must be one of {LAMBDA_TARGETS}, got {lambda_targets!r}"
            )
        self.lambda_targets = lambda_targets
        self._all_targets = lambda_targets == "all"
        self._by_cash = lambda_targets == "pending-cash"
        self._accounts: dict[str, _Account] = {}
        self._hosts: dict[str, _HostQueue] = {}
        self._host_heap: list[tuple[int, str]] = []  # (advertised entry, host)
        self._leases: dict[str, tuple[int, float]] = {}
        # Additive dividend, or the multiplicative scale with "pending-cash".
        self._dividend = 1.0 if self._by_cash else 0.0
        # "pending-cash": sum of cash / mark over pending accounts (exact
        # partials), and a bound on how far the accounts' roundings moved it.
        self._norm_partials: list[float] = []
        self._norm_error = 0.0
        self._next_seq = 0
        self._next_lease = 0
        self._entries = 0  # heap entries, live or stale, across hosts
        self._totals = Totals()
        self._crawled = 0
        self._keep_links = link_memory
        # heap_entry(key, seq) of CRAWLED accounts with remembered links; lazy.
        self._rich: list[int] = []
        # Every account's URL by seq, and the books of pending and crawled rows.
        self._table = AccountTable(self._all_targets)
        self._last_referer: tuple[bytes | None, int] = (None, -1)  # see _referer_seq
        self._deleted = 0  # keys deleted from _accounts since it was copied
        self._peeked: tuple[str, int] | None = None  # (url, row) peek_crawled returned
        self.priority_horizon = 0.0
        self._horizon = 0.0  # same; 0.0: cash order (read on every credit)
        self._clock_visits, self._clock_value = -1, 0.0  # see _clock
        self.priority_fallbacks = 0
        #: seqs the restored snapshot's header says were handed out that
        #: no record holds (see :meth:`restore`)
        self.unused_seqs = 0
        self.discovery_cash = 0.0
        if not link_memory:
            self._table.forget_links()
        if priority_horizon:
            self.set_priority_horizon(priority_horizon)

    def set_priority_horizon(self, horizon: float) -> None:
        if not 0.0 <= horizon < math.inf:
            raise ValueError(f"AOPIC_PRIORITY_HORIZON must be a number of fetches >= 0, got {horizon!r}")
        horizon = float(horizon)
        if horizon == self._horizon:
            return
        had = self._horizon
        self.priority_horizon = self._horizon = horizon
        self._clock_visits, self._clock_value = -1, 0.0
        table = self._table
        table.keep_priorities(bool(horizon))
        if horizon:
            fresh = self._fresh_priority
            moved = 0
            for acc in self._accounts.values():
                if acc.state == PENDING:
                    acc.prio = fresh(self._effective_cash(acc))
                elif acc.state == LEASED:  # kept for a requeue
                    acc.prio = fresh(self._leases[acc.url][1])
                else:
                    continue
                moved += 1
            for p in table.pending_rows():
                table.p_prio[p] = fresh(self._seq_cash(table.p_seq[p]))
                moved += 1
            if had:  # priorities kept under another horizon: not comparable
                self.priority_fallbacks += moved
        self._compact()

    # -- helpers ------------------------------------------------------------

    def _is_target(self, acc: _Account) -> bool:
        if self._all_targets:
            return acc.state in _ALL_TARGET_STATES
        return acc.state == PENDING

    def _settle(self, acc: _Account) -> None:
        """Bring the lazily owed dividend into ``acc.cash``."""
        if self._is_target(acc) and acc.mark != self._dividend:
            if self._by_cash:
                acc.cash = acc.cash * self._dividend / acc.mark
            else:
                acc.cash += self._dividend - acc.mark
            acc.mark = self._dividend

    def _effective_cash(self, acc: _Account) -> float:
        if self._is_target(acc):
            if self._by_cash:
                return acc.cash * self._dividend / acc.mark
            return acc.cash + (self._dividend - acc.mark)
        return acc.cash

    def _key(self, acc: _Account) -> float:
        """Heap key of a pending account: smaller is richer (first), unchanged by payouts."""
        if self._horizon:
            return -acc.prio
        if self._by_cash:
            return -acc.cash / acc.mark
        return acc.mark - acc.cash

    def _add_pending_cash(self, acc: _Account, amount: float) -> None:
        """Credit a PENDING account (its key changes: push it after)."""
        if self._by_cash:
            self._settle(acc)
            self._add_norm(amount / self._dividend, acc.seq)
        acc.cash += amount

    def _raise(self, acc: _Account, amount: float) -> None:
        """A credit of ``amount`` raises the priority of pending ``acc``."""
        if amount > 0:
            acc.prio = raise_priority(acc.prio, amount, self._clock())

    def _clock(self) -> float:
        """:func:`~scrapy_aopic.store.base.priority_clock` now (cached: a
        visit's credits all come at one visit count)."""
        visits = self._totals.visits
        if visits != self._clock_visits:
            self._clock_visits = visits
            self._clock_value = priority_clock(visits, self._horizon)
        return self._clock_value

    def _fresh_priority(self, cash: float) -> float:
        """The priority of an account entering the frontier with ``cash``
        and no credit history here: as if it all arrived now."""
        return raise_priority(-math.inf, cash, self._clock()) if cash > 0 else -math.inf

    def _add_norm(self, value: float, seq: int) -> None:
        """``"pending-cash"``: add account ``seq``'s change to the pending
        sum, and to its error bound (``seq`` for subclasses that watch
        accounts)."""
        exact_add(self._norm_partials, value)
        self._norm_error += _ROUNDING * abs(value)

    @property
    def _pending_norm(self) -> float:
        return math.fsum(self._norm_partials)

    def _pending_norms(self) -> Iterator[tuple[int, float]]:
        """``(seq, cash / mark)`` of every pending account (O(n))."""
        for acc in self._accounts.values():
            if acc.state == PENDING:
                yield acc.seq, acc.cash / acc.mark
        table = self._table
        for p in table.pending_rows():
            yield table.p_seq[p], table.p_cash[p] / table.p_mark[p]

    def _recount_norm(self) -> None:
        """``"pending-cash"``: the pending sum, recounted exactly (O(n))."""
        total = math.fsum(value for _, value in self._pending_norms())
        self._norm_partials = [total]
        self._norm_error = _ROUNDING * total

    def _push(self, acc: _Account) -> None:
        # The key inline (not self._key): this runs for every credit.
        if self._horizon:
            key = -acc.prio
        else:
            key = -acc.cash / acc.mark if self._by_cash else acc.mark - acc.cash
        self._push_entry(heap_entry(key, acc.seq), acc.host)

    def _row_key(self, p: int) -> float:
        """Heap key of pending row ``p`` (as :meth:`_key` of an object)."""
        table = self._table
        if self._horizon:
            return -table.p_prio[p]
        cash, mark = table.p_cash[p], table.p_mark[p]
        return -cash / mark if self._by_cash else mark - cash

    def _push_row(self, p: int) -> None:
        """Push the entry of pending row ``p`` (as :meth:`_push` would the object)."""
        table = self._table
        if self._horizon:
            key = -table.p_prio[p]
        else:  # inline (not _row_key): this runs for every credit
            cash, mark = table.p_cash[p], table.p_mark[p]
            key = -cash / mark if self._by_cash else mark - cash
        self._push_entry(heap_entry(key, table.p_seq[p]), table.hosts[table.p_host[p]])

    def _push_entry(self, entry: int, host: str) -> None:
        hq = self._hosts.get(host)
        if hq is None:
            hq = self._hosts[host] = _HostQueue()
        heapq.heappush(hq.heap, entry)
        self._entries += 1
        if hq.advertised is None or entry < hq.advertised:
            hq.advertised = entry
            heapq.heappush(self._host_heap, (entry, host))
        if self._entries > 64 and self._entries > 3 * self._totals.pending:
            self._compact()

    def _valid(self, entry: int) -> bool:
        seq = entry_seq(entry)
        table = self._table
        code = table.row_of[seq]
        # Keys inline (not _row_key / _key): this runs for every entry a pop looks at.
        if code <= -2:  # a pending row
            p = -code - 2
            if self._horizon:
                return heap_entry(-table.p_prio[p], seq) == entry
            cash, mark = table.p_cash[p], table.p_mark[p]
            return heap_entry(-cash / mark if self._by_cash else mark - cash, seq) == entry
        if code >= 0:  # crawled
            return False
        acc = self._accounts.get(table.url(seq))
        if acc is None or acc.state != PENDING or acc.seq != seq:
            return False
        if self._horizon:
            return heap_entry(-acc.prio, seq) == entry
        return heap_entry(-acc.cash / acc.mark if self._by_cash else acc.mark - acc.cash, seq) == entry

    def _seq_cash(self, seq: int) -> float:
        """Effective cash of the pending account ``seq`` (row or object)."""
        table = self._table
        code = table.row_of[seq]
        if code <= -2:
            p = -code - 2
            if self._by_cash:
                return table.p_cash[p] * self._dividend / table.p_mark[p]
            return table.p_cash[p] + (self._dividend - table.p_mark[p])
        return self._effective_cash(self._accounts[table.url(seq)])

    def _seq_order(self, seq: int) -> float:
        """What the pending account ``seq`` is ordered by: its effective
        cash, or its log priority with a horizon."""
        if not self._horizon:
            return self._seq_cash(seq)
        table = self._table
        code = table.row_of[seq]
        if code <= -2:
            return table.p_prio[-code - 2]
        return self._accounts[table.url(seq)].prio

    def _clean_top(self, hq: _HostQueue) -> int | None:
        heap = hq.heap
        while heap:
            if self._valid(heap[0]):
                return heap[0]
            heapq.heappop(heap)
            self._entries -= 1
        return None

    def _head(self) -> tuple[_HostQueue, int, str] | None:
        """The host heap's first valid host, its queue and top entry.

        Repairs stale host entries on the way; does not pop the valid one.
        """
        host_heap = self._host_heap
        while host_heap:
            advertised, host = host_heap[0]
            hq = self._hosts.get(host)
            if hq is None or hq.advertised != advertised:
                heapq.heappop(host_heap)
                continue
            top = self._clean_top(hq)
            if top is None:
                heapq.heappop(host_heap)
                del self._hosts[host]
                continue
            if top != advertised:
                # The advertised entry went stale (taken, refused): re-advertise.
                hq.advertised = top
                heapq.heapreplace(host_heap, (top, host))
                continue
            return hq, top, host
        return None

    def _compact(self) -> None:
        """Drop stale entries everywhere (amortised O(1) per push)."""
        live: dict[str, list[int]] = {}
        key = self._key
        for acc in self._accounts.values():
            if acc.state == PENDING:
                live.setdefault(acc.host, []).append(heap_entry(key(acc), acc.seq))
        table = self._table
        row_key = self._row_key
        for p in table.pending_rows():
            live.setdefault(table.hosts[table.p_host[p]], []).append(heap_entry(row_key(p), table.p_seq[p]))
        self._hosts = {}
        self._host_heap = []
        self._entries = 0
        for host, heap in live.items():
            heapq.heapify(heap)
            hq = self._hosts[host] = _HostQueue()
            hq.heap = heap
            hq.advertised = heap[0]
            self._host_heap.append((heap[0], host))
            self._entries += len(heap)
        heapq.heapify(self._host_heap)

    def _new_account(self, link: Link, cash: float, brought_in: float = 0.0) -> int:
        """A pending row for ``link`` holding ``cash`` plus ``brought_in``,
        new cash counted as injected (a visit's discovery cash); returns its seq."""
        if brought_in:
            self._totals.injected += brought_in
            cash += brought_in
        seq = self._next_seq
        self._next_seq += 1
        table = self._table
        table.add_name(seq, link.url)
        request = link.request
        p = table.add_pending(
            seq, cash, self._dividend, link.depth, link.host, request,
            -1 if request is None else self._referer_seq(request),
            self._fresh_priority(cash) if self._horizon else -math.inf,
        )
        self._totals.known += 1
        self._totals.pending += 1
        if self._by_cash and cash:
            self._add_norm(cash / self._dividend, seq)
        self._push_row(p)
        return seq

    def _credit_pending(self, p: int, amount: float, depth: int | None) -> None:
        """Credit pending row ``p`` as :meth:`_credit` does a pending object."""
        table = self._table
        if amount:
            if self._by_cash:  # settle first, as _add_pending_cash does
                mark = table.p_mark[p]
                if mark != self._dividend:
                    table.p_cash[p] = table.p_cash[p] * self._dividend / mark
                    table.p_mark[p] = self._dividend
                self._add_norm(amount / self._dividend, table.p_seq[p])
            table.p_cash[p] += amount
            if self._horizon and amount > 0:
                table.p_prio[p] = raise_priority(table.p_prio[p], amount, self._clock())
            self._push_row(p)
        if depth is not None and depth < table.p_depth[p]:
            table.p_depth[p] = depth

    def _object(self, url: str) -> _Account | None:
        """The account of ``url`` as an object: a pending row becomes one."""
        acc = self._accounts.get(url)
        if acc is None:
            table = self._table
            seq = table.find_seq(url)
            if seq is not None and table.row_of[seq] <= -2:
                return self._thaw_pending(-table.row_of[seq] - 2)
        return acc

    def _thaw_pending(self, p: int) -> _Account:
        """Pending row ``p`` as an object (same books, same heap entry)."""
        table = self._table
        seq = table.p_seq[p]
        url = table.url(seq)
        acc = _Account(
            table.p_cash[p], table.p_mark[p], table.p_depth[p], seq, table.hosts[table.p_host[p]],
            table.pending_request(p), url,
        )
        if table.p_prio is not None:
            acc.prio = table.p_prio[p]
        table.drop_pending(p)
        self._accounts[url] = acc
        return acc

    def _shrink(self, acc: _Account) -> None:
        """The never-fetched PENDING object ``acc`` to a pending row."""
        del self._accounts[acc.url]
        request = acc.request
        self._table.add_pending(
            acc.seq, acc.cash, acc.mark, acc.depth, acc.host, request,
            -1 if request is None else self._referer_seq(request), acc.prio,
        )

    def _set_state(self, acc: _Account, state: int) -> None:
        """Change state; settle the dividend before leaving the target set
        and start at the current dividend when entering it."""
        was_target = self._is_target(acc)
        if was_target:
            self._settle(acc)
        old = acc.state
        acc.state = state
        if self._by_cash and old == PENDING and state != PENDING:
            self._add_norm(-acc.cash / acc.mark, acc.seq)
            if self._totals.pending == 1:  # nothing left pending: exactly 0
                self._norm_partials, self._norm_error = [], 0.0
        if old == PENDING:
            self._totals.pending -= 1
        elif old == LEASED:
            self._totals.leased -= 1
        elif old == CRAWLED:
            self._crawled -= 1
        if state == PENDING:
            self._totals.pending += 1
        elif state == LEASED:
            self._totals.leased += 1
        elif state == CRAWLED:
            self._crawled += 1
        if not was_target and self._is_target(acc):
            acc.mark = self._dividend
            if self._by_cash and acc.cash:
                self._add_norm(acc.cash / self._dividend, acc.seq)

    def _resolve(self, url: str) -> tuple[str, _Account | None, bool]:
        """Follow aliases: ``(url, account, ok)``; ``ok`` is False on a loop
        or a chain longer than MAX_ALIAS_HOPS."""
        acc = self._accounts.get(url)
        hops = 0
        while acc is not None and acc.state == ALIAS:
            if hops == MAX_ALIAS_HOPS:
                return url, acc, False
            url = acc.request
            acc = self._accounts.get(url)
            hops += 1
        return url, acc, True

    def _credit(self, link: Link, amount: float, bonus: float = 0.0) -> int:
        """Credit ``amount`` to ``link``'s account (following aliases);
        returns the seq of ``link.url``'s account itself (the one to remember).
        A new account opened here also gets ``bonus`` of new cash, counted
        as injected (a visit's discovery cash; a transfer's target gets none)."""
        acc = self._accounts.get(link.url)
        if acc is None:
            table = self._table
            seq, code = table.find_row(link.url)
            if code >= 0:
                self._credit_row(code, amount, link.depth)
            elif code <= -2:
                self._credit_pending(-code - 2, amount, link.depth)
            else:  # a URL first known through a link: its discovery cash with it
                return self._new_account(link, amount, bonus)
            return seq
        state = acc.state
        if state == ALIAS:
            self._credit_resolved(link, amount, bonus)
        elif state == REFUSED or state == FAILED:
            self._totals.lambda_cash += amount
        else:
            # Fast path (no alias): the common case of a visit's credits.
            if amount:
                if state == PENDING:
                    if self._by_cash:
                        self._add_pending_cash(acc, amount)
                    else:
                        acc.cash += amount
                    if self._horizon:
                        self._raise(acc, amount)
                    self._push(acc)
                else:
                    acc.cash += amount
                    if state == CRAWLED and acc.links is not None:
                        self._push_rich(self._rich_key(acc), acc.seq)
            if link.depth < acc.depth:
                acc.depth = link.depth
        return acc.seq

    def _credit_row(self, row: int, amount: float, depth: int) -> None:
        """Credit the crawled account of ``row`` (crawled accounts do not
        settle on a credit: their key moves with their cash alone)."""
        table = self._table
        if amount:
            table.cash[row] += amount
            if self._keep_links and table.link_count[row] >= 0:
                self._push_rich(self._row_rich_key(row), table.seq[row])
        if depth < table.depth[row]:
            table.depth[row] = depth

    def _credit_resolved(self, link: Link, amount: float, bonus: float = 0.0) -> None:
        url, acc, ok = self._resolve(link.url)
        if not ok:
            self._totals.lambda_cash += amount
            return
        if acc is None:
            table = self._table
            _, code = table.find_row(url)
            if code >= 0:
                self._credit_row(code, amount, link.depth)
                return
            if code <= -2:
                self._credit_pending(-code - 2, amount, link.depth)
                return
            if url != link.url:  # an alias whose target vanished: cannot happen
                self._totals.lambda_cash += amount
                return
            self._new_account(link, amount, bonus)
            return
        state = acc.state
        if state in (REFUSED, FAILED):
            self._totals.lambda_cash += amount
            return
        if amount:
            if state == PENDING:
                self._add_pending_cash(acc, amount)
                if self._horizon:
                    self._raise(acc, amount)
            else:
                acc.cash += amount
        if link.depth < acc.depth:
            acc.depth = link.depth
        if amount:
            if state == PENDING:
                self._push(acc)
            elif state == CRAWLED and acc.links is not None:
                self._push_rich(self._rich_key(acc), acc.seq)

    def _credit_seq(self, seq: int, amount: float) -> None:
        """Credit a remembered account (a virtual revisit's link)."""
        table = self._table
        row = table.row_of[seq]
        if row >= 0:
            if amount:
                table.cash[row] += amount
                if self._keep_links and table.link_count[row] >= 0:
                    self._push_rich(self._row_rich_key(row), seq)
            return
        if row <= -2:
            self._credit_pending(-row - 2, amount, None)
            return
        acc = self._accounts[table.url(seq)]
        state = acc.state
        if state == ALIAS:
            self._credit_resolved(Link(acc.url, acc.host, acc.depth), amount)
        elif state == REFUSED or state == FAILED:
            self._totals.lambda_cash += amount
        elif amount:
            if state == PENDING:
                self._add_pending_cash(acc, amount)
                if self._horizon:
                    self._raise(acc, amount)
                self._push(acc)
            else:
                acc.cash += amount
                if state == CRAWLED and acc.links is not None:
                    self._push_rich(self._rich_key(acc), acc.seq)

    # -- crawled rows -------------------------------------------------------------

    def _row_rich_key(self, row: int) -> float:
        table = self._table
        return table.mark[row] - table.cash[row] if self._all_targets else -table.cash[row]

    def _row_cash(self, row: int) -> float:
        """Effective cash of a crawled row (dividends owed included)."""
        table = self._table
        if self._all_targets:
            return table.cash[row] + (self._dividend - table.mark[row])
        return table.cash[row]

    def _settle_row(self, row: int) -> None:
        table = self._table
        if self._all_targets and table.mark[row] != self._dividend:
            table.cash[row] += self._dividend - table.mark[row]
            table.mark[row] = self._dividend

    def _freeze(self, acc: _Account) -> int:
        """Move the CRAWLED account ``acc`` from its object to a row."""
        table = self._table
        referer = self._referer_seq(acc.request)  # before acc leaves the dict: it may name itself
        del self._accounts[acc.url]
        # A dict never shrinks when keys are deleted: once the crawled
        # accounts that left it outnumber twice those in it, copy it (O(n),
        # amortised O(1) per crawled page).
        self._deleted += 1
        if self._deleted > 2 * len(self._accounts) + 4096:
            self._accounts = dict(self._accounts)
            self._deleted = 0
        row = table.add(acc.seq, acc.host, acc.depth, acc.request, referer)
        table.cash[row] = acc.cash
        if table.mark is not None:
            table.mark[row] = acc.mark
        table.history[row] = acc.history
        table.set_last_visit(row, acc.last_visit)
        table.set_visits(row, acc.visits)
        table.set_links(row, acc.links)
        return row

    def _referer_seq(self, request: object) -> int:
        """The seq of a name equal to the Referer of a ``Referred(None,
        referer)`` request, or -1 (the request is kept as it is). The links
        of one page share one Referer: the last answer is kept."""
        if type(request) is not Referred or request.url is not None:
            return -1
        referer = request.referer
        last = self._last_referer
        if referer == last[0]:  # equal bytes, not the same object: a header each
            return last[1]
        seq = self._table.find_seq(referer.decode("latin-1"))  # one str per byte string, and back
        seq = -1 if seq is None else seq
        self._last_referer = (referer, seq)
        return seq

    def _thaw(self, row: int) -> _Account:
        """The crawled account of ``row`` as an object again (re-pended,
        refused), still CRAWLED; its row is kept for a later crawl."""
        table = self._table
        seq = table.seq[row]
        url = table.url(seq)
        mark = table.mark[row] if table.mark is not None else self._dividend
        acc = _Account(
            table.cash[row], mark, table.depth[row], seq, table.hosts[table.host[row]], table.request(row), url
        )
        acc.history = table.history[row]
        acc.last_visit = table.get_last_visit(row)
        acc.visits = table.visits[row]
        acc.state = CRAWLED
        acc.links = table.links(row)
        table.kill(row)
        self._accounts[url] = acc
        return acc

    def _row_view(self, row: int) -> AccountView:
        table = self._table
        return AccountView(
            table.url(table.seq[row]),
            CRAWLED,
            self._row_cash(row),
            table.history[row],
            0.0,
            table.visits[row],
            table.get_last_visit(row),
            table.depth[row],
            table.hosts[table.host[row]],
            None,
        )

    def _link_of(self, seq: int) -> Link:
        table = self._table
        row = table.row_of[seq]
        if row >= 0:
            return Link(table.url(seq), table.hosts[table.host[row]], table.depth[row])
        if row <= -2:
            p = -row - 2
            return Link(table.url(seq), table.hosts[table.p_host[p]], table.p_depth[p])
        acc = self._accounts[table.url(seq)]
        return Link(acc.url, acc.host, acc.depth)

    def request_of(self, url: str) -> object:
        """The stored request data of ``url``, if any."""
        acc = self._accounts.get(url)
        if acc is not None:
            return acc.request
        table = self._table
        _, code = table.find_row(url)
        if code >= 0:
            return table.request(code)
        return table.pending_request(-code - 2) if code <= -2 else None

    # -- link memory helpers ----------------------------------------------------

    def _rich_key(self, acc: _Account) -> float:
        return acc.mark - acc.cash if self._all_targets else -acc.cash

    def _push_rich(self, key: float, seq: int) -> None:
        rich = self._rich
        heapq.heappush(rich, heap_entry(key, seq))
        if len(rich) > 64 and len(rich) > 3 * self._crawled:
            self._rebuild_rich()

    def _rebuild_rich(self) -> None:
        """One entry per crawled account that can be revisited."""
        everyone = self._all_targets  # "all": payouts may raise a 0-cash account
        table = self._table
        self._rich = [
            heap_entry(self._row_rich_key(row), table.seq[row])
            for row in table.rows()
            if table.links_on and table.link_count[row] >= 0 and (everyone or table.cash[row] > 0)
        ]
        heapq.heapify(self._rich)

    def _open_lease(self, url: str, acc: _Account) -> Lease:
        self._set_state(acc, LEASED)
        cash = acc.cash
        acc.cash = 0.0
        self._next_lease += 1
        self._leases[url] = (self._next_lease, cash)
        self._totals.in_flight += cash
        return Lease(
            url,
            self._next_lease,
            cash,
            acc.host,
            acc.depth,
            acc.request,
            acc.history,
            acc.last_visit,
            acc.visits,
            acc.prio if self._horizon else cash,
        )

    def _close_lease(self, url: str, lease_id: int) -> tuple[_Account, float] | None:
        lease = self._leases.get(url)
        if lease is None or lease[0] != lease_id:
            return None
        del self._leases[url]
        cash = lease[1]
        # Recount from scratch when nothing is in flight: no float drift.
        self._totals.in_flight = self._totals.in_flight - cash if self._leases else 0.0
        acc = self._accounts[url]
        self._settle(acc)
        return acc, cash

    # -- reading ------------------------------------------------------------

    def totals(self) -> Totals:
        return self._totals

    def _view(self, url: str, acc: _Account) -> AccountView:
        lease = self._leases.get(url)
        return AccountView(
            url,
            acc.state,
            self._effective_cash(acc),
            acc.history,
            lease[1] if lease else 0.0,
            acc.visits,
            acc.last_visit,
            acc.depth,
            acc.host,
            acc.request if acc.state == ALIAS else None,
        )

    def _pending_view(self, p: int) -> AccountView:
        table = self._table
        seq = table.p_seq[p]
        return AccountView(
            table.url(seq), PENDING, self._seq_cash(seq), 0.0, 0.0, 0, None, table.p_depth[p],
            table.hosts[table.p_host[p]], None,
        )

    def get(self, url: str) -> AccountView | None:
        acc = self._accounts.get(url)
        if acc is not None:
            return self._view(url, acc)
        table = self._table
        _, code = table.find_row(url)
        if code >= 0:
            return self._row_view(code)
        return self._pending_view(-code - 2) if code <= -2 else None

    def knows(self, url: str) -> bool:
        if url in self._accounts:
            return True
        seq = self._table.find_seq(url)
        # NO_ROW and no object: an empty name a restore put in a gap
        return seq is not None and self._table.row_of[seq] != NO_ROW

    def iter_accounts(self) -> Iterator[AccountView]:
        for url, acc in self._accounts.items():
            yield self._view(url, acc)
        for p in self._table.pending_rows():
            yield self._pending_view(p)
        for row in self._table.rows():
            yield self._row_view(row)

    def peek(self) -> tuple[str, float] | None:
        head = self._head()
        if head is None:
            return None
        _, top, _ = head
        seq = entry_seq(top)
        return self._table.url(seq), self._seq_cash(seq)

    # -- snapshots (JOBDIR) -------------------------------------------------

    def snapshot(self, *, exact: bool = False) -> tuple[dict, Iterator[list]]:
        """``(header, records)``: the whole store as JSON-able data.

        A record's cash is the account's cash with the dividends it is owed
        (format 2). With ``exact`` (format 3, what a ``JOBDIR`` writes) the
        snapshot holds the store as it is held, so that :meth:`restore`
        gives back every float bit for bit and a resumed crawl goes on as
        this one would (``docs/troubleshooting.rst``): the header's
        ``"exact"`` part has lambda's cumulative dividend (or scale), the
        pending-cash sum's exact partials and error bound, the cash in
        flight, the open leases (in the order they were opened) and the
        distinct dividend marks; an account lambda pays has its raw cash
        (dividends owed not added) and, as a 13th field, the index of its
        mark in that list (marks are few: one per lambda visit at most);
        leased accounts are written as such. Without ``exact`` open leases
        are refused (give them back first)."""
        if self._leases and not exact:
            raise RuntimeError("snapshot with open leases: requeue them first")
        t = self._totals
        header = {
            "lambda_targets": self.lambda_targets,
            "injected": t.injected,
            "lambda_cash": t.lambda_cash,
            "lambda_history": t.lambda_history,
            "history_sum": t.history_sum,
            "lambda_visits": t.lambda_visits,
            "visits": t.visits,
            "virtual_visits": t.virtual_visits,
            "next_seq": self._next_seq,
            "next_lease": self._next_lease,
            "priority_horizon": self._horizon,
            "discovery_cash": self.discovery_cash,
        }
        table = self._table
        all_targets = self._all_targets
        marks: dict[float, int] = {}
        if exact:
            # The columns whole (C speed; a free row's mark is an old one,
            # kept only when not above the dividend, which every live
            # mark is: a rebase can leave free rows above it).
            found = dict.fromkeys(table.p_mark)
            if all_targets:
                found.update(dict.fromkeys(table.mark))
            is_target = self._is_target
            found.update(dict.fromkeys(acc.mark for acc in self._accounts.values() if is_target(acc)))
            dividend = self._dividend
            marks = {mark: i for i, mark in enumerate(m for m in found if m <= dividend)}
            header["exact"] = {
                "lambda_targets": self.lambda_targets,  # how to read the marks, should the header be lost
                "dividend": self._dividend,
                "norm": list(self._norm_partials),
                "norm_error": self._norm_error,
                "in_flight": t.in_flight,
                "leases": [[url, lease_id, cash] for url, (lease_id, cash) in self._leases.items()],
                "marks": list(marks),
            }
        horizon = self._horizon

        def saved(prio: float) -> float | None:  # -inf (no credit yet) is not JSON
            return prio if horizon and prio != -math.inf else None

        def records() -> Iterator[list]:
            for url, acc in self._accounts.items():
                state = acc.state
                raw = exact and self._is_target(acc)
                record = [
                    url,
                    state,
                    acc.cash if raw else self._effective_cash(acc),
                    acc.history,
                    acc.last_visit,
                    acc.visits,
                    acc.depth,
                    acc.seq,
                    acc.host,
                    acc.request,
                    None if acc.links is None else [table.url(seq) for seq in acc.links],
                    saved(acc.prio) if state == PENDING or state == LEASED else None,
                ]
                if raw:
                    record.append(marks[acc.mark])
                yield record
            # Most accounts: columns and methods read once.
            p_seq, p_cash, p_mark, p_depth, p_host, p_prio = (
                table.p_seq, table.p_cash, table.p_mark, table.p_depth, table.p_host, table.p_prio)
            url_of, hosts, request_of, seq_cash = table.url, table.hosts, table.pending_request, self._seq_cash
            for p in table.pending_rows():
                seq = p_seq[p]
                record = [
                    url_of(seq),
                    PENDING,
                    p_cash[p] if exact else seq_cash(seq),
                    0.0,
                    None,
                    0,
                    p_depth[p],
                    seq,
                    hosts[p_host[p]],
                    request_of(p),
                    None,
                    saved(p_prio[p]) if horizon else None,
                ]
                if exact:
                    record.append(marks[p_mark[p]])
                yield record
            for row in table.rows():
                seq = table.seq[row]
                links = table.links(row)
                raw = exact and all_targets
                record = [
                    table.url(seq),
                    CRAWLED,
                    table.cash[row] if raw else self._row_cash(row),
                    table.history[row],
                    table.get_last_visit(row),
                    table.visits[row],
                    table.depth[row],
                    seq,
                    table.hosts[table.host[row]],
                    table.request(row),
                    None if links is None else [table.url(s) for s in links],
                    None,
                ]
                if raw:
                    record.append(marks[table.mark[row]])
                yield record

        return header, records()

    @classmethod
    def restore(cls, header: dict, records: Iterable[list], *, priority_horizon: float = 0.0) -> MemoryStore:
        """A store equal to the one :meth:`snapshot` described, ordered with
        ``priority_horizon``. A pending account's saved priority is used
        when the snapshot was written with that horizon and the value reads
        back as a finite number (or none: no credit yet); otherwise (an
        older snapshot, another horizon, a corrupt value) it is given
        ``log(cash) + priority_clock(visits, horizon)`` and counted in
        :attr:`priority_fallbacks`.

        An ``exact`` snapshot gives back the very floats it was written
        from, each checked first (finite, in range, and consistent with the
        rest: marks between where the dividend started and where it is, the
        pending-cash sum with the accounts, the leases with the cash in
        flight and their accounts, the books balanced); any that is not
        raises :class:`ValueError`. One without it (format 2) is read as it
        always was: dividends settled, the pending-cash sum recounted."""
        store = cls(header["lambda_targets"])
        t = store._totals
        for name in ("injected", "lambda_cash", "lambda_history", "history_sum"):
            setattr(t, name, float(header[name]))
        t.lambda_visits = int(header["lambda_visits"])
        t.visits = int(header["visits"])
        t.virtual_visits = int(header.get("virtual_visits", 0))
        store._next_seq = int(header["next_seq"])
        store._next_lease = int(header["next_lease"])
        # A journal replayed on top continues with the amount its visits had.
        store.set_discovery_cash(float(header.get("discovery_cash", 0.0)))
        exact = header.get("exact")
        if exact is not None:
            store._dividend = _checked_dividend(store, exact)
            leases = _checked_leases(exact, store._next_lease)
            marks = _checked_marks(store, exact)
        horizon = float(priority_horizon)
        if horizon:
            store.set_priority_horizon(horizon)
        # Saved priorities are comparable only under the horizon they were kept with.
        usable = bool(horizon) and header.get("priority_horizon") == horizon
        remembered: list[tuple[_Account, list]] = []
        held = []  # exact: every account's cash, dividends owed included (the balance is checked)
        if exact is not None:
            dividend, by_cash = store._dividend, store._by_cash
            targets = _ALL_TARGET_STATES if store._all_targets else (PENDING,)
        for record in records:
            url, state, cash, history, last_visit, visits, depth, seq, host, request = record[:10]
            # Snapshots written before link memory have 10 fields, before priorities 11.
            links = record[10] if len(record) > 10 else None
            if url in store._accounts:  # (the books would count it twice)
                raise ValueError(f"snapshot holds {url} twice")
            acc = _Account(float(cash), store._dividend, int(depth), int(seq), host, request, url)
            acc.state = int(state)
            if exact is not None:
                cash = acc.cash
                if not 0.0 <= cash < 1e30:
                    raise ValueError(f"{url}: cash {cash!r} is not an amount of cash")
                if acc.state in targets:  # raw cash, and its mark: what it is owed
                    index = record[12] if len(record) > 12 else None
                    if type(index) is not int or not 0 <= index < len(marks):
                        raise ValueError(f"{url}: mark {index!r} is not one of the {len(marks)} marks")
                    acc.mark = mark = marks[index]
                    cash = cash * dividend / mark if by_cash else cash + (dividend - mark)
                elif acc.state == LEASED and url not in leases:
                    raise ValueError(f"snapshot holds a leased account without its lease: {url}")
                held.append(cash)
            elif acc.state == LEASED:
                raise ValueError(f"snapshot holds a leased account: {url}")
            if horizon and acc.state in (PENDING, LEASED):
                prio = record[11] if usable and len(record) > 11 else math.nan
                if prio is None:
                    acc.prio = -math.inf  # no credit yet
                elif type(prio) in (float, int) and math.isfinite(prio):
                    acc.prio = float(prio)
                else:  # missing, another horizon's, or corrupt (NaN, inf, not a number): never used
                    fallback = acc.cash if acc.state == PENDING else leases[url][1]
                    acc.prio = store._fresh_priority(fallback)
                    store.priority_fallbacks += 1
            if links is not None and store._keep_links:
                remembered.append((acc, links))
            acc.history = float(history)
            acc.last_visit = last_visit
            acc.visits = int(visits)
            store._accounts[url] = acc
            t.known += 1
            if acc.state == PENDING:
                t.pending += 1
            elif acc.state == CRAWLED:
                store._crawled += 1
            elif acc.state == LEASED:
                t.leased += 1
        accounts = store._accounts
        if exact is not None:
            for url, (lease_id, cash) in leases.items():
                acc = accounts.get(url)
                if acc is None or acc.state != LEASED:
                    raise ValueError(f"lease on {url} without a leased account")
                store._leases[url] = (lease_id, cash)
            if t.leased != len(leases):
                raise ValueError(f"{t.leased} leased accounts for {len(leases)} leases")
            t.in_flight = checked_amount(exact["in_flight"], "cash in flight")
            in_flight = math.fsum(cash for _, cash in leases.values())
            if abs(t.in_flight - in_flight) > 1e-9 * max(in_flight, 1.0):
                raise ValueError(f"cash in flight {t.in_flight!r} where the leases hold {in_flight!r}")
            books = math.fsum(held) + t.lambda_cash + t.in_flight
            if abs(books - t.injected) > 1e-9 * max(t.injected, 1.0):
                raise ValueError(f"unbalanced books: the accounts, lambda and in flight hold {books!r} "
                                 f"where {t.injected!r} was injected")
        # Seqs only order (heap ties, discovery order): the accounts are
        # numbered again from 0 in the order they had, so the names table
        # (dense by seq) holds exactly the accounts. A gap (the accounts an
        # earlier salvage lost, or an edited header or seq: next_seq 2**31 - 1
        # made the first new account fill two billion empty names) costs
        # nothing, and is counted. A snapshot no salvage touched has no gap:
        # its seqs stay as written, and a resume goes on bit for bit.
        table = store._table
        previous = -1
        for seq, acc in enumerate(sorted(accounts.values(), key=lambda a: a.seq)):
            if acc.seq == previous:
                raise ValueError(f"snapshot holds seq {acc.seq} twice: {acc.url}")
            if acc.seq >= store._next_seq:  # only seqs handed out
                raise ValueError(f"{acc.url}: seq {acc.seq} where only {store._next_seq} were handed out")
            previous, acc.seq = acc.seq, seq
            table.add_name(seq, acc.url)
        store.unused_seqs = store._next_seq - len(accounts)
        store._next_seq = len(accounts)
        for acc, links in remembered:
            acc.links = tuple(accounts[u].seq for u in links if u in accounts)
        for acc in [acc for acc in accounts.values() if acc.state == CRAWLED]:
            store._freeze(acc)
        for acc in [acc for acc in accounts.values() if acc.state == PENDING]:
            if acc.history == 0.0 and acc.visits == 0 and acc.last_visit is None and acc.links is None:
                store._shrink(acc)  # never fetched: a row, as it was
        store._compact()
        store._rebuild_rich()
        if exact is not None:
            _restore_norm(store, exact)
        elif store._by_cash:
            store._recount_norm()
        return store

    # -- cash in ------------------------------------------------------------

    def set_discovery_cash(self, cash: float) -> None:
        if not 0.0 <= cash < math.inf:
            raise ValueError(f"discovery cash must be a finite amount >= 0, got {cash!r}")
        self.discovery_cash = float(cash)

    def inject(self, link: Link, cash: float) -> bool:
        if self.knows(link.url):
            return False
        self._totals.injected += cash
        self._new_account(link, cash)
        return True

    def register(self, link: Link) -> int | None:
        url, acc, _ = self._resolve(link.url)
        if acc is None:
            table = self._table
            _, code = table.find_row(url)
            if code >= 0:
                if link.depth < table.depth[code]:
                    table.depth[code] = link.depth
                return CRAWLED
            if code <= -2:
                if link.depth < table.p_depth[-code - 2]:
                    table.p_depth[-code - 2] = link.depth
                return PENDING
            self._new_account(link, 0.0)
            return None
        if link.depth < acc.depth:
            acc.depth = link.depth
        return acc.state

    def repend(self, link: Link) -> bool:
        url, acc, ok = self._resolve(link.url)
        if ok and acc is None:
            row = self._table.find(url)
            if row is not None:
                acc = self._thaw(row)
        if not ok or acc is None or acc.state not in (CRAWLED, FAILED):
            return False
        if link.request is not None:
            acc.request = link.request
        self._set_state(acc, PENDING)
        if self._horizon:
            acc.prio = self._fresh_priority(self._effective_cash(acc))
        self._push(acc)
        return True

    # -- selection ----------------------------------------------------------

    def pop(self, ready: Callable[[str], bool], min_share: float = 0.0) -> Lease | None:
        skipped: list[tuple[int, str]] = []
        floor = None
        # The share compares the cash URLs hold beyond the discovery cash
        # each brought in: a host that mints URLs (a link farm) gets as much
        # of it per URL as any other host, so counted in, its URLs would pass
        # the test on cash they were given for being new and the farm would
        # fund itself with the free slots (issue 18; cash order only).
        minted = 0.0 if self._horizon else self.discovery_cash
        try:
            while True:
                head = self._head()
                if head is None:
                    return None
                hq, top, host = head
                if min_share > 0:
                    order = self._seq_order(entry_seq(top))
                    if minted:
                        order = order - minted if order > minted else 0.0
                    if floor is None:  # the first head is the richest of all
                        floor = order + math.log(min_share) if self._horizon else order * min_share
                    elif order < floor:
                        return None  # hosts come richest first: every later one is poorer
                if not ready(host):
                    skipped.append(heapq.heappop(self._host_heap))
                    continue
                heapq.heappop(self._host_heap)
                heapq.heappop(hq.heap)
                self._entries -= 1
                seq = entry_seq(top)
                code = self._table.row_of[seq]
                # the entry is valid: a pending row, or a pending object
                acc = self._thaw_pending(-code - 2) if code <= -2 else self._accounts[self._table.url(seq)]
                lease = self._open_lease(acc.url, acc)
                nxt = self._clean_top(hq)
                if nxt is None:
                    del self._hosts[host]
                else:
                    hq.advertised = nxt
                    heapq.heappush(self._host_heap, (nxt, host))
                return lease
        finally:
            for entry in skipped:
                heapq.heappush(self._host_heap, entry)

    def order_at_rank(self, rank: int) -> float | None:
        """Best-first over the host heaps (each an array in heap order,
        stale entries included: their order still bounds their children):
        O(rank log(rank + hosts)), never a pass over every account."""
        if rank <= 0:
            return None
        heaps = [hq.heap for hq in self._hosts.values() if hq.heap]
        candidates = [(heap[0], k, 0) for k, heap in enumerate(heaps)]
        heapq.heapify(candidates)
        found = 0
        counted: set[int] = set()  # a requeue pushes an entry equal to the one left in the heap
        while candidates:
            entry, k, i = heapq.heappop(candidates)
            heap = heaps[k]
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap):
                    heapq.heappush(candidates, (heap[child], k, child))
            if entry not in counted and self._valid(entry):
                counted.add(entry)
                found += 1
                if found == rank:
                    return self._seq_order(entry_seq(entry))
        return -math.inf if self._horizon else 0.0

    def take(self, url: str) -> Lease | None:
        acc = self._object(url)
        if acc is None or acc.state != PENDING:
            return None
        return self._open_lease(url, acc)

    def visit_lambda(self) -> float:
        t = self._totals
        targets = t.pending + (t.leased + self._crawled if self._all_targets else 0)
        amount = t.lambda_cash
        if targets == 0 or amount <= 0:
            return 0.0
        if self._by_cash:
            if not self._pay_by_cash(amount):
                return 0.0
        else:
            self._dividend += amount / targets
        t.lambda_cash = 0.0
        t.lambda_history += amount
        t.history_sum += amount
        t.lambda_visits += 1
        return amount

    def _pay_by_cash(self, amount: float) -> bool:
        """Multiply every pending account's cash by ``1 + amount / P``;
        False (lambda keeps its cash) when no pending account holds any."""
        norm = self._pending_norm
        if self._norm_error > _MAX_NORM_ERROR * norm:
            self._recount_norm()  # also when rounding left it at 0 or below
            norm = self._pending_norm
        if norm <= 0.0:
            return False
        # sum(cash) over pending = norm * scale; it grows by exactly amount.
        self._dividend += amount / norm
        if self._dividend > _MAX_SCALE:
            self._rebase()
        return True

    def _rebase(self) -> None:
        """Settle every pending account and restart the scale at 1 (O(n),
        once per 1e12-fold growth): keeps new credits far from underflow."""
        for acc in self._accounts.values():
            if acc.state == PENDING:
                acc.cash = acc.cash * self._dividend / acc.mark
                acc.mark = 1.0
        table = self._table
        for p in table.pending_rows():
            table.p_cash[p] = table.p_cash[p] * self._dividend / table.p_mark[p]
            table.p_mark[p] = 1.0
        self._dividend = 1.0
        self._compact()  # new keys
        self._recount_norm()  # new cash: the sum recounted

    # -- settling -------------------------------------------------------------

    def settle_visit(
        self,
        url: str,
        lease_id: int,
        history: float,
        visited_at: float,
        credits: Iterable[Credit],
    ) -> bool:
        closed = self._close_lease(url, lease_id)
        if closed is None:
            return False
        acc, cash = closed
        self._set_state(acc, CRAWLED)
        self._totals.history_sum += history - acc.history
        acc.history = history
        acc.last_visit = visited_at
        acc.visits += 1
        self._totals.visits += 1
        paid = 0.0
        credit = self._credit
        bonus = self.discovery_cash  # what each new account opened here brings in
        if self._keep_links:
            remembered = []
            append = remembered.append
            for link, amount in credits:
                paid += amount
                append(credit(link, amount, bonus))
            acc.links = remembered
        else:
            for link, amount in credits:
                paid += amount
                credit(link, amount, bonus)
        self._totals.lambda_cash += _rest(cash, paid)
        row = self._freeze(acc)
        if acc.links is not None and (self._all_targets or acc.cash > 0):
            self._push_rich(self._row_rich_key(row), acc.seq)
        return True

    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        closed = self._close_lease(url, lease_id)
        if closed is None:
            return False
        acc, cash = closed
        self._set_state(acc, REFUSED if refuse else FAILED)
        # A dead page holds no cash: what it had, and what was in flight, go to lambda.
        self._totals.lambda_cash += cash + acc.cash
        acc.cash = 0.0
        return True

    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        if target.url == url:
            if not self.settle_requeue(url, lease_id):
                return False
            if target.request is not None:
                self._accounts[url].request = target.request
            return True
        closed = self._close_lease(url, lease_id)
        if closed is None:
            return False
        acc, cash = closed
        self._set_state(acc, ALIAS)
        amount = cash + acc.cash
        acc.cash = 0.0
        acc.request = target.url
        self._credit(target._replace(depth=min(target.depth, acc.depth)), amount)
        return True

    def settle_requeue(self, url: str, lease_id: int) -> bool:
        closed = self._close_lease(url, lease_id)
        if closed is None:
            return False
        acc, cash = closed
        self._set_state(acc, PENDING)
        self._add_pending_cash(acc, cash)
        self._push(acc)
        return True

    def open_leases(self) -> list[tuple[str, int]]:
        return [(url, lease[0]) for url, lease in self._leases.items()]

    # -- link memory ------------------------------------------------------------

    def remembered_links(self, url: str) -> list[Link] | None:
        acc = self._accounts.get(url)
        if acc is not None:
            seqs = acc.links
        else:
            row = self._table.find(url)
            seqs = None if row is None else self._table.links(row)
        if seqs is None:
            return None
        return [self._link_of(seq) for seq in seqs]

    def keep_links(self, enabled: bool) -> None:
        if not enabled and self._keep_links:
            for acc in self._accounts.values():
                acc.links = None
            self._table.forget_links()
            self._rich = []
        elif enabled:
            self._table.remember_links()
        self._keep_links = bool(enabled)

    def peek_crawled(self) -> tuple[str, float] | None:
        rich, table = self._rich, self._table
        while rich:
            entry = rich[0]
            seq = entry_seq(entry)
            row = table.row_of[seq]
            if row >= 0 and table.links_on and table.link_count[row] >= 0 and heap_entry(self._row_rich_key(row), seq) == entry:
                url = table.url(seq)
                self._peeked = (url, row)  # the engine revisits it next: no lookup then
                return url, self._row_cash(row)
            heapq.heappop(rich)  # stale: revisited, credited again, re-pended...
        return None

    def revisit(self, url: str, lambda_tax: float | None) -> tuple[float, float, int] | None:
        table = self._table
        peeked = self._peeked
        if peeked is not None and peeked[0] is url and table.row_of[table.seq[peeked[1]]] == peeked[1]:
            row = peeked[1]
        elif url in self._accounts:  # an object: not a crawled account
            return None
        else:
            row = table.find(url)
            if row is None:
                return None
        links = table.links(row)
        if links is None:
            return None
        self._settle_row(row)
        cash = table.cash[row]
        table.cash[row] = 0.0
        _, share = lambda_split(cash, len(links), lambda_tax)
        t = self._totals
        # Plain OPIC: the cash passed on joins the history (no window here).
        table.history[row] += cash
        t.history_sum += cash
        t.virtual_visits += 1
        paid = 0.0
        credit = self._credit_seq
        for linked in links:
            paid += share
            credit(linked, share)
        t.lambda_cash += _rest(cash, paid)
        if self._all_targets or table.cash[row] > 0:
            # it keeps earning lambda dividends
            self._push_rich(self._row_rich_key(row), table.seq[row])
        return cash, share, len(links)

    def refuse(self, url: str, host: str, depth: int) -> None:
        acc = self._object(url)
        if acc is None:
            row = self._table.find(url)
            if row is not None:
                acc = self._thaw(row)
            else:
                self._new_account(Link(url, host, depth), 0.0)
                acc = self._object(url)
        if acc.state in (PENDING, CRAWLED, FAILED):
            self._set_state(acc, REFUSED)
            self._totals.lambda_cash += acc.cash
            acc.cash = 0.0


def _rest(cash: float, paid: float) -> float:
    """What credits summing to ``paid`` leave of a visit's ``cash``, for
    lambda. Shares of the cash summed in another order can leave a rounding
    residue below zero, which would make lambda's cash negative (refused
    when a ``JOBDIR`` header is read back): it counts as zero. Anything
    larger is the caller's, passed on as is."""
    rest = cash - paid
    return 0.0 if -1e-12 * cash < rest < 0.0 else rest


# -- checks of an exact snapshot (MemoryStore.restore) ---------------------------------------------


def checked_amount(value, what: str) -> float:
    """An amount of cash read back from disk: finite and not negative. JSON
    parsing already refuses NaN and Infinity; this refuses the rest a damaged
    or edited line can hold ("abc", -5, 1e308), before anything is changed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e30:
        raise ValueError(f"{what} {value!r} is not an amount of cash")
    return float(value)


def _checked_dividend(store: MemoryStore, exact: dict) -> float:
    """Lambda's cumulative dividend: from 0 up (additive), or the scale, from
    1 to where it is brought back to 1 (``"pending-cash"``)."""
    dividend = exact.get("dividend")
    low, high = (1.0, _MAX_SCALE) if store._by_cash else (0.0, 1e30)
    if isinstance(dividend, bool) or not isinstance(dividend, (int, float)) or not low <= dividend <= high:
        raise ValueError(f"lambda's dividend {dividend!r} is not in [{low:g}, {high:g}]")
    return float(dividend)


def _checked_leases(exact: dict, next_lease: int) -> dict[str, tuple[int, float]]:
    """The open leases, in the order they were opened: distinct URLs and ids
    up to the last id handed out, each with an amount of cash."""
    leases = exact.get("leases")
    if not isinstance(leases, list):
        raise ValueError(f"leases {leases!r} are not a list")
    out: dict[str, tuple[int, float]] = {}
    ids = set()
    for lease in leases:
        if not (isinstance(lease, list) and len(lease) == 3 and isinstance(lease[0], str)
                and type(lease[1]) is int and 0 < lease[1] <= next_lease):
            raise ValueError(f"lease {lease!r} is not [url, id up to {next_lease}, cash]")
        if lease[0] in out or lease[1] in ids:
            raise ValueError(f"lease {lease!r} repeats a URL or an id")
        out[lease[0]] = (lease[1], checked_amount(lease[2], f"lease on {lease[0]}: cash"))
        ids.add(lease[1])
    return out


def _checked_marks(store: MemoryStore, exact: dict) -> list[float]:
    """The distinct dividend marks: each between where the dividend started
    (0, or the scale's 1) and where it is now (it only grows)."""
    marks, dividend = exact.get("marks"), store._dividend
    low = 1.0 if store._by_cash else 0.0
    if not isinstance(marks, list):
        raise ValueError(f"marks {marks!r} are not a list")
    for mark in marks:
        if isinstance(mark, bool) or not isinstance(mark, (int, float)) or not low <= mark <= dividend:
            raise ValueError(f"mark {mark!r} is not in [{low:g}, {dividend!r}] (lambda's dividend)")
    return [float(mark) for mark in marks]


def _restore_norm(store: MemoryStore, exact: dict) -> None:
    """The pending-cash sum as it was kept (its exact partials and its error
    bound), after checking it against the accounts: within the bound (or
    1e-9 of it), which a recount before a payout also allows."""
    partials, error = exact.get("norm"), exact.get("norm_error")
    if not (isinstance(partials, list) and all(
            type(x) in (int, float) and not isinstance(x, bool) and abs(x) < 1e30 for x in partials)):
        raise ValueError(f"the pending-cash sum's partials {partials!r} are not finite numbers")
    if isinstance(error, bool) or not isinstance(error, (int, float)) or not 0 <= error < 1e30:
        raise ValueError(f"the pending-cash sum's error bound {error!r} is not a finite number >= 0")
    if not store._by_cash:
        if partials or error:
            raise ValueError(f"a pending-cash sum ({partials!r}) under lambda targets {store.lambda_targets!r}")
        return
    held = math.fsum(value for _, value in store._pending_norms())
    kept = math.fsum(partials)
    if abs(kept - held) > max(error, 1e-9 * held) + 1e-300:
        raise ValueError(f"the pending-cash sum {kept!r} is not the accounts' {held!r} (error bound {error!r})")
    store._norm_partials = [float(x) for x in partials]
    store._norm_error = float(error)
