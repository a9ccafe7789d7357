"""How long the re-crawl planner's revisits wait in their host's queue past
the time they were planned for, and what that costs (issue 17).

A diagnostic, not a judgement. The planner places a section's revisits at
the same few timetable slots; a host fetches one page per host gap (60 s
here), so the pages due at one slot are fetched one after another, the
last hours after the slot. One run of the planner at one budget per trace
(``--per-page-per-day``, default 1), driven as ``bench_recrawl_traces.py``
drives it (``run_planner``: the hook, the host gap, changed / unchanged
only, no ``Last-Modified``), plus the settings of ``--set``. Over the
scored years (after the half year of history) it prints:

* how late the revisits come after their planned time (mean, median, 90th
  percentile, the largest; the share more than an hour late);
* the same per class of pages by their true changes a year;
* the mean delay of a change against the real fetches, and against the same
  fetches each moved back to its planned time (as if the host had no queue;
  the plans that followed are the real ones): the difference is what the
  queue costs, at most (a fetch on time would change the plans after it)::

    .venv/bin/python benchmarks/recrawl_host_queue.py --fixture benchmarks/data/recrawl_traces_extra.json.gz \\
        --trace docs-cn --trace govuk-dev-docs
    .venv/bin/python benchmarks/recrawl_host_queue.py --trace debian
    # the same three with --set LIKELY_FIRST=true

(about a minute a trace, Debian three.) The output of these commands, in
that order, appended: ``docs/_static/bench/recrawl-host-queue.txt``.
"""

from __future__ import annotations

import argparse
import bisect
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_recrawl_traces as brt  # noqa: E402
from arglists import setting, settings_of  # noqa: E402
from recrawl_traces import FIXTURE, YEAR, Trace, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-host-queue.txt"
HOUR = 3600.0
CLASSES = (("<= 1 a year", 1.0), ("1-3 a year", 3.0), ("3-10 a year", 10.0), ("> 10 a year", math.inf))


def instrumented_run(trace: Trace, settings: dict) -> tuple[dict, dict]:
    """``run_planner`` with each revisit's planned time recorded:
    ``(fetches, planned)``, ``planned[url]`` a list parallel to the page's
    revisits (its fetches after the first crawl)."""
    planned: dict[str, list[float]] = {p.url: [] for p in trace.pages}

    def instrument(planner):
        on_visit = planner.on_visit

        def _on_visit(url, host, now, **kw):
            record = planner.pages.get(url)
            if record is not None and record.deadline is not None:
                planned[url].append(min(record.deadline, now))
            return on_visit(url, host, now, **kw)

        planner.on_visit = _on_visit

    fetches, _, _ = brt.run_planner(trace, settings, last_modified=False, instrument=instrument)
    return fetches, planned


def mean_delay(trace: Trace, fetches: dict[str, list[float]], a: float, b: float) -> float:
    """Mean hours from a change in ``[a, b)`` to the first fetch at or after it."""
    total, n = 0.0, 0
    for page in trace.pages:
        times = fetches[page.url]
        for c in page.changes:
            if a <= c < b:
                i = bisect.bisect_left(times, c)
                if i < len(times):
                    total += times[i] - c
                    n += 1
    return total / n / HOUR if n else float("nan")


def report(trace: Trace, fetches: dict, planned: dict) -> list[str]:
    a, b = trace.start + brt.WARMUP, trace.end
    years = (trace.end - trace.start) / YEAR
    late, by_class = [], {label: [] for label, _ in CLASSES}
    on_time = {}
    for page in trace.pages:
        times, plans = fetches[page.url], planned[page.url]
        # the first crawl has no plan; every later fetch has one
        revisits = times[len(times) - len(plans):]
        cls = next(label for label, top in CLASSES if len(page.changes) / years <= top)
        moved = times[: len(times) - len(plans)]
        for t, p in zip(revisits, plans):
            if a <= t < b:
                late.append(t - p)
                by_class[cls].append(t - p)
            moved.append(max(p, moved[-1]) if moved else p)
        on_time[page.url] = moved
    late.sort()
    real, ideal = mean_delay(trace, fetches, a, b), mean_delay(trace, on_time, a, b)
    q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))] / HOUR  # noqa: E731
    lines = [
        f"== {trace.name}: {len(trace.pages)} pages, {len({p.host for p in trace.pages})} host(s); "
        f"{len(late)} revisits scored",
        f"late after the planned time, h: mean {statistics.fmean(late) / HOUR:.2f}, median {q(late, 0.5):.2f}, "
        f"90 % {q(late, 0.9):.2f}, largest {late[-1] / HOUR:.2f}; "
        f"more than an hour late {100 * sum(x > HOUR for x in late) / len(late):.0f} %",
    ]
    for label, xs in by_class.items():
        if xs:
            lines.append(f"  pages {label:<12} {len(xs):>8} revisits, mean {statistics.fmean(xs) / HOUR:.2f} h late")
    lines.append(f"mean delay of a change: {real:.2f} h; each fetch at its planned time: {ideal:.2f} h "
                 f"(the queue's cost at most {real - ideal:+.2f} h)")  # fmt: skip
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace names (default: all of the file)")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--per-page-per-day", type=float, default=1.0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting("AOPIC_RECRAWL_"),
                        help="one more setting (VALUE read as JSON if it parses; NAME without AOPIC_ "
                             "is read as AOPIC_RECRAWL_NAME)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=OUT, help="appended to")
    args = parser.parse_args(argv)
    extra = settings_of(args.set, "AOPIC_RECRAWL_")
    lines = [f"default planner{''.join(f', {k} = {v!r}' for k, v in extra.items())}, "
             f"budget {args.per_page_per_day} revisits a day per page, host gap {brt.HOST_GAP:g} s"]  # fmt: skip
    for trace in load(args.fixture, args.trace):
        settings = {"AOPIC_RECRAWL_BUDGET": args.per_page_per_day * len(trace.pages), **extra}
        lines += report(trace, *instrumented_run(trace, settings))
        print("\n".join(lines), flush=True)
        lines_out, lines = lines, []
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write("\n".join(lines_out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
