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

``--split TRACE`` runs the planner on the trace as
``bench_recrawl_traces.py`` does (default settings, one revisit a page a
day) and splits the scored changes, and their delay, by kind: *lone* (no
other page changed at that instant) or *shared*; found by a revisit a
co-change hint brought forward (*hinted*) or by a planned one, and for the
latter whether another page of the same change had been fetched more than
an hour before (*seen elsewhere first*: a hint could have caught it).
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recrawl_traces import EXTRA, FIXTURE, HELDOUT, load  # noqa: E402

HOUR = 3600.0


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", action="append", default=[], metavar="TRACE",
                        help="also split that trace's delay by kind of change (runs the planner)")
    args = parser.parse_args(argv)
    print(f"{'trace':<17}{'pages':>6}{'changes':>9}{'same instant':>14}{'within 1 h':>12}{'pages/instant':>15}")
    for trace in load(FIXTURE) + load(EXTRA) + load(HELDOUT):
        changes, same, near, per = together(trace)
        print(f"{trace.name:<17}{len(trace.pages):>6}{changes:>9}{same:>14.2f}{near:>12.2f}{per:>15.2f}")
    traces = {t.name: t for t in load(FIXTURE) + load(EXTRA) + load(HELDOUT)}
    unknown = [name for name in args.split if name not in traces]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
