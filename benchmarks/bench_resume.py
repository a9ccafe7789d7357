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
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--roll", type=int, default=100_000, help="AOPIC_JOURNAL_ROLL_ENTRIES to compare with 0")
    args = parser.parse_args()
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
