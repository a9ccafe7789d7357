"""What the re-crawl planner spends of its budget, block by block (issue 17).

A diagnostic, not a judgement. The budget (``AOPIC_RECRAWL_BUDGET``, here
``--per-page-per-day`` revisits a page a day) is what the split plans; host
activity (``AOPIC_RECRAWL_ACTIVITY``, on by default) moves revisits into the
times a host is at work and takes them from its quiet times, and a spend
check keeps the *long-run* spend near the budget. This prints how far the
spend strays over shorter spans: one run of the planner per trace, driven
as ``bench_recrawl_traces.py`` drives it (``run_planner``), with the
settings of ``--set``; for each block of ``--days`` days (the first, while
the planner has seen little, and the last, partial, left out) the
revisits a page a day, as a share of the budget, and their least, median
and largest over the blocks, and over the whole run (the half year of
history included, which ``bench_recrawl_traces.py`` does not score)::

    .venv/bin/python benchmarks/recrawl_spend.py --trace sphinx-src --trace rust-book --trace debian
    # the same with --set ACTIVITY=false

(a minute or two a trace.) The output of these two commands, appended:
``docs/_static/bench/recrawl-spend.txt``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_recrawl_traces as brt  # noqa: E402
from arglists import setting, settings_of  # noqa: E402
from recrawl_traces import FIXTURE, load  # noqa: E402

DAY = 86400.0
OUT = Path(__file__).resolve().parent.parent / "docs" / "_static" / "bench" / "recrawl-spend.txt"


def blocks(times: list[float], pages: int, budget: float, days: float) -> tuple[list[float], float]:
    """The spend of each whole block of ``days`` days as a share of the
    budget (``budget`` revisits a page a day), and of the whole span."""
    times = sorted(times)
    start, span = times[0], days * DAY
    counts: dict[int, int] = {}
    for t in times:
        k = int((t - start) // span)
        counts[k] = counts.get(k, 0) + 1
    last = max(counts)
    shares = [counts.get(k, 0) / (pages * days * budget) for k in range(1, last)]
    whole = len(times) / (pages * budget * max((times[-1] - start) / DAY, days))
    return shares, whole


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace names (default: all of the file)")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--per-page-per-day", type=float, default=1.0)
    parser.add_argument("--days", type=float, default=28.0, help="days a block")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting("AOPIC_RECRAWL_"),
                        help="a setting for the planner (AOPIC_RECRAWL_ may be left out)")
    parser.add_argument("--out", type=Path, default=OUT, help="appended to")
    args = parser.parse_args(argv)
    extra = settings_of(args.set, "AOPIC_RECRAWL_")
    lines = [f"$ recrawl_spend.py --per-page-per-day {args.per_page_per_day:g} --days {args.days:g}"
             + "".join(f" --set {item}" for item in args.set)]
    lines.append(f"{'trace':<17}{'blocks':>7}{'least':>8}{'median':>8}{'largest':>9}{'whole run':>11}")
    for trace in load(args.fixture, args.trace):
        budget = args.per_page_per_day
        settings = {"AOPIC_RECRAWL_BUDGET": budget * len(trace.pages), **extra}
        fetches, _, _ = brt.run_planner(trace, settings, False)
        revisits = [t for times in fetches.values() for t in times[1:]]  # first visits are not revisits
        shares, whole = blocks(revisits, len(trace.pages), budget, args.days)
        lines.append(f"{trace.name:<17}{len(shares):>7}{min(shares):>8.3f}{statistics.median(shares):>8.3f}"
                     f"{max(shares):>9.3f}{whole:>11.3f}")
        print(lines[-1], flush=True)
    with args.out.open("a") as out:
        out.write("\n".join(lines) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
