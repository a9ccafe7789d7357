"""The AOPIC engine: cash, lambda, greedy selection, history window, importance.

Pure Python, no Scrapy and no Redis: the scheduler, the Redis backend and the
simulator all drive this one implementation (Abiteboul, Preda, Cobena,
"Adaptive On-Line Page Importance Computation", WWW 2003; ``docs/concepts.rst``).

The engine decides *how much* cash moves *where*; a
:class:`~scrapy_aopic.store.base.FrontierStore` applies each move atomically.
Cash enters only through seeds (:meth:`AopicEngine.add_seed`) and, with
``discovery_cash``, with each URL a visit makes known; it is never created or
lost otherwise, which :meth:`AopicEngine.conservation_error` checks by
recounting every account against what was brought in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from .store.base import (  # lambda_split is re-exported (public API)
    ALIAS,
    PENDING,
    Credit,
    FrontierStore,
    Lease,
    Link,
    Totals,
    lambda_split,
)

_new_credit = tuple.__new__  # Credit(link, amount) without NamedTuple.__new__'s Python call


def _always_ready(host: str) -> bool:
    return True


class VisitResult(NamedTuple):
    """What a visit paid: to lambda, to each link, and over how many links."""

    lambda_amount: float
    link_share: float
    links: int


class Upkeep(NamedTuple):
    """What :meth:`AopicEngine.upkeep` did before a pop."""

    lambda_visits: int
    lambda_paid: float
    revisits: int  #: virtual revisits of crawled pages (link memory)


class RankedPage(NamedTuple):
    """One line of the importance ranking."""

    url: str
    importance: float
    cash: float
    history: float
    visits: int
    depth: int
    state: int


def windowed_history(
    history: float,
    last_visit: float | None,
    cash: float,
    now: float,
    window: float | None,
) -> float:
    """History of a page after a visit that found ``cash`` (AOPIC's window, ``docs/concepts.rst``).

    Without a window this is OPIC's ``H + c``. With window ``T`` and ``S`` the
    time since the previous visit: ``T < S`` keeps only the part of ``c`` that
    accrued inside the window, ``c*T/S``; ``S <= T`` scales the old history
    down by the part of the window that has passed and adds ``c``. A first
    visit has no previous one: its history is ``c``.
    """
    if window is None or last_visit is None:
        return history + cash
    elapsed = max(0.0, now - last_visit)
    if window < elapsed:
        return cash * window / elapsed
    return history * (window - elapsed) / window + cash


class AopicEngine:
    """AOPIC over a :class:`~scrapy_aopic.store.base.FrontierStore`.

    :param store: where the books live.
    :param lambda_tax: ``None`` (lambda is one more out-link) or a float in
        [0, 1] (fixed share to lambda). See ``AOPIC_LAMBDA_TAX``.
    :param history_window: ``T`` in clock units, or ``None`` for plain OPIC.
    :param seed_cash: cash each new seed brings.
    :param clock: returns the current time; wall-clock seconds in a crawl, a
        visit counter in simulations.
    :param link_memory: remember the out-links of crawled pages and revisit
        them virtually (``AOPIC_LINK_MEMORY``; needs a store with
        ``supports_link_memory``, otherwise it stays off: see
        :attr:`link_memory`). Off by default here, so that code building an
        engine by hand keeps plain one-pass OPIC; the Scrapy frontier
        passes the setting (default on). With it off the store is told to
        forget links (no memory cost).
    :param max_revisits: at most this many virtual revisits per
        :meth:`upkeep` (one per pop keeps the cost per fetch bounded).
    :param priority_horizon: order pending URLs by discounted inflow with
        this horizon in fetches instead of by cash (``AOPIC_PRIORITY_HORIZON``;
        0: by cash). Needs a store with ``supports_priority``, otherwise it
        stays off (see :attr:`priority_horizon`). Every comparison of pending
        URLs follows the store's order: the greedy pick, lambda's rule and
        the virtual-revisit rule compare against the *first* pending URL's
        cash (:meth:`FrontierStore.peek`), which with a horizon is the one
        with the highest priority. Cash moves exactly as without it.
    :param discovery_cash: a share of ``seed_cash`` brought in for every URL
        first made known by a visit's links (``AOPIC_DISCOVERY_CASH``; 0:
        none): a teleport to the pages the crawl knows, counted as injected
        cash. Needs a store with ``supports_discovery_cash``, otherwise it
        stays off (see :attr:`discovery_cash`).
    """

    def __init__(
        self,
        store: FrontierStore,
        *,
        lambda_tax: float | None = None,
        history_window: float | None = None,
        seed_cash: float = 1.0,
        clock: Callable[[], float] = time.time,
        link_memory: bool = False,
        max_revisits: int = 1,
        priority_horizon: float = 0.0,
        discovery_cash: float = 0.0,
    ):
        if lambda_tax is not None and not 0.0 <= lambda_tax <= 1.0:
            raise ValueError(f"AOPIC_LAMBDA_TAX must be in [0, 1] or None, got {lambda_tax!r}")
        if history_window is not None and history_window <= 0:
            raise ValueError(f"AOPIC_HISTORY_WINDOW must be > 0 or None, got {history_window!r}")
        if not seed_cash > 0 or math.isinf(seed_cash):
            raise ValueError(f"AOPIC_SEED_CASH must be a positive number, got {seed_cash!r}")
        self.store = store
        self.lambda_tax = lambda_tax
        self.history_window = history_window
        self.seed_cash = seed_cash
        self.clock = clock
        if not 0.0 <= priority_horizon < math.inf:
            raise ValueError(f"AOPIC_PRIORITY_HORIZON must be a number of fetches >= 0, got {priority_horizon!r}")
        if not 0.0 <= discovery_cash < math.inf:
            raise ValueError(f"AOPIC_DISCOVERY_CASH must be a share >= 0 of AOPIC_SEED_CASH, got {discovery_cash!r}")
        if max_revisits < 0:
            raise ValueError(f"max_revisits must be >= 0, got {max_revisits!r}")
        supported = getattr(store, "supports_link_memory", False)
        #: Whether virtual revisits are on (asked for, and the store can).
        self.link_memory = bool(link_memory) and supported
        self.max_revisits = max_revisits
        if supported:
            store.keep_links(self.link_memory)
        ordered = getattr(store, "supports_priority", False)
        #: The horizon in force (0.0: cash order, also when the store cannot
        #: order by priority: the caller says so, see the frontier).
        self.priority_horizon = float(priority_horizon) if ordered else 0.0
        if ordered:
            store.set_priority_horizon(self.priority_horizon)
        discovering = getattr(store, "supports_discovery_cash", False)
        #: The share of ``seed_cash`` in force per URL discovered (0.0 also
        #: when the store cannot bring it in: the caller says so).
        self.discovery_cash = float(discovery_cash) if discovering else 0.0
        if discovering:
            store.set_discovery_cash(self.discovery_cash * seed_cash)

    # -- cash in ------------------------------------------------------------

    def add_seed(self, link: Link, cash: float | None = None) -> bool:
        """Bring ``cash`` (default ``seed_cash``) in for a new URL; a known
        URL brings nothing (returns ``False``)."""
        return self.store.inject(link, self.seed_cash if cash is None else cash)

    def discover(self, link: Link) -> int | None:
        """Make a URL known with no cash; returns its previous state or None."""
        return self.store.register(link)

    # -- selection ----------------------------------------------------------

    def visit_lambda_if_due(self) -> float:
        """Visit lambda when it is at least as rich as the first pending
        URL (the richest, or the one with the highest priority), or when
        nothing else is pending (``docs/concepts.rst``); returns the payout."""
        lambda_cash = self.store.totals().lambda_cash
        if lambda_cash <= 0:
            return 0.0
        richest = self.store.peek()
        if richest is not None and lambda_cash < richest[1]:
            return 0.0
        return self.store.visit_lambda()

    def revisit_if_due(self) -> bool:
        """One virtual revisit, if due: when the richest crawled page (with
        remembered links) holds more cash than the first pending URL (the
        richest, or the one with the highest priority), its
        cash moves on along its links as a visit would pass it, without a
        fetch (``store.revisit``). Returns whether one was done."""
        if not self.link_memory:
            return False
        store = self.store
        richest = store.peek_crawled()
        if richest is None or richest[1] <= 0:
            return False
        top = store.peek()
        if top is not None and richest[1] <= top[1]:
            return False
        return store.revisit(richest[0], self.lambda_tax) is not None

    def upkeep(self) -> Upkeep:
        """Everything due before the next pop: lambda's visit if due, then
        up to ``max_revisits`` virtual revisits (each followed by lambda's
        visit if due). Without link memory this is exactly
        :meth:`visit_lambda_if_due`."""
        paid = self.visit_lambda_if_due()
        lambda_visits = 1 if paid else 0
        revisits = 0
        while revisits < self.max_revisits and self.revisit_if_due():
            revisits += 1
            more = self.visit_lambda_if_due()
            if more:
                lambda_visits += 1
                paid += more
        return Upkeep(lambda_visits, paid, revisits)

    def next(self, ready: Callable[[str], bool] = _always_ready) -> Lease | None:
        """Lease the first pending URL (richest, or highest priority) among
        hosts that are ``ready`` (after :meth:`upkeep`)."""
        self.upkeep()
        return self.store.pop(ready)

    # -- settling -------------------------------------------------------------

    def visit(
        self, lease: Lease, links: Iterable[Link], now: float | None = None
    ) -> VisitResult | None:
        """The page of ``lease`` was parsed and links to ``links``.

        ``links`` must already exclude URLs known to be refused; duplicates and
        self-links are removed here. Returns what lambda and each link got, or
        ``None`` if the lease was already settled.
        """
        distinct: dict[str, Link] = {}
        setdefault = distinct.setdefault  # keeps the first spelling of each URL
        for link in links:
            setdefault(link.url, link)
        distinct.pop(lease.url, None)  # no self-link
        lambda_amount, share = lambda_split(lease.cash, len(distinct), self.lambda_tax)
        now = self.clock() if now is None else now
        history = windowed_history(
            lease.history, lease.last_visit, lease.cash, now, self.history_window
        )
        credits = [_new_credit(Credit, (link, share)) for link in distinct.values()]
        if not self.store.settle_visit(lease.url, lease.lease_id, history, now, credits):
            return None
        return VisitResult(lambda_amount, share, len(distinct))

    def fail(self, lease: Lease, *, refuse: bool = False) -> bool:
        """The fetch yielded no page: its cash goes to lambda."""
        return self.store.settle_failure(lease.url, lease.lease_id, refuse=refuse)

    def transfer(self, lease: Lease, target: Link) -> bool:
        """The URL is another name of ``target``: cash and future credit go there."""
        return self.store.settle_transfer(lease.url, lease.lease_id, target)

    def requeue(self, lease: Lease) -> bool:
        """Put the URL back in the frontier with its cash."""
        return self.store.settle_requeue(lease.url, lease.lease_id)

    # -- importance -----------------------------------------------------------

    def totals(self) -> Totals:
        return self.store.totals()

    @property
    def history_sum(self) -> float:
        """Sum of history over all pages and lambda: the convergence
        indicator (the importance error shrinks like ``1/history_sum``)."""
        return self.store.totals().history_sum

    def importance_denominator(self) -> float:
        t = self.store.totals()
        return t.history_sum + t.injected

    def importance(self, url: str) -> float:
        """``X(u) = (H(u) + C(u)) / (sum H + injected)``; 0 for unknown URLs."""
        view = self.store.get(url)
        denominator = self.importance_denominator()
        if view is None or denominator <= 0:
            return 0.0
        return (view.history + view.cash + view.leased) / denominator

    def ranking(self) -> list[RankedPage]:
        """Every non-alias page, most important first (O(n log n))."""
        denominator = self.importance_denominator() or 1.0
        pages = [
            RankedPage(
                v.url,
                (v.history + v.cash + v.leased) / denominator,
                v.cash + v.leased,
                v.history,
                v.visits,
                v.depth,
                v.state,
            )
            for v in self.store.iter_accounts()
            if v.state != ALIAS
        ]
        pages.sort(key=lambda p: (-p.importance, p.url))
        return pages

    # -- the invariant --------------------------------------------------------

    def ledger(self) -> tuple[float, float, float, float]:
        """Recount the books account by account (O(n)):
        ``(account_cash, lambda_cash, in_flight, injected)``."""
        return self.store.recount()

    def conservation_error(self) -> float:
        """``|sum C + C(lambda) + in flight - injected|``, recounted."""
        accounts, lambda_cash, in_flight, injected = self.ledger()
        return abs(math.fsum((accounts, lambda_cash, in_flight)) - injected)

    def iter_pending(self) -> Iterator[str]:
        """URLs of pending accounts (O(n); for tests and tools)."""
        return (v.url for v in self.store.iter_accounts() if v.state == PENDING)
