"""The burst model against main's planner, judged above single-run noise (issue 17).

One run of ``bench_recrawl_traces.py`` per side is mostly noise on the
small traces: moving the budget by 0.1 % moves main's own mean delay by up
to 10 % (the developer's guide 8.9-9.8 h). So each side is run at five
budgets (0.998 to 1.002 revisits a day per page; the runs are
deterministic, the budgets are the noise) and compared by the mean and
sample sd over them: mean delay (hours, as the benchmark prints it, to
0.1 h) and freshness minus the oracle's. "main" is this checkout with
bursts off (its decisions are main's: same fetches); "fetches" is the
largest gap in fetches between the sides at one budget (equal cost).

The verdict rule (fixed before the runs): bursts go on by default only if
their mean delay is lower than main's on at least 6 of 8 traces, higher by
more than one sd of main's spread on none, and their freshness minus the
oracle's is lower than main's by more than one sd of main's spread on
none.

Each run is a ``bench_recrawl_traces.py --no-last-modified [--burst]
--trace NAME --per-page-per-day F`` subprocess writing to
``WORK/{main,burst}-NAME-F/``; a run whose output is there already is not
run again (resume, or re-aggregate with ``--jobs 0``). Debian, the slowest
(about 50 s a run on a loaded machine; the small traces 10-60 s), goes
last.

    .venv/bin/python benchmarks/bench_recrawl_burst_noise.py --work /tmp/burst-noise   # ~20 minutes, 2 processes
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_recrawl_traces.py"
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-traces-burst-noise.txt"
FIXTURE = ROOT / "benchmarks" / "data" / "recrawl_traces.json.gz"
BUDGETS = ("0.998", "0.999", "1", "1.001", "1.002")
SIDES = ("main", "burst")
PLANNER_ROW = re.compile(r"^planner\s+(\d+)\s+[\d.]+\s+([\d.]+)\s", re.M)
FRESHNESS = re.compile(r"freshness ([+-][\d.]+) vs oracle")


def run(work: Path, side: str, trace: str, budget: str) -> None:
    out = work / f"{side}-{trace}-{budget}"
    if list(out.glob("recrawl-traces*.txt")):
        return
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(BENCH), "--no-last-modified", "--trace", trace,
           "--per-page-per-day", budget, "--out", str(out)]  # fmt: skip
    if side == "burst":
        cmd.append("--burst")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def read(work: Path, side: str, trace: str, budget: str) -> tuple[float, float, int] | None:
    """Mean delay (hours), freshness minus the oracle's, fetches; None if not run."""
    files = list((work / f"{side}-{trace}-{budget}").glob("recrawl-traces*.txt"))
    if not files:
        return None
    text = files[0].read_text()
    row, fresh = PLANNER_ROW.search(text), FRESHNESS.search(text)
    return float(row.group(2)), float(fresh.group(1)), int(row.group(1))


def spread(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="where the runs' outputs go")
    parser.add_argument("--trace", action="append", help="trace names (default: all, Debian last)")
    parser.add_argument("--budget", action="append", help=f"budgets (default: {' '.join(BUDGETS)})")
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time (0: only aggregate)")
    parser.add_argument("--out", type=Path, default=OUT, help="the table is also written here")
    args = parser.parse_args(argv)
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        names = list(json.load(f))
    traces = args.trace or sorted(names, key=lambda name: name == "debian")
    budgets = args.budget or list(BUDGETS)
    if args.jobs:
        with ThreadPoolExecutor(args.jobs) as pool:
            for done in [pool.submit(run, args.work, side, trace, budget)
                         for trace in traces for budget in budgets for side in SIDES]:  # fmt: skip
                done.result()
    say(f"{'trace':<17}{'runs':>5}{'main delay h':>15}{'burst delay h':>15}{'change':>8}"
        f"{'main fresh-oracle':>21}{'burst fresh-oracle':>21}{'fetches':>9}")  # fmt: skip
    lower, judged, worse, staler = 0, 0, [], []
    for trace in traces:
        runs = {side: {b: read(args.work, side, trace, b) for b in budgets} for side in SIDES}
        common = [b for b in budgets if runs["main"][b] and runs["burst"][b]]
        if not common:
            continue
        judged += 1
        (md, md_sd), (bd, bd_sd) = (spread([runs[s][b][0] for b in common]) for s in SIDES)
        (mf, mf_sd), (bf, bf_sd) = (spread([runs[s][b][1] for b in common]) for s in SIDES)
        fetches = max(abs(runs["burst"][b][2] / runs["main"][b][2] - 1) for b in common)
        lower += bd < md
        if bd > md + md_sd:
            worse.append(trace)
        if bf < mf - mf_sd:
            staler.append(trace)
        say(f"{trace:<17}{len(common):>5}{md:>8.2f} ± {md_sd:4.2f}{bd:>8.2f} ± {bd_sd:4.2f}"
            f"{100 * (bd / md - 1):>+7.1f}%{mf:>+11.5f} ± {mf_sd:.5f}{bf:>+11.5f} ± {bf_sd:.5f}"
            f"{100 * fetches:>8.2f}%")  # fmt: skip
        for side in SIDES:
            say(f"    {side:<6}" + "  ".join(f"{b}: {runs[side][b][0]:.1f}" for b in common))
    verdict = "on by default" if lower >= 6 and not worse and not staler else "stay off"
    say(f"bursts lower on {lower} of {judged}; higher by more than main's sd on: "
        f"{', '.join(worse) or 'none'}; freshness lower by more than main's sd on: "
        f"{', '.join(staler) or 'none'} -> bursts {verdict}"
        + ("" if judged == len(names) else f" (the rule needs all {len(names)} traces; {judged} run)"))  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
