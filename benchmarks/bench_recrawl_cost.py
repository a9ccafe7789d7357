"""The re-crawl planner's cost per visit, two code bases side by side (issue 17).

Runs the planner on a real change trace exactly as
``bench_recrawl_traces.py`` does (``planner_from_settings`` + ``RecrawlHook``,
``AOPIC_RECRAWL_BUDGET`` = one revisit per page per day, ``next_lease`` as
the frontier calls it) and measures the CPU time (this thread's, so the
other processes on a shared machine count less) spent in the hook and the
planner per visit. Each run is a fresh process importing ``scrapy_aopic``
from one checkout; the checkouts alternate (A B, then B A, ...) so that
machine load hits both alike, and the figure to quote is the ratio of the
medians.

Every run also prints a digest of all the fetch times it produced: equal
digests mean the two checkouts made exactly the same decisions.

    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main
    .venv/bin/python benchmarks/bench_recrawl_cost.py            # this checkout only
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --timetable     # on, both sides
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --no-timetable  # off, both sides
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --burst  # bursts on here
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --burst both  # on both sides
    .venv/bin/python benchmarks/bench_recrawl_cost.py --memory --trace debian --years 0.8  # bytes per page
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --set COCHANGE=true  # here only
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main \
        --fixture benchmarks/data/recrawl_traces_births.json.gz --trace peps   # pages born inside
    .venv/bin/python benchmarks/bench_recrawl_cost.py --against /work/main --instructions --years 0.3

Without ``--timetable`` / ``--no-timetable`` each side runs with its own
default ``AOPIC_RECRAWL_TIMETABLE`` (on since issue 17's judgement; a
checkout from before it: off), so ``--against`` an older main compares the
two defaults.

``--instructions`` counts instead of timing: each side runs under
valgrind's callgrind on the first ``--years`` and on the first
``BASE_YEARS``, and the difference in instructions over the difference in
visits is its instructions per visit. The counts repeat exactly (the same
code, Python and inputs give the same figure whatever the machine is
doing), so a change of 1-2 % shows where CPU time moves by 10 % from run to
run here; about 3 minutes for 0.3 years of the Rust book, two runs at a
time.

``--memory`` runs this checkout once under ``tracemalloc`` (slower: no
timing) and prints the memory still held at the end by what
``scrapy_aopic/recrawl`` allocated (records, histories, profiles, heaps,
queues; the URL strings come from the trace and are not counted), per page.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

from arglists import setting

ROOT = Path(__file__).resolve().parents[1]


def worker(
    root: str, trace_name: str, years: float, last_modified: bool, timetable: bool | None = None,
    burst: bool = False, memory: bool = False, extra: list[str] | None = None, fixture: str | None = None,
) -> dict:
    # scrapy_aopic from ``root``; the trace tools from this checkout's
    # benchmarks (imported after, so their sys.path edit cannot shadow it).
    sys.path.insert(0, root)
    import scrapy_aopic  # noqa: F401

    sys.path.insert(1, str(ROOT / "benchmarks"))
    import time

    from bench_recrawl_traces import run_planner
    from recrawl_traces import YEAR, Page, Trace, load

    trace = (load(Path(fixture), names=[trace_name]) if fixture else load(names=[trace_name]))[0]
    end = min(trace.end, trace.start + years * YEAR)
    trace = Trace(
        trace.name, trace.start, end,
        [Page(p.url, p.host, [t for t in p.changes if t < end], p.born)
         for p in trace.pages if p.born is None or p.born < end],
    )  # fmt: skip
    settings = {"AOPIC_RECRAWL_BUDGET": float(len(trace.pages))}
    if timetable is not None:  # else the checkout's own default
        settings["AOPIC_RECRAWL_TIMETABLE"] = timetable
    if burst:
        settings["AOPIC_RECRAWL_BURST"] = True
    from arglists import settings_of

    settings.update(settings_of(extra or [], "AOPIC_RECRAWL_"))
    if memory:
        import gc
        import tracemalloc

        tracemalloc.start(1)  # the allocating line: the planner's own code for its state
    kept: list = []
    fetches, us, visits = run_planner(trace, settings, last_modified, timer=time.thread_time, keep=kept)
    digest = hashlib.sha256(
        json.dumps([fetches[p.url] for p in trace.pages]).encode()
    ).hexdigest()[:16]
    held = None
    if memory:
        # The planner and hook are kept alive (without ``kept`` they were
        # freed and only the fetch times the benchmark holds were counted:
        # floats the planner's code allocated); the fetch times are dropped.
        del fetches
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, str(Path(scrapy_aopic.__file__).parent / "recrawl" / "*"))]
        )
        held = sum(stat.size for stat in snapshot.statistics("filename"))
        tracemalloc.stop()
    del kept
    return {"us": us, "visits": visits, "digest": digest, "file": scrapy_aopic.__file__,
            "pages": len(trace.pages), "held": held}  # fmt: skip


def worker_command(args, sides: dict[str, str], name: str, years: float) -> list[str]:
    """The command of one worker run of side ``name`` on the first ``years``."""
    return [sys.executable, __file__, "--worker", sides[name], "--trace", args.trace,
            "--years", str(years)] + (["--last-modified"] if args.last_modified else []) + (
        {None: [], True: ["--timetable"], False: ["--no-timetable"]}[args.timetable]) + (
        ["--burst"] if args.burst == "both" or (args.burst and name == "this") else []) + (
        [f"--set={item}" for item in args.set] if name == "this" else []) + (
        ["--fixture", args.fixture] if args.fixture else [])  # fmt: skip


#: the prefix whose instructions are taken off (start-up, imports, the
#: trace's loading and first crawl): what is left is the revisits' own
BASE_YEARS = 0.01


def count_instructions(args, sides: dict[str, str]) -> int:
    """Instructions per visit of each side, counted by callgrind: two runs
    per side (the first ``args.years`` and the first ``BASE_YEARS``), the
    difference over the difference in visits. Counts repeat exactly for the
    same code, Python and inputs, whatever else the machine runs, so a
    change of 1-2 % shows (CPU time here moves 10 % from run to run). What
    is counted: the whole simulation loop between the two prefixes, i.e.
    the hook and planner plus the few lines of the loop around them, and
    the digest of the longer run's fetch times (the same on both sides: a
    ratio is a little closer to 1 than the planner's own)."""
    import shutil
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    if shutil.which("valgrind") is None:
        print("--instructions needs valgrind (Debian: apt-get install valgrind)")
        return 2

    def run(name: str, years: float) -> tuple[int, dict]:
        with tempfile.TemporaryDirectory() as tmp:
            out_file = Path(tmp) / "callgrind.out"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                   *worker_command(args, sides, name, years)]  # fmt: skip
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            totals = [line for line in out_file.read_text().splitlines() if line.startswith("totals:")]
            return int(totals[0].split()[1]), json.loads(done.stdout)

    jobs = [(name, years) for name in sides for years in (args.years, BASE_YEARS)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two valgrinds at once (two cores)
        counted = dict(zip(jobs, pool.map(lambda job: run(*job), jobs)))
    per_visit = {}
    print(f"{args.trace}, first {args.years:g} years less the first {BASE_YEARS:g}, under callgrind:")
    for name in sides:
        (total, out), (base, base_out) = counted[(name, args.years)], counted[(name, BASE_YEARS)]
        visits = out["visits"] - base_out["visits"]
        per_visit[name] = (total - base) / visits
        print(f"  {name:<6} {per_visit[name] / 1000:8.1f} thousand instructions per visit  ({visits} visits; "
              f"decisions {out['digest']})  ({sides[name]})")  # fmt: skip
    if "other" in per_visit:
        same = {counted[(name, args.years)][1]["digest"] for name in sides}
        print(f"  this / other = {per_visit['this'] / per_visit['other']:.3f}; "
              f"decisions {'identical' if len(same) == 1 else 'DIFFER: ' + ', '.join(sorted(same))}")  # fmt: skip
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="another checkout (e.g. /work/main) to compare with")
    parser.add_argument("--trace", default="rust-book")
    parser.add_argument("--years", type=float, default=1.5, help="trace prefix to run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--last-modified", action="store_true")
    parser.add_argument("--timetable", action=argparse.BooleanOptionalAction, default=None,
                        help="AOPIC_RECRAWL_TIMETABLE = True / False on both sides (neither: each "
                             "checkout's own default)")  # fmt: skip
    parser.add_argument("--burst", nargs="?", const="this", choices=("this", "both"),
                        help="AOPIC_RECRAWL_BURST = True on this side only (or on both)")
    parser.add_argument("--memory", action="store_true", help="this checkout once, bytes held per page")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting("AOPIC_RECRAWL_"),
                        help="one more setting, on this side only (NAME without AOPIC_ is read as "
                             "AOPIC_RECRAWL_NAME)")  # fmt: skip
    parser.add_argument("--fixture", help="traces file (default: recrawl_traces.py's fixture)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind's callgrind instead of timing "
                             "(deterministic; slow: use a short --years)")  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker or args.memory:
        out = worker(args.worker or str(ROOT), args.trace, args.years, args.last_modified, args.timetable,
                     bool(args.burst), args.memory, args.set, args.fixture)  # fmt: skip
        if args.worker:
            print(json.dumps(out))
        else:
            print(f"{args.trace}, first {args.years:g} years: {out['pages']} pages, {out['visits']} visits; "
                  f"held by scrapy_aopic/recrawl at the end: {out['held'] / 1024:.0f} KiB, "
                  f"{out['held'] / out['pages']:.0f} B per page")  # fmt: skip
        return 0
    sides = {"this": str(ROOT)}
    if args.against:
        sides = {"other": str(Path(args.against).resolve()), "this": str(ROOT)}
    if args.instructions:
        return count_instructions(args, sides)
    results: dict[str, list[dict]] = {name: [] for name in sides}
    names = list(sides)
    for rep in range(args.repeats):
        for name in names if rep % 2 == 0 else names[::-1]:
            cmd = worker_command(args, sides, name, args.years)
            out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            results[name].append(out)
            print(f"  run {rep + 1} {name:<6} {out['us']:7.1f} µs/visit  {out['visits']} visits  "
                  f"decisions {out['digest']}  ({Path(out['file']).parents[1]})", flush=True)  # fmt: skip
    medians = {name: statistics.median(r["us"] for r in runs) for name, runs in results.items()}
    print(f"{args.trace}, first {args.years:g} years, {args.repeats} runs each (CPU µs per visit, median):")
    for name, value in medians.items():
        print(f"  {name:<6} {value:7.1f}  ({sides[name]})")
    if "other" in medians:
        same = {r["digest"] for runs in results.values() for r in runs}
        print(f"  this / other = {medians['this'] / medians['other']:.2f}; "
              f"decisions {'identical' if len(same) == 1 else 'DIFFER: ' + ', '.join(sorted(same))}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
