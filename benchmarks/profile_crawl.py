"""Where a real crawl's CPU goes, with and without the add-on (issue 18, item 4).

    python benchmarks/profile_crawl.py [--root DIR] [--top 25]

Serves a documentation tree as ``bench_e2e.py`` does (default: the
PostgreSQL 15 manual), crawls it once with plain Scrapy and once with the
add-on, each under ``cProfile``, and prints: the total
profiled CPU of each; by module, what the add-on's crawl spent more than
plain Scrapy's; and the add-on's own functions by cumulative time. Both
crawls fetch the same pages (the whole manual), so the difference is the
add-on's cost and not the crawl order. ``cProfile`` inflates pure-Python
code (a call costs more under it than numpy's or lxml's C work): read the
order and the shares, and ``bench_page_work.py`` / ``bench_e2e.py`` for
sizes. A sampling profiler (``py-spy record -f raw -- python -m scrapy
crawl ...``) distorts less, where it can be installed.
"""

from __future__ import annotations

import argparse
import collections
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import CANDIDATES, ROOT, serve  # noqa: E402


def profile(seed: str, setup: str, workdir: Path) -> pstats.Stats:
    out = workdir / f"{setup}.prof"
    command = [
        sys.executable, "-m", "cProfile", "-o", str(out), "-m", "scrapy", "crawl", "broad",
        "-a", f"seeds={seed}", "-a", "allowed_domains=127.0.0.1", "-s", "CLOSESPIDER_PAGECOUNT=3000",
        "-s", "CONCURRENT_REQUESTS=16", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=16", "-s", "ROBOTSTXT_OBEY=False",
        "-s", "LOG_LEVEL=WARNING",
    ]
    if setup == "plain":
        command += ["-s", "ADDONS={}"]
    subprocess.run(command, cwd=ROOT / "example_project", check=True, stdout=subprocess.DEVNULL,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return pstats.Stats(str(out))


def by_module(stats: pstats.Stats) -> collections.Counter:
    """Own time per module (a package's name outside this project)."""
    spent: collections.Counter = collections.Counter()
    for (file, _line, name), (_cc, _nc, own, _cum, _callers) in stats.stats.items():
        if "scrapy_aopic/" in file:
            key = "scrapy_aopic/" + file.split("scrapy_aopic/", 1)[1]
        elif "site-packages/" in file:
            key = file.split("site-packages/", 1)[1].split("/", 1)[0]
        elif file == "~":
            key = f"(built-in) {name}"
        else:
            key = Path(file).name
        spent[key] += own
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="documentation tree to serve")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    root = args.root or next((c for c in CANDIDATES if Path(c).is_dir()), None)
    if root is None:
        sys.exit("no doc tree found: apt-get install postgresql-doc-15, or pass --root DIR")
    server, seed = serve(root)
    with tempfile.TemporaryDirectory() as tmp:
        plain = profile(seed, "plain", Path(tmp))
        addon = profile(seed, "scrapy-aopic", Path(tmp))
    server.shutdown()
    print(f"{root}: profiled CPU s, plain Scrapy {plain.total_tt:.2f}, with the add-on {addon.total_tt:.2f}")
    a, p = by_module(addon), by_module(plain)
    print(f"\nown time by module, add-on crawl minus plain crawl (s), top {args.top}:")
    for key in sorted(set(a) | set(p), key=lambda k: p.get(k, 0) - a.get(k, 0))[: args.top]:
        print(f"  {a.get(key, 0) - p.get(key, 0):+7.3f}  {key}")
    print(f"\nthe add-on's functions by cumulative time (s), top {args.top}:")
    rows = [(cum, own, calls, file.split("scrapy_aopic/", 1)[1], line, name)
            for (file, line, name), (_cc, calls, own, cum, _callers) in addon.stats.items()
            if "scrapy_aopic/" in file]
    for cum, own, calls, file, line, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {cum:7.3f} cum {own:7.3f} own {calls:8d} calls  {file}:{line} {name}")


if __name__ == "__main__":
    main()
