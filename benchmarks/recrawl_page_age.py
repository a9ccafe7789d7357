"""How often pages born inside a change trace change, by their age (issue 17).

For each trace of a births fixture (written by ``recrawl_creations.py``):
the changes per second of the pages born inside the trace, in bands of
their age (time since birth), over the changes per second of the pages
there from the start (over the whole trace). The table behind
:setting:`AOPIC_RECRAWL_NEW_PAGES` (``docs/recrawl.rst``, *New pages*)::

    .venv/bin/python benchmarks/recrawl_page_age.py \\
        --fixture benchmarks/data/recrawl_traces_births.json.gz \\
        --fixture benchmarks/data/recrawl_traces_extra_births.json.gz \\
        --fixture benchmarks/data/recrawl_traces_heldout_births.json.gz \\
        --fixture benchmarks/data/recrawl_traces_heldout2_births.json.gz

Each cell is the ratio, and in brackets the changes it counts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recrawl_traces import Trace, load  # noqa: E402

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0

#: age bands (seconds since birth) and their labels
BANDS = ((0.0, HOUR, "< 1 h"), (HOUR, DAY, "1 h - 1 day"), (DAY, WEEK, "1 day - 1 week"),
         (WEEK, 4 * WEEK, "1 - 4 weeks"), (4 * WEEK, float("inf"), "> 4 weeks"))  # fmt: skip


def age_ratios(trace: Trace) -> tuple[int, list[tuple[float | None, int]]]:
    """``(pages born inside, [(ratio or None, changes counted) per band])``."""
    born = [p for p in trace.pages if p.born is not None and p.born > trace.start]
    settled = [p for p in trace.pages if p.born is None or p.born <= trace.start]
    watched = len(settled) * (trace.end - trace.start)
    settled_rate = sum(len(p.changes) for p in settled) / watched if watched > 0 else 0.0
    cells = []
    for lo, hi, _ in BANDS:
        n = sum(lo <= c - p.born < hi for p in born for c in p.changes)
        seconds = sum(max(0.0, min(hi, trace.end - p.born) - lo) for p in born)
        ratio = n / seconds / settled_rate if seconds > 0 and settled_rate > 0 else None
        cells.append((ratio, n))
    return len(born), cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", type=Path, action="append", required=True, help="a births fixture")
    args = parser.parse_args(argv)
    print(f"{'trace':<18}{'born':>10}" + "".join(f"{label:>17}" for *_, label in BANDS))
    for path in args.fixture:
        for trace in load(path):
            born, cells = age_ratios(trace)
            row = "".join(
                f"{'-' if r is None else f'{r:,.1f}'} ({n})".rjust(17) for r, n in cells
            )
            print(f"{trace.name:<18}{f'{born}/{len(trace.pages)}':>10}{row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
