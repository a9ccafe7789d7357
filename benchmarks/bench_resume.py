"""Resume time and journal size of a long JOBDIR crawl, with and without
journal rolling (``AOPIC_JOURNAL_ROLL_ENTRIES``), in the same run.

    python benchmarks/bench_resume.py [--pages 100000] [--links 10] [--in-flight 16]

The crawl is driven through the engine and the journaled store directly
(the frontier's own calls, without HTTP: a real 100k-page crawl takes tens
of minutes here, and the journal does not know the difference): pages of a
generated graph (``--links`` links each, half to known pages) are visited
greedily with ``--in-flight`` leases open, lambda visited when due, until
``--pages`` pages are crawled. Then the process "dies" (the journal is
closed without a snapshot, the lock released as the OS would) and the
``JOBDIR`` is reopened, timed. Printed per policy: journal and snapshot bytes
on disk at the kill, entries replayed, resume seconds, and the ratio of
rolling to never rolling.

    python benchmarks/bench_resume.py --against /path/to/other/checkout [--pages 30000] [--repeat 3]

compares this checkout's snapshots with another's (main's, say) side by
side: for each ``AOPIC_LAMBDA_TARGETS`` a crawl of ``--pages`` pages, then a
snapshot written (a roll: process CPU seconds, and its size), ``--pages``/10
more pages journaled, the kill and the resume (CPU seconds: read, check,
restore, replay, and the next generation's snapshot). Each run is its own
process, the two checkouts interleaved, ``--repeat`` times; printed are the
medians and the ratios this / other.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The checkout whose code runs (``--root``: a worker of ``--against``).
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_aopic.engine import AopicEngine  # noqa: E402
from scrapy_aopic.store.base import Link  # noqa: E402
from scrapy_aopic.store.journal import JournaledStore  # noqa: E402


def _url(i: int) -> str:
    return f"http://h{i % 500}.example/page/{i}"


def crawl(directory: Path, pages: int, links: int, in_flight: int, roll_entries: int) -> dict:
    rng = random.Random(5)
    store = JournaledStore(directory, roll_entries=roll_entries)
    engine = AopicEngine(store)
    engine.add_seed(Link(_url(0), "h0.example", 0))
    known = 1
    leases = []
    crawled = 0
    start = time.perf_counter()
    while crawled < pages:
        engine.visit_lambda_if_due()
        lease = store.pop(lambda host: True)
        if lease is not None:
            leases.append(lease)
        if not leases:
            break
        if len(leases) > in_flight or lease is None:
            done = leases.pop(0)
            out = []
            for _ in range(links):
                if rng.random() < 0.5:
                    target = rng.randrange(known)
                else:
                    target = known
                    known += 1
                out.append(Link(_url(target), f"h{target % 500}.example", 1))
            engine.visit(done, out)
            crawled += 1
    crawl_s = time.perf_counter() - start
    # The kill: no snapshot, no release but the OS's.
    store._journal.close()
    store._lock.release()
    on_disk = {p.name.split(".")[0]: p.stat().st_size for p in directory.glob("*.jsonl")}
    start = time.perf_counter()
    again = JournaledStore(directory, roll_entries=roll_entries)
    resume_s = time.perf_counter() - start
    result = {
        "crawl_s": crawl_s,
        "journal_bytes": on_disk.get("journal", 0),
        "snapshot_bytes": on_disk.get("snapshot", 0),
        "generations": store._generation,
        "replayed": again.replayed,
        "resume_s": resume_s,
        "accounts": again.totals().known,
    }
    again.close()
    return result


class Crawler:
    """The crawl of :func:`crawl`, resumable: ``run(pages)`` crawls that many more."""

    def __init__(self, engine, links, in_flight):
        self.engine, self.links, self.in_flight = engine, links, in_flight
        self.rng = random.Random(5)
        self.known = 1
        self.leases = []

    def run(self, pages):
        engine, rng, leases = self.engine, self.rng, self.leases
        crawled = 0
        while crawled < pages:
            engine.visit_lambda_if_due()
            lease = engine.store.pop(lambda host: True)
            if lease is not None:
                leases.append(lease)
            if not leases:
                return
            if len(leases) > self.in_flight or lease is None:
                done = leases.pop(0)
                out = []
                for _ in range(self.links):
                    if rng.random() < 0.5:
                        target = rng.randrange(self.known)
                    else:
                        target = self.known
                        self.known += 1
                    out.append(Link(_url(target), f"h{target % 500}.example", 1))
                engine.visit(done, out)
                crawled += 1


def snapshot_and_resume(directory: Path, targets: str, pages: int, links: int, in_flight: int) -> dict:
    """CPU seconds of one snapshot (a roll) after ``pages`` pages, and of the
    resume after ``pages // 10`` more and a kill."""
    store = JournaledStore(directory, targets)
    engine = AopicEngine(store)
    engine.add_seed(Link(_url(0), "h0.example", 0))
    crawler = Crawler(engine, links, in_flight)
    crawler.run(pages)
    start = time.process_time()
    store._start_generation()  # what a roll does
    snapshot_cpu = time.process_time() - start
    snapshot_bytes = store._snapshot_bytes
    crawler.run(pages // 10)
    store._journal.close()
    store._lock.release()  # the kill
    start = time.process_time()
    again = JournaledStore(directory, targets)
    resume_cpu = time.process_time() - start
    result = {"snapshot_cpu": snapshot_cpu, "snapshot_bytes": snapshot_bytes, "resume_cpu": resume_cpu,
              "replayed": again.replayed, "accounts": again.totals().known}
    again.close()
    return result


def against(args) -> None:
    here = Path(__file__).resolve().parents[1]
    trees = {"other": Path(args.against).resolve(), "this": here}
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for targets in ("pending", "pending-cash"):
            for name, tree in trees.items():  # interleaved: the machine's load hits both alike
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", "--root", str(tree), "--targets", targets,
                     "--pages", str(args.pages), "--links", str(args.links), "--in-flight", str(args.in_flight)],
                    check=True, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                ).stdout
                runs.setdefault((targets, name), []).append(json.loads(out))
    print(f"JOBDIR snapshot and resume, {args.pages:,} pages then {args.pages // 10:,} journaled, "
          f"{args.links} links, {args.in_flight} in flight; median of {args.repeat} interleaved runs "
          f"(process CPU s); other = {trees['other']}")
    print(f"{'targets':>13} {'tree':>6} {'accounts':>9} {'snapshot MB':>12} {'snapshot s':>11} {'resume s':>9}")
    for targets in ("pending", "pending-cash"):
        med = {}
        for name in trees:
            rows = runs[targets, name]
            med[name] = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
            m = med[name]
            print(f"{targets:>13} {name:>6} {m['accounts']:>9,.0f} {m['snapshot_bytes'] / 1e6:>12.1f} "
                  f"{m['snapshot_cpu']:>11.2f} {m['resume_cpu']:>9.2f}")
        this, other = med["this"], med["other"]
        print(f"{targets:>13} this / other: snapshot size {this['snapshot_bytes'] / other['snapshot_bytes']:.2f}, "
              f"snapshot time {this['snapshot_cpu'] / other['snapshot_cpu']:.2f}, "
              f"resume time {this['resume_cpu'] / other['resume_cpu']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=None, help="100,000 (30,000 with --against)")
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--roll", type=int, default=100_000, help="AOPIC_JOURNAL_ROLL_ENTRIES to compare with 0")
    parser.add_argument("--against", help="another checkout to compare snapshot and resume times with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--targets", default="pending", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pages is None:
        args.pages = 30_000 if args.against or args.worker else 100_000
    if args.worker:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(snapshot_and_resume(Path(tmp), args.targets, args.pages, args.links, args.in_flight)))
        return
    if args.against:
        against(args)
        return
    rows = {}
    for name, roll in (("never rolls", 0), (f"rolls at {args.roll:,}", args.roll)):
        with tempfile.TemporaryDirectory() as tmp:
            rows[name] = crawl(Path(tmp), args.pages, args.links, args.in_flight, roll)
    print(f"JOBDIR resume after a kill: {args.pages:,} pages crawled, {args.links} links each, "
          f"{args.in_flight} in flight")
    print(f"{'journal':>20} {'accounts':>10} {'gens':>5} {'journal MB':>11} {'snapshot MB':>12} "
          f"{'replayed':>10} {'resume s':>9} {'crawl s':>8}")
    for name, r in rows.items():
        print(f"{name:>20} {r['accounts']:>10,} {r['generations']:>5} {r['journal_bytes'] / 1e6:>11.1f} "
              f"{r['snapshot_bytes'] / 1e6:>12.1f} {r['replayed']:>10,} {r['resume_s']:>9.2f} {r['crawl_s']:>8.1f}")
    never, rolled = rows.values()
    print(f"rolling / never: resume time {rolled['resume_s'] / never['resume_s']:.2f}, "
          f"journal size {rolled['journal_bytes'] / max(1, never['journal_bytes']):.2f}, "
          f"crawl time {rolled['crawl_s'] / never['crawl_s']:.2f}")


if __name__ == "__main__":
    main()
