"""Where a crawl's CPU goes, part by part, measured inside the crawl (issue 18, item 4).

    python benchmarks/bench_e2e_parts.py [--root DIR] [--rounds 2] [--base CHECKOUT]
                                         [--gc] [--gc-freeze] [--links]
                                         [--addon-setting NAME=VALUE ...]

Crawls a documentation tree as ``bench_e2e.py`` does (same spider, same
settings, every page; default the PostgreSQL 15 manual) with plain Scrapy,
the add-on with near-duplicate detection off (``AOPIC_SIMHASH_ENABLED=False``),
the add-on with its defaults and, with ``--base``, another checkout's add-on
with its defaults, alternating, and prints for each setup (median of the
rounds) the crawl's CPU ms per page and, from the extension
``e2e_parts.py``, the thread CPU ms per page of each timed part *inside the
crawl*: Scrapy's parse, the near-duplicate middleware and its steps, the
soft-404 middleware, the frontier's per-page link work, and the garbage
collector by generation. In-process benchmarks (``bench_page_work.py``)
time the same steps in a tight loop, where their code and data stay in the
CPU's caches: inside a crawl, between Scrapy's and Twisted's work, they
cost more, and only this says how much.

A part timed inside another is printed a second time as ``PART [inside:
OUTER]`` (a collection too, as ``gc [inside: OUTER]``): Scrapy's parse runs
inside the near-duplicate middleware, the first to ask for the selector,
and ``near-dup: rest`` is the middleware's time net of every part inside it.
``--links`` also times the steps of the frontier's link work (canonical
key, each link filter, ``store.knows``, the ledger's credit...; wrappers of
about 1 µs a call, per link: they add to the frontier's total).

``--gc`` counts, before every full collection, the objects the collector
tracks, by type (what a full pass traverses; the count costs CPU, so read
the timings from a run without it). ``--gc-freeze`` makes every setup call
``gc.freeze()`` as the spider opens: what a process-wide change would save
plain Scrapy and the add-on alike (a measurement, not the add-on's setting).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import CANDIDATES, ROOT, serve  # noqa: E402


def crawl(seed: str, tree: Path, settings: list[str], workdir: Path, census: bool = False, links: bool = False) -> dict:
    stem = workdir / f"crawl-{time.monotonic_ns()}"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seed}", "-a", "allowed_domains=127.0.0.1",
        "-s", "CLOSESPIDER_PAGECOUNT=3000", "-s", "CONCURRENT_REQUESTS=16", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=16",
        "-s", "ROBOTSTXT_OBEY=False", "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={stem}.log",
        "-s", 'EXTENSIONS={"e2e_parts.CrawlParts": 0}', "-s", f"E2E_PARTS_FILE={stem}.json", *settings,
    ]
    if census:
        command += ["-s", "E2E_PARTS_CENSUS=True"]
    if links:
        command += ["-s", "E2E_PARTS_LINKS=True"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=tree / "example_project", check=True, stdout=subprocess.DEVNULL,
                   env={"PYTHONPATH": f"{tree}:{ROOT / 'benchmarks'}", "PATH": "/usr/bin:/bin"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = Path(f"{stem}.log").read_text()
    pages = int(log.split("'response_received_count': ", 1)[1].split(",", 1)[0])
    parts = json.loads(Path(f"{stem}.json").read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    census = parts.pop("gc census")
    figures = {"crawl CPU": cpu * 1000 / pages}
    figures.update({part: ms / pages for part, (ms, _calls) in parts.items()})
    whole = "near-dup: whole middleware"
    if whole in figures:
        # What the middleware costs beyond its timed steps, and beyond
        # Scrapy's parse, which runs inside it (the first to ask for the
        # selector) but which the spider would pay anyway.
        inside = sum(value for part, value in figures.items() if part.endswith(f" [inside: {whole}]"))
        figures["near-dup: rest (whole minus the parts inside it)"] = figures[whole] - inside
    # The collector per page: passes by generation, and at close the objects
    # it tracks (a full pass visits each) and the most numerous types.
    figures.update({f"{part}: passes a crawl": calls for part, (_ms, calls) in parts.items()
                    if part.startswith("gc generation")})
    figures.update({f"{part}: collected": n / pages for part, n in census["collected"].items()})
    figures["gc: tracked objects at close"] = census["tracked"]
    figures["gc: of which in generation 2"] = census["oldest generation"]
    if census["full passes"]:  # --gc: counted before every full pass
        figures["gc: tracked objects, largest full pass"] = max(census["full passes"])
        figures["gc: tracked objects, median full pass"] = statistics.median(census["full passes"])
        figures["gc types"] = census["types at the largest full pass"]
    else:
        figures["gc types"] = census["types"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="documentation tree to serve")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base", type=Path, help="another checkout: its add-on (defaults) is one more setup")
    parser.add_argument("--gc", action="store_true",
                        help="count the tracked objects before every full collection (this costs CPU: read the "
                             "timings of a run without it) and print them by type, per setup")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="every setup calls gc.freeze() as the spider opens (a process-wide measurement, "
                             "plain Scrapy included; not what the add-on does)")
    parser.add_argument("--links", action="store_true",
                        help="time the steps of the frontier's link work too (per-call wrappers: they add to "
                             "the frontier's total; read that from a run without them)")
    parser.add_argument("--addon-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a Scrapy setting for every add-on crawl; repeat")
    args = parser.parse_args()
    root = args.root or next((c for c in CANDIDATES if Path(c).is_dir()), None)
    if root is None:
        sys.exit("no doc tree found: apt-get install postgresql-doc-15, or pass --root DIR")
    extra = [x for setting in args.addon_setting for x in ("-s", setting)]
    setups = {
        "plain Scrapy": (ROOT, ["-s", "ADDONS={}"]),
        "add-on, near-dups off": (ROOT, extra + ["-s", "AOPIC_SIMHASH_ENABLED=False"]),
        "add-on": (ROOT, extra),
    }
    if args.base is not None:
        setups["base add-on"] = (args.base.resolve(), extra)
    server, seed = serve(root)
    results: dict[str, list[dict]] = {name: [] for name in setups}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):
            order = list(setups) if round_number % 2 == 0 else list(reversed(setups))
            for name in order:
                tree, settings = setups[name]
                frozen = ["-s", "E2E_PARTS_GC_FREEZE=True"] if args.gc_freeze else []
                results[name].append(crawl(seed, tree, settings + frozen, Path(tmp), args.gc, args.links))
                print(f"  round {round_number + 1}: {name:<22} {results[name][-1]['crawl CPU']:.2f} CPU ms a page",
                      flush=True)
    server.shutdown()
    parts = sorted({part for runs in results.values() for run in runs for part in run} - {"gc types"},
                   key=lambda part: (part != "crawl CPU", part))
    print(f"\n{root}: CPU ms a page, median of {args.rounds} rounds (parts: thread CPU inside the crawl)")
    print(f"{'':42s}" + "".join(f"{name:>24s}" for name in setups))
    for part in parts:
        cells = []
        for name in setups:
            values = [run[part] for run in results[name] if part in run]
            cells.append(f"{statistics.median(values):24.3f}" if values else f"{'-':>24s}")
        print(f"{part:42s}" + "".join(cells))
    if args.gc:
        # Tracked objects by type at the largest full pass: what the add-on
        # gives every full pass to traverse, against plain Scrapy's heap.
        census = {name: {} for name in setups}
        for name in setups:
            for kind in {kind for run in results[name] for kind in run["gc types"]}:
                census[name][kind] = statistics.median(run["gc types"].get(kind, 0) for run in results[name])
        kinds = sorted({kind for counts in census.values() for kind in counts},
                       key=lambda kind: -max(counts.get(kind, 0) for counts in census.values()))
        print("\ntracked objects by type at the crawl's largest full collection "
              "(median of rounds; the 60 most numerous of each setup)")
        print(f"{'':58s}" + "".join(f"{name:>24s}" for name in setups))
        for kind in kinds[:40]:
            print(f"{kind[-58:]:58s}" + "".join(f"{census[name].get(kind, 0):24.0f}" for name in setups))


if __name__ == "__main__":
    main()
