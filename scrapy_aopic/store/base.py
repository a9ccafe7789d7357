"""The storage interface behind the AOPIC engine.

A store keeps the books: one account per canonical URL, the lambda page, the
cash in flight (leased to a fetch) and the running totals. Every method that
moves cash is *one atomic change that keeps the books balanced*: the in-memory
store does it in plain Python, the Redis store in one Lua script, so many
workers can share it. The engine (:mod:`scrapy_aopic.engine`) decides how much
moves where; the store only applies it.

Amounts handed to a store are never created by it: the only way cash enters
is :meth:`FrontierStore.inject` (a seed), and cash a store cannot deliver
(a refused or failed account, an alias loop) goes to lambda.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

# Account states. Small ints: they are stored per account.
PENDING = 0  #: waiting to be fetched
LEASED = 1  #: handed to a fetch; its cash is in flight
CRAWLED = 2  #: fetched and parsed
FAILED = 3  #: fetch failed / not HTML / non-2xx; cash sent to lambda
REFUSED = 4  #: refused (trap, robots, duplicate); never fetched
ALIAS = 5  #: another name of ``target`` (redirect, near-duplicate)

STATE_NAMES = {
    PENDING: "pending",
    LEASED: "leased",
    CRAWLED: "crawled",
    FAILED: "failed",
    REFUSED: "refused",
    ALIAS: "alias",
}

#: Longest alias chain followed before the cash goes to lambda instead.
MAX_ALIAS_HOPS = 8

#: What a store keeps as the request of an account: ``None`` (a plain GET of
#: the account's URL), a ``str`` (a plain GET of another spelling of it), a
#: JSON-able ``dict`` (see :mod:`scrapy_aopic.frontier.requestcodec`), or, in memory,
#: any object the caller gave.
RequestData = Any
class Referred(NamedTuple):
    """A plain link whose only header is ``Referer`` (in-memory form; see
    :mod:`scrapy_aopic.frontier.requestcodec`). Defined here so that the
    memory store can keep the Referer of a crawled account as the account
    of the page it names (4 bytes) instead of these bytes."""

    url: str | None  #: as the site spelled it; ``None``: the account's URL
    referer: bytes


#: The key that marks the portable (JSON) form of a Referer-only link's
#: request data (see :mod:`scrapy_aopic.frontier.requestcodec`), which a shared store
#: must accept when it checks what it reads back.
REFERER_KEY = "aopic_referer"


class StoreUnavailable(RuntimeError):
    """The store cannot be reached any more (a shared store's server gone
    for longer than its retry time): the crawl must stop, never carry on as
    if the frontier were empty."""


class StoreStalled(RuntimeError):
    """A shared store did not answer just now, and the caller asked not to
    wait (a crawl's reactor must keep serving downloads): nothing was
    changed by the call that raised it; try again later (see
    :meth:`FrontierStore.probe`)."""


class FrontierLost(StoreUnavailable):
    """The shared frontier this crawl was using no longer exists (a Redis
    restarted without persistence): finishing would look like success."""


class FrontierCorrupt(StoreUnavailable):
    """The shared frontier holds a value this store never writes where the
    books depend on it (a total that is not a finite number, a key of the
    wrong Redis type): the crawl stops and says which, rather than carry on
    with books it cannot trust. (A bad record of one URL is not this: it is
    skipped, named and counted, its cash to lambda.)"""


class UnreadableData(NamedTuple):
    """Request data a store could not read back (not JSON, the wrong shape,
    too large or too deep): never a request to fetch; the frontier settles
    its lease with the cash to lambda and says why."""

    reason: str


class Link(NamedTuple):
    """A URL a visited page passes cash to, with what is needed to fetch it."""

    url: str  #: canonical URL (the account key)
    host: str  #: politeness key (Scrapy's download slot)
    depth: int  #: hops from a seed
    request: RequestData = None


class Credit(NamedTuple):
    """``amount`` of cash for the account of ``link`` (created if unknown)."""

    link: Link
    amount: float


class Lease(NamedTuple):
    """A pending URL handed out for fetching, with the cash it took along."""

    url: str
    lease_id: int
    cash: float  #: cash moved from the account into flight
    host: str
    depth: int
    request: RequestData
    history: float  #: the account's history before this visit
    last_visit: float | None  #: clock time of the previous visit, if any
    visits: int  #: completed visits before this one
    #: what the store ordered this URL by when it was leased: its cash, or
    #: its log priority with a priority horizon (see
    #: :meth:`FrontierStore.order_at_rank`); ``None``: not said
    order: float | None = None


class AccountView(NamedTuple):
    """Read-only snapshot of one account (cash settled, lease included)."""

    url: str
    state: int
    cash: float  #: cash held now, dividends settled
    history: float
    leased: float  #: cash in flight for this URL (0 unless LEASED)
    visits: int
    last_visit: float | None
    depth: int
    host: str
    target: str | None  #: for ALIAS accounts, the URL they point to


@dataclass
class Totals:
    """The store's running books (O(1) to read)."""

    injected: float = 0.0  #: all cash ever brought in (seeds, discovery cash)
    lambda_cash: float = 0.0
    lambda_history: float = 0.0
    in_flight: float = 0.0  #: cash of open leases
    history_sum: float = 0.0  #: sum of history over pages, lambda included
    lambda_visits: int = 0
    visits: int = 0  #: completed page visits
    #: virtual revisits of crawled pages (link memory; not in ``visits``)
    virtual_visits: int = 0
    known: int = 0  #: accounts of every state
    pending: int = 0
    leased: int = 0


def lambda_split(cash: float, links: int, tax: float | None) -> tuple[float, float]:
    """``(lambda_amount, per_link_share)`` of a page holding ``cash`` with
    ``links`` distinct out-links (``docs/concepts.rst``, visiting a page).

    ``tax=None``: lambda is one more out-link, ``c/(m+1)`` each. A float tax:
    lambda gets ``t*c`` and every link ``(1-t)*c/m``. No links: all to lambda.
    (Defined here so that stores applying a virtual revisit split cash with
    the very formula the engine uses; :mod:`scrapy_aopic.engine` re-exports it.)
    """
    if links <= 0:
        return cash, 0.0
    if tax is None:
        share = cash / (links + 1)
        return cash - share * links, share
    share = cash * (1.0 - tax) / links
    return cash - share * links, share


#: Past ``horizon / PRIORITY_GROWTH`` fetches the horizon grows with the
#: crawl: ``PRIORITY_GROWTH`` times the fetches so far (0: fixed horizon).
PRIORITY_GROWTH = 0.05


def priority_clock(visits: int, horizon: float) -> float:
    """The exponent of a credit's weight after ``visits`` fetches:
    ``visits / horizon`` while the horizon is fixed, then (past ``knee =
    horizon / PRIORITY_GROWTH``) the integral of ``1 / (PRIORITY_GROWTH *
    t)``, continuous at the knee: a horizon that grows with the crawl, so
    "recent" means a share of the crawl at any scale. A function of the
    visit count alone: every store computes it from its own books."""
    growth = PRIORITY_GROWTH
    if not growth or visits * growth <= horizon:
        return visits / horizon
    return (1.0 + math.log(visits * growth / horizon)) / growth


def raise_priority(priority: float, amount: float, clock_term: float) -> float:
    """The log priority of a pending URL after a credit of ``amount`` at
    ``clock_term`` (:func:`priority_clock`, ``AOPIC_PRIORITY_HORIZON``):
    ``log(exp(priority) + amount * exp(clock_term))``, computed without
    leaving log space, so it neither overflows nor needs a rebase however
    long the crawl (``-inf``: no credit yet). Only the order uses it; the
    cash moved is ``amount`` whatever the priority."""
    x = math.log(amount) + clock_term
    if x >= priority:
        return x + math.log1p(math.exp(priority - x))
    return priority + math.log1p(math.exp(x - priority))


class FrontierStore(ABC):
    """Accounts, lambda, pending order and leases: the engine's storage.

    ``lambda_targets`` is ``"pending"`` or ``"all"``: which accounts share a
    lambda payout. Payouts are O(1): a store keeps a cumulative per-target
    dividend and settles an account lazily when it is next touched.

    **Link memory** (optional capability, ``supports_link_memory``). A store
    that has it remembers, for every CRAWLED account, the URLs credited by
    its last visit, and can *revisit* the richest crawled account without a
    fetch: its cash moves on along the remembered links exactly as a visit
    would pass it (see :meth:`revisit`). In a one-pass crawl this keeps cash
    that reaches already-crawled pages flowing to the frontier instead of
    piling up there.
    """

    lambda_targets: str

    #: Other processes write to this store too (the Redis backend): the
    #: frontier then asks it for lambda's visits and expired leases in its
    #: pop, and polls for work other workers free or find.
    shared: bool = False

    #: Whether :meth:`keep_links`, :meth:`peek_crawled` and :meth:`revisit`
    #: are implemented.
    supports_link_memory: bool = False

    #: Whether :meth:`set_priority_horizon` is implemented: pending URLs can
    #: be ordered by discounted inflow instead of cash.
    supports_priority: bool = False
    #: ``AOPIC_PRIORITY_HORIZON`` in force (0: cash order).
    priority_horizon: float = 0.0
    #: pending URLs whose saved priority could not be used (missing from an
    #: old snapshot, corrupt, or saved under another horizon) and were
    #: ordered from their cash instead
    priority_fallbacks: int = 0

    #: Whether :meth:`set_discovery_cash` is implemented.
    supports_discovery_cash: bool = False
    #: Cash brought in for each URL a visit's credits make known
    #: (``AOPIC_DISCOVERY_CASH`` times ``AOPIC_SEED_CASH``; 0: none).
    discovery_cash: float = 0.0

    # -- reading ------------------------------------------------------------

    @abstractmethod
    def totals(self) -> Totals:
        """The running books."""

    @abstractmethod
    def get(self, url: str) -> AccountView | None:
        """Snapshot of the account of canonical ``url``, if known."""

    def knows(self, url: str) -> bool:
        """Whether canonical ``url`` has an account. Local stores answer
        without building a snapshot; the default asks :meth:`get`."""
        return self.get(url) is not None

    def count_known(self, urls: Collection[str]) -> int:
        """How many of the distinct canonical ``urls`` have an account (a
        shared store answers in one round trip)."""
        return sum(1 for url in urls if self.knows(url))

    def pending_count(self) -> int:
        """Pending URLs (a shared store may answer from its last round trip)."""
        return self.totals().pending

    def recount(self) -> tuple[float, float, float, float]:
        """``(account_cash, lambda_cash, in_flight, injected)`` recounted
        account by account (O(n)); a shared store recounts in one consistent
        snapshot, since other workers keep writing."""
        accounts = 0.0
        in_flight = 0.0
        for view in self.iter_accounts():
            accounts += view.cash
            in_flight += view.leased
        t = self.totals()
        return accounts, t.lambda_cash, in_flight, t.injected

    #: seconds since a shared store stopped answering (``None``: it answers)
    stalled_for: float | None = None
    #: a shared store raises :class:`StoreStalled` instead of waiting
    fail_fast: bool = False

    def probe(self) -> bool:
        """Whether the store answers (a shared store that stalled tries its
        server once; may block, so a crawl calls it from a thread)."""
        return True

    def end_stall(self) -> None:
        """The store answered a :meth:`probe`: calls may reach it again."""

    def claim_books_check(self) -> bool:
        """Whether this process should :meth:`recount` the books as it
        closes. A private store always should; a shared store lets only the
        crawl's last worker do it (a recount is O(n) and blocks a shared
        server), and says no to the others."""
        return True

    @abstractmethod
    def iter_accounts(self) -> Iterator[AccountView]:
        """Every account, in no particular order (O(n): exports, checks)."""

    @abstractmethod
    def peek(self) -> tuple[str, float] | None:
        """URL and cash of the first pending account in the store's order
        (any host: the richest, or with a priority horizon the one with the
        highest priority), if any."""

    def order_at_rank(self, rank: int) -> float | None:
        """What the ``rank``-th pending account in order (1 = the first) is
        ordered by: its cash, or its log priority with a priority horizon
        (comparable with :attr:`Lease.order`); the lowest value (0.0 or
        ``-inf``) when fewer are pending, ``None`` when this store cannot
        say cheaply (the frontier then skips what needs it)."""
        return None

    def set_priority_horizon(self, horizon: float) -> None:
        """Order pending URLs by discounted inflow, ``horizon`` fetches
        (``AOPIC_PRIORITY_HORIZON``; 0: by cash). The priority of a pending
        URL is ``log(sum(credit * exp(priority_clock(t, horizon))))`` over
        the credits it received while pending, ``t`` being the store's visit
        count when it arrived (:func:`raise_priority`); lambda's dividends
        are left out (they add the same to every pending URL). Cash, and
        every move of it, stays as it is: only the order changes. Accounts
        already pending when the horizon changes are given ``log(cash) +
        priority_clock(t, horizon)`` (counted in :attr:`priority_fallbacks`
        when they had a priority under another horizon)."""
        raise NotImplementedError(f"{type(self).__name__} has no priority order")

    def set_discovery_cash(self, cash: float) -> None:
        """From now on, every credit of :meth:`settle_visit` that opens a new
        pending account brings ``cash`` more into the system with it, counted
        in ``Totals.injected`` as a seed's cash is (``AOPIC_DISCOVERY_CASH``;
        0: none). Transfers, seeds and registrations bring none."""
        raise NotImplementedError(f"{type(self).__name__} has no discovery cash")

    # -- cash in ------------------------------------------------------------

    @abstractmethod
    def inject(self, link: Link, cash: float) -> bool:
        """Bring ``cash`` into the system for a *new* account (a seed).

        Returns ``False`` and injects nothing when ``link.url`` is already
        known: a seed is new cash only the first time it is seen.
        """

    @abstractmethod
    def register(self, link: Link) -> int | None:
        """Make ``link`` known with no cash; returns the state it had before
        (``None`` if it was new). Creates a PENDING account if new."""

    @abstractmethod
    def repend(self, link: Link) -> bool:
        """Queue a known CRAWLED/FAILED account again (``dont_filter`` and
        re-crawl), keeping its cash; returns whether it is now pending."""

    # -- selection ----------------------------------------------------------

    @abstractmethod
    def pop(self, ready: Callable[[str], bool], min_share: float = 0.0) -> Lease | None:
        """Lease the richest pending URL whose host is ``ready`` and whose
        cash is at least ``min_share`` times the cash of the richest pending
        URL of any host (``None`` if there is none: better to wait for a busy
        host than to spend a fetch on a page worth far less). With a
        priority horizon "richest" means highest priority, and the share
        compares priorities (``exp(priority - top priority)``).

        Ties go to the account discovered first. The account's cash moves to
        ``in_flight`` and the account becomes LEASED.
        """

    @abstractmethod
    def take(self, url: str) -> Lease | None:
        """Lease the pending account ``url`` (journal replay), if pending."""

    @abstractmethod
    def visit_lambda(self) -> float:
        """Pay lambda's cash to its targets; returns the amount paid (0 when
        there are no targets). Lambda's history grows by that amount."""

    # -- settling a lease (each exactly once; a stale lease is ignored) ------

    @abstractmethod
    def settle_visit(
        self,
        url: str,
        lease_id: int,
        history: float,
        visited_at: float,
        credits: Iterable[Credit],
    ) -> bool:
        """Complete a visit: the lease's cash goes to the credits and what
        they leave of it to lambda (so the books balance whatever the caller
        computed; credits must not exceed the lease), the account's history becomes
        ``history`` and it is CRAWLED. Credits for unknown URLs open pending
        accounts; for refused or failed ones they go to lambda; for aliases
        they follow the alias. Returns ``False`` for a stale lease."""

    @abstractmethod
    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        """The fetch yielded no page: the lease's cash goes to lambda and the
        account becomes FAILED (REFUSED with ``refuse``)."""

    @abstractmethod
    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        """The URL turned out to be ``target`` (redirect, near-duplicate): the
        account becomes an ALIAS of ``target`` and the lease's cash goes to
        it (a new pending account if unknown). A transfer to the URL itself is
        a requeue that replaces the stored request with ``target.request``
        when that is not ``None`` (a retry carrying its retry count)."""

    @abstractmethod
    def settle_requeue(self, url: str, lease_id: int) -> bool:
        """Give the lease back: the account is PENDING again with its cash
        (a retry, a shutdown with requests in flight)."""

    @abstractmethod
    def open_leases(self) -> list[tuple[str, int]]:
        """``(url, lease_id)`` of every open lease."""

    # -- link memory (optional: ``supports_link_memory``) ---------------------

    def keep_links(self, enabled: bool) -> None:
        """Start (``True``) or stop remembering the out-links of crawled
        accounts; stopping forgets every remembered link (frees the memory)."""
        raise NotImplementedError(f"{type(self).__name__} has no link memory")

    def peek_crawled(self) -> tuple[str, float] | None:
        """URL and cash of the richest CRAWLED account whose links are
        remembered (ties: discovered first), if any."""
        raise NotImplementedError(f"{type(self).__name__} has no link memory")

    def revisit(self, url: str, lambda_tax: float | None) -> tuple[float, float, int] | None:
        """Virtual visit of the CRAWLED account ``url``, atomically and
        without a lease: take all its cash ``c``, split it with
        :func:`lambda_split` (``lambda_tax``) over its remembered links, credit
        them as :meth:`settle_visit` does (aliases followed, refused/failed
        to lambda), pay lambda the remainder, and add ``c`` to the account's
        history (plain OPIC: no window). ``last_visit`` and ``visits`` do not
        change; ``Totals.virtual_visits`` counts it. Returns
        ``(cash, per_link_share, links)``, or ``None`` when ``url`` is not a
        crawled account with remembered links."""
        raise NotImplementedError(f"{type(self).__name__} has no link memory")

    def remembered_links(self, url: str) -> list[Link] | None:
        """The links the last visit of ``url`` paid (link memory), or
        ``None`` when they are not remembered. A re-crawl answered "304 Not
        Modified" pays them again."""
        return None

    # -- other ---------------------------------------------------------------

    @abstractmethod
    def refuse(self, url: str, host: str, depth: int) -> None:
        """Mark ``url`` as never to be fetched. A pending account's cash goes
        to lambda; future credits to it go to lambda too."""

    def close(self) -> None:
        """Release resources (connections, files)."""


def credit_amounts(credits: Iterable[Credit]) -> float:
    """Sum of a visit's credits (for the callers' own checks)."""
    return sum(c.amount for c in credits)
