"""End to end: pages/s of a real `scrapy crawl` with scrapy-aopic vs plain Scrapy.

    python benchmarks/bench_e2e.py [--root DIR] [--pages 3000] [--rounds 2]
    python benchmarks/bench_e2e.py --root /usr/share/doc/rust-doc/html --pages 40000   # 20 minutes

Serves a Debian documentation tree (default: postgresql-doc-15, else
rust-doc, under /usr/share/doc; ``apt-get install postgresql-doc-15``) from a
threaded static server on 127.0.0.1. It crawls the tree with the example
project's ``broad`` spider (every link, staying on 127.0.0.1), at most
``--pages`` responses per crawl, ``CONCURRENT_REQUESTS=16``. Each round runs
one crawl with the add-on (the ADDONS line of example_project/settings.py:
everything on) and one with ``-s ADDONS={}`` (plain Scrapy), alternating the
order, for ``--rounds`` rounds. It prints pages/s and the crawler's CPU
milliseconds per page for each run, the median ratios, and peak memory.

Compare the same pages: the default (the whole 1,169-page PostgreSQL manual)
makes both crawls fetch everything. On a budget smaller than the site, each
order fetches a different set of pages; AOPIC fetches the link-heavy hubs
first, and those cost more per page to parse.

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


def crawl(seed: str, pages: int, aopic: bool, workdir: Path) -> dict:
    log = workdir / f"crawl-{'aopic' if aopic else 'plain'}-{time.monotonic_ns()}.log"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seed}",
        # Stay on the local copy: links out of it would only measure how this
        # machine's closed network fails (DNS errors, connection timeouts).
        "-a", "allowed_domains=127.0.0.1",
        "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "CONCURRENT_REQUESTS=16",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=16", "-s", "ROBOTSTXT_OBEY=False",
        "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={log}", "-s", "MEMUSAGE_ENABLED=True",
    ]
    if not aopic:
        command += ["-s", "ADDONS={}"]
    # The crawl logs to LOG_FILE; its stdout is discarded so that it cannot
    # interleave with (or truncate) this script's result lines.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=ROOT / "example_project", check=True,
                   stdout=subprocess.DEVNULL,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="directory to serve (a Debian doc tree)")
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = args.root or next((c for c in CANDIDATES if Path(c).is_dir()), None)
    if root is None:
        sys.exit("no doc tree found: apt-get install rust-doc, or pass --root DIR")
    server, seed = serve(root)
    print(f"serving {root} at {seed}; {args.pages} responses per crawl, {args.rounds} rounds", flush=True)
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):
            for aopic in (False, True) if round_number % 2 == 0 else (True, False):
                r = crawl(seed, args.pages, aopic, Path(tmp))
                startup = crawl(seed + "aopic-bench-missing-page.html", args.pages, aopic, Path(tmp))["cpu_s"]
                r["startup_cpu_s"] = startup
                r["steady_cpu_ms_per_page"] = (r["cpu_s"] - startup) / (r["responses"] - 1) * 1000
                results[aopic].append(r)
                extra = f", {r['known_urls']} URLs known, conservation error {r['conservation_error']:.1e}" if aopic else ""
                print(f"  {'scrapy-aopic' if aopic else 'plain Scrapy':<13} {r['pages_per_s']:7.1f} pages/s, "
                      f"{r['cpu_ms_per_page']:6.2f} CPU ms/page ({r['responses']} responses), "
                      f"{r['steady_cpu_ms_per_page']:5.2f} after a start-up of {startup:.2f} s CPU, "
                      f"peak RSS {r['memory_mb']:.0f} MB{extra}", flush=True)
    server.shutdown()
    ratio = statistics.median(results[True][i]["pages_per_s"] / results[False][i]["pages_per_s"]
                              for i in range(args.rounds))
    for i in range(args.rounds):
        print(f"  round {i + 1}: ratio {results[True][i]['pages_per_s'] / results[False][i]['pages_per_s']:.2f}, "
              f"peak RSS {results[True][i]['memory_mb']:.0f} MB vs {results[False][i]['memory_mb']:.0f} MB", flush=True)
    print(f"pages/s ratio scrapy-aopic / plain Scrapy (median of {args.rounds} rounds): {ratio:.2f}", flush=True)
    cpu_ratio = statistics.median(results[False][i]["cpu_ms_per_page"] / results[True][i]["cpu_ms_per_page"]
                                  for i in range(args.rounds))
    print(f"CPU-bound throughput ratio, plain CPU/page / scrapy-aopic CPU/page (median): {cpu_ratio:.2f}"
          " (the pages/s ratio a crawler limited by its own CPU would see; robust to other load)", flush=True)
    steady_ratio = statistics.median(
        results[False][i]["steady_cpu_ms_per_page"] / results[True][i]["steady_cpu_ms_per_page"]
        for i in range(args.rounds)
    )
    startups = [statistics.median(r["startup_cpu_s"] for r in results[m]) for m in (False, True)]
    print(f"the same after start-up (median): {steady_ratio:.2f}; start-up CPU: plain {startups[0]:.2f} s, "
          f"scrapy-aopic {startups[1]:.2f} s", flush=True)


if __name__ == "__main__":
    main()
