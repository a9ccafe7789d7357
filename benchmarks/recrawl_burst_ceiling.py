"""How much a burst model could gain on the real traces, at most (issue 17).

Runs the planner with its default settings plus the benchmark's budget (as
``bench_recrawl_traces.py`` does) and asks, of its mean delay: how much of
it is owed to changes that came within ``W`` of a revisit that had just
found the page changed? Those are the only changes a revisit sooner after
a detected change can catch sooner; the rest (the first change of each
burst, lone changes) it cannot. Their share of the total delay is the
ceiling of what bursts can save at any cost.

It also splits the mean delay by the trace's own bursts, whatever the
planner saw: changes within ``W`` of the page's previous change, and the
rest. Run once as is and once with ``--set AOPIC_RECRAWL_BURST=true``, it
says what the burst model gains on the changes of a burst and what it
costs the others (``--budget-factor``: the budget moved, as in
``bench_recrawl_budgets.py``).

    .venv/bin/python benchmarks/recrawl_burst_ceiling.py rust-book packaging-guide devguide scrapy-docs
    .venv/bin/python benchmarks/recrawl_burst_ceiling.py rust-book --set AOPIC_RECRAWL_BURST=true --budget-factor 1.001
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arglists import setting, settings_of  # noqa: E402
from bench_recrawl_traces import DAY, HOUR, WARMUP, run_planner  # noqa: E402
from recrawl_traces import load  # noqa: E402

WINDOWS = (DAY, 3 * DAY)


def mean(delay: float, n: int) -> str:
    """A total delay (seconds) over ``n`` changes, in hours (``-``: none)."""
    return f"{delay / n / HOUR:.2f} h" if n else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", metavar="TRACE", help="trace names (default: all)")
    parser.add_argument("--budget-factor", type=float, default=1.0, help="the budget times this")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(),
                        help="one more setting (VALUE read as JSON if it parses)")
    args = parser.parse_args(argv)
    extra = settings_of(args.set)
    for trace in load(names=args.traces or None):
        settings = {"AOPIC_RECRAWL_BUDGET": float(len(trace.pages)) * args.budget_factor, **extra}
        fetches, _, _ = run_planner(trace, settings, False)
        start = trace.start + WARMUP
        total = 0.0
        count = 0
        after = dict.fromkeys(WINDOWS, 0.0)
        n_after = dict.fromkeys(WINDOWS, 0)
        # by the trace's own bursts: the same changes whatever the planner did
        in_burst = dict.fromkeys(WINDOWS, 0.0)
        n_burst = dict.fromkeys(WINDOWS, 0)
        for page in trace.pages:
            times, changes = fetches[page.url], page.changes
            found = [t for k, t in enumerate(times) if k and
                     bisect.bisect_right(changes, t) > bisect.bisect_right(changes, times[k - 1])]  # fmt: skip
            for k, c in enumerate(changes):
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
                    if k and c - changes[k - 1] < w:
                        in_burst[w] += delay
                        n_burst[w] += 1
        shares = ", ".join(
            f"within {w / DAY:g} d: {n_after[w]} changes, {100 * after[w] / total:.0f} % of the delay"
            for w in WINDOWS
        )
        print(f"{trace.name}: {count} scored changes, mean delay {total / count / HOUR:.1f} h; "
              f"after a revisit that found a change, {shares}", flush=True)  # fmt: skip
        split = "; ".join(
            f"within {w / DAY:g} d: {n_burst[w]} changes, mean delay {mean(in_burst[w], n_burst[w])}, "
            f"the rest {mean(total - in_burst[w], count - n_burst[w])}"
            for w in WINDOWS
        )
        print(f"    of the page's previous change ({sum(map(len, fetches.values()))} fetches): {split}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
