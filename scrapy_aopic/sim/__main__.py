"""Command line of the simulator: ``python -m scrapy_aopic.sim COMMAND``.

Commands:

``replay GRAPH.jsonl --out DIR``
    Compare every policy on a graph recorded with ``AOPIC_EXPORT_GRAPH``;
    writes ``DIR/ordering-<name>.md`` (tables), ``.png`` (plot) and ``.inc``
    (reStructuredText tables) and prints the Markdown.
``docgraph NAME_OR_ROOT``
    Build (or load from the cache) the link graph of a Debian doc tree
    (``rust-doc``, ``python3-doc``, ``postgresql-doc-15``, or an HTML root).
``compare GRAPH --out DIR``
    Like ``replay`` for any graph: a doc tree name or root, a saved ``.npz``,
    a ``.jsonl`` recording, or ``synthetic:N[:SEED]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .graph import Graph
from .runner import FRACTIONS, compare, default_policies


def load_graph(spec: str, *, unvisited: str = "keep") -> Graph:
    """A graph from a command-line spec (see the module doc)."""
    if spec.startswith("synthetic:"):
        from .synthetic import scale_free_web

        parts = spec.split(":")
        n = int(float(parts[1]))
        seed = int(parts[2]) if len(parts) > 2 else 1
        return scale_free_web(n, seed=seed)
    path = Path(spec)
    if path.suffix == ".npz":
        return Graph.load(path)
    if path.name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        from .recorded import read_recorded_graph

        return read_recorded_graph(path, unvisited=unvisited)
    from .docgraph import load_docgraph

    return load_docgraph(spec, verbose=True)


def _fractions(text: str) -> tuple[float, ...]:
    values = tuple(float(x) / 100 for x in text.split(",") if x.strip())
    if not values or not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError("fractions are percentages in (0, 100], e.g. 1,5,10,25,50")
    return values


def run_comparison(graph: Graph, out: Path, *, fractions, quick: bool, seed: int, log=print) -> str:
    """Compare policies on ``graph``, write the outputs into ``out``; returns
    the Markdown report."""
    from .pagerank import pagerank
    from .report import markdown_report, write_outputs

    log(f"{graph.name}: {graph.summary()}")
    true_rank = pagerank(graph)
    comparison = compare(
        graph,
        default_policies(true_rank, quick=quick),
        fractions=fractions,
        seed=seed,
        true_rank=true_rank,
        log=log,
    )
    paths = write_outputs(comparison, out)
    log(f"wrote {', '.join(str(p) for p in paths.values())}")
    if "png" not in paths:
        print('no plot written: it needs matplotlib (pip install "scrapy-aopic[report]")', file=sys.stderr)
    return markdown_report(comparison, paths["png"].name if "png" in paths else None)


def main(argv: list[str] | None = None) -> int:
    """Entry point (also usable from a Scrapy command)."""
    parser = argparse.ArgumentParser(prog="python -m scrapy_aopic.sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--out", type=Path, default=Path("aopic-sim"), help="output directory")
        p.add_argument("--fractions", type=_fractions, default=FRACTIONS,
                       help="budgets in %% of pages, comma-separated (default 1,5,10,25,50)")
        p.add_argument("--quick", action="store_true", help="fewer engine variants")
        p.add_argument("--seed", type=int, default=0, help="seed of the random policy")

    replay = sub.add_parser("replay", help="compare policies on a recorded graph (JSON Lines)")
    replay.add_argument("graph", help="file written by AOPIC_EXPORT_GRAPH (.jsonl or .jsonl.gz)")
    replay.add_argument("--unvisited", choices=("keep", "drop"), default="keep",
                        help="linked-but-unvisited URLs: keep as pages without links (default) or drop")
    common(replay)

    comp = sub.add_parser("compare", help="compare policies on any graph")
    comp.add_argument("graph", help="doc tree name or root, .npz, .jsonl, or synthetic:N[:SEED]")
    common(comp)

    doc = sub.add_parser("docgraph", help="build and cache a documentation tree's graph")
    doc.add_argument("tree", help="rust-doc, python3-doc, postgresql-doc-15 or an HTML root")
    doc.add_argument("--rebuild", action="store_true")

    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.command == "docgraph":
        from .docgraph import load_docgraph

        graph = load_docgraph(args.tree, rebuild=args.rebuild, verbose=True)
        print(graph.summary(), graph.meta)
        return 0
    try:
        graph = load_graph(args.graph, unvisited=getattr(args, "unvisited", "keep"))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = run_comparison(graph, args.out, fractions=args.fractions, quick=args.quick, seed=args.seed)
    print()
    print(report)
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
