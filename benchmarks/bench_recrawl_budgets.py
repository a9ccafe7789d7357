"""The re-crawl planner on the real traces, judged over five budgets rather
than one run (issue 17).

One run of ``bench_recrawl_traces.py`` is mostly noise on the small traces:
the runs are deterministic, but moving the budget by 0.1 % moves the
planner's mean delay by up to 10 % (the developer's guide 8.9-9.8 h), and
the best fixed interval's and the oracle's with it. So every side is run at
five budgets (0.998 to 1.002 revisits a day per page: the budgets are the
noise) and summarised by the mean and sample sd over them.

**One side** (the default: this checkout, default settings plus the
budget; the defaults of the code it runs, so with ``--checkout`` a main
from before issue 17's third judgement runs without timetables, and
``--side main=--no-timetable`` runs this code as that main did): per
trace, the planner's mean delay (hours), its delay over the best fixed
interval's (the target is <= 0.75) with the true-rate oracle's
beside it, and its freshness minus the oracle's (the target is >= 0), each
taken run by run at the same budget (the same cost) and then averaged. A
target is *met* or *missed beyond noise* when the mean is on that side of
it by more than two standard errors (2 sd / sqrt(runs)); else the run
cannot tell (*noise*).

**Several sides** (``--side NAME=ARGS``): each further side is also
compared with the first by the rule fixed for issue 17 before any run: it
becomes the default only if its mean delay is lower than the first side's
on at least 6 of 8 traces (by 0.005 h or more: a side that decides as the
first up to float rounding ties), higher by more than one sd of the first
side's spread on none, and its freshness minus the oracle's lower than the
first side's by more than one sd of the first side's spread on none. A
second rule (fixed before the rank-1 profile's run) is printed beside it:
no trace longer in delay or staler beyond two standard errors of the
difference (``sqrt((sd1^2 + sd2^2) / n)``), and the pip or the Sphinx
sources fresher beyond two.
"fetches" is the largest gap in fetches between the two at one budget: the
mean delays compare equal costs only when it is small; the per-side table
(delay / best fixed, freshness minus the oracle's) is at equal cost run by
run, since the baselines get each run's own cost.

Each run is ``bench_recrawl_traces.py --no-last-modified --json --trace NAME
--per-page-per-day F`` plus the side's arguments, a subprocess writing to
``WORK/SIDE-NAME-F/``; a run whose output is there already is not run again
(resume, or re-aggregate with ``--jobs 0``). ``--checkout SIDE=PATH`` runs
that side from another checkout (a ``git archive`` of main, say; this
checkout's benchmark file is used with its code, so old checkouts work).
Debian, the slowest, goes last::

    .venv/bin/python benchmarks/bench_recrawl_budgets.py --work /tmp/budgets    # 40 runs, ~15 minutes
    .venv/bin/python benchmarks/bench_recrawl_budgets.py --work /tmp/burst-noise \\
        --side main --side burst=--burst --out docs/_static/bench/recrawl-traces-burst-noise.txt
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_recrawl_traces.py"
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-traces-budgets.txt"
FIXTURE = ROOT / "benchmarks" / "data" / "recrawl_traces.json.gz"
BUDGETS = ("0.998", "0.999", "1", "1.001", "1.002")
FIXED, ORACLE, PLANNER = "fixed (best phase)", "oracle (true rates)", "planner"
HOUR = 3600.0
#: hours: mean delays closer than this are a tie, not "lower" (a side whose
#: decisions are the other's up to float rounding differs by ~1e-12 h)
TIE = 0.005


def run(work: Path, side: str, extra: list[str], bench: Path, trace: str, budget: str) -> None:
    out = work / f"{side}-{trace}-{budget}"
    if list(out.glob("recrawl-traces*.json")):
        return
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(bench), "--no-last-modified", "--json", "--trace", trace,
           "--per-page-per-day", budget, "--out", str(out), *extra]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def read(work: Path, side: str, trace: str, budget: str) -> dict | None:
    """The figures of one run: delay (hours), delay / best fixed (planner
    and oracle), freshness minus the oracle's, fetches; None if not run."""
    files = list((work / f"{side}-{trace}-{budget}").glob("recrawl-traces*.json"))
    if not files:
        return None
    rows = json.loads(files[0].read_text())[trace]
    fixed, oracle, planner = rows[FIXED], rows[ORACLE], rows[PLANNER]
    return {
        "delay": planner["delay"] / HOUR,
        "x_fixed": planner["delay"] / fixed["delay"],
        "oracle_x_fixed": oracle["delay"] / fixed["delay"],
        "fresh": planner["freshness"] - oracle["freshness"],
        "fetches": planner["fetches"],
    }


def spread(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else float("nan")


def verdict(mean: float, sd: float, n: int, target: float, below: bool) -> str:
    """``met`` / ``MISSED`` beyond two standard errors of the mean, else ``noise``."""
    margin = 2 * sd / math.sqrt(n) if n > 1 else math.inf
    gap = (target - mean) if below else (mean - target)
    return "met" if gap > margin else "MISSED" if gap < -margin else "noise"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="where the runs' outputs go")
    parser.add_argument("--trace", action="append", help="trace names (default: all, Debian last)")
    parser.add_argument("--budget", action="append", help=f"budgets (default: {' '.join(BUDGETS)})")
    parser.add_argument("--side", action="append", metavar="NAME[=ARGS]",
                        help="a side: its name and bench_recrawl_traces.py arguments (default: main, none); "
                             "the first is the reference")  # fmt: skip
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                        help="run side NAME with the code of the checkout at PATH")
    parser.add_argument("--fixture", type=Path, default=FIXTURE,
                        help="the traces file (passed to every run; recrawl_traces_extra.json.gz: "
                             "the traces judged apart)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time (0: only aggregate)")
    parser.add_argument("--out", type=Path, default=OUT, help="the table is also written here")
    args = parser.parse_args(argv)
    sides = {}
    for item in args.side or ["main"]:
        name, _, extra = item.partition("=")
        sides[name] = shlex.split(extra)
        if args.fixture != FIXTURE:
            sides[name] += ["--fixture", str(args.fixture.resolve())]
    benches = {name: BENCH for name in sides}
    scratch = []
    for item in args.checkout:
        name, _, path = item.partition("=")
        # This benchmark file (it writes the JSON read here) with that
        # checkout's code: it puts its own parent's parent first on sys.path.
        copy = Path(tempfile.mkdtemp(prefix=f"budgets-{name}-"))
        scratch.append(copy)
        (copy / "benchmarks").mkdir()
        for f in ("bench_recrawl_traces.py", "recrawl_traces.py", "arglists.py"):
            shutil.copy(BENCH.parent / f, copy / "benchmarks" / f)
        (copy / "benchmarks" / "data").symlink_to(BENCH.parent / "data")
        (copy / "scrapy_aopic").symlink_to(Path(path).resolve() / "scrapy_aopic")
        benches[name] = copy / "benchmarks" / "bench_recrawl_traces.py"
    lines = []

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    with gzip.open(args.fixture, "rt", encoding="utf-8") as f:
        names = list(json.load(f))
    traces = args.trace or sorted(names, key=lambda name: name == "debian")
    budgets = args.budget or list(BUDGETS)
    try:
        if args.jobs:
            with ThreadPoolExecutor(args.jobs) as pool:
                for done in [pool.submit(run, args.work, side, extra, benches[side], trace, budget)
                             for trace in traces for budget in budgets
                             for side, extra in sides.items()]:  # fmt: skip
                    done.result()
    finally:
        for path in scratch:
            shutil.rmtree(path)
    runs = {side: {t: {b: read(args.work, side, t, b) for b in budgets} for t in traces} for side in sides}

    say("mean ± sd over the budgets " + " ".join(budgets) + " (revisits a day per page); "
        "met / MISSED: beyond two standard errors of the mean, else noise")  # fmt: skip
    for side in sides:
        say(f"-- {side} {shlex.join(sides[side])}".rstrip())
        say(f"{'trace':<17}{'runs':>5}{'delay h':>15}{'x best fixed':>22}{'oracle x fixed':>17}"
            f"{'fresh - oracle':>30}")  # fmt: skip
        for trace in traces:
            done = [r for r in runs[side][trace].values() if r]
            if not done:
                continue
            n = len(done)
            d, x, o, f = (spread([r[k] for r in done]) for k in ("delay", "x_fixed", "oracle_x_fixed", "fresh"))
            say(f"{trace:<17}{n:>5}{d[0]:>8.2f} ± {d[1]:4.2f}{x[0]:>8.3f} ± {x[1]:5.3f} "
                f"{verdict(*x, n, 0.75, True):<6}{o[0]:>8.3f} ± {o[1]:5.3f}"
                f"{f[0]:>+11.5f} ± {f[1]:.5f} {verdict(*f, n, 0.0, False):<6}")  # fmt: skip
    ref = next(iter(sides))
    for side in list(sides)[1:]:
        say()
        say(f"{side} against {ref}: mean delay (h) and freshness minus the oracle's, mean ± sd")
        say(f"{'trace':<17}{'runs':>5}{ref + ' delay':>15}{side + ' delay':>15}{'change':>8}"
            f"{ref + ' fresh':>21}{side + ' fresh':>21}{'fetches':>9}")  # fmt: skip
        lower, judged, worse, staler = 0, 0, [], []
        se_worse, se_staler, se_fresher = [], [], []
        for trace in traces:
            common = [b for b in budgets if runs[ref][trace][b] and runs[side][trace][b]]
            if not common:
                continue
            judged += 1
            (md, md_sd), (sd_, sd_sd) = (spread([runs[s][trace][b]["delay"] for b in common]) for s in (ref, side))
            (mf, mf_sd), (sf, sf_sd) = (spread([runs[s][trace][b]["fresh"] for b in common]) for s in (ref, side))
            fetches = max(abs(runs[side][trace][b]["fetches"] / runs[ref][trace][b]["fetches"] - 1) for b in common)
            lower += sd_ < md - TIE
            if sd_ > md + md_sd:
                worse.append(trace)
            if sf < mf - mf_sd:
                staler.append(trace)
            n = len(common)
            if n > 1:  # the two-standard-error rule: Welch's standard error of the difference
                se_delay = math.sqrt((md_sd**2 + sd_sd**2) / n)
                se_fresh = math.sqrt((mf_sd**2 + sf_sd**2) / n)
                if sd_ - md > 2 * se_delay:
                    se_worse.append(f"{trace} ({sd_ - md:+.2f} h, 2 se {2 * se_delay:.2f})")
                if sf - mf < -2 * se_fresh:
                    se_staler.append(f"{trace} ({sf - mf:+.5f}, 2 se {2 * se_fresh:.5f})")
                elif sf - mf > 2 * se_fresh:
                    se_fresher.append(f"{trace} ({sf - mf:+.5f}, 2 se {2 * se_fresh:.5f})")
            say(f"{trace:<17}{len(common):>5}{md:>8.2f} ± {md_sd:4.2f}{sd_:>8.2f} ± {sd_sd:4.2f}"
                f"{100 * (sd_ / md - 1):>+7.1f}%{mf:>+11.5f} ± {mf_sd:.5f}{sf:>+11.5f} ± {sf_sd:.5f}"
                f"{100 * fetches:>8.2f}%")  # fmt: skip
            for s in (ref, side):
                say(f"    {s:<10}" + "  ".join(f"{b}: {runs[s][trace][b]['delay']:.2f}" for b in common))
        ok = lower >= 6 and not worse and not staler and judged == len(names)
        say(f"{side} lower on {lower} of {judged}; higher by more than {ref}'s sd on: "
            f"{', '.join(worse) or 'none'}; freshness lower by more than {ref}'s sd on: "
            f"{', '.join(staler) or 'none'} -> {side} {'becomes the default' if ok else 'stays off'}"
            + ("" if judged == len(names) else f" (the rule needs all {len(names)} traces; {judged} run)"))  # fmt: skip
        # The second rule (issue 17, fixed before the rank-1 profile's run):
        # no trace worse beyond two standard errors of the difference in
        # delay or freshness, and the pip or Sphinx sources fresher beyond
        # two. Standard error of a difference of means: sqrt((sd1^2 + sd2^2) / n).
        helps = [t for t in se_fresher if t.split()[0] in ("pip-src", "sphinx-src")]
        ships = not se_worse and not se_staler and bool(helps) and judged == len(names)
        say(f"by two standard errors: longer on {', '.join(se_worse) or 'none'}; staler on "
            f"{', '.join(se_staler) or 'none'}; fresher on {', '.join(se_fresher) or 'none'} -> {side} "
            f"{'ships' if ships else 'does not ship'} (needs none longer or staler, pip-src or sphinx-src fresher)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
