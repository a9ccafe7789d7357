"""Flat tables behind the memory store: names of every account and the
books of pending and crawled ones, in ``array`` columns instead of Python
objects.

Most accounts are pending (discovered, not fetched) or crawled, and there
are many of them: as an object an account cost about 390 bytes (the object,
its URL string, the dict entry, its floats and ints). Here it is a row of
fixed-width columns, its URL stored once as bytes.

**Names.** Every account (whatever its state) has a sequence number
(``seq``, given in discovery order); its URL is kept here as
``scheme://host`` (one shared string per host: an id) plus the rest as bytes
in one ``bytearray``. Remembered links (link memory) and a Referer naming a
known page are seqs: 4 bytes each, valid whatever state their target moves
to (a name never changes).

**Exact lookup.** A URL is found by an open-addressing table of seqs keyed
by the URL's ``hash()``. The hash only narrows the search: a candidate
counts only when its URL, rebuilt from the names, equals the one looked up,
so two URLs with the same hash are two accounts and a URL never seen is
never reported seen. (``hash()`` of a ``str`` varies between processes;
nothing here is written to disk: snapshots hold URLs.) Names are never
removed, so the table never needs deletions.

**Rows.** ``row_of[seq]`` says where an account's books are: ``>= 0`` a
crawled row, ``<= -2`` the pending row ``-(value + 2)``, ``-1`` neither (the
store keeps the account as an object: leased, failed, refused, an alias, or
a pending account that has been fetched before). A pending row holds only
what a never-fetched account has: cash, dividend mark, depth, host and its
request. A row whose account leaves its state is put on a free list and
used again.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterator

from .base import Referred

#: ``row_of`` value of a seq without a row.
NO_ROW = -1
_NONE = math.nan  #: ``last_visit`` of an account never visited
_pack_double = struct.Struct("<d").pack
_unpack_int = struct.Struct("<q").unpack


def heap_entry(key: float, seq: int) -> int:
    """One int ordered as the tuple ``(key, seq)`` is (``0 <= seq < 2**64``):
    a heap entry of about 44 bytes instead of a tuple, a float and an int
    (about 110)."""
    bits = _unpack_int(_pack_double(key + 0.0))[0]  # + 0.0: -0.0 sorts as 0.0
    if bits < 0:  # negative floats: larger magnitude, larger bits; flip them
        bits ^= 0x7FFFFFFFFFFFFFFF
    return (bits << 64) | seq


def entry_seq(entry: int) -> int:
    return entry & 0xFFFFFFFFFFFFFFFF


_WIDER = {"H": "I", "I": "Q", "h": "i", "i": "q"}


def _append(table: object, name: str, value: int) -> None:
    """Append to a narrow integer column, widening it the first time a
    value does not fit (65,536 hosts, 4 billion accounts or bytes...)."""
    column = getattr(table, name)
    try:
        column.append(value)
    except OverflowError:
        setattr(table, name, array(_WIDER[column.typecode], column))
        _append(table, name, value)


def _put(table: object, name: str, row: int, value: int) -> None:
    """``column[row] = value``, widening the column as :func:`_append` does."""
    column = getattr(table, name)
    try:
        column[row] = value
    except OverflowError:
        setattr(table, name, array(_WIDER[column.typecode], column))
        _put(table, name, row, value)


class AccountTable:
    """Names of all accounts, and pending and crawled accounts as rows.

    ``with_mark``: keep each crawled row's dividend mark (lambda pays
    crawled accounts too, ``AOPIC_LAMBDA_TARGETS = "all"``).
    """

    def __init__(self, with_mark: bool):
        # -- names, by seq
        self._prefixes: list[str] = []
        self._prefix_ids: dict[str, int] = {}
        self._prefix_of = array("H")  # widened past 65,536 hosts
        self._ends = array("I")  # end of each name in the arena
        self._arena = bytearray()
        self.row_of = array("i")  # seq -> crawled row, -(pending row + 2), or NO_ROW
        self._hash = array("I")  # low 32 bits of each name's hash
        self._slots = array("i", [-1]) * 8  # open addressing, seq or -1
        self._mask = 7
        self._recent: dict[str, int] = {}  # see _remember
        # (url, slot) where the last missed lookup stopped: a new URL is
        # looked up, then named, and its name goes to that slot instead of
        # probing the same path again (slots are never emptied, and every
        # name added clears this, so the slot is still the path's first free one)
        self._miss: tuple[str, int] | None = None
        self.hosts: list[str] = []
        self._host_ids: dict[str, int] = {}
        # -- pending rows (never fetched): 28 bytes and a heap entry each
        self.p_seq = array("I")
        self.p_cash = array("d")
        self.p_mark = array("d")
        self.p_depth = array("h")
        self.p_host = array("H")  # widened past 65,536 hosts
        self.p_referer = array("i")  # see ``referer`` below
        self.p_requests: dict[int, object] = {}  # pending row -> request, when kept
        # log priority (AOPIC_PRIORITY_HORIZON): 8 bytes a row, only while on
        self.p_prio: array | None = None
        self._p_free = array("I")
        # -- crawled rows
        self.seq = array("I")
        self.cash = array("d")
        self.mark = array("d") if with_mark else None
        self.history = array("d")
        self.last_visit = array("d")
        self.visits = array("H")  # 2 bytes each, widened when a value needs more
        self.depth = array("h")
        self.host = array("I")
        self.requests: dict[int, object] = {}  # row -> request, when not None
        # seq of the account named by the Referer of a Referer-only request
        # (``Referred(None, url)``: every followed link's), else -1
        self.referer = array("i")
        self._free = array("I")
        # -- remembered links: ``count < 0``: none remembered; the columns
        # are empty while link memory is off (8 bytes a row saved)
        self.links_on = True
        self.link_start = array("I")
        self.link_count = array("i")
        self.link_pool = array("I")
        self._link_garbage = 0

    # -- names -------------------------------------------------------------

    def add_name(self, seq: int, url: str) -> None:
        """Record the URL of account ``seq``, the next one: seqs are dense
        (a restore numbers its accounts again from 0, in their order, so a
        gap in a snapshot's seqs costs nothing). Runs for every new URL:
        kept lean."""
        ends = self._ends
        if seq != len(ends):  # a name at another seq would be read back as another's
            raise ValueError(f"name {seq} added after {len(ends)} names")
        scheme = url.find("//")
        split = url.find("/", scheme + 2) if scheme >= 0 else 0
        if split < 0:
            split = len(url)
        prefix = url[:split]
        pid = self._prefix_ids.get(prefix)
        if pid is None:
            pid = self._prefix_ids[prefix] = len(self._prefixes)
            self._prefixes.append(prefix)
        arena = self._arena
        arena += url[split:].encode("utf-8", "surrogatepass")
        try:
            self._prefix_of.append(pid)
        except OverflowError:
            _append(self, "_prefix_of", pid)
        try:
            ends.append(len(arena))
        except OverflowError:  # 4 GB of names: 8-byte offsets from now on
            self._ends = array("Q", ends)
            self._ends.append(len(arena))
        self.row_of.append(NO_ROW)
        h = hash(url)
        self._hash.append(h & 0xFFFFFFFF)
        miss, self._miss = self._miss, None
        if 3 * (seq + 1) > 2 * len(self._slots):
            self._grow()  # inserts the new name too
        elif miss is not None and miss[0] == url:
            self._slots[miss[1]] = seq
        else:
            self._insert(seq, h)
        self._remember(url, seq)

    def url(self, seq: int) -> str:
        start = self._ends[seq - 1] if seq else 0
        return self._prefixes[self._prefix_of[seq]] + self._arena[start : self._ends[seq]].decode(
            "utf-8", "surrogatepass"
        )

    def find_row(self, url: str) -> tuple[int | None, int]:
        """The seq named ``url`` and its row code (:attr:`row_of`:
        ``NO_ROW`` when unknown or an object)."""
        seq = self.find_seq(url)
        return seq, (NO_ROW if seq is None else self.row_of[seq])

    def find_seq(self, url: str) -> int | None:
        """The seq named ``url``, compared exactly."""
        seq = self._recent.get(url)
        if seq is not None:
            return seq
        h = hash(url)
        low = h & 0xFFFFFFFF
        slots, mask, hashes = self._slots, self._mask, self._hash
        i = h & mask
        while True:
            seq = slots[i]
            if seq < 0:
                self._miss = (url, i)
                return None
            if hashes[seq] == low and self.url(seq) == url:
                self._remember(url, seq)
                return seq
            i = (i + 1) & mask

    def _remember(self, url: str, seq: int) -> None:
        """Keep ``url -> seq`` for the next lookups: a page's links are
        looked up twice (known? then credited), and the links of the next
        pages often name the same URLs. Names never change, so an entry is
        never stale; the dict is emptied when full (256 entries)."""
        recent = self._recent
        if len(recent) >= 256:
            recent.clear()
        recent[url] = seq

    def _insert(self, seq: int, h: int) -> None:
        slots, mask = self._slots, self._mask
        i = h & mask
        while slots[i] >= 0:
            i = (i + 1) & mask
        slots[i] = seq

    def _grow(self) -> None:
        size = len(self._slots) * 2
        self._slots = array("i", [-1]) * size
        self._mask = size - 1
        for seq, low in enumerate(self._hash):  # the low 32 bits index any table below 2**32 slots
            self._insert(seq, low)

    def _host_id(self, host: str) -> int:
        hid = self._host_ids.get(host)
        if hid is None:
            hid = self._host_ids[host] = len(self.hosts)
            self.hosts.append(host)
        return hid

    # -- pending rows --------------------------------------------------------

    def add_pending(
        self, seq: int, cash: float, mark: float, depth: int, host: str, request: object, referer: int,
        prio: float = -math.inf,
    ) -> int:
        """A pending row for account ``seq`` (``referer``: as for :meth:`add`;
        ``prio``: kept while :attr:`p_prio` is on)."""
        free = self._p_free
        if free:
            p = free.pop()
            _put(self, "p_seq", p, seq)
            self.p_cash[p] = cash
            self.p_mark[p] = mark
            _put(self, "p_depth", p, depth)
            _put(self, "p_host", p, self._host_id(host))
            self.p_referer[p] = referer
            if self.p_prio is not None:
                self.p_prio[p] = prio
        else:
            p = len(self.p_seq)
            _append(self, "p_seq", seq)
            self.p_cash.append(cash)
            self.p_mark.append(mark)
            _append(self, "p_depth", depth)
            _append(self, "p_host", self._host_id(host))
            self.p_referer.append(referer)
            if self.p_prio is not None:
                self.p_prio.append(prio)
        if request is not None and referer < 0:
            self.p_requests[p] = request
        self.row_of[seq] = -p - 2
        return p

    def drop_pending(self, p: int) -> None:
        """The account of pending row ``p`` left it (it is an object now)."""
        self.row_of[self.p_seq[p]] = NO_ROW
        self.p_requests.pop(p, None)
        free = self._p_free
        free.append(p)
        if len(free) > 4096 and 2 * len(free) > len(self.p_seq):
            self._pack_pending()

    def _pack_pending(self) -> None:
        """Move the live pending rows to the front and cut the columns to
        them (once half the rows are free: amortised O(1) a row), so that
        a frontier past its peak gives the memory back. Heap entries name
        seqs, not rows: only ``row_of`` and the kept requests move."""
        live = list(self.pending_rows())
        for name in ("p_seq", "p_cash", "p_mark", "p_depth", "p_host", "p_referer", "p_prio"):
            column = getattr(self, name)
            if column is None:
                continue
            setattr(self, name, array(column.typecode, [column[p] for p in live]))
        requests = self.p_requests
        self.p_requests = {new: requests[p] for new, p in enumerate(live) if p in requests}
        for new, seq in enumerate(self.p_seq):
            self.row_of[seq] = -new - 2
        self._p_free = array("I")

    def keep_priorities(self, enabled: bool) -> None:
        """Keep a log priority per pending row (``-inf`` to start), or drop the column."""
        if not enabled:
            self.p_prio = None
        elif self.p_prio is None:
            self.p_prio = array("d", [-math.inf]) * len(self.p_seq)

    def pending_request(self, p: int) -> object:
        referer = self.p_referer[p]
        if referer >= 0:
            return Referred(None, self.url(referer).encode("latin-1"))
        return self.p_requests.get(p)

    def pending_rows(self) -> Iterator[int]:
        """Live pending rows, in row order: O(rows), at most twice the live
        ones past a few thousand (see :meth:`_pack_pending`), not O(names)."""
        row_of = self.row_of
        for p, seq in enumerate(self.p_seq):
            if row_of[seq] == -p - 2:
                yield p

    # -- crawled rows ------------------------------------------------------

    def find(self, url: str) -> int | None:
        """The crawled row of ``url``, compared exactly."""
        seq = self.find_seq(url)
        if seq is None:
            return None
        row = self.row_of[seq]
        return row if row >= 0 else None

    def add(self, seq: int, host: str, depth: int, request: object, referer: int = -1) -> int:
        """A crawled row for account ``seq``; the caller fills cash,
        history, last visit and visits. ``referer``: the seq of the account
        whose URL is ``request``'s Referer, when ``request`` is
        ``Referred(None, that URL)`` (then not kept itself)."""
        if self._free:
            row = self._free.pop()
            _put(self, "seq", row, seq)
            _put(self, "depth", row, depth)
            self.host[row] = self._host_id(host)
        else:
            row = len(self.seq)
            _append(self, "seq", seq)
            self.cash.append(0.0)
            if self.mark is not None:
                self.mark.append(0.0)
            self.history.append(0.0)
            self.last_visit.append(_NONE)
            self.visits.append(0)
            _append(self, "depth", depth)
            self.host.append(self._host_id(host))
            self.referer.append(-1)
            if self.links_on:
                self.link_start.append(0)
                self.link_count.append(-1)
        self.row_of[seq] = row
        self._set_request(row, request, referer)
        return row

    def kill(self, row: int) -> None:
        """The row's account left the crawled state (it lives as an object
        again): free the row, forget its links."""
        self.row_of[self.seq[row]] = NO_ROW
        self.requests.pop(row, None)
        self.referer[row] = -1
        self.set_links(row, None)
        self._free.append(row)

    def rows(self) -> Iterator[int]:
        """Live crawled rows, in row order."""
        row_of = self.row_of
        for row, seq in enumerate(self.seq):
            if row_of[seq] == row:
                yield row

    def _set_request(self, row: int, request: object, referer: int) -> None:
        self.referer[row] = referer
        if request is None or referer >= 0:
            self.requests.pop(row, None)
        else:
            self.requests[row] = request

    def request(self, row: int) -> object:
        referer = self.referer[row]
        if referer >= 0:
            return Referred(None, self.url(referer).encode("latin-1"))
        return self.requests.get(row)

    def get_last_visit(self, row: int) -> float | None:
        value = self.last_visit[row]
        return None if value != value else value

    def set_visits(self, row: int, visits: int) -> None:
        _put(self, "visits", row, visits)

    def set_last_visit(self, row: int, value: float | None) -> None:
        self.last_visit[row] = _NONE if value is None else value

    # -- remembered links ----------------------------------------------------

    def links(self, row: int) -> array | None:
        if not self.links_on:
            return None
        count = self.link_count[row]
        if count < 0:
            return None
        start = self.link_start[row]
        return self.link_pool[start : start + count]

    def set_links(self, row: int, seqs) -> None:
        """Remember ``seqs`` (``None``: nothing remembered) for ``row``."""
        if not self.links_on:
            return
        old = self.link_count[row]
        if old > 0:
            self._link_garbage += old
        if seqs is None:
            self.link_count[row] = -1
            return
        if self._link_garbage > 1024 and self._link_garbage > len(self.link_pool) // 2:
            self._pack_links()
        start = len(self.link_pool)
        try:
            self.link_start[row] = start
        except OverflowError:
            self.link_start = array("Q", self.link_start)
            self.link_start[row] = start
        try:
            self.link_pool.extend(seqs)
        except OverflowError:
            del self.link_pool[start:]
            self.link_pool = array("Q", self.link_pool)
            self.link_pool.extend(seqs)
        self.link_count[row] = len(seqs)

    def _pack_links(self) -> None:
        """Drop the links of rows re-crawled or forgotten (amortised: once
        garbage is half the pool)."""
        pool = array(self.link_pool.typecode)
        old, starts, counts = self.link_pool, self.link_start, self.link_count
        for row in range(len(counts)):
            count = counts[row]
            if count > 0:
                start = starts[row]
                starts[row] = len(pool)
                pool.extend(old[start : start + count])
        self.link_pool = pool
        self._link_garbage = 0

    def forget_links(self) -> None:
        """Link memory off: drop every remembered link and the columns."""
        self.links_on = False
        self.link_start, self.link_count = array("I"), array("i")
        self.link_pool = array("I")
        self._link_garbage = 0

    def remember_links(self) -> None:
        """Link memory on (again): every row remembers nothing yet."""
        if not self.links_on:
            self.links_on = True
            self.link_start = array("I", [0]) * len(self.seq)
            self.link_count = array("i", [-1]) * len(self.seq)
