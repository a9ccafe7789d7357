"""Run ordering policies over a graph and measure them.

:func:`simulate` crawls one graph with one policy, one fetch per step, up to a
budget, and returns the fetch order (plus, for OPIC/AOPIC, how well the
engine's importance estimate matched true PageRank along the way).
:func:`compare` runs a list of policies side by side and computes every
figure the reports show (:mod:`scrapy_aopic.sim.report`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

import numpy as np

from .graph import FARM, TRAP, Graph
from .pagerank import pagerank
from .policies import (
    BacklinkCount,
    BatchPageRank,
    BreadthFirst,
    DepthFirst,
    EnginePolicy,
    LargerSiteFirst,
    Omniscient,
    Policy,
    RandomOrder,
)

#: Budgets reported, as fractions of the graph's pages.
FRACTIONS = (0.01, 0.05, 0.10, 0.25, 0.50)
#: Size of the top set compared in the importance-accuracy figures.
TOP_K = 100


@dataclass
class Run:
    """One policy's crawl of one graph."""

    policy: str
    family: str
    order: np.ndarray  #: nodes in fetch order
    seconds: float
    #: importance accuracy at checkpoints: dicts with ``fetched``,
    #: ``kendall_tau``, ``top_overlap`` (engine policies only)
    accuracy: list[dict] = field(default_factory=list)
    #: ``(fetches, lambda paid, paid to trap pages)`` running totals after
    #: each lambda visit (engine policies on graphs with traps)
    lambda_log: list[tuple[int, float, float]] | None = None


def budget_of(n: int, fraction: float) -> int:
    """Number of fetches a fraction of ``n`` pages allows (at least one)."""
    return max(1, int(math.ceil(fraction * n - 1e-9)))


def simulate(
    graph: Graph,
    policy: Policy,
    budget: int,
    *,
    seed: int = 0,
    true_rank: np.ndarray | None = None,
    checkpoints: tuple[int, ...] = (),
) -> Run:
    """Crawl ``graph`` with ``policy`` for at most ``budget`` fetches.

    ``checkpoints`` (fetch counts) ask the policy for its importance estimate
    (OPIC/AOPIC only), compared with ``true_rank``.
    """
    indptr, indices = graph.indptr, graph.indices
    discovered = bytearray(graph.n)
    seeds = []
    for s in graph.seeds.tolist():
        if not discovered[s]:
            discovered[s] = 1
            seeds.append(s)
    order = np.empty(budget, dtype=np.int64)
    fetched = bytearray(graph.n)
    pending_checks = sorted(set(c for c in checkpoints if 0 < c <= budget))
    accuracy: list[dict] = []
    started = time.perf_counter()
    policy.start(graph, seeds, random.Random(seed))
    steps = 0
    while steps < budget:
        node = policy.select()
        if node < 0:
            break
        if fetched[node]:
            raise RuntimeError(f"{policy.name} fetched node {node} twice")
        fetched[node] = 1
        order[steps] = node
        steps += 1
        links = indices[indptr[node] : indptr[node + 1]].tolist()
        new = [v for v in links if not discovered[v]]
        for v in new:
            discovered[v] = 1
        policy.fetched(node, links, new)
        if pending_checks and steps == pending_checks[0]:
            pending_checks.pop(0)
            estimate = policy.estimate()
            if estimate is not None and true_rank is not None:
                accuracy.append({"fetched": steps, **importance_accuracy(*estimate, true_rank)})
    seconds = time.perf_counter() - started
    return Run(policy.name, policy.family, order[:steps].copy(), seconds, accuracy, getattr(policy, "lambda_log", None))


# -- metrics -----------------------------------------------------------------


def captured(true_rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Fraction of the total PageRank held by the first ``k`` fetched pages,
    for ``k = 1..len(order)``."""
    return np.cumsum(true_rank[order]) / true_rank.sum()


def ideal(true_rank: np.ndarray, budget: int) -> np.ndarray:
    """The unconstrained ideal: the ``k`` highest-PageRank pages, reachable
    or not (Cho, Garcia-Molina, Page 1998's ordering metric)."""
    top = np.sort(true_rank)[::-1][:budget]
    return np.cumsum(top) / true_rank.sum()


def value_at(curve: np.ndarray, k: int) -> float:
    """``curve`` after ``k`` fetches (its last value if the crawl stopped)."""
    if len(curve) == 0:
        return 0.0
    return float(curve[min(k, len(curve)) - 1])


def label_share(labels: np.ndarray, order: np.ndarray, k: int, label: int) -> float:
    """Share of the first ``k`` fetches spent on pages labelled ``label``."""
    head = order[:k]
    return float((labels[head] == label).mean()) if len(head) else 0.0


def lambda_trap_share(lambda_log: list[tuple[int, float, float]] | None, k: int) -> float | None:
    """Share of lambda's payouts in the first ``k`` fetches that landed in
    trap pages (``None`` without a log; 0 when lambda paid nothing)."""
    if lambda_log is None:
        return None
    paid = to_traps = 0.0
    for fetches, total, traps in lambda_log:
        if fetches > k:
            break
        paid, to_traps = total, traps
    return to_traps / paid if paid else 0.0


def importance_accuracy(
    nodes: np.ndarray, scores: np.ndarray, true_rank: np.ndarray, top: int = TOP_K
) -> dict:
    """How well ``scores`` of ``nodes`` (an estimate) match ``true_rank``.

    ``kendall_tau``: Kendall's tau-b between the estimate and true PageRank
    over the pages the estimate covers. ``top_overlap``: share of the
    ``top`` truly most important pages of the whole graph that are also in
    the estimate's top ``top``.
    """
    from scipy.stats import kendalltau

    tau = float("nan")
    if len(nodes) > 1:
        tau = float(kendalltau(scores, true_rank[nodes]).statistic)
    k = min(top, len(true_rank))
    best_true = set(np.argsort(-true_rank, kind="stable")[:k].tolist())
    best_estimate = set(nodes[np.argsort(-scores, kind="stable")[:k]].tolist())
    return {"kendall_tau": tau, "top_overlap": len(best_true & best_estimate) / k}


# -- side by side ------------------------------------------------------------


def default_policies(true_rank: np.ndarray, *, quick: bool = False) -> list[Policy]:
    """Every ordering policy (``docs/benchmarks.rst``), with the engine variants worth showing.

    ``quick`` drops the slow and redundant variants (for tests and replays of
    big graphs).
    """
    policies: list[Policy] = [
        BreadthFirst(),
        DepthFirst(),
        RandomOrder(),
        BacklinkCount(),
        BatchPageRank(0.01),
        BatchPageRank(0.01, partial=True),
        LargerSiteFirst(),
        EnginePolicy.shipped(),  # the product's defaults (scrapy_aopic.settings), lambda -> pending-cash
        # lambda -> pending (the default before issue 16), and variants of it
        EnginePolicy(lambda_targets="pending"),
        EnginePolicy(lambda_targets="pending", link_memory=False),  # one-pass (no virtual revisits)
        EnginePolicy(lambda_targets="all"),
        # ordered by discounted inflow (AOPIC_PRIORITY_HORIZON, issue 18), both lambda rules
        EnginePolicy(lambda_targets="pending", priority_horizon=100.0),
        EnginePolicy(lambda_targets="pending-cash", priority_horizon=100.0),
    ]
    if not quick:
        policies += [
            EnginePolicy(lambda_targets="pending", lambda_tax=0.1),
            EnginePolicy(lambda_targets="pending", lambda_tax=0.3),
            EnginePolicy(lambda_targets="all", lambda_tax=0.1),
            EnginePolicy(lambda_targets="pending", history_window=0.05),
            EnginePolicy(lambda_targets="pending", max_revisits=4),
        ]
    policies.append(Omniscient(true_rank))
    return policies


@dataclass
class Comparison:
    """Every policy's run over one graph, and the figures derived from them."""

    graph: Graph
    true_rank: np.ndarray
    budget: int
    fractions: tuple[float, ...]
    runs: list[Run]
    ideal: np.ndarray  #: ideal-sort curve up to ``budget``
    pagerank_seconds: float

    def curve(self, run: Run) -> np.ndarray:
        return captured(self.true_rank, run.order)

    def budgets(self) -> list[int]:
        return [budget_of(self.graph.n, f) for f in self.fractions]

    def table(self) -> list[dict]:
        """One row per policy (plus the ideal sort): captured PageRank and
        ratio to the ideal sort at each budget, trap/farm shares, seconds."""
        budgets = self.budgets()
        rows = []
        ideal_at = [value_at(self.ideal, k) for k in budgets]
        rows.append(
            {
                "policy": "ideal sort (unreachable ok)",
                "family": "reference",
                "captured": ideal_at,
                "ratio": [1.0 for _ in budgets],
                "seconds": None,
                "fetched": self.budget,
            }
        )
        labels = self.graph.labels
        for run in self.runs:
            curve = self.curve(run)
            got = [value_at(curve, k) for k in budgets]
            row = {
                "policy": run.policy,
                "family": run.family,
                "captured": got,
                "ratio": [g / i if i else float("nan") for g, i in zip(got, ideal_at)],
                "seconds": run.seconds,
                "fetched": len(run.order),
            }
            if labels is not None:
                row["trap_share"] = [label_share(labels, run.order, k, TRAP) for k in budgets]
                row["farm_share"] = [label_share(labels, run.order, k, FARM) for k in budgets]
                row["lambda_trap_share"] = [lambda_trap_share(run.lambda_log, k) for k in budgets]
            rows.append(row)
        return rows


def compare(
    graph: Graph,
    policies: list[Policy] | None = None,
    *,
    fractions: tuple[float, ...] = FRACTIONS,
    seed: int = 0,
    true_rank: np.ndarray | None = None,
    accuracy: bool = True,
    log=None,
) -> Comparison:
    """Run ``policies`` (default: :func:`default_policies`) over ``graph`` up
    to the largest fraction of its pages; ``log`` gets progress lines."""
    started = time.perf_counter()
    if true_rank is None:
        true_rank = pagerank(graph)
    pagerank_seconds = time.perf_counter() - started
    if policies is None:
        policies = default_policies(true_rank)
    budget = budget_of(graph.n, max(fractions))
    checkpoints = tuple(budget_of(graph.n, f) for f in fractions) if accuracy else ()
    runs = []
    for policy in policies:
        run = simulate(graph, policy, budget, seed=seed, true_rank=true_rank, checkpoints=checkpoints)
        runs.append(run)
        if log is not None:
            log(f"  {graph.name}: {run.policy:<28} {len(run.order):>8} fetches in {run.seconds:7.1f} s")
    return Comparison(
        graph=graph,
        true_rank=true_rank,
        budget=budget,
        fractions=tuple(fractions),
        runs=runs,
        ideal=ideal(true_rank, budget),
        pagerank_seconds=pagerank_seconds,
    )


def importance_convergence(
    graph: Graph,
    true_rank: np.ndarray,
    *,
    rounds: tuple[float, ...] = (0.5, 1, 2, 5, 10, 20),
    lambda_tax: float | None = None,
    lambda_targets: str = "pending",
) -> list[dict]:
    """How the engine's importance estimate converges when pages are revisited.

    A continuous crawl: the engine (through its public API) fetches the
    richest page, and every visited page goes straight back into the
    frontier (``store.repend``), as in the OPIC paper where every page is
    visited again and again. At ``rounds`` x n visits, the estimate
    (``engine.ranking()``) is compared with true PageRank. Returns dicts
    with ``visits``, ``rounds``, ``history_sum``, ``kendall_tau``,
    ``top_overlap`` and ``coverage`` (share of the graph's pages known).
    """
    from ..engine import AopicEngine
    from ..store.base import Link
    from ..store.memory import MemoryStore

    store = MemoryStore(lambda_targets)
    visits = 0
    engine = AopicEngine(store, lambda_tax=lambda_tax, clock=lambda: float(visits))
    host, names = graph.host.tolist(), graph.host_names
    for s in graph.seeds.tolist():
        engine.add_seed(Link(str(s), names[host[s]], 0))
    checkpoints = sorted(int(r * graph.n) for r in rounds)
    results = []
    indptr, indices = graph.indptr, graph.indices
    for target in checkpoints:
        while visits < target:
            lease = engine.next()
            if lease is None:
                break
            u = int(lease.url)
            links = indices[indptr[u] : indptr[u + 1]].tolist()
            engine.visit(lease, [Link(str(v), names[host[v]], 1) for v in links])
            visits += 1
            store.repend(Link(lease.url, lease.host, lease.depth))
        ranking = engine.ranking()
        nodes = np.fromiter((int(p.url) for p in ranking), dtype=np.int64, count=len(ranking))
        scores = np.fromiter((p.importance for p in ranking), dtype=np.float64, count=len(ranking))
        results.append(
            {
                "visits": visits,
                "rounds": visits / graph.n,
                "history_sum": engine.history_sum,
                "coverage": len(nodes) / graph.n,
                **importance_accuracy(nodes, scores, true_rank),
            }
        )
    return results
