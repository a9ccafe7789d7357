"""Where the planner's freshness goes, against the true-rate oracle, per
quintile of the pages' true change rate (issue 17).

Runs the planner on one trace as ``bench_recrawl_traces.py`` does, gives the
oracle its measured cost, and prints per fifth of the pages (slowest first)
the changes in the history and in the scored years, stale page-days and
fetches of both. ``--budget-factor`` moves the budget (0.999, 1.001: how
much of the difference is noise)::

    .venv/bin/python benchmarks/recrawl_quintiles.py rust-book
    .venv/bin/python benchmarks/recrawl_quintiles.py devguide --budget-factor 1.001
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recrawl_traces as bench  # noqa: E402
from recrawl_traces import YEAR, Trace, load  # noqa: E402

from scrapy_aopic.recrawl.budget import FreshnessAllocator  # noqa: E402

DAY = 86400.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--budget-factor", type=float, default=1.0)
    args = parser.parse_args(argv)
    trace = load(names=[args.trace])[0]
    a, b = trace.start + bench.WARMUP, trace.end
    n = len(trace.pages)
    settings = {"AOPIC_RECRAWL_BUDGET": float(n) * args.budget_factor}
    fetches, _, _ = bench.run_planner(trace, settings, False)

    def per_page(fx):
        out = []
        for page in trace.pages:
            s = bench.score(Trace(trace.name, trace.start, trace.end, [page]), {page.url: fx[page.url]}, a, b)
            out.append(((1 - s.freshness) * (b - a) / DAY, s.fetches))
        return out

    planner = per_page(fetches)
    rates = bench.true_rates(trace)
    allocator = FreshnessAllocator(1 / (7 * DAY), 1 / 60)
    allocator.solve(rates, [1.0] * n, sum(f for _, f in planner) / (b - a))
    freq = [allocator.frequency(r) for r in rates]
    oracle = per_page(
        bench.periodic(trace, [1 / f for f in freq], [(i * 0.618 % 1) / f for i, f in enumerate(freq)])
    )
    stale_p, stale_o = sum(s for s, _ in planner), sum(s for s, _ in oracle)
    print(f"{trace.name} x{args.budget_factor:g} budget: stale page-days planner {stale_p:.1f}, oracle "
          f"{stale_o:.1f}; freshness planner - oracle {(stale_o - stale_p) * DAY / ((b - a) * n):+.6f}")  # fmt: skip
    order = sorted(range(n), key=lambda i: rates[i])
    for q in range(5):
        idx = order[q * n // 5 : (q + 1) * n // 5]
        hist = sum(sum(1 for t in trace.pages[i].changes if t < a) for i in idx)
        scored = sum(sum(1 for t in trace.pages[i].changes if t >= a) for i in idx)
        print(f"  fifth {q + 1} ({rates[idx[0]] * YEAR:.2f}-{rates[idx[-1]] * YEAR:.2f} changes/year): "
              f"changes {hist} history, {scored} scored; stale page-days planner "
              f"{sum(planner[i][0] for i in idx):.1f}, oracle {sum(oracle[i][0] for i in idx):.1f}; "
              f"fetches planner {sum(planner[i][1] for i in idx)}, oracle {sum(oracle[i][1] for i in idx)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
