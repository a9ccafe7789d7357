"""Run every benchmark, one after the other, and print their figures.

    python benchmarks/run_all.py            # the full set (about an hour and a half on 2 cores)
    python benchmarks/run_all.py --quick    # smaller sizes (about 20 minutes)
    python benchmarks/run_all.py scheduler traps   # only these

Each benchmark is a script of its own in this folder (see its docstring for
what it measures and its options); this runner only calls them. Optional
data: the ordering and end-to-end benchmarks use Debian's documentation
packages when installed (``apt-get install rust-doc python3-doc
postgresql-doc-15``) and skip what is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Where quick runs write their plots and tables (the docs keep the full runs'
#: ones: bench_memory, bench_ordering and bench_recrawl write to
#: docs/_static/bench by default).
QUICK_OUT = str(Path(tempfile.gettempdir()) / "scrapy-aopic-bench")

#: name -> (script, full arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "scheduler": ("bench_scheduler.py", ["--redis"], ["--sizes", "100000", "--redis"]),
    "e2e": ("bench_e2e.py", ["--pages", "3000", "--rounds", "2"], ["--pages", "1000", "--rounds", "1"]),
    "e2e-parts": ("bench_e2e_parts.py", [], ["--rounds", "1"]),
    "page-work": ("bench_page_work.py", [], ["--pages", "100", "--rounds", "1"]),
    "links": ("bench_links.py", [], ["--rounds", "1"]),
    "memory": ("bench_memory.py", [], ["--pages", "8000", "--out", QUICK_OUT]),
    "traps": ("bench_traps.py", [], ["--budget", "800", "--articles", "1000"]),
    "simhash": ("bench_simhash.py", [], ["--quick"]),
    "corpus": ("bench_visibletext_corpus.py", [], ["--pages", "40"]),
    "soft404-corpus": ("bench_soft404_corpus.py", [], ["--pages", "300"]),
    "version-pairs": ("bench_version_pairs.py", [], ["--quick"]),
    "pending-memory": ("bench_pending_memory.py", ["--urls", "1000000"], ["--urls", "100000"]),
    "crawled-memory": ("bench_crawled_memory.py", ["--pages", "100000", "1000000"], ["--pages", "20000"]),
    "ordering": ("bench_ordering.py", [], ["--quick", "--out", QUICK_OUT]),
    "ordering-gap": ("bench_ordering_gap.py", [], ["--graphs", "rust-doc", "--taus", "100"]),
    "redis": ("bench_redis.py", [], ["--runs", "1"]),
    "redis-cluster": ("bench_redis_cluster.py", ["--cycles", "4000", "--rounds", "8"],
                      ["--cycles", "1200", "--rounds", "4", "--memory", "20000"]),
    "redis-script": ("bench_redis_script.py", [], ["--rounds", "1", "--pops", "1000"]),
    "recrawl": ("bench_recrawl.py", [], ["--no-sweep", "--no-sensitivity", "--out", QUICK_OUT]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run, of: {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    unknown = set(args.names) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    failed = []
    for name in args.names or BENCHMARKS:
        script, full, quick = BENCHMARKS[name]
        command = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
        start = time.monotonic()
        if subprocess.run(command).returncode != 0:
            failed.append(name)
        print(f"=== {name}: {time.monotonic() - start:.0f} s", flush=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
