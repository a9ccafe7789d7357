"""How much the pages of a real change trace change together (issue 17).

For each trace (``benchmarks/recrawl_traces.py``): the share of its changes
that share their instant with a change of another page of the trace (one
commit, one upload), the share with another page's change within an hour,
and the mean number of pages a change instant touches. This is what the
co-change hints (:setting:`AOPIC_RECRAWL_COCHANGE`,
``scrapy_aopic/recrawl/cochange.py``) learn from, seen with the exact
times; the planner only sees which revisits found a page changed.

    .venv/bin/python benchmarks/recrawl_cochange.py
    .venv/bin/python benchmarks/recrawl_cochange.py --split rust-book --split devguide   # where the delay is
    .venv/bin/python benchmarks/recrawl_cochange.py --ceiling rust-book   # hints with the true partners
    .venv/bin/python benchmarks/recrawl_cochange.py --recall rust-book    # how many the learnt ones are

``--split TRACE`` runs the planner on the trace as
``bench_recrawl_traces.py`` does (default settings, one revisit a page a
day) and splits the scored changes, and their delay, by kind: *lone* (no
other page changed at that instant) or *shared*; found by a revisit a
co-change hint brought forward (*hinted*) or by a planned one, and for the
latter whether another page of the same change had been fetched more than
an hour before (*seen elsewhere first*: a hint could have caught it).

``--ceiling TRACE`` runs the planner at five budgets (0.998-1.002 revisits
a page a day) with its default hints and again with the hints told the
truth: when a revisit finds a page changed, the pages that changed at the
same instant as one of its changes in that window, and not fetched since,
are brought forward (same budget accounting, same cap): how far co-change
hints could go if the partners of each change were known. ``--recall
TRACE`` runs the default once (budget 1) and says, for each change a
revisit found, how many such true partners there were, how many the
learnt partners were (``AOPIC_RECRAWL_COCHANGE_SHARE``), how many of the
true ones were among them, and among the pages the page had ever been
seen co-changing with, and how often a page of the host picked at random
is a true partner (the precision of a guess).

``--activity`` says, per trace, how much more likely a page is to change
on a day when another page of the trace changed in the three days
before (the site is *active*) than on other days, and the share of days
that are active: what a model of a site's active periods could use.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import types
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recrawl_traces import EXTRA, FIXTURE, HELDOUT, load  # noqa: E402

HOUR = 3600.0
DAY = 86400.0


def together(trace) -> tuple[int, float, float, float]:
    """(changes, share at the same instant as another page's, share within
    an hour of one, pages per change instant)."""
    pages_at: dict[float, int] = defaultdict(int)
    for page in trace.pages:
        for t in page.changes:
            pages_at[t] += 1
    changes = sum(pages_at.values())
    same = sum(n for n in pages_at.values() if n > 1)
    instants = sorted(pages_at)
    near = 0
    for t, n in pages_at.items():
        lo, hi = bisect.bisect_left(instants, t - HOUR), bisect.bisect_right(instants, t + HOUR)
        others = sum(pages_at[u] for u in instants[lo:hi]) - 1
        near += n if others > 0 else 0
    return changes, same / changes, near / changes, changes / len(pages_at)


def split(trace, budget: float = 1.0) -> dict[str, tuple[int, float]]:
    """Kind of change -> (changes, summed delay in seconds), scored as
    ``bench_recrawl_traces.py`` scores (after its warm-up)."""
    import bench_recrawl_traces as bench

    hinted: set[tuple[str, float]] = set()

    def instrument(planner):
        on_visit = planner.on_visit

        def visit(url, host, now, **kwargs):
            record = planner.pages.get(url)
            if record is not None and record.hinted:
                hinted.add((url, now))
            return on_visit(url, host, now, **kwargs)

        planner.on_visit = visit

    settings = {"AOPIC_RECRAWL_BUDGET": budget * len(trace.pages)}
    fetches, _, _ = bench.run_planner(trace, settings, False, instrument=instrument)
    a, b = trace.start + bench.WARMUP, trace.end
    pages_at = defaultdict(list)
    for page in trace.pages:
        for t in page.changes:
            pages_at[t].append(page.url)

    def first_fetch(url: str, t: float) -> float | None:
        times = fetches[url]
        i = bisect.bisect_left(times, t)
        return times[i] if i < len(times) else None

    kinds: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for page in trace.pages:
        for t in page.changes:
            found = first_fetch(page.url, t)
            if not a <= t < b or found is None:
                continue
            others = [f for url in pages_at[t] if url != page.url and (f := first_fetch(url, t)) is not None]
            if (page.url, found) in hinted:
                kind = ("shared" if others else "lone") + ", hinted"
            elif not others:
                kind = "lone, planned"
            elif min(others) < found - HOUR:
                kind = "shared, planned, seen elsewhere first"
            else:
                kind = "shared, planned, found first"
            kinds[kind][0] += 1
            kinds[kind][1] += found - t
    return {kind: (n, delay) for kind, (n, delay) in sorted(kinds.items())}


def _instants(trace) -> tuple[dict[str, list[float]], dict[float, list[str]]]:
    """Each page's change times, and the pages that changed at each instant."""
    pages_at = defaultdict(list)
    for page in trace.pages:
        for t in page.changes:
            pages_at[t].append(page.url)
    return {page.url: page.changes for page in trace.pages}, pages_at


def _true_partners(planner, changes, pages_at, url, previous, now) -> list[str]:
    """Pages that changed with ``url`` in ``(previous, now]`` (at the same
    instant) after their last visit, and are not due already."""
    times = changes[url]
    found = []
    for t in times[bisect.bisect_right(times, previous) : bisect.bisect_right(times, now)]:
        for other in pages_at[t]:
            record = planner.pages.get(other)
            if (
                other != url
                and record is not None
                and record.last_visit is not None
                and record.last_visit < t
                and record.deadline is not None
                and record.deadline > now
                and other not in found
            ):
                found.append(other)
    return found


def ceiling(trace, budget: float) -> list[tuple[float, float]]:
    """[(delay, the best fixed interval's delay at the same cost)] of the
    default and of the hints told the true partners, seconds."""
    import bench_recrawl_traces as bench
    from scrapy.settings import Settings

    from scrapy_aopic.recrawl.hook import planner_from_settings

    changes, pages_at = _instants(trace)

    def told(planner):
        def hint_partners(self, url, record, previous, now):
            budget = self.budget_per_second()
            for other in _true_partners(self, changes, pages_at, url, previous, now):
                self._hint(other, self.pages[other], now, budget)

        planner._hint_partners = types.MethodType(hint_partners, planner)

    a, b = trace.start + bench.WARMUP, trace.end
    settings = {"AOPIC_RECRAWL_BUDGET": budget * len(trace.pages)}
    bounds = planner_from_settings(Settings({"AOPIC_RECRAWL": True}))
    delays = []
    for instrument in (None, told):
        fetches, _, _ = bench.run_planner(trace, settings, False, instrument=instrument)
        result = bench.score(trace, fetches, a, b)
        # each run against the best fixed interval at its own cost, as
        # bench_recrawl_budgets.py does
        fixed = bench.baselines(trace, result.fetches, a, b, bounds.max_interval, bounds.min_interval)
        delays.append((result.delay, fixed["fixed (best phase)"].delay))
    return delays


def recall(trace) -> dict[str, float]:
    """Per change a revisit found (default, budget 1): true partners, learnt
    partners, true among learnt, pages ever seen co-changing, true among
    those, other pages of the host (means)."""
    import bench_recrawl_traces as bench

    changes, pages_at = _instants(trace)
    sums = defaultdict(float)

    def instrument(planner):
        hint_partners = planner._hint_partners

        def count(url, record, previous, now):
            true = set(_true_partners(planner, changes, pages_at, url, previous, now))
            model = planner.cochange
            counts = model.partners.get(url, {})
            # the partners as observe() will find them, before it counts this change
            learnt = set(model.partners_of(url, seen=model.changes.get(url, 0) + 1))
            sums["events"] += 1
            sums["true"] += len(true)
            sums["learnt"] += len(learnt)
            sums["true learnt"] += len(true & learnt)
            sums["ever"] += len(counts)
            sums["true ever"] += len(true & counts.keys())
            sums["host"] += sum(1 for other in planner.pages.values() if other.site == record.site) - 1
            return hint_partners(url, record, previous, now)

        planner._hint_partners = count

    bench.run_planner(trace, {"AOPIC_RECRAWL_BUDGET": len(trace.pages)}, False, instrument=instrument)
    events = sums.pop("events") or 1
    return {"changes found": events, **{name: total / events for name, total in sums.items()}}


def activity(trace, window: float = 3 * DAY) -> tuple[float, float, float]:
    """(share of page-days active, P(change on an active day), P(change on a
    quiet day)): a page-day is active when another page of the trace
    changed in the ``window`` before it; days from half a year in."""
    every = sorted(t for page in trace.pages for t in page.changes)
    counts = {True: [0, 0], False: [0, 0]}
    first = trace.start + 182 * DAY
    days = int((trace.end - first) // DAY)
    for page in trace.pages:
        own = page.changes
        for d in range(days):
            t = first + d * DAY
            others = bisect.bisect_left(every, t) - bisect.bisect_left(every, t - window)
            mine = bisect.bisect_left(own, t) - bisect.bisect_left(own, t - window)
            active = others > mine
            counts[active][0] += bisect.bisect_left(own, t + DAY) > bisect.bisect_left(own, t)
            counts[active][1] += 1
    (hit, n), (quiet_hit, quiet_n) = counts[True], counts[False]
    return n / max(n + quiet_n, 1), hit / max(n, 1), quiet_hit / max(quiet_n, 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", action="append", default=[], metavar="TRACE",
                        help="also split that trace's delay by kind of change (runs the planner)")
    parser.add_argument("--ceiling", action="append", default=[], metavar="TRACE",
                        help="the default's delay against hints told the true partners (10 runs)")
    parser.add_argument("--recall", action="append", default=[], metavar="TRACE",
                        help="how many of each change's true partners the learnt partners are (1 run)")
    parser.add_argument("--activity", action="store_true",
                        help="how much likelier a change is when the site changed in the 3 days before")
    args = parser.parse_args(argv)
    print(f"{'trace':<17}{'pages':>6}{'changes':>9}{'same instant':>14}{'within 1 h':>12}{'pages/instant':>15}")
    for trace in load(FIXTURE) + load(EXTRA) + load(HELDOUT):
        changes, same, near, per = together(trace)
        print(f"{trace.name:<17}{len(trace.pages):>6}{changes:>9}{same:>14.2f}{near:>12.2f}{per:>15.2f}")
    traces = {t.name: t for t in load(FIXTURE) + load(EXTRA) + load(HELDOUT)}
    unknown = [name for name in args.split + args.ceiling + args.recall if name not in traces]
    if unknown:
        parser.error(f"unknown trace {', '.join(unknown)} (known: {', '.join(traces)})")
    for name in args.split:
        kinds = split(traces[name])
        changes = sum(n for n, _ in kinds.values())
        delay = sum(d for _, d in kinds.values())
        print(f"\n{name}: {changes} changes scored, mean delay {delay / changes / HOUR:.2f} h")
        for kind, (n, d) in kinds.items():
            print(f"  {kind:<40}{n / changes:>6.0%} of the changes, mean {d / n / HOUR:5.1f} h, "
                  f"{d / delay:>4.0%} of the delay")
    if args.activity:
        print(f"\n{'trace':<17}{'active days':>12}{'P(change) active':>18}{'quiet':>9}{'ratio':>7}"
              f"{'changes active':>16}")
        for trace in traces.values():
            share, active, quiet = activity(trace)
            found = share * active / max(share * active + (1 - share) * quiet, 1e-12)
            print(f"{trace.name:<17}{share:>12.2f}{active:>18.4f}{quiet:>9.4f}"
                  f"{active / max(quiet, 1e-12):>7.1f}{found:>16.2f}", flush=True)
    if args.ceiling:
        print("\nhints told the true partners, five budgets (revisits a page a day): delay h, x best fixed")
    for name in args.ceiling:
        ratios = {"default": [], "true partners": []}
        for budget in (0.998, 0.999, 1.0, 1.001, 1.002):
            (default, fixed), (told, told_fixed) = ceiling(traces[name], budget)
            ratios["default"].append(default / fixed)
            ratios["true partners"].append(told / told_fixed)
            print(f"  {name} {budget:g}: default {default / HOUR:.2f} h ({default / fixed:.3f}), "
                  f"true partners {told / HOUR:.2f} h ({told / told_fixed:.3f})", flush=True)
        print("  " + name + ": " + ", ".join(
            f"{side} {statistics.mean(r):.3f} ± {statistics.stdev(r):.3f}" for side, r in ratios.items()))
    for name in args.recall:
        figures = recall(traces[name])
        print(f"\n{name}: {figures.pop('changes found'):.0f} changes found; per change, true partners "
              f"{figures['true']:.2f}, learnt {figures['learnt']:.2f}, true among learnt "
              f"{figures['true learnt']:.2f} (recall {figures['true learnt'] / max(figures['true'], 1e-9):.2f}, "
              f"precision {figures['true learnt'] / max(figures['learnt'], 1e-9):.3f}); ever co-changed "
              f"{figures['ever']:.2f}, true among them {figures['true ever']:.2f} "
              f"(recall {figures['true ever'] / max(figures['true'], 1e-9):.2f}); a page of the host picked at "
              f"random is one {figures['true'] / max(figures['host'], 1e-9):.3f} of the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
