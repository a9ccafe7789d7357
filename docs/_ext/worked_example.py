"""The five-page worked example of SPEC 2 (seed 004), computed, not typed.

Pages A->{B,C}, B->{D,E}, C->{E}, E->{B}, D->{} and one seed, A, with 1.0 of
cash. :func:`compute` runs

* Apache Nutch 0.9's OPIC variant (one score per page, never reset, no
  lambda page) over the visits A, B, C, E, D;
* our engine (:class:`scrapy_aopic.engine.AopicEngine`) over the same five
  visits in the same order;
* our engine with greedy selection, every page re-queued after its visit,
  for a growing number of visits, against the PageRank of the graph with the
  lambda page (every page also links to lambda, lambda links to every page).

The docs' ``aopic-worked-example`` directive prints these numbers at build
time; ``python docs/_ext/worked_example.py`` redraws
``docs/_static/worked_example.png`` from them (needs matplotlib).
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from pathlib import Path

GRAPH = {"A": ["B", "C"], "B": ["D", "E"], "C": ["E"], "E": ["B"], "D": []}
ORDER = ["A", "B", "C", "E", "D"]
PAGES = sorted(GRAPH)
#: Visit counts at which the greedy run is compared with PageRank.
CHECKPOINTS = (10, 50, 200, 1000, 5000)


def nutch_scores(graph=GRAPH, order=ORDER, seed="A") -> dict[str, float]:
    """Nutch 0.9: a visited page adds ``score/outlinks`` to each out-link and
    keeps its own score; a page without links passes nothing on."""
    score = {page: 0.0 for page in graph}
    score[seed] = 1.0
    for page in order:
        links = graph[page]
        for target in links:
            score[target] += score[page] / len(links)
    return score


def pagerank_with_lambda(graph=GRAPH, iterations: int = 10_000) -> tuple[dict[str, float], float]:
    """Stationary distribution of the walk that follows a random out-link or
    lambda (one more out-link), with lambda linking to every page: the ranking
    OPIC's importance converges to. Returns ``(share of each page among the
    pages, lambda's own share of the whole walk)``."""
    nodes = list(graph) + [None]  # None is lambda
    out = {page: list(links) + [None] for page, links in graph.items()}
    out[None] = list(graph)
    rank = {node: 1.0 / len(nodes) for node in nodes}
    for _ in range(iterations):
        new = {node: 0.0 for node in nodes}
        for node in nodes:
            share = rank[node] / len(out[node])
            for target in out[node]:
                new[target] += share
        if sum(abs(new[n] - rank[n]) for n in nodes) < 1e-15:
            rank = new
            break
        rank = new
    pages_total = sum(rank[page] for page in graph)
    return {page: rank[page] / pages_total for page in graph}, rank[None]


def _engine(lambda_targets: str = "all"):
    from scrapy_aopic.engine import AopicEngine
    from scrapy_aopic.store.base import Link
    from scrapy_aopic.store.memory import MemoryStore

    ticks = itertools.count()
    store = MemoryStore(lambda_targets)
    engine = AopicEngine(store, clock=lambda: float(next(ticks)))
    engine.add_seed(Link("A", "example", 0))
    return engine, store, Link


def aopic_five_visits(graph=GRAPH, order=ORDER) -> list[dict]:
    """Our engine, the same five visits: a snapshot after each one."""
    engine, store, Link = _engine("pending")
    steps = []
    for page in order:
        lease = store.take(page)
        engine.visit(lease, [Link(target, "example", 0) for target in graph[page]])
        views = {v.url: v for v in store.iter_accounts()}
        totals = engine.totals()
        steps.append(
            {
                "visited": page,
                "cash": {p: views[p].cash if p in views else 0.0 for p in PAGES},
                "history": {p: views[p].history if p in views else 0.0 for p in PAGES},
                "lambda": totals.lambda_cash,
                "total": math.fsum([views[p].cash for p in views] + [totals.lambda_cash, totals.in_flight]),
                "injected": totals.injected,
            }
        )
    return steps


def aopic_greedy(graph=GRAPH, checkpoints=CHECKPOINTS) -> list[dict]:
    """Our engine, greedy, every page queued again after its visit (a
    re-crawl): the importance of each page (as a share among the pages) at
    each checkpoint, and the largest difference from PageRank with lambda."""
    engine, store, Link = _engine("all")
    truth, _ = pagerank_with_lambda(graph)
    results = []
    visits = 0
    for checkpoint in checkpoints:
        while visits < checkpoint:
            lease = engine.next()
            if lease is None:  # cannot happen: every page is queued again
                raise RuntimeError("the frontier stalled")
            engine.visit(lease, [Link(target, "example", 0) for target in graph[lease.url]])
            store.repend(Link(lease.url, "example", 0))
            visits += 1
        ranking = engine.ranking()
        total = sum(p.importance for p in ranking)
        share = {p.url: p.importance / total for p in ranking}
        results.append(
            {
                "visits": visits,
                "lambda_visits": engine.totals().lambda_visits,
                "history_sum": engine.history_sum,
                "share": share,
                "order": [p.url for p in ranking],
                "max_error": max(abs(share[p] - truth[p]) for p in graph),
                "conservation_error": engine.conservation_error(),
            }
        )
    return results


@functools.lru_cache(maxsize=1)
def compute() -> dict:
    """Every number the docs show about the worked example (computed once
    per process: three directives of one page share it)."""
    truth, lambda_share = pagerank_with_lambda()
    return {
        "nutch": nutch_scores(),
        "five": aopic_five_visits(),
        "greedy": aopic_greedy(),
        "pagerank": truth,
        "lambda_share": lambda_share,
    }


def draw(path: str | Path) -> Path:
    """Draw the graph and the three rankings to ``path`` (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle, FancyArrowPatch

    numbers = compute()
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    graph_ax, bars_ax = fig.subplots(1, 2, width_ratios=[1, 1.25])

    where = {"A": (0.0, 1.0), "B": (1.0, 1.6), "C": (1.0, 0.4), "E": (2.0, 1.0), "D": (2.2, 2.2), "λ": (2.9, 0.0)}
    radius = 0.22
    for page, (x, y) in where.items():
        is_lambda = page == "λ"
        graph_ax.add_patch(
            Circle(
                (x, y), radius, facecolor="#fdf0d5" if is_lambda else "#dbe9f6",
                edgecolor="#c77d00" if is_lambda else "#2b6cb0", linestyle="--" if is_lambda else "-",
                linewidth=1.5, zorder=2,
            )
        )
        graph_ax.text(x, y, page, ha="center", va="center", fontsize=14, zorder=3)

    def arrow(a, b, style="-", color="#2b6cb0", bend=0.0):
        # Trim both ends to the circles' edges so the arrow heads show.
        (x1, y1), (x2, y2) = where[a], where[b]
        length = math.hypot(x2 - x1, y2 - y1)
        dx, dy = (x2 - x1) / length * radius * 1.05, (y2 - y1) / length * radius * 1.05
        graph_ax.add_patch(
            FancyArrowPatch(
                (x1 + dx, y1 + dy), (x2 - dx, y2 - dy), arrowstyle="-|>", mutation_scale=14,
                linestyle=style, color=color, shrinkA=0, shrinkB=0, linewidth=1.3,
                connectionstyle=f"arc3,rad={bend}", zorder=1,
            )
        )

    for page, links in GRAPH.items():
        for target in links:
            arrow(page, target, bend=0.25 if (page, target) in {("B", "E"), ("E", "B")} else 0.0)
    for page in GRAPH:  # lambda is one more out-link of every page
        arrow(page, "λ", style=":", color="#c77d00", bend=-0.15)
    graph_ax.text(where["A"][0], where["A"][1] - 0.32, "seed: 1.0", ha="center", va="top", fontsize=9)
    graph_ax.text(1.45, -0.42, "dotted: every page also links to λ,\nand λ pays its cash back to the pages",
                  ha="center", va="top", fontsize=9, color="#8a5a00")
    graph_ax.set_xlim(-0.4, 3.3)
    graph_ax.set_ylim(-0.95, 2.55)
    graph_ax.set_aspect("equal")
    graph_ax.axis("off")
    graph_ax.set_title("The five pages of SPEC 2 (seed 004), seed A")

    nutch = numbers["nutch"]
    nutch_total = sum(nutch.values())
    final = numbers["greedy"][-1]
    series = [
        (f"Nutch 0.9 after A,B,C,E,D (scores sum to {nutch_total:g} from 1.0)",
         {p: nutch[p] / nutch_total for p in PAGES}, "#9b2c2c"),
        (f"scrapy-aopic importance after {final['visits']} greedy visits", final["share"], "#2b6cb0"),
        ("PageRank of the graph with λ", numbers["pagerank"], "#38a169"),
    ]
    width = 0.27
    for i, (label, values, color) in enumerate(series):
        xs = [k + (i - 1) * width for k in range(len(PAGES))]
        bars_ax.bar(xs, [values[p] for p in PAGES], width, label=label, color=color)
    bars_ax.set_xticks(range(len(PAGES)), PAGES)
    bars_ax.set_ylabel("share of the pages' importance")
    bars_ax.set_title("Nutch's ranking vs ours and the truth")
    bars_ax.legend(fontsize="small", loc="upper left")
    bars_ax.set_ylim(0, 0.5)
    path = Path(path)
    fig.savefig(path, dpi=90)
    return path


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "_static" / "worked_example.png"
    print(draw(target))
