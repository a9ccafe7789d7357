"""What AOPIC's ordering gap to batch PageRank is made of (issue 18, item 1).

One command prints every figure of "What the rust-doc gap is made of" in
``docs/benchmarks.rst``::

    python benchmarks/bench_ordering_gap.py                      # rust-doc diagnosis + prototype on 4 graphs
    python benchmarks/bench_ordering_gap.py --diagnose none --graphs rust-doc --revisit-sweep   # + 4 and 16 revisits per fetch (slow)

Sections (all with the engine as it was before issue 16 made lambda pay
``"pending-cash"`` by default: OPIC, lambda -> pending, link memory, one
virtual revisit per fetch, through :class:`EnginePolicy`; rows with
``pending-cash`` say so):

1. *Where the cash is* at 1, 5, 10 % of pages fetched: share of all cash on
   crawled pages, on pending URLs and on lambda; how many crawled pages hold
   more than the richest pending URL (each one a revisit the rule would do)
   and how much cash they hold; virtual revisits and lambda payouts so far.
2. *Ranking the frontier*: frozen at 5, 10, 25 % of the engine's own crawl,
   the pending URLs are ranked by several scores and the next 1 % of pages
   taken from the top; the table gives the true PageRank those pages hold as
   a share of the best any choice of pending URLs could hold. "known-graph
   PageRank" is what batch PageRank would rank by (computed on the engine's
   known graph); "cash / age" divides cash by the fetches since discovery.
   The mean discovery time of each score's top pages shows the age bias.
3. *By directory*: at 10 %, where batch PageRank's crawl and the engine's
   differ most (true PageRank held, by the first two path components).
4. *Discounted priority prototype* (``DiscountedOpic`` below, simulation
   only): the engine's cash flow unchanged (same lambda rule, same
   revisit rule, same splits), but pending URLs ordered by the cash they
   received with each credit weighted ``exp(t / tau)`` (``t``: fetches so
   far), i.e. by recent inflow, instead of by the cash accumulated since
   discovery. Heap keys never change once pushed (a credit pushes a new
   entry, as in the store), so it is O(log n) per credit; lambda's uniform
   dividend is left out of the priority (it adds the same amount to every
   pending URL).
   The engine with lambda paid by cash (``AOPIC_LAMBDA_TARGETS =
   "pending-cash"``) and with a 0.1 lambda tax runs alongside: other lambda
   rules, no other order.
5. With ``--revisit-sweep``: the engine with 1, 4, 16 virtual revisits per fetch.
6. With ``--horizons``: the engine itself ordered by discounted inflow
   (``AOPIC_PRIORITY_HORIZON``, built from the prototype) at each horizon,
   under each lambda rule of ``--targets``, and with ``--growth`` each
   value of :data:`~scrapy_aopic.store.base.PRIORITY_GROWTH` (the horizon
   growing with the crawl past ``horizon / growth`` fetches; 0: fixed)::

    python benchmarks/bench_ordering_gap.py --diagnose none --taus none --no-lambda-rules \
        --horizons 0,30,50,100,200,300 --targets pending,pending-cash --growth 0
    python benchmarks/bench_ordering_gap.py --diagnose none --taus none --no-lambda-rules \
        --graphs synthetic-100k,synthetic-1M --horizons 0,100 --growth 0,0.05

Needs numpy and scipy; rust-doc, python3-doc, postgresql-doc-15 from Debian
(see ``bench_ordering.py``).
"""

from __future__ import annotations

import argparse
import collections
import heapq
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from arglists import names, numbers  # noqa: E402
from bench_ordering import ALL_GRAPHS, load  # noqa: E402

from scrapy_aopic.sim.pagerank import pagerank, pagerank_csr  # noqa: E402
from scrapy_aopic.sim.policies import BatchPageRank, EnginePolicy, Policy  # noqa: E402
from scrapy_aopic.sim.report import markdown_table  # noqa: E402
from scrapy_aopic.sim.runner import FRACTIONS, budget_of, compare  # noqa: E402
from scrapy_aopic.store import base  # noqa: E402
from scrapy_aopic.store.base import CRAWLED, PENDING  # noqa: E402
from scrapy_aopic.store.memory import LAMBDA_TARGETS  # noqa: E402

default_growth = base.PRIORITY_GROWTH

PENDING_STATE, CRAWLED_STATE = 1, 2


class DiscountedOpic(Policy):
    """OPIC with link memory (as the engine: lambda -> pending, lambda one
    more out-link, one virtual revisit per fetch) whose frontier is ordered
    by discounted inflow ``sum(credit * exp(t_credit / tau))`` instead of
    cash. Kept in log space (``logaddexp``): no overflow, no rebase."""

    family = "prototype"

    def __init__(self, tau: float = 100.0):
        self.tau = tau
        self.name = f"discounted tau={tau:g}" if math.isfinite(tau) else "credits only (no dividend)"

    def start(self, graph, seeds, rng):
        n = graph.n
        self.ip, self.ix = graph.indptr, graph.indices
        self.state = np.zeros(n, dtype=np.int8)
        self.cash = np.zeros(n)
        self.mark = np.zeros(n)  # lambda dividend when last settled (pending)
        self.logp = np.full(n, -math.inf)  # log of the discounted inflow
        self.seq = np.full(n, -1, dtype=np.int64)
        self.next_seq = 0
        self.dividend = 0.0
        self.lam = 0.0
        self.pending = 0
        self.now = 0
        self.heap: list[tuple[float, int, int]] = []
        self.rich: list[tuple[float, int, int]] = []  # crawled, by cash
        self.leased_cash = 0.0
        for s in seeds:
            self._credit(s, 1.0)

    def _credit(self, v: int, amount: float) -> None:
        state = self.state[v]
        if state == 0:
            self.state[v] = PENDING_STATE
            self.seq[v] = self.next_seq
            self.next_seq += 1
            self.mark[v] = self.dividend
            self.pending += 1
            state = PENDING_STATE
        if amount <= 0:
            if state == PENDING_STATE and self.logp[v] == -math.inf:
                heapq.heappush(self.heap, (math.inf, int(self.seq[v]), v))
            return
        self.cash[v] += amount
        if state == PENDING_STATE:
            self.logp[v] = np.logaddexp(self.logp[v], math.log(amount) + self.now / self.tau)  # tau=inf: 0
            heapq.heappush(self.heap, (-self.logp[v], int(self.seq[v]), v))
        else:
            heapq.heappush(self.rich, (-self.cash[v], int(self.seq[v]), v))

    def _top(self) -> int:
        heap, state, logp = self.heap, self.state, self.logp
        while heap:
            key, _, v = heap[0]
            if state[v] == PENDING_STATE and (key == -logp[v] or (key == math.inf and logp[v] == -math.inf)):
                return v
            heapq.heappop(heap)
        return -1

    def _eff(self, v: int) -> float:
        return self.cash[v] + self.dividend - self.mark[v]

    def _lambda_if_due(self) -> None:
        if self.lam <= 0 or self.pending == 0:
            return
        top = self._top()
        if top >= 0 and self.lam < self._eff(top):
            return
        self.dividend += self.lam / self.pending
        self.lam = 0.0

    def _pass_on(self, u: int, cash: float) -> None:
        links = self.ix[self.ip[u] : self.ip[u + 1]]
        share = cash / (len(links) + 1)
        self.lam += cash - share * len(links)
        for v in links.tolist():
            self._credit(v, share)

    def _revisit_if_due(self) -> None:
        rich, state, cash = self.rich, self.state, self.cash
        while rich and (state[rich[0][2]] != CRAWLED_STATE or -rich[0][0] != cash[rich[0][2]]):
            heapq.heappop(rich)
        if not rich:
            return
        u = rich[0][2]
        top = self._top()
        if top >= 0 and cash[u] <= self._eff(top):
            return
        heapq.heappop(rich)
        c = cash[u]
        cash[u] = 0.0
        self._pass_on(u, c)

    def select(self):
        self._lambda_if_due()
        self._revisit_if_due()
        self._lambda_if_due()
        v = self._top()
        if v < 0:
            return -1
        heapq.heappop(self.heap)
        self.leased_cash = self._eff(v)
        self.cash[v] = 0.0
        self.state[v] = CRAWLED_STATE
        self.pending -= 1
        return v

    def fetched(self, node, links, new):
        self.now += 1
        self._pass_on(node, self.leased_cash)
        self.leased_cash = 0.0

    def books(self) -> float:
        """All cash, recounted (O(n)): pending (dividends owed included),
        crawled, lambda, in flight. Equals the seeds' cash at every step."""
        pending = self.state == PENDING_STATE
        owed = float((self.cash[pending] + self.dividend - self.mark[pending]).sum())
        return math.fsum((owed, float(self.cash[self.state == CRAWLED_STATE].sum()), self.lam, self.leased_cash))


class _Probe(EnginePolicy):
    """The engine with lambda -> pending, stopping at checkpoints to look at its books."""

    def __init__(self, checks, on_check):
        super().__init__()
        self.checks, self.on_check = set(checks), on_check

    def start(self, graph, seeds, rng):
        super().start(graph, seeds, rng)
        self.discovered = {s: 0 for s in seeds}
        self.dividend_at = {s: 0.0 for s in seeds}
        self.fetched_nodes: list[int] = []

    def fetched(self, node, links, new):
        super().fetched(node, links, new)
        self.fetched_nodes.append(node)
        dividend = self.store._dividend  # lambda -> pending: the cumulative payout per pending URL
        for v in new:
            self.discovered[v] = self.now
            self.dividend_at[v] = dividend
        if self.now in self.checks:
            self.on_check(self)


def known_graph_pagerank(graph, crawled: list[int], known: np.ndarray) -> np.ndarray:
    """PageRank of the graph a crawl knows (batch PageRank's score), indexed like ``known``."""
    cid = np.full(graph.n, -1, dtype=np.int64)
    cid[known] = np.arange(len(known))
    src, dst = [], []
    for u in crawled:
        t = graph.indices[graph.indptr[u] : graph.indptr[u + 1]]
        src.append(np.full(len(t), cid[u]))
        dst.append(cid[t])
    src, dst = np.concatenate(src), np.concatenate(dst)
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(len(known) + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=len(known)), out=indptr[1:])
    return pagerank_csr(indptr, dst[order].astype(np.int32), len(known), tol=1e-10)


def diagnose(graph, true_rank) -> None:
    n = graph.n
    cash_rows, rank_rows = [], []
    next_k = budget_of(n, 0.01)

    def where_is_the_cash(p: _Probe) -> None:
        store, t = p.store, p.store.totals()
        crawled = np.array([v.cash for v in store.iter_accounts() if v.state == CRAWLED])
        pending_views = [v for v in store.iter_accounts() if v.state == PENDING]
        pending = np.array([v.cash for v in pending_views])
        dividends = sum(store._dividend - p.dividend_at[int(v.url)] for v in pending_views)
        top = store.peek()
        top_cash = top[1] if top else 0.0
        stuck = crawled > top_cash
        total = t.injected
        cash_rows.append(
            [
                f"{p.now} ({100 * p.now / n:.0f} %)",
                f"{100 * crawled.sum() / total:.1f} %",
                f"{100 * pending.sum() / total:.1f} % ({100 * dividends / pending.sum():.0f} %)",
                f"{100 * t.lambda_cash / total:.2f} %",
                f"{int(stuck.sum())} of {len(crawled)}",
                f"{100 * crawled[stuck].sum() / total:.1f} %",
                str(t.virtual_visits),
                f"{t.lambda_history / total:.3f}",
            ]
        )

    def rank_frontier(p: _Probe) -> None:
        accounts = {int(v.url): v for v in p.store.iter_accounts()}
        known = np.array(sorted(p.discovered))
        position = {u: i for i, u in enumerate(known.tolist())}
        kpr = known_graph_pagerank(graph, p.fetched_nodes, known)
        pend = np.array([u for u in known.tolist() if accounts[u].state == PENDING])
        cash = np.array([accounts[u].cash for u in pend.tolist()])
        discovered = np.array([p.discovered[u] for u in pend.tolist()], dtype=float)
        age = p.now - discovered + 1
        indegree = np.zeros(n)
        for u in p.fetched_nodes:
            indegree[graph.indices[graph.indptr[u] : graph.indptr[u + 1]]] += 1
        best = np.sort(true_rank[pend])[::-1][:next_k].sum()
        row = [f"{p.now} ({100 * p.now / n:.0f} %)"]
        for score in (cash, kpr[[position[u] for u in pend.tolist()]], cash / age, indegree[pend]):
            top = np.argsort(-score, kind="stable")[:next_k]
            row.append(f"{100 * true_rank[pend[top]].sum() / best:.1f} % (t={discovered[top].mean():.0f})")
        rank_rows.append(row)

    checks = [budget_of(n, f) for f in (0.01, 0.05, 0.10, 0.25)]

    def on_check(p: _Probe) -> None:
        if p.now in checks[:3]:
            where_is_the_cash(p)
        if p.now in checks[1:]:
            rank_frontier(p)

    from scrapy_aopic.sim.runner import simulate

    probe = _Probe(checks, on_check)
    engine_run = simulate(graph, probe, checks[-1])
    print(f"## {graph.name}: where the cash is (engine, lambda -> pending)\n")
    print(
        markdown_table(
            [
                "fetched",
                "on crawled pages",
                "on pending URLs (of it, lambda's dividends)",
                "on lambda",
                "crawled pages richer than the top pending URL",
                "cash they hold",
                "virtual revisits so far",
                "lambda paid so far (share of all cash)",
            ],
            cash_rows,
        )
    )
    print(f"\n## {graph.name}: ranking the engine's frontier for the next 1 % of pages\n")
    print(
        "True PageRank of the top pending URLs by each score, as a share of the best possible "
        "choice; t = mean fetch count at which those URLs were discovered.\n"
    )
    print(markdown_table(["frozen at", "cash (the engine)", "known-graph PageRank (batch)", "cash / age", "in-links from crawled pages"], rank_rows))

    k = budget_of(n, 0.10)
    batch_run = simulate(graph, BatchPageRank(0.01), k)
    urls = graph.urls

    def group(u: int) -> str:
        return "/".join(urls[u].split("/")[:2]) if urls is not None else graph.host_names[graph.host[u]]

    held = {"engine": collections.Counter(), "batch": collections.Counter()}
    count = {"engine": collections.Counter(), "batch": collections.Counter()}
    for label, order in (("engine", engine_run.order[:k]), ("batch", batch_run.order)):
        for u in order.tolist():
            held[label][group(u)] += true_rank[u]
            count[label][group(u)] += 1
    total = true_rank.sum()
    gap = sorted(set(held["engine"]) | set(held["batch"]), key=lambda g: held["engine"][g] - held["batch"][g])
    rows = [
        [g, str(count["engine"][g]), str(count["batch"][g]), f"{100 * held['engine'][g] / total:.2f} %", f"{100 * held['batch'][g] / total:.2f} %"]
        for g in gap[:8] + gap[-3:]
    ]
    engine_held = true_rank[engine_run.order[:k]].sum() / total
    batch_held = true_rank[batch_run.order].sum() / total
    only_batch = np.setdiff1d(batch_run.order, engine_run.order[:k])
    print(
        f"\n## {graph.name}: at 10 % ({k} pages) the engine holds {100 * engine_held:.1f} % of all PageRank, "
        f"batch PageRank {100 * batch_held:.1f} %; {len(only_batch)} pages only batch fetched hold "
        f"{100 * true_rank[only_batch].sum() / total:.1f} %\n"
    )
    print(markdown_table(["directory", "engine pages", "batch pages", "engine PageRank", "batch PageRank"], rows))
    print()


def curves(
    graphs, taus, sweep: bool, lambda_rules: bool = True, horizons=(), targets=("pending",), growth=(None,)
) -> None:
    header = ["graph", "policy"] + [f"@{f:.0%}" for f in FRACTIONS] + ["CPU s"]
    rows = []
    for name in graphs:
        graph = load(name)
        if graph is None:
            continue
        graph.name = name
        true_rank = pagerank(graph)
        policies: list[Policy] = [] if horizons else [EnginePolicy(), BatchPageRank(0.01)]
        if lambda_rules:  # lambda's dividend is most of pending cash: other ways to pay it
            policies += [EnginePolicy(lambda_targets="pending-cash"), EnginePolicy(lambda_tax=0.1)]
        policies += [DiscountedOpic(t) for t in taus]
        if sweep:
            policies += [EnginePolicy(max_revisits=4), EnginePolicy(max_revisits=16)]
        runs = [(policy, None) for policy in policies]
        for rule in targets:
            for h in horizons:
                for g in growth if h else (None,):
                    runs.append((EnginePolicy(lambda_targets=rule, priority_horizon=h), g))
        for policy, g in runs:
            if g is not None:
                base.PRIORITY_GROWTH = g  # read by priority_clock at every credit
            started = time.process_time()
            table = compare(graph, [policy], true_rank=true_rank, accuracy=False).table()
            seconds = time.process_time() - started
            base.PRIORITY_GROWTH = default_growth
            row = table[1]
            label = row["policy"] + ("" if g is None else f" growth={g:g}")
            rows.append([name, label] + [f"{100 * r:.1f}" for r in row["ratio"]] + [f"{seconds:.1f}"])
            print("  ", " | ".join(rows[-1]), flush=True)
    print("\n## share of the ideal sort's PageRank (%), same run\n")
    print(markdown_table(header, rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--diagnose", choices=[*ALL_GRAPHS, "none"], default="rust-doc",
                        help="graph to diagnose ('none' to skip)")
    parser.add_argument("--graphs", type=names(ALL_GRAPHS),
                        default=["rust-doc", "python3-doc", "postgresql-doc-15", "synthetic-100k"])
    parser.add_argument("--taus", type=numbers, default=[30.0, 100.0, 300.0, math.inf], help="prototype's tau values, in fetches ('inf': no discount)")
    parser.add_argument("--revisit-sweep", action="store_true", help="also 4 and 16 revisits per fetch (slow)")
    parser.add_argument("--no-lambda-rules", action="store_true", help="skip the engine's other lambda rules")
    parser.add_argument("--horizons", type=numbers, default=[], help="the engine with AOPIC_PRIORITY_HORIZON = each (0: cash order)")
    parser.add_argument("--targets", type=names(LAMBDA_TARGETS, none=False), default=["pending"], help="AOPIC_LAMBDA_TARGETS values for --horizons")
    parser.add_argument("--growth", type=numbers, default=[], help="PRIORITY_GROWTH values for --horizons (default: the shipped one)")
    args = parser.parse_args()
    if args.diagnose != "none":
        graph = load(args.diagnose)
        graph.name = args.diagnose
        diagnose(graph, pagerank(graph))
    if args.graphs:
        curves(
            args.graphs, args.taus, args.revisit_sweep, not args.no_lambda_rules,
            horizons=args.horizons,
            targets=args.targets,
            growth=args.growth or [None],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
