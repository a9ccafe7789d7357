"""How much the pages of a real change trace change together (issue 17).

For each trace (``benchmarks/recrawl_traces.py``): the share of its changes
that share their instant with a change of another page of the trace (one
commit, one upload), the share with another page's change within an hour,
and the mean number of pages a change instant touches. This is what the
co-change hints (:setting:`AOPIC_RECRAWL_COCHANGE`,
``scrapy_aopic/recrawl/cochange.py``) learn from, seen with the exact
times; the planner only sees which revisits found a page changed.

    .venv/bin/python benchmarks/recrawl_cochange.py
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    print(f"{'trace':<17}{'pages':>6}{'changes':>9}{'same instant':>14}{'within 1 h':>12}{'pages/instant':>15}")
    for trace in load(FIXTURE) + load(EXTRA) + load(HELDOUT):
        changes, same, near, per = together(trace)
        print(f"{trace.name:<17}{len(trace.pages):>6}{changes:>9}{same:>14.2f}{near:>12.2f}{per:>15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
