"""Where the re-crawl planner's fetches land against the changes, by hour of
the day (UTC) and by how often the pages change (issue 17).

A diagnostic, not a judgement: it says *why* a trace misses a target. One
run per trace of the default planner plus a budget (``--per-page-per-day``,
one revisit per page a day by default), driven as
``bench_recrawl_traces.py`` drives it (``run_planner``: the hook, the host
gap, changed / unchanged only); over the scored years (after the half year
of history) it prints, per hour of the day, the changes, the planner's
fetches and the mean delay of the changes of that hour; then, per class of
pages by their true changes a year, the pages, the fetches a day per page
and the mean delay::

    .venv/bin/python benchmarks/recrawl_fetch_hours.py --trace govuk-dev-docs --trace tidb-operator

(traces of ``benchmarks/data/recrawl_traces_extra.json.gz`` by default,
``--fixture`` for another file; about a minute a trace.) The output of the
command above: ``docs/_static/bench/recrawl-fetch-hours-extra.txt``.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recrawl_traces import HOUR, WARMUP, run_planner  # noqa: E402
from recrawl_traces import EXTRA, YEAR, Trace, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-fetch-hours-extra.txt"
DAY = 86400.0
#: classes of pages by true changes a year: (label, upper bound)
CLASSES = (("<= 1 a year", 1.0), ("1-3 a year", 3.0), ("3-10 a year", 10.0), ("> 10 a year", float("inf")))


def where_fetches_land(trace: Trace, fetches: dict[str, list[float]], a: float, b: float) -> dict:
    """Per hour of the day (UTC) of ``[a, b)``: changes, fetches and the
    summed delay (seconds) of the changes of that hour, each to the first
    fetch at or after it (a change never fetched is left out); per class of
    pages: pages, fetches, changes and summed delay."""
    hours = {h: {"changes": 0, "fetches": 0, "delay": 0.0} for h in range(24)}
    classes = {label: {"pages": 0, "fetches": 0, "changes": 0, "delay": 0.0} for label, _ in CLASSES}
    years = (trace.end - trace.start) / YEAR
    for page in trace.pages:
        times = fetches[page.url]
        rate = len(page.changes) / years
        cls = classes[next(label for label, top in CLASSES if rate <= top)]
        cls["pages"] += 1
        for f in times:
            if a <= f < b:
                hours[int(f // HOUR) % 24]["fetches"] += 1
                cls["fetches"] += 1
        for c in page.changes:
            if not a <= c < b:
                continue
            i = bisect.bisect_left(times, c)
            if i == len(times):
                continue
            row = hours[int(c // HOUR) % 24]
            row["changes"] += 1
            row["delay"] += times[i] - c
            cls["changes"] += 1
            cls["delay"] += times[i] - c
    return {"hours": hours, "classes": classes, "days": (b - a) / DAY}


def report(name: str, found: dict) -> list[str]:
    lines = [f"== {name}: by hour of the day (UTC), the scored years",
             f"{'hour':>4}{'changes':>9}{'fetches':>9}{'mean delay h':>14}"]  # fmt: skip
    for h, row in found["hours"].items():
        delay = f"{row['delay'] / row['changes'] / HOUR:.1f}" if row["changes"] else "-"
        lines.append(f"{h:>4}{row['changes']:>9}{row['fetches']:>9}{delay:>14}")
    lines.append(f"{'pages by true changes':<24}{'pages':>6}{'fetches a day':>15}{'changes':>9}{'mean delay h':>14}")
    for label, row in found["classes"].items():
        if not row["pages"]:
            continue
        per_day = row["fetches"] / row["pages"] / found["days"]
        delay = f"{row['delay'] / row['changes'] / HOUR:.1f}" if row["changes"] else "-"
        lines.append(f"{label:<24}{row['pages']:>6}{per_day:>15.2f}{row['changes']:>9}{delay:>14}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace names (default: all of the file)")
    parser.add_argument("--fixture", type=Path, default=EXTRA)
    parser.add_argument("--per-page-per-day", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--timetable", action=argparse.BooleanOptionalAction, default=None,
                        help="AOPIC_RECRAWL_TIMETABLE = True / False (neither: the default, on; "
                             "the figures in docs/recrawl.rst before issue 17's judgement: --no-timetable)")  # fmt: skip
    args = parser.parse_args(argv)
    settings = {} if args.timetable is None else {"AOPIC_RECRAWL_TIMETABLE": args.timetable}
    which = {None: "default", True: "timetables on", False: "timetables off"}[args.timetable]
    lines = [f"{which} planner, budget {args.per_page_per_day} revisits a day per page, one run a trace"]
    for trace in load(args.fixture, args.trace):
        budget = args.per_page_per_day * len(trace.pages)
        fetches, _, _ = run_planner(trace, {"AOPIC_RECRAWL_BUDGET": budget, **settings}, last_modified=False)
        lines += report(trace.name, where_fetches_land(trace, fetches, trace.start + WARMUP, trace.end))
        print("\n".join(lines[-32:]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
