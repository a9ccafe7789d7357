"""Where the planner's freshness goes, against the true-rate oracle, per
quintile of the pages' true change rate (issue 17).

Runs the planner on one trace as ``bench_recrawl_traces.py`` does, gives the
oracle its measured cost, and prints per fifth of the pages (slowest first)
the changes in the history and in the scored years, stale page-days and
fetches of both. ``--budget-factor`` moves the budget (0.999, 1.001: how
much of the difference is noise). ``--true-rates`` plans every page with its
true mean change rate (what the oracle knows) through the planner's own
machinery (budget solve, waiting rule on the learnt profile, host gap): what
is left of the gap is the machinery's, the rest the rate estimates'.
``--flat`` plans on a flat profile (no hour-of-week timing)::

    .venv/bin/python benchmarks/recrawl_quintiles.py rust-book
    .venv/bin/python benchmarks/recrawl_quintiles.py devguide --budget-factor 1.001
    .venv/bin/python benchmarks/recrawl_quintiles.py pip-src --true-rates --flat
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arglists import setting, settings_of  # noqa: E402
import bench_recrawl_traces as bench  # noqa: E402
from recrawl_traces import YEAR, Trace, load  # noqa: E402

from scrapy.settings import Settings  # noqa: E402

from scrapy_aopic.recrawl.budget import FreshnessAllocator  # noqa: E402
from scrapy_aopic.recrawl.hook import planner_from_settings  # noqa: E402
from scrapy_aopic.recrawl.planner import _FLAT  # noqa: E402

DAY = 86400.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--budget-factor", type=float, default=1.0)
    parser.add_argument("--true-rates", action="store_true", help="plan with the true mean rates")
    parser.add_argument("--flat", action="store_true", help="plan on a flat profile")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(),
                        help="one more setting (VALUE read as JSON if it parses)")
    args = parser.parse_args(argv)
    trace = load(names=[args.trace])[0]
    a, b = trace.start + bench.WARMUP, trace.end
    n = len(trace.pages)
    settings = {"AOPIC_RECRAWL_BUDGET": float(n) * args.budget_factor}
    settings.update(settings_of(args.set))
    rates = bench.true_rates(trace)
    truth = {page.url: rate for page, rate in zip(trace.pages, rates)}
    mean_rate = sum(rates) / n
    changes_of = {page.url: page.changes for page in trace.pages}
    window = planner_from_settings(Settings({"AOPIC_RECRAWL": True})).change_window
    # Per page, over its plans in the scored years: the rate it was planned
    # with, and its true changes in the change window before (the most an
    # estimator forgetting with that window can know).
    planned: dict[str, list[float]] = {page.url: [0.0, 0.0, 0] for page in trace.pages}

    def instrument(planner):
        url_of: dict[int, str] = {}
        own = planner.page_rate

        def page_rate(record, now):
            if id(record) not in url_of:
                url_of.update((id(r), u) for u, r in planner.pages.items())
            url = url_of[id(record)]
            rate = truth[url] if args.true_rates else own(record, now)
            if now >= a and rate is not None:
                entry = planned[url]
                entry[0] += rate
                c = changes_of[url]
                entry[1] += (bisect.bisect_right(c, now) - bisect.bisect_right(c, now - window)) / window
                entry[2] += 1
            return rate

        planner.page_rate = page_rate
        if args.true_rates:
            planner.prior_rate = lambda record, now: mean_rate
        if args.flat:
            planner.shape_of = lambda record: ("flat", _FLAT)

    fetches, _, _ = bench.run_planner(trace, settings, False, instrument=instrument)

    def per_page(fx):
        out = []
        for page in trace.pages:
            s = bench.score(Trace(trace.name, trace.start, trace.end, [page]), {page.url: fx[page.url]}, a, b)
            out.append(((1 - s.freshness) * (b - a) / DAY, s.fetches))
        return out

    planner = per_page(fetches)
    allocator = FreshnessAllocator(1 / (7 * DAY), 1 / 60)
    allocator.solve(rates, [1.0] * n, sum(f for _, f in planner) / (b - a))
    freq = [allocator.frequency(r) for r in rates]
    oracle = per_page(
        bench.periodic(trace, [1 / f for f in freq], [(i * 0.618 % 1) / f for i, f in enumerate(freq)])
    )
    stale_p, stale_o = sum(s for s, _ in planner), sum(s for s, _ in oracle)
    mode = " (true rates)" * args.true_rates + " (flat profile)" * args.flat
    print(f"{trace.name}{mode} x{args.budget_factor:g} budget: stale page-days planner {stale_p:.1f}, oracle "
          f"{stale_o:.1f}; freshness planner - oracle {(stale_o - stale_p) * DAY / ((b - a) * n):+.6f}")  # fmt: skip
    order = sorted(range(n), key=lambda i: rates[i])

    def mean_of(idx, k):
        """Mean over the pages of ``idx`` of their mean planned (k = 0) or
        past-window (k = 1) rate, per year."""
        per = [planned[trace.pages[i].url] for i in idx]
        return YEAR * sum(e[k] / e[2] for e in per if e[2]) / max(1, sum(1 for e in per if e[2]))

    for q in range(5):
        idx = order[q * n // 5 : (q + 1) * n // 5]
        hist = sum(sum(1 for t in trace.pages[i].changes if t < a) for i in idx)
        scored = sum(sum(1 for t in trace.pages[i].changes if t >= a) for i in idx)
        print(f"  fifth {q + 1} ({rates[idx[0]] * YEAR:.2f}-{rates[idx[-1]] * YEAR:.2f} changes/year): "
              f"changes {hist} history, {scored} scored; stale page-days planner "
              f"{sum(planner[i][0] for i in idx):.1f}, oracle {sum(oracle[i][0] for i in idx):.1f}; "
              f"fetches planner {sum(planner[i][1] for i in idx)}, oracle {sum(oracle[i][1] for i in idx)}; "
              f"rate/year planned {mean_of(idx, 0):.2f}, past window {mean_of(idx, 1):.2f}, "
              f"true {YEAR * sum(rates[i] for i in idx) / len(idx):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
