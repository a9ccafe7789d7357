"""Ordering quality of every crawl policy on real and synthetic link graphs.

One command regenerates every table and plot of the "Ordering quality"
section of ``docs/benchmarks.rst``::

    python benchmarks/bench_ordering.py                 # all graphs
    python benchmarks/bench_ordering.py --graphs rust-doc,synthetic-100k
    python benchmarks/bench_ordering.py --graphs none     # importance convergence only

For each graph it writes ``ordering-<graph>.md`` (Markdown tables),
``ordering-<graph>.inc`` (the same as reStructuredText, included by the docs)
and ``ordering-<graph>.png`` into ``--out`` (default ``docs/_static/bench``),
then ``ordering-summary.md`` / ``.inc`` with the product target (AOPIC at
10 % of pages fetched: >= 80 % of what the ideal sort captures, and more than
breadth-first; a run of some graphs replaces their rows and keeps the
others, each row dated by the run that measured it), and prints everything.

Graphs: ``rust-doc``, ``python3-doc``, ``postgresql-doc-15`` (Debian packages;
``apt-get install -y --no-install-recommends rust-doc python3-doc
postgresql-doc-15``; missing trees are skipped with a note) and
``synthetic-100k`` / ``synthetic-1M`` (generated from seed 1, cached under
``~/.cache/scrapy-aopic/graphs``), and ``synthetic-traps-100k`` (the same
generator with 40 % of the pages in calendar traps linked from every page of
their site, 30 new URLs per trap page: where lambda's payouts go, issue 16). Needs numpy, scipy, matplotlib.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from arglists import names  # noqa: E402
from scrapy_aopic.sim.docgraph import DOC_TREES, cache_dir, load_docgraph  # noqa: E402
from scrapy_aopic.sim.graph import Graph  # noqa: E402
from scrapy_aopic.sim.pagerank import pagerank  # noqa: E402
from scrapy_aopic.sim.policies import EnginePolicy  # noqa: E402
from scrapy_aopic.sim.report import markdown_report, markdown_table, rst_table, write_outputs  # noqa: E402
from scrapy_aopic.sim.runner import FRACTIONS, compare, default_policies, importance_convergence  # noqa: E402
from scrapy_aopic.sim.synthetic import scale_free_web  # noqa: E402

SYNTHETIC = {"synthetic-100k": 100_000, "synthetic-1M": 1_000_000, "synthetic-traps-100k": 100_000}
#: Generator arguments besides the size (issue 16: a web where traps take
#: 40 % of the pages, each a calendar linked from every page of its site and
#: minting 30 new URLs per page).
SYNTHETIC_ARGS = {
    "synthetic-traps-100k": {"trap_share": 0.4, "pages_per_trap": 20_000, "trap_fanout": 30, "trap_linkers": 0},
}
ALL_GRAPHS = ["rust-doc", "python3-doc", "postgresql-doc-15", "synthetic-100k", "synthetic-1M", "synthetic-traps-100k"]
#: Graphs the product target is judged on (issue 5).
TARGET_GRAPHS = {"rust-doc", "synthetic-100k", "synthetic-1M"}
#: The row of the engine with its shipped defaults, read from
#: scrapy_aopic.settings (OPIC, lambda -> pending-cash since issue 16, no tax,
#: link memory); "opic pending" is the rule before, kept for comparison.
DEFAULT_ENGINE = EnginePolicy.shipped().name
TARGET_FRACTION = 0.10


def load(name: str) -> Graph | None:
    """A benchmark graph by name, or None (with a note) if unavailable."""
    if name in SYNTHETIC:
        path = cache_dir() / f"{name}-seed1.npz"
        if path.exists():
            return Graph.load(path)
        print(f"generating {name} ...", flush=True)
        graph = scale_free_web(SYNTHETIC[name], seed=1, name=name, **SYNTHETIC_ARGS.get(name, {}))
        graph.save(path)
        return graph
    if name in DOC_TREES and not Path(DOC_TREES[name]).is_dir():
        print(f"NOTE: {name} is not installed ({DOC_TREES[name]} missing): skipped", flush=True)
        return None
    return load_docgraph(name, verbose=True)


def summary_rows(results: dict, stamp: str) -> tuple[list[str], list[list[str]]]:
    """The product target per graph, from the default engine's row, each
    row dated ``stamp`` (the run that measured it)."""
    header = [
        "graph",
        "measured",
        f"AOPIC (defaults: {DEFAULT_ENGINE}) @10 %",
        "ideal sort @10 %",
        "AOPIC / ideal",
        "breadth-first / ideal",
        "best policy / ideal (excl. omniscient)",
        "target met",
    ]
    rows = []
    i = list(FRACTIONS).index(TARGET_FRACTION)
    for name, comparison in results.items():
        table = {row["policy"]: row for row in comparison.table()}
        engine, ideal, bfs = table[DEFAULT_ENGINE], table["ideal sort (unreachable ok)"], table["breadth-first"]
        others = [
            (row["ratio"][i], policy)
            for policy, row in table.items()
            if row["family"] != "reference"
        ]
        best_ratio, best = max(others)
        met = engine["ratio"][i] >= 0.8 and engine["captured"][i] > bfs["captured"][i]
        rows.append(
            [
                name,
                stamp,
                f"{100 * engine['captured'][i]:.1f} %",
                f"{100 * ideal['captured'][i]:.1f} %",
                f"{100 * engine['ratio'][i]:.1f} %",
                f"{100 * bfs['ratio'][i]:.1f} %",
                f"{100 * best_ratio:.1f} % ({best})",
                ("yes" if met else "NO") + ("" if name in TARGET_GRAPHS else " (not a target graph)"),
            ]
        )
    return header, rows


def kept_rows(path: Path, header: list[str], measured: dict) -> list[list[str]]:
    """The rows of the summary at ``path`` (Markdown) for graphs this run did
    not measure, so that a run of some graphs updates their rows only. A
    summary with other columns is not merged (none kept, said)."""
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    if not cells or cells[0] != header:
        print(f"NOTE: {path} has other columns: its rows of graphs not run now are dropped", flush=True)
        return []
    return [row for row in cells[1:] if len(row) == len(header) and row[0] not in measured]


#: Small graphs on which the importance estimate is followed over many revisits.
CONVERGENCE_GRAPHS = ["postgresql-doc-15", "python3-doc"]
CONVERGENCE_ROUNDS = (0.5, 1, 2, 5, 10, 20)


def convergence(out: Path) -> None:
    """Importance estimate vs true PageRank when every page is revisited
    (a continuous crawl), for the default engine and a 0.15 lambda tax."""
    header = ["graph", "lambda tax"] + [f"tau@{r:g}n" for r in CONVERGENCE_ROUNDS] + [
        f"top100@{r:g}n" for r in CONVERGENCE_ROUNDS
    ]
    rows = []
    for name in CONVERGENCE_GRAPHS:
        graph = load(name)
        if graph is None:
            continue
        true_rank = pagerank(graph)
        for tax in (None, 0.15):
            t = time.perf_counter()
            points = importance_convergence(graph, true_rank, rounds=CONVERGENCE_ROUNDS, lambda_tax=tax)
            print(f"  convergence {name} tax={tax}: {time.perf_counter() - t:.1f} s", flush=True)
            rows.append(
                [name, "None" if tax is None else f"{tax:g}"]
                + [f"{p['kendall_tau']:.3f}" for p in points]
                + [f"{p['top_overlap']:.2f}" for p in points]
            )
    if not rows:
        return
    intro = (
        "Importance estimate (``engine.ranking()``) against true PageRank in a continuous "
        "crawl where every visited page is queued again, after k x n visits (n = pages): "
        "Kendall tau over all pages and overlap of the top 100."
    )
    (out / "ordering-convergence.md").write_text(intro.replace("``", "`") + "\n\n" + markdown_table(header, rows) + "\n")
    (out / "ordering-convergence.inc").write_text(intro + "\n\n" + rst_table(header, rows) + "\n")
    print("## importance convergence with revisits\n")
    print(intro.replace("``", "`") + "\n")
    print(markdown_table(header, rows))
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "_static" / "bench")
    parser.add_argument("--graphs", type=names(ALL_GRAPHS), default=ALL_GRAPHS,
                        help=f"comma-separated, of {', '.join(ALL_GRAPHS)} ('none': only the revisit experiment)")
    parser.add_argument("--quick", action="store_true", help="fewer engine variants")
    parser.add_argument("--no-convergence", action="store_true", help="skip the revisit experiment")
    args = parser.parse_args()
    started = time.perf_counter()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    command = "python benchmarks/bench_ordering.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_convergence:
        convergence(args.out)
    results = {}
    for name in args.graphs:
        graph = load(name)
        if graph is None:
            continue
        graph.name = name
        t = time.perf_counter()
        true_rank = pagerank(graph)
        print(f"{name}: {graph.summary()}; PageRank in {time.perf_counter() - t:.1f} s", flush=True)
        comparison = compare(
            graph,
            default_policies(true_rank, quick=args.quick),
            true_rank=true_rank,
            log=lambda line: print(line, flush=True),
        )
        paths = write_outputs(comparison, args.out)
        print()
        print(markdown_report(comparison, paths["png"].name))
        results[name] = comparison
    if not results:
        print("no ordering graph run", file=sys.stderr)
        return 0 if not args.graphs else 1
    header, rows = summary_rows(results, stamp)
    kept = kept_rows(args.out / "ordering-summary.md", header, results)
    rows = sorted(rows + kept, key=lambda row: ALL_GRAPHS.index(row[0]) if row[0] in ALL_GRAPHS else len(ALL_GRAPHS))
    intro = (
        f"Product target: at {TARGET_FRACTION:.0%} of pages fetched, AOPIC with its default "
        "settings captures >= 80 % of the PageRank the ideal sort captures, and more than "
        f"breadth-first. Rows measured {stamp} on {machine} with `{command}`"
        + (f"; the rows of {', '.join(row[0] for row in kept)} by the earlier run of their date" if kept else "")
        + "."
    )
    (args.out / "ordering-summary.md").write_text(intro + "\n\n" + markdown_table(header, rows) + "\n")
    (args.out / "ordering-summary.inc").write_text(
        intro.replace("`", "``") + "\n\n" + rst_table(header, rows) + "\n"
    )
    print("## summary\n")
    print(intro + "\n")
    print(markdown_table(header, rows))
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
