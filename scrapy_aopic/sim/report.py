"""Tables (Markdown, reStructuredText) and plots (PNG) of a comparison."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .runner import Comparison


def _pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:.{digits}f}"


def _frac_label(f: float) -> str:
    return f"{100 * f:g} %"


def table_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table: captured PageRank (% of the total)
    and the same as % of what the ideal sort captures, at each budget."""
    fr = comparison.fractions
    header = ["policy"]
    header += [f"PR@{_frac_label(f)}" for f in fr]
    header += [f"vs ideal@{_frac_label(f)}" for f in fr]
    header += ["seconds"]
    rows = []
    for row in comparison.table():
        seconds = "" if row["seconds"] is None else f"{row['seconds']:.1f}"
        rows.append(
            [row["policy"]]
            + [_pct(x) for x in row["captured"]]
            + [_pct(x) for x in row["ratio"]]
            + [seconds]
        )
    return header, rows


def waste_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]] | None:
    """Share of fetches spent in traps and link farms (graphs with labels)."""
    if comparison.graph.labels is None:
        return None
    fr = comparison.fractions
    header = (
        ["policy"]
        + [f"trap@{_frac_label(f)}" for f in fr]
        + [f"farm@{_frac_label(f)}" for f in fr]
        + [f"lambda->trap@{_frac_label(f)}" for f in fr]
    )
    rows = []
    for row in comparison.table()[1:]:
        rows.append(
            [row["policy"]]
            + [_pct(x) for x in row["trap_share"]]
            + [_pct(x) for x in row["farm_share"]]
            + ["–" if x is None else _pct(x) for x in row["lambda_trap_share"]]
        )
    return header, rows


def accuracy_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]] | None:
    """Kendall tau and top-100 overlap of the engine's importance estimate."""
    runs = [run for run in comparison.runs if run.accuracy]
    if not runs:
        return None
    fetched = [a["fetched"] for a in runs[0].accuracy]
    n = comparison.graph.n
    labels = [f"{100 * k / n:.3g} %" for k in fetched]
    header = ["policy"] + [f"tau@{x}" for x in labels] + [f"top100@{x}" for x in labels]
    rows = []
    for run in runs:
        by_k = {a["fetched"]: a for a in run.accuracy}
        rows.append(
            [run.policy]
            + [f"{by_k[k]['kendall_tau']:.3f}" if k in by_k else "–" for k in fetched]
            + [f"{by_k[k]['top_overlap']:.2f}" if k in by_k else "–" for k in fetched]
        )
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def rst_table(header: list[str], rows: list[list[str]]) -> str:
    """A reStructuredText ``list-table``."""
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header] + rows:
        out.append("   * - " + (row[0] or " "))
        out += [f"     - {cell or ' '}" for cell in row[1:]]
    return "\n".join(out)


def graph_facts(comparison: Comparison) -> str:
    """One line describing the graph."""
    g = comparison.graph
    s = g.summary()
    facts = f"{s['nodes']:,} pages, {s['links']:,} links, {s['sites']:,} sites, {s['seeds']} seed(s), {s['reachable']:,} reachable"
    if "trap_nodes" in s:
        facts += f", {s['trap_nodes']:,} trap pages, {s['farm_nodes']:,} link-farm pages"
    return facts


def markdown_report(comparison: Comparison, png_name: str | None = None) -> str:
    """The whole Markdown report of one graph."""
    g = comparison.graph
    parts = [f"## {g.name}", "", graph_facts(comparison) + ".", ""]
    parts.append(
        "PageRank captured (% of the graph's total) after fetching a share of its pages, "
        "and the same as % of what the ideal sort (top pages by true PageRank, reachable "
        "or not) captures:"
    )
    parts += ["", markdown_table(*table_rows(comparison)), ""]
    waste = waste_rows(comparison)
    if waste:
        parts += ["Share of fetches (%) spent in crawler traps and link farms, and share of lambda's payouts (%) that landed in trap pages (`lambda->trap`, engine policies):", "", markdown_table(*waste), ""]
    acc = accuracy_rows(comparison)
    if acc:
        parts += [
            "Importance estimate of the engine (`engine.ranking()`) against true PageRank: "
            "Kendall tau over the known pages, and overlap of the top 100:",
            "",
            markdown_table(*acc),
            "",
        ]
    if png_name:
        parts += [f"![{g.name}]({png_name})", ""]
    return "\n".join(parts)


def rst_fragment(comparison: Comparison) -> str:
    """Tables of one graph as a reStructuredText fragment (for ``.. include::``)."""
    parts = [graph_facts(comparison) + ".", "", rst_table(*table_rows(comparison)), ""]
    waste = waste_rows(comparison)
    if waste:
        parts += ["Share of fetches (%) spent in traps and link farms, and share of lambda's payouts (%) that landed in trap pages (``lambda->trap``, engine policies):", "", rst_table(*waste), ""]
    acc = accuracy_rows(comparison)
    if acc:
        parts += [
            "Importance estimate against true PageRank (Kendall tau, top-100 overlap):",
            "",
            rst_table(*acc),
            "",
        ]
    return "\n".join(parts)


#: Fixed colours for the usual policies, so plots of different graphs match.
_COLOURS = {
    "breadth-first": "#1f77b4",
    "depth-first": "#7f7f7f",
    "random": "#bcbd22",
    "backlink-count": "#ff7f0e",
    "batch-pagerank": "#2ca02c",
    "partial-pagerank": "#98df8a",
    "larger-site-first": "#8c564b",
    "omniscient": "#000000",
}
_ENGINE_COLOURS = ["#d62728", "#ff9896", "#9467bd", "#c5b0d5", "#e377c2", "#f7b6d2", "#17becf"]
#: One marker per line (in plot order), so that no two lines look alike even
#: where colours are close or repeat.
_MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d", "8", "H", "1", "2", "3", "4"]


def _style(run, engine_index: int, line_index: int) -> dict:
    """Line style of a policy: engine variants solid and thick, PageRank
    variants dashed, other baselines dotted; every line its own marker."""
    if run.family == "reference":
        style = dict(color="black", linewidth=1.8)
    elif run.family == "aopic":
        style = dict(color=_ENGINE_COLOURS[engine_index % len(_ENGINE_COLOURS)], linewidth=1.8)
    else:
        style = dict(color=_COLOURS.get(run.policy, "#aaaaaa"), linewidth=1.3)
        style["linestyle"] = "--" if run.family == "pagerank" else ":"
    style.update(marker=_MARKERS[line_index % len(_MARKERS)], markersize=4, markevery=0.1)
    return style


def plot(comparison: Comparison, path: str | Path, *, title: str | None = None) -> Path:
    """PNG with captured PageRank and the ratio to the ideal sort against the
    share of pages fetched (log scale), one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    n = comparison.graph.n
    budget = comparison.budget
    # A log-spaced grid of fetch counts keeps the PNG small and the curves smooth.
    grid = np.unique(np.geomspace(1, budget, 300).astype(np.int64))
    x = grid / n
    ideal_curve = comparison.ideal[grid - 1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=80)
    ax1.plot(x, ideal_curve, color="black", linestyle="--", linewidth=1.5, label="ideal sort")
    ax2.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
    engine_index = 0
    for line_index, run in enumerate(comparison.runs):
        curve = comparison.curve(run)
        if len(curve) == 0:
            continue
        y = curve[np.minimum(grid, len(curve)) - 1]
        style = _style(run, engine_index, line_index)
        engine_index += run.family == "aopic"
        ax1.plot(x, y, label=run.policy, **style)
        ax2.plot(x, y / ideal_curve, **style)
    for f in comparison.fractions:
        ax1.axvline(f, color="#dddddd", linewidth=0.6, zorder=0)
        ax2.axvline(f, color="#dddddd", linewidth=0.6, zorder=0)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlim(max(1.0 / n, 1e-3), max(comparison.fractions))
        ax.set_xlabel("share of pages fetched")
        ax.grid(True, which="major", alpha=0.3)
    ax1.set_ylabel("share of total PageRank captured")
    ax1.set_ylim(0, 1)
    ax2.set_ylabel("captured / ideal sort")
    ax2.set_ylim(0, 1.05)
    ax1.set_title("PageRank captured", fontsize=10)
    ax2.set_title("relative to the ideal sort", fontsize=10)
    fig.suptitle(title or f"{comparison.graph.name}: {graph_facts(comparison)}", fontsize=10)
    fig.legend(*ax1.get_legend_handles_labels(), fontsize=8, loc="center right", frameon=False)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_outputs(comparison: Comparison, out_dir: str | Path, stem: str | None = None) -> dict[str, Path]:
    """Write ``<stem>.md``, ``<stem>.inc`` (reST fragment) and ``<stem>.png``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or f"ordering-{comparison.graph.name}"
    outputs: dict[str, Path] = {}
    try:
        outputs["png"] = plot(comparison, out_dir / f"{stem}.png")
    except ImportError:  # the plot needs matplotlib (the [report] or [bench] extra); the tables do not
        pass  # the caller sees there is no "png" and says so
    md = out_dir / f"{stem}.md"
    md.write_text(markdown_report(comparison, outputs["png"].name if "png" in outputs else None))
    inc = out_dir / f"{stem}.inc"
    inc.write_text(rst_fragment(comparison))
    return {**outputs, "markdown": md, "rst": inc}


__all__ = [
    "accuracy_rows",
    "markdown_report",
    "markdown_table",
    "plot",
    "rst_fragment",
    "rst_table",
    "table_rows",
    "waste_rows",
    "write_outputs",
]
