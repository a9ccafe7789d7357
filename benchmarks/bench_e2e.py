"""End to end: pages/s of a real `scrapy crawl` with scrapy-aopic vs plain Scrapy.

    python benchmarks/bench_e2e.py [--root DIR ...] [--pages 3000] [--rounds 2] [--base CHECKOUT]
                                   [--addon-setting NAME=VALUE ...]
    python benchmarks/bench_e2e.py --root /usr/share/doc/postgresql-doc-15/html \
        --root /usr/share/doc/python3.11/html --rounds 3     # two sites, about 10 minutes
    python benchmarks/bench_e2e.py --root /usr/share/doc/rust-doc/html --pages 40000   # 20 minutes

Serves a Debian documentation tree (default: postgresql-doc-15, else
rust-doc, under /usr/share/doc; ``apt-get install postgresql-doc-15``, or
without root ``apt-get download postgresql-doc-15 && dpkg-deb -x
postgresql-doc-15*.deb DIR`` and ``--root DIR/usr/share/doc/...``) from a
threaded static server on 127.0.0.1. ``--root`` may be repeated: each site
is measured in turn. It crawls the tree with the example project's
``broad`` spider (every link, staying on 127.0.0.1), at most ``--pages``
responses per crawl, ``CONCURRENT_REQUESTS=16``. Each round runs one crawl
with the add-on (the ADDONS line of example_project/settings.py: everything
on) and one with ``-s ADDONS={}`` (plain Scrapy), alternating the order, for
``--rounds`` rounds. With ``--base CHECKOUT`` (e.g. ``git worktree add
/tmp/base main``) the add-on of that checkout is a third setup in every
round, so that a change is measured against its base in one session.
``--addon-setting NAME=VALUE`` (repeatable) sets a Scrapy setting for the
add-on's crawls only, e.g. ``AOPIC_SIMHASH_ENABLED=False`` to see what an
optional part costs.

It prints pages/s and the crawler's CPU milliseconds per page for each run,
then per setup and round the ratios to plain Scrapy (add-on / plain: pages/s,
CPU per page, CPU per page after start-up; the target is a CPU ratio of at
most 1.05), their medians, and peak memory.

Compare the same pages: every crawl records the URLs it fetched, and each
round says how many both setups fetched and how many only one did. The
default budget (3,000) is above the size of the PostgreSQL manual (1,169
pages) and of the Python manual (530), so both crawls fetch everything. On a
budget smaller than the site, each order fetches a different set of pages;
AOPIC fetches the link-heavy hubs first, and those cost more per page to
parse.

The server shares the 2-core machine with the crawler, and other jobs move
wall-clock figures. The CPU ratio is the robust one: the pages/s ratio a
crawl limited by its own CPU would see. Each round also runs one start-up
crawl per setup (its seed is a missing page: imports, opening, one 404,
closing); the CPU per page *after start-up* subtracts it, which is what a
long crawl sees. Both ratios are printed.
"""

from __future__ import annotations

import argparse
import functools
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ["/usr/share/doc/postgresql-doc-15/html", "/usr/share/doc/rust-doc/html"]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the crawler closing connections at its page budget is expected


def serve(directory: str) -> tuple[ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=directory)
    server = QuietServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def crawl(seed: str, pages: int, setup: str, workdir: Path, tree: Path = ROOT,
          addon_settings: tuple[str, ...] = ()) -> dict:
    """One ``scrapy crawl broad`` from ``tree``'s example project; ``setup``
    is ``plain`` (``ADDONS={}``) or an add-on label (its crawls get the
    ``NAME=VALUE`` of ``addon_settings`` too). Returns its figures and the
    set of URLs it fetched."""
    stem = f"crawl-{setup}-{time.monotonic_ns()}"
    log, fetched = workdir / f"{stem}.log", workdir / f"{stem}.urls"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seed}",
        # Stay on the local copy: links out of it would only measure how this
        # machine's closed network fails (DNS errors, connection timeouts).
        "-a", "allowed_domains=127.0.0.1",
        "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "CONCURRENT_REQUESTS=16",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=16", "-s", "ROBOTSTXT_OBEY=False",
        "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={log}", "-s", "MEMUSAGE_ENABLED=True",
        # The URLs fetched, to check that both setups crawled the same pages.
        "-s", 'EXTENSIONS={"e2e_fetched.FetchedUrls": 0}', "-s", f"E2E_FETCHED_FILE={fetched}",
    ]
    if setup == "plain":
        command += ["-s", "ADDONS={}"]
    else:
        for setting in addon_settings:
            command += ["-s", setting]
    # The crawl logs to LOG_FILE; its stdout is discarded so that it cannot
    # interleave with (or truncate) this script's result lines.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=tree / "example_project", check=True,
                   stdout=subprocess.DEVNULL,
                   env={"PYTHONPATH": f"{tree}:{ROOT / 'benchmarks'}", "PATH": "/usr/bin:/bin"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time of the crawler process alone (the server runs in this one):
    # unlike wall time, other jobs on the machine barely change it.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = log.read_text()
    found = re.search(r"'response_received_count': (\d+)", text)
    responses = int(found.group(1)) if found else 0
    if responses <= 1:  # a start-up run: one 404
        return {"cpu_s": cpu}
    elapsed = float(re.search(r"'elapsed_time_seconds': ([\d.]+)", text).group(1))
    memory = int(re.search(r"'memusage/max': (\d+)", text).group(1))
    known = re.search(r"'aopic/known_urls': (\d+)", text)
    error = re.search(r"'aopic/conservation_error': ([\d.e+-]+)", text)
    return {
        "pages_per_s": responses / elapsed,
        "cpu_s": cpu,
        "cpu_ms_per_page": cpu / responses * 1000,
        "responses": responses,
        "memory_mb": memory / 2**20,
        "known_urls": int(known.group(1)) if known else None,
        "conservation_error": float(error.group(1)) if error else None,
        "urls": set(fetched.read_text().split()),
    }


def run_site(root: str, pages: int, rounds: int, base: Path | None, addon_settings: tuple[str, ...] = ()) -> None:
    """Alternating rounds on one doc tree: plain Scrapy, the add-on, and
    (with ``--base``) the add-on of another checkout."""
    server, seed = serve(root)
    trees = {"plain": ROOT, "scrapy-aopic": ROOT}
    if base is not None:
        trees["base"] = base
    print(f"serving {root} at {seed}; {pages} responses per crawl, {rounds} rounds"
          + (f"; add-on crawls with {', '.join(addon_settings)}" if addon_settings else ""), flush=True)
    results: dict[str, list[dict]] = {setup: [] for setup in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(rounds):
            order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
            for setup in order:
                r = crawl(seed, pages, setup, Path(tmp), trees[setup], addon_settings)
                startup = crawl(seed + "aopic-bench-missing-page.html", pages, setup, Path(tmp), trees[setup],
                                addon_settings)["cpu_s"]
                r["startup_cpu_s"] = startup
                r["steady_cpu_ms_per_page"] = (r["cpu_s"] - startup) / (r["responses"] - 1) * 1000
                results[setup].append(r)
                extra = (f", {r['known_urls']} URLs known, conservation error {r['conservation_error']:.1e}"
                         if setup != "plain" else "")
                print(f"  {setup:<13} {r['pages_per_s']:7.1f} pages/s, "
                      f"{r['cpu_ms_per_page']:6.2f} CPU ms/page ({r['responses']} responses), "
                      f"{r['steady_cpu_ms_per_page']:5.2f} after a start-up of {startup:.2f} s CPU, "
                      f"peak RSS {r['memory_mb']:.0f} MB{extra}", flush=True)
    server.shutdown()
    plain = results["plain"]
    for setup in trees:
        if setup == "plain":
            continue
        runs = results[setup]
        print(f"{setup} / plain Scrapy:", flush=True)
        for i in range(rounds):
            # The comparison is the add-on's cost only if both crawls fetched
            # the same pages (a budget smaller than the site would not).
            common = runs[i]["urls"] & plain[i]["urls"]
            print(f"  round {i + 1}: pages/s {runs[i]['pages_per_s'] / plain[i]['pages_per_s']:.2f}, "
                  f"CPU/page {runs[i]['cpu_ms_per_page'] / plain[i]['cpu_ms_per_page']:.3f}, "
                  f"after start-up {runs[i]['steady_cpu_ms_per_page'] / plain[i]['steady_cpu_ms_per_page']:.3f}; "
                  f"same pages: {len(common)} both, {len(plain[i]['urls'] - common)} only plain, "
                  f"{len(runs[i]['urls'] - common)} only {setup}; "
                  f"peak RSS {runs[i]['memory_mb']:.0f} MB vs {plain[i]['memory_mb']:.0f} MB", flush=True)

        def median(figure: str) -> float:
            return statistics.median(runs[i][figure] / plain[i][figure] for i in range(rounds))

        startups = [statistics.median(r["startup_cpu_s"] for r in results[s]) for s in ("plain", setup)]
        print(f"  median of {rounds} rounds: pages/s ratio {median('pages_per_s'):.2f}; "
              f"CPU per page ratio {median('cpu_ms_per_page'):.3f}, after start-up "
              f"{median('steady_cpu_ms_per_page'):.3f} (target <= 1.05); "
              f"start-up CPU {startups[1]:.2f} s vs {startups[0]:.2f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append",
                        help="directory to serve (a Debian doc tree); repeat for several sites")
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base", type=Path,
                        help="another checkout (e.g. a git worktree of main): its add-on is a third "
                             "setup in every round, so a change is measured in the same session")
    parser.add_argument("--addon-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a Scrapy setting for the add-on's crawls (e.g. AOPIC_SIMHASH_ENABLED=False); repeat")
    args = parser.parse_args()
    roots = args.root or [next((c for c in CANDIDATES if Path(c).is_dir()), None)]
    if roots[0] is None:
        sys.exit("no doc tree found: apt-get install postgresql-doc-15, or pass --root DIR")
    for root in roots:
        run_site(root, args.pages, args.rounds, args.base.resolve() if args.base else None,
                 tuple(args.addon_setting))


if __name__ == "__main__":
    main()
