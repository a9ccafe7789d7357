"""Crawl-ordering policies, all behind one small interface.

A policy keeps its own frontier. The simulator (:mod:`scrapy_aopic.sim.runner`)
calls :meth:`Policy.start` with the seeds, then repeatedly :meth:`Policy.select`
(which page to fetch next, removed from the frontier) and
:meth:`Policy.fetched` (the page's out-links, and which of them nobody had
seen before). Every page is fetched at most once; a page is enqueued once,
when first discovered (Scrapy's duplicate filter does the same).

OPIC and AOPIC are not re-implemented here: :class:`EnginePolicy` drives
:class:`scrapy_aopic.engine.AopicEngine` over a
:class:`scrapy_aopic.store.memory.MemoryStore`, exactly as the scheduler does,
with a virtual clock that counts fetches.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

import numpy as np

from ..engine import AopicEngine
from ..store.base import Link
from ..store.memory import MemoryStore, exact_add
from .graph import TRAP, Graph
from .pagerank import pagerank_csr


class Policy:
    """Base class: a named frontier ordering.

    ``name`` labels the policy in tables; ``family`` groups variants in plots.
    """

    name = "policy"
    family = "baseline"

    def start(self, graph: Graph, seeds: list[int], rng: random.Random) -> None:
        """A new crawl of ``graph`` begins; ``seeds`` are known, unfetched."""
        raise NotImplementedError

    def select(self) -> int:
        """Remove and return the next page to fetch; ``-1`` when none is left."""
        raise NotImplementedError

    def fetched(self, node: int, links: list[int], new: list[int]) -> None:
        """``node`` was fetched; it links to ``links`` (page order, distinct),
        of which ``new`` had never been seen by this crawl."""
        raise NotImplementedError

    def estimate(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(nodes, importance)`` this policy currently believes, or None."""
        return None


#: The settings that make plain Scrapy crawl breadth-first (its FAQ's
#: recipe), for the benchmarks that run this order as a real crawl.
SCRAPY_BREADTH_FIRST = {
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}


class BreadthFirst(Policy):
    """FIFO: pages in the order they were discovered."""

    name = "breadth-first"

    def start(self, graph, seeds, rng):
        self.queue = deque(seeds)

    def select(self):
        return self.queue.popleft() if self.queue else -1

    def fetched(self, node, links, new):
        self.queue.extend(new)


class DepthFirst(Policy):
    """LIFO, Scrapy's default order: the last link extracted is fetched first."""

    name = "depth-first"

    def start(self, graph, seeds, rng):
        # Scrapy reads start requests first; reversed so the first seed goes first.
        self.stack = list(reversed(seeds))

    def select(self):
        return self.stack.pop() if self.stack else -1

    def fetched(self, node, links, new):
        self.stack.extend(new)


class RandomOrder(Policy):
    """A uniformly random page of the frontier."""

    name = "random"

    def start(self, graph, seeds, rng):
        self.rng = rng
        self.frontier = list(seeds)

    def select(self):
        frontier = self.frontier
        if not frontier:
            return -1
        i = self.rng.randrange(len(frontier))
        frontier[i], frontier[-1] = frontier[-1], frontier[i]
        return frontier.pop()

    def fetched(self, node, links, new):
        self.frontier.extend(new)


class _HeapPolicy(Policy):
    """A max-priority frontier with lazy increase-key; ties: discovered first."""

    def start(self, graph, seeds, rng):
        self.graph = graph
        self.seq = np.full(graph.n, -1, dtype=np.int64)
        self.next_seq = 0
        self.done = np.zeros(graph.n, dtype=bool)
        self.heap: list[tuple[float, int, int]] = []
        self._discover(seeds)

    def _discover(self, nodes):
        seq = self.seq
        for v in nodes:
            seq[v] = self.next_seq
            self.next_seq += 1
            self._push(v)

    def _priority(self, v: int) -> float:
        raise NotImplementedError

    def _push(self, v: int) -> None:
        heapq.heappush(self.heap, (-self._priority(v), int(self.seq[v]), v))

    def select(self):
        heap, done = self.heap, self.done
        while heap:
            neg, _, v = heapq.heappop(heap)
            if done[v] or -neg != self._priority(v):
                continue  # fetched already, or a stale priority
            done[v] = True
            return v
        return -1


class Omniscient(_HeapPolicy):
    """The known, unfetched page with the highest *true* PageRank
    (simulation only: a greedy ceiling for crawlers that only know what they
    have discovered)."""

    name = "omniscient"
    family = "reference"

    def __init__(self, true_rank: np.ndarray):
        self.true_rank = true_rank

    def _priority(self, v):
        return float(self.true_rank[v])

    def fetched(self, node, links, new):
        self._discover(new)


class BacklinkCount(_HeapPolicy):
    """The page with the most in-links from pages fetched so far."""

    name = "backlink-count"

    def start(self, graph, seeds, rng):
        self.count = np.zeros(graph.n, dtype=np.int64)
        super().start(graph, seeds, rng)

    def _priority(self, v):
        return float(self.count[v])

    def fetched(self, node, links, new):
        count, seq, done = self.count, self.seq, self.done
        for v in new:
            seq[v] = self.next_seq
            self.next_seq += 1
        for v in links:
            if not done[v]:
                count[v] += 1
                self._push(v)


class BatchPageRank(_HeapPolicy):
    """PageRank of the known graph, recomputed every ``every`` fetches
    (Cho, Garcia-Molina, Page 1998; "batch-pagerank" in Baeza-Yates et al.
    2005). Known-but-unfetched pages are dangling nodes of that graph.

    With ``partial=True`` ("partial-pagerank"), pages discovered between two
    recomputations get a temporary score: the sum, over the fetched pages
    linking to them, of the linking page's score divided by its out-degree.
    Without it they wait behind every scored page, in discovery order.
    """

    family = "pagerank"

    def __init__(self, every: int | float = 0.01, *, partial: bool = False):
        self.every_spec = every
        self.partial = partial
        self.name = "partial-pagerank" if partial else "batch-pagerank"

    def start(self, graph, seeds, rng):
        every = self.every_spec
        self.every = max(1, int(every * graph.n) if isinstance(every, float) else int(every))
        self.score = np.zeros(graph.n)
        self.scored = np.zeros(graph.n, dtype=bool)  # has a batch score
        self.fetched_nodes: list[int] = []
        self.since = 0
        self.last_rank: np.ndarray | None = None
        self.recomputations = 0
        # Until the first recomputation the seeds share the only rank known.
        self.score[seeds] = 1.0 / max(1, len(seeds))
        super().start(graph, seeds, rng)

    def _priority(self, v):
        return float(self.score[v])

    def fetched(self, node, links, new):
        self.fetched_nodes.append(node)
        self._discover(new)
        if self.partial and links:
            share = self.score[node] / len(links)
            if share > 0:
                score, scored, done = self.score, self.scored, self.done
                for v in links:
                    if not done[v] and not scored[v]:
                        score[v] += share
                        self._push(v)
        self.since += 1
        if self.since >= self.every:
            self.recompute()

    def recompute(self) -> None:
        """PageRank of the known graph; rebuild the frontier heap from it."""
        self.since = 0
        self.recomputations += 1
        graph = self.graph
        known = self.next_seq
        order = np.empty(known, dtype=np.int64)  # compact id (seq) -> node
        seq = self.seq
        nodes = np.flatnonzero(seq >= 0)
        order[seq[nodes]] = nodes
        fetched = np.asarray(self.fetched_nodes, dtype=np.int64)
        starts = graph.indptr[fetched]
        counts = graph.indptr[fetched + 1] - starts
        # Out-links of the fetched pages, gathered without a Python loop.
        total = int(counts.sum())
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        targets = graph.indices[offsets + np.arange(total)]
        src = np.repeat(seq[fetched], counts)
        dst = seq[targets]
        indptr = np.zeros(known + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=known), out=indptr[1:])
        sorter = np.argsort(src, kind="stable")
        start = None
        if self.last_rank is not None:
            start = np.full(known, 1.0 / known)
            start[: len(self.last_rank)] = self.last_rank
        rank = pagerank_csr(indptr, dst[sorter].astype(np.int32), known, tol=1e-8, start=start)
        self.last_rank = rank
        self.score[order] = rank
        self.scored[order] = True
        done = self.done
        frontier = order[~done[order]]
        self.heap = [(-float(rank[seq[v]]), int(seq[v]), int(v)) for v in frontier.tolist()]
        heapq.heapify(self.heap)


class LargerSiteFirst(Policy):
    """The site with the most pending pages first; within it, FIFO
    (Baeza-Yates et al. 2005)."""

    name = "larger-site-first"

    def start(self, graph, seeds, rng):
        self.host = graph.host
        self.queues: dict[int, deque] = {}
        self.pending: dict[int, int] = {}
        self.heap: list[tuple[int, int, int]] = []
        self.first_seen: dict[int, int] = {}
        self._add(seeds)

    def _add(self, nodes):
        host, queues, pending, first_seen = self.host, self.queues, self.pending, self.first_seen
        touched = set()
        for v in nodes:
            h = int(host[v])
            q = queues.get(h)
            if q is None:
                q = queues[h] = deque()
                first_seen.setdefault(h, len(first_seen))
            q.append(v)
            pending[h] = pending.get(h, 0) + 1
            touched.add(h)
        for h in touched:
            heapq.heappush(self.heap, (-pending[h], first_seen[h], h))

    def select(self):
        heap, pending = self.heap, self.pending
        while heap:
            neg, _, h = heap[0]
            if pending.get(h, 0) != -neg or neg == 0:
                heapq.heappop(heap)  # stale count
                continue
            v = self.queues[h].popleft()
            pending[h] -= 1
            if pending[h]:
                heapq.heapreplace(heap, (-pending[h], self.first_seen[h], h))
            else:
                heapq.heappop(heap)
            return v
        return -1

    def fetched(self, node, links, new):
        self._add(new)


class _TrapWatchStore(MemoryStore):
    """``"pending-cash"`` store that also keeps the pending sum of the trap
    pages (``trap[int(url)]``), so that the trap share of a lambda payout
    is O(1) to read (:class:`EnginePolicy` measures it at each payout)."""

    def __init__(self, lambda_targets: str, trap: list[bool]):
        self.trap = trap
        self.trap_partials: list[float] = []
        super().__init__(lambda_targets)

    def _add_norm(self, value, seq):
        super()._add_norm(value, seq)
        if self.trap[int(self._table.url(seq))]:
            exact_add(self.trap_partials, value)

    @property
    def trap_norm(self) -> float:
        return math.fsum(self.trap_partials)

    def _recount_norm(self):
        super()._recount_norm()
        url = self._table.url
        self.trap_partials = [math.fsum(value for seq, value in self._pending_norms() if self.trap[int(url(seq))])]


def shipped_engine_kwargs() -> dict:
    """:class:`EnginePolicy` arguments for the engine a crawl builds with
    every setting left at its default, read from :mod:`scrapy_aopic.settings`
    (as :class:`scrapy_aopic.frontier.Frontier` reads them) so that the
    benchmarks' "default engine" follows the product's defaults: lambda's
    targets and tax, the history window (none unless re-crawl is on), link
    memory, the priority horizon, seed cash, discovery cash; ``max_revisits`` is no setting:
    the engine's own default, which the frontier leaves as it is.
    (``AOPIC_MIN_CASH_SHARE`` and the other host-slot rules have nothing to
    act on in the simulator: it fetches one page at a time, no host waits.)
    ``tests/unit/test_sim.py`` checks them against a crawler's engine."""
    import inspect

    from scrapy.settings import Settings

    from .. import settings as aopic_settings

    empty = Settings()  # nothing set: every getter returns the default
    return {
        "lambda_targets": aopic_settings.get(empty, "AOPIC_LAMBDA_TARGETS"),
        "lambda_tax": aopic_settings.get_optional_float(empty, "AOPIC_LAMBDA_TAX"),
        "history_window": aopic_settings.effective_history_window(empty),
        "link_memory": aopic_settings.get_bool(empty, "AOPIC_LINK_MEMORY"),
        "max_revisits": inspect.signature(AopicEngine).parameters["max_revisits"].default,
        "priority_horizon": aopic_settings.get_float(empty, "AOPIC_PRIORITY_HORIZON"),
        "seed_cash": aopic_settings.get_float(empty, "AOPIC_SEED_CASH"),
        # the simulator's crawls are open ones (no allowed_domains)
        "discovery_cash": aopic_settings.discovery_cash(empty, allowed_domains=None),
    }


class EnginePolicy(Policy):
    """OPIC / AOPIC: :class:`~scrapy_aopic.engine.AopicEngine` itself.

    Node ``u`` is the account ``str(u)`` on host ``host_names[host[u]]``; the
    engine's clock is the number of fetches so far. Each seed brings
    ``seed_cash``.

    The arguments' own defaults are the engine before issue 16 (lambda pays
    ``"pending"``); :meth:`shipped` is the engine with the product's
    defaults (:func:`shipped_engine_kwargs`).

    :param lambda_targets: ``"pending"``, ``"pending-cash"`` or ``"all"``
        (``AOPIC_LAMBDA_TARGETS``).
    :param lambda_tax: ``None`` or a float (``AOPIC_LAMBDA_TAX``).
    :param history_window: ``T`` in fetches, a float in (0, 1) meaning that
        share of the graph's pages, or ``None`` (``AOPIC_HISTORY_WINDOW``).
    :param link_memory: virtual revisits of crawled pages
        (``AOPIC_LINK_MEMORY``, on by default as in a crawl); variants with it
        off are named ``... no-link-memory``.
    :param max_revisits: virtual revisits per fetch at most.
    :param priority_horizon: ``AOPIC_PRIORITY_HORIZON`` in fetches (0: cash
        order); ``None``: the shipped default.
    :param discovery_cash: ``AOPIC_DISCOVERY_CASH``, a share of
        ``seed_cash`` per URL discovered; 0 (none: the paper's algorithm)
        unless given, :meth:`shipped` gives the product's default.

    On graphs with trap labels it also measures where lambda's cash goes:
    :attr:`lambda_log` holds ``(fetches, paid, paid_to_traps)`` (running
    totals) after each lambda visit, ``paid_to_traps`` being what the trap
    pages lambda paid at that visit received (O(1) per visit with
    ``"pending"`` and ``"all"``; with ``"pending-cash"`` through a store that
    keeps the trap pages' pending sum).
    """

    family = "aopic"

    def __init__(
        self,
        name: str | None = None,
        *,
        lambda_targets: str = "pending",
        lambda_tax: float | None = None,
        history_window: float | None = None,
        link_memory: bool = True,
        max_revisits: int = 1,
        priority_horizon: float | None = None,
        seed_cash: float = 1.0,
        discovery_cash: float = 0.0,
    ):
        self.seed_cash = seed_cash
        if priority_horizon is None:
            from ..settings import DEFAULTS

            priority_horizon = float(DEFAULTS["AOPIC_PRIORITY_HORIZON"])
        self.priority_horizon = priority_horizon
        self.discovery_cash = discovery_cash
        self.lambda_targets = lambda_targets
        self.lambda_tax = lambda_tax
        self.history_window = history_window
        self.link_memory = link_memory
        self.max_revisits = max_revisits
        if name is None:
            name = "opic" if history_window is None else "aopic"
            if history_window is not None:
                name += f" T={history_window:g}"
            name += f" {lambda_targets}"
            if lambda_tax is not None:
                name += f" tax={lambda_tax:g}"
            if not link_memory:
                name += " no-link-memory"
            elif max_revisits != 1:
                name += f" revisits={max_revisits}"
            if priority_horizon:
                name += f" horizon={priority_horizon:g}"
            if discovery_cash:
                name += f" discovery={discovery_cash:g}"
        self.name = name

    @classmethod
    def shipped(cls, name: str | None = None) -> EnginePolicy:
        """The engine with every setting at its shipped default."""
        return cls(name, **shipped_engine_kwargs())

    def start(self, graph, seeds, rng):
        window = self.history_window
        if window is not None and window < 1:
            window = max(1.0, window * graph.n)
        self.now = 0
        labels = graph.labels
        self._trap = None if labels is None or not (labels == TRAP).any() else (labels == TRAP).tolist()
        if self._trap is not None and self.lambda_targets == "pending-cash":
            self.store = _TrapWatchStore(self.lambda_targets, self._trap)
        else:
            self.store = MemoryStore(self.lambda_targets)
        self.engine = AopicEngine(
            self.store,
            lambda_tax=self.lambda_tax,
            history_window=window,
            seed_cash=self.seed_cash,
            clock=self._clock,
            link_memory=self.link_memory,
            max_revisits=self.max_revisits,
            priority_horizon=self.priority_horizon,
            discovery_cash=self.discovery_cash,
        )
        self.host = graph.host.tolist()
        self.host_names = graph.host_names
        self.lease = None
        self.lambda_log: list[tuple[int, float, float]] = []
        self._paid = self._paid_to_traps = 0.0
        self._trap_pending: set[str] = set()
        self._trap_known = 0
        if self._trap is not None:
            # The engine calls store.visit_lambda: measure each payout there.
            self.store.visit_lambda = self._visit_lambda_measured
        for s in seeds:
            self.engine.add_seed(Link(str(s), self.host_names[self.host[s]], 0))
            self._seen(s)

    def _seen(self, node: int) -> None:
        if self._trap is not None and self._trap[node]:
            self._trap_pending.add(str(node))
            self._trap_known += 1

    def _trap_weight(self) -> float:
        """Share of the next lambda payout that trap pages will receive."""
        store, t = self.store, self.store.totals()
        if self.lambda_targets == "pending":
            return len(self._trap_pending) / t.pending if t.pending else 0.0
        if self.lambda_targets == "all":
            targets = t.pending + t.leased + store._crawled
            return self._trap_known / targets if targets else 0.0
        if store._norm_error > 1e-13 * store._pending_norm:
            store._recount_norm()  # as the payout will: the sums it divides
        norm = store._pending_norm
        return store.trap_norm / norm if norm > 0 else 0.0

    def _visit_lambda_measured(self) -> float:
        share = self._trap_weight()
        paid = MemoryStore.visit_lambda(self.store)
        if paid:
            self._paid += paid
            self._paid_to_traps += paid * share
            self.lambda_log.append((self.now, self._paid, self._paid_to_traps))
        return paid

    def _clock(self) -> float:
        return float(self.now)

    def select(self):
        lease = self.engine.next()
        if lease is None:
            return -1
        self.lease = lease
        return int(lease.url)

    def fetched(self, node, links, new):
        lease = self.lease
        depth = lease.depth + 1
        host, host_names = self.host, self.host_names
        self.now += 1
        self.engine.visit(lease, [Link(str(v), host_names[host[v]], depth) for v in links])
        self.lease = None
        if self._trap is not None:
            self._trap_pending.discard(lease.url)
            for v in new:
                self._seen(v)

    def estimate(self):
        ranking = self.engine.ranking()
        nodes = np.fromiter((int(p.url) for p in ranking), dtype=np.int64, count=len(ranking))
        scores = np.fromiter((p.importance for p in ranking), dtype=np.float64, count=len(ranking))
        return nodes, scores


class EngineWithRevisits(EnginePolicy):
    """The engine with link memory on (kept for scripts written when virtual
    revisits were evaluated here, before they moved into the engine as
    ``AOPIC_LINK_MEMORY``). ``per_fetch`` is the engine's ``max_revisits``.
    """

    def __init__(self, name: str | None = None, *, per_fetch: int = 1, **kwargs):
        kwargs["link_memory"] = True
        super().__init__(name, max_revisits=per_fetch, **kwargs)
        if name is None:
            self.name += " +revisits"

    @property
    def revisits(self) -> int:
        """Virtual revisits done so far."""
        return self.store.totals().virtual_visits
