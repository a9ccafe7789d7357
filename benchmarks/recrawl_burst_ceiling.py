"""How much a burst model could gain on the real traces, at most (issue 17).

Runs the planner with its default settings plus the benchmark's budget (as
``bench_recrawl_traces.py`` does) and asks, of its mean delay: how much of
it is owed to changes that came within ``W`` of a revisit that had just
found the page changed? Those are the only changes a revisit sooner after
a detected change can catch sooner; the rest (the first change of each
burst, lone changes) it cannot. Their share of the total delay is the
ceiling of what bursts can save at any cost.

    .venv/bin/python benchmarks/recrawl_burst_ceiling.py rust-book packaging-guide devguide scrapy-docs
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recrawl_traces import DAY, HOUR, WARMUP, run_planner  # noqa: E402
from recrawl_traces import load  # noqa: E402

WINDOWS = (DAY, 3 * DAY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", metavar="TRACE", help="trace names (default: all)")
    args = parser.parse_args(argv)
    for trace in load(names=args.traces or None):
        fetches, _, _ = run_planner(trace, {"AOPIC_RECRAWL_BUDGET": float(len(trace.pages))}, False)
        start = trace.start + WARMUP
        total = 0.0
        count = 0
        after = dict.fromkeys(WINDOWS, 0.0)
        n_after = dict.fromkeys(WINDOWS, 0)
        for page in trace.pages:
            times, changes = fetches[page.url], page.changes
            found = [t for k, t in enumerate(times) if k and
                     bisect.bisect_right(changes, t) > bisect.bisect_right(changes, times[k - 1])]  # fmt: skip
            for c in changes:
                if c < start:
                    continue
                i = bisect.bisect_left(times, c)
                delay = (times[i] if i < len(times) else trace.end) - c
                total += delay
                count += 1
                j = bisect.bisect_left(found, c)
                for w in WINDOWS:
                    if j and c - found[j - 1] < w:
                        after[w] += delay
                        n_after[w] += 1
        shares = ", ".join(
            f"within {w / DAY:g} d: {n_after[w]} changes, {100 * after[w] / total:.0f} % of the delay"
            for w in WINDOWS
        )
        print(f"{trace.name}: {count} scored changes, mean delay {total / count / HOUR:.1f} h; "
              f"after a revisit that found a change, {shares}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
