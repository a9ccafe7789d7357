"""Online push propagation of cash against batch PageRank (issue 18, item 1).

A prototype (simulation only, not in the engine): ``PushRank`` keeps the
known graph's PageRank up to date by forward push (Andersen, Chung, Lang
2006; for a graph growing by crawls, Zhang, Lofgren, Goel 2016) and orders
pending URLs by it; ``EngineTeleport`` gives the shipped engine the same
source of cash (a share of a seed's cash per URL discovered). These commands
print every figure of "Online push propagation" in ``docs/benchmarks.rst``
(the first one also the shipped engine, batch PageRank every 1 % and the
engine with a seed's cash per new URL)::

    python benchmarks/bench_ordering_push.py        # 4 graphs, teleports known and seeds, eps 0.1 and 0.01 per page
    python benchmarks/bench_ordering_push.py --no-baselines --shares none --teleports lambda-cash,lambda-uniform --eps 0.1
    python benchmarks/bench_ordering_push.py --no-baselines --teleports known --rules total --eps 1e-5,1e-6,1e-7
    python benchmarks/bench_ordering_push.py --graphs synthetic-1M --teleports known --eps 0.1
    python benchmarks/bench_ordering_push.py --no-baselines --teleports none --shares 0.1,0.01,0.001

The mechanism, in AOPIC's words. Every known page ``u`` has an estimate
``p[u]`` (settled importance, crawled pages only) and a residual ``r[u]``
(cash not yet passed on). A pending URL is a sink: its out-links are unknown,
so it keeps whatever reaches it (its residual is its *absorbed* cash, and the
frontier is ordered by it). Crawling a page releases its absorbed cash: a
push keeps ``1 - d`` of it as the page's importance (``p``; AOPIC's history,
with the tax as damping) and splits ``d`` of it over the page's out-links.
A crawled page whose residual rises above a threshold (credits from pages
crawled later, through remembered links) is pushed again at once, and so on
until no crawled page is above it: AOPIC's virtual revisits, driven by a
residual threshold instead of one per fetch.

The invariant (Zhang, Lofgren, Goel), for every known page ``v``::

    p[v] + (1 - d) r[v] = (1 - d) s[v] + d * sum over crawled w -> v of p[w] / outdeg(w)

A push keeps it; crawling a page changes nothing in it (the page had
``p = 0``, so its new out-links carry nothing yet): no correction is ever
needed. Pushed until every crawled residual is 0, a pending URL's
``(1 - d) r`` is exactly its PageRank in the known graph with pending URLs as
sinks (with ``s`` = 1 on every known page, the teleport batch PageRank uses,
proportional to it: ``tests/unit/test_bench_ordering_push.py``). The
threshold (``--eps``) bounds what is left behind.

Teleport (``s``, the source of the cash) and where the ``1 - d`` share goes:

``known``
    One unit of cash per page when it is discovered (teleport uniform over
    known pages, batch PageRank's choice); ``1 - d`` kept as ``p``.
``seeds``
    The seeds' cash only (teleport back to the seeds: personalized PageRank
    of the seeds); ``1 - d`` kept as ``p``.
``lambda-cash``
    The seeds' cash only; ``1 - d`` of every push paid to lambda, which pays
    it before each pick to the pending URLs in proportion to their cash
    (``AOPIC_LAMBDA_TARGETS = "pending-cash"``: a common factor, kept as one
    number, so the order is not touched).
``lambda-uniform``
    As ``lambda-cash`` but lambda pays every pending URL the same
    (``"pending"``; a dividend counter, the order keeps ``r - mark``).

Threshold (per out-link, as Andersen-Chung-Lang): a crawled page is pushed
again when its residual exceeds ``eps * M * max(1, outdeg)`` (``--rules
total``), ``M`` all cash put in so far (grows with discoveries under
``known``; 1 otherwise), or ``eps * (M / K) * max(1, outdeg)`` (``--rules
page``), ``K`` the pages known: relative to the mean cash per known page
(under ``known`` exactly ACL's ``eps * outdeg``, the teleport being 1 per
page). ``total`` bounds the whole crawl's work (about ``1 / ((1 - d) eps)``
pushes of a unit, whatever the graph's size), ``page`` the work per fetch.

Work per fetch: pushes (the release of the fetched page counts as one) and
edges touched (out-links credited), mean / p99 / max / total over the crawl.
Every credit to a pending URL pushes one lazy heap entry (O(log n)); the
heap is rebuilt from the live entries when it holds more than twice the
pending URLs (amortised O(1) per entry).

Needs numpy and scipy; rust-doc, python3-doc, postgresql-doc-15 from Debian
(see ``bench_ordering.py``).
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from arglists import names, numbers  # noqa: E402
from bench_ordering import ALL_GRAPHS, load  # noqa: E402

from scrapy_aopic.sim.pagerank import DAMPING, pagerank  # noqa: E402
from scrapy_aopic.sim.policies import BatchPageRank, EnginePolicy, Policy, shipped_engine_kwargs  # noqa: E402
from scrapy_aopic.sim.report import markdown_table  # noqa: E402
from scrapy_aopic.sim.runner import FRACTIONS, compare  # noqa: E402

UNKNOWN, PENDING, CRAWLED = 0, 1, 2
TELEPORTS = ("known", "seeds", "lambda-cash", "lambda-uniform")
RULES = ("total", "page")


class PushRank(Policy):
    """Frontier ordered by absorbed cash, kept current by forward push (module docstring)."""

    family = "prototype"

    def __init__(self, eps: float = 0.1, teleport: str = "known", rule: str = "page", damping: float = DAMPING):
        if teleport not in TELEPORTS:
            raise ValueError(f"teleport: one of {TELEPORTS}")
        if rule not in RULES:
            raise ValueError(f"rule: one of {RULES}")
        self.eps, self.teleport, self.rule, self.damping = eps, teleport, rule, damping
        self.name = f"push {teleport} eps={eps:g}" + ("" if rule == "total" else " per page")

    # -- set-up ---------------------------------------------------------------

    def start(self, graph, seeds, rng):
        n = graph.n
        self.state = bytearray(n)
        self.r = [0.0] * n  # residual; pending: absorbed (lambda-cash: divided by scale)
        self.p = [0.0] * n  # settled importance (crawled pages)
        self.mark = [0.0] * n  # lambda-uniform: dividend when discovered
        self.seq = [0] * n
        self.links: dict[int, list[int]] = {}  # link memory
        self.next_seq = 0
        self.heap: list[tuple[float, int, int]] = []
        self.pending = 0
        self.queue: deque[int] = deque()
        self.queued = bytearray(n)
        self.total = 0.0  # M: all cash put in
        self.pool = 0.0  # lambda modes: 1 - d shares not paid yet
        self.dangling = 0.0  # d share of crawled pages without out-links (kept aside, counted)
        self.scale = 1.0  # lambda-cash: pending cash = scale * r
        self.pending_stored = 0.0  # lambda-cash: sum of r over pending URLs
        self.dividend = 0.0  # lambda-uniform: paid per pending URL so far
        self.leased = 0.0
        self.pushes: list[int] = []  # per fetch
        self.edges: list[int] = []
        for s in seeds:
            self._discover(s)
        if self.teleport != "known":
            for s in seeds:
                self._credit(s, 1.0 / len(seeds))
            self.total = 1.0

    def _discover(self, v: int) -> None:
        self.state[v] = PENDING
        self.seq[v] = self.next_seq
        self.next_seq += 1
        self.pending += 1
        self.mark[v] = self.dividend
        if self.teleport == "known":
            self.total += 1.0
            self._credit(v, 1.0)
        else:
            heapq.heappush(self.heap, (-self._key(v), self.seq[v], v))

    def _key(self, v: int) -> float:
        return self.r[v] - self.mark[v] if self.teleport == "lambda-uniform" else self.r[v]

    def _threshold(self, u: int) -> float:
        per_degree = self.eps * max(1, len(self.links[u]))
        return per_degree * (self.total if self.rule == "total" else self.total / self.next_seq)

    # -- moving cash -----------------------------------------------------------

    def _credit(self, v: int, amount: float) -> None:
        if self.state[v] == PENDING:
            if self.teleport == "lambda-cash":
                amount /= self.scale
                self.pending_stored += amount
            self.r[v] += amount
            heapq.heappush(self.heap, (-self._key(v), self.seq[v], v))
        else:  # crawled: pushed again if above the threshold
            self.r[v] += amount
            if not self.queued[v] and self.r[v] > self._threshold(v):
                self.queued[v] = 1
                self.queue.append(v)

    def _push(self, u: int, cash: float) -> int:
        """Pass ``cash`` on from crawled ``u``; returns the edges touched."""
        kept = (1.0 - self.damping) * cash
        if self.teleport in ("known", "seeds"):
            self.p[u] += kept
        else:
            self.pool += kept
        links = self.links[u]
        if not links:  # lambda modes: to lambda; else set aside (a sink's share that leaves the graph)
            if self.teleport in ("known", "seeds"):
                self.dangling += cash - kept
            else:
                self.pool += cash - kept
            return 0
        share = (cash - kept) / len(links)
        for v in links:
            self._credit(v, share)
        return len(links)

    def _pay_lambda(self) -> None:
        if self.pool <= 0 or self.pending == 0:
            return
        if self.teleport == "lambda-uniform":
            self.dividend += self.pool / self.pending
            self.pool = 0.0
        elif self.pending_stored > 0:  # lambda-cash: every pending URL's cash times one factor
            self.scale *= 1.0 + self.pool / (self.scale * self.pending_stored)
            self.pool = 0.0

    # -- the policy ------------------------------------------------------------

    def select(self):
        self._pay_lambda()
        heap, state = self.heap, self.state
        while heap:
            neg, _, v = heapq.heappop(heap)
            if state[v] == PENDING and -neg == self._key(v):
                break
        else:
            return -1
        state[v] = CRAWLED
        self.pending -= 1
        if self.teleport == "lambda-cash":
            self.leased = self.scale * self.r[v]
            self.pending_stored -= self.r[v]
        elif self.teleport == "lambda-uniform":
            self.leased = self.r[v] + self.dividend - self.mark[v]
        else:
            self.leased = self.r[v]
        self.r[v] = 0.0
        return v

    def fetched(self, node, links, new):
        for v in new:
            self._discover(v)
        self.links[node] = list(links)
        edges = self._push(node, self.leased)
        self.leased = 0.0
        pushes = 1
        queue, queued, r = self.queue, self.queued, self.r
        while queue:
            u = queue.popleft()
            queued[u] = 0
            if r[u] > self._threshold(u):
                cash, r[u] = r[u], 0.0
                edges += self._push(u, cash)
                pushes += 1
        self.pushes.append(pushes)
        self.edges.append(edges)
        if len(self.heap) > 2 * self.pending + 1024:  # drop stale entries
            live = {v for _, _, v in self.heap if self.state[v] == PENDING}
            self.heap = [(-self._key(v), self.seq[v], v) for v in live]
            heapq.heapify(self.heap)

    # -- books and estimate ----------------------------------------------------

    def pending_cash(self, v: int) -> float:
        if self.teleport == "lambda-cash":
            return self.scale * self.r[v]
        if self.teleport == "lambda-uniform":
            return self.r[v] + self.dividend - self.mark[v]
        return self.r[v]

    def books(self) -> dict:
        """All cash recounted (O(n)): sums to ``self.total`` after every fetch."""
        state = self.state
        parts = {
            "p": [],
            "crawled residual": [],
            "pending": [],
            "lambda, set aside, in flight": [self.pool, self.dangling, self.leased],
        }
        for v in range(len(state)):
            if state[v] == CRAWLED:
                parts["p"].append(self.p[v])
                parts["crawled residual"].append(self.r[v])
            elif state[v] == PENDING:
                parts["pending"].append(self.pending_cash(v))
        return {k: math.fsum(x) for k, x in parts.items()}

    def estimate(self):
        """Known pages with their importance: ``p`` (plus the residual not yet
        settled, times 1 - d) for crawled pages, ``(1 - d) * cash`` for pending URLs."""
        state = self.state
        nodes = [v for v in range(len(state)) if state[v]]
        a = 1.0 - self.damping
        scores = [self.p[v] + a * self.r[v] if state[v] == CRAWLED else a * self.pending_cash(v) for v in nodes]
        return np.array(nodes, dtype=np.int64), np.array(scores)

    def work(self) -> dict:
        pushes, edges = np.array(self.pushes), np.array(self.edges)
        return {
            "pushes mean": pushes.mean(),
            "pushes p99": np.percentile(pushes, 99),
            "edges mean": edges.mean(),
            "edges p99": np.percentile(edges, 99),
            "edges max": edges.max(),
            "edges total": edges.sum(),
        }


class EngineTeleport(EnginePolicy):
    """The engine as shipped with ``AOPIC_DISCOVERY_CASH = share``: every URL
    it discovers brings ``share`` of a seed's cash, before the visit that
    found it credits it: ``known``'s teleport in AOPIC's books (the cash put
    in grows by that much per URL discovered). Built into the engine and the
    stores from this prototype (issue 18)."""

    family = "aopic"

    def __init__(self, share: float = 1.0, **kwargs):
        super().__init__(**{**shipped_engine_kwargs(), "discovery_cash": share, **kwargs})
        self.name = f"engine, AOPIC_DISCOVERY_CASH={share:g}"
        self.name += "".join(f" {k}={v}" for k, v in kwargs.items())


def run(graphs, eps_values, teleports, rules, baselines: bool, shares=(1.0,)) -> None:
    header = ["graph", "policy"] + [f"@{f:.0%}" for f in FRACTIONS] + ["tau @10 %", "top-100 @10 %", "CPU s"]
    work_header = [
        "graph", "policy", "pushes / fetch (mean)", "p99", "edges / fetch (mean)", "p99", "max",
        "edges total", "stuck @50 %",
    ]
    rows, work_rows = [], []
    for name in graphs:
        graph = load(name)
        if graph is None:
            continue
        graph.name = name
        true_rank = pagerank(graph)
        policies: list[Policy] = [EnginePolicy.shipped(), BatchPageRank(0.01)] if baselines else []
        policies += [EngineTeleport(share) for share in shares]
        policies += [PushRank(e, t, rule) for rule in rules for t in teleports for e in eps_values]
        for policy in policies:
            started = time.process_time()
            comparison = compare(graph, [policy], true_rank=true_rank)
            seconds = time.process_time() - started
            row = comparison.table()[1]
            acc = {a["fetched"]: a for a in comparison.runs[0].accuracy}
            at10 = acc.get(comparison.budgets()[FRACTIONS.index(0.10)])
            rows.append(
                [name, row["policy"]]
                + [f"{100 * r:.1f}" for r in row["ratio"]]
                + ([f"{at10['kendall_tau']:.2f}", f"{at10['top_overlap']:.2f}"] if at10 else ["-", "-"])
                + [f"{seconds:.1f}"]
            )
            print("  ", " | ".join(rows[-1]), flush=True)
            if isinstance(policy, PushRank):
                w, books = policy.work(), policy.books()
                work_rows.append(
                    [
                        name, policy.name, f"{w['pushes mean']:.1f}", f"{w['pushes p99']:.0f}",
                        f"{w['edges mean']:.0f}", f"{w['edges p99']:.0f}", f"{w['edges max']:.0f}",
                        f"{w['edges total']:.3g}",
                        f"{100 * books['crawled residual'] / policy.total:.1f} %",
                    ]
                )
                print("  ", " | ".join(work_rows[-1]), flush=True)
    print("\n## share of the ideal sort's PageRank (%), same run; importance estimate at 10 %\n")
    print(markdown_table(header, rows))
    print("\n## work per fetch (the fetched page's release counts as one push); cash left on crawled pages at 50 %\n")
    print(markdown_table(work_header, work_rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", type=names(ALL_GRAPHS, none=False),
                        default=["rust-doc", "python3-doc", "postgresql-doc-15", "synthetic-100k"])
    parser.add_argument("--eps", type=numbers, default=[0.1, 0.01], help="thresholds (see --rules)")
    parser.add_argument("--teleports", type=names(TELEPORTS), default=["known", "seeds"],
                        help=f"of {', '.join(TELEPORTS)}")
    parser.add_argument("--rules", type=names(RULES, none=False), default=["page"],
                        help="threshold rules: page (per known page), total (of all cash)")
    parser.add_argument(
        "--no-baselines", action="store_true", help="skip the shipped engine and batch PageRank"
    )
    parser.add_argument(
        "--shares", type=numbers, default=[1.0], help="rows of the shipped engine with AOPIC_DISCOVERY_CASH at each of these ('none': skip)"
    )
    args = parser.parse_args()
    run(
        args.graphs,
        args.eps,
        args.teleports,
        args.rules,
        not args.no_baselines,
        args.shares,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
