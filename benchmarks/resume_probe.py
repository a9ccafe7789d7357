"""How many crawls resumed from a JOBDIR diverge from the uninterrupted crawl.

    python benchmarks/resume_probe.py [--root /path/to/other/checkout]

150 crawls (discovery cash on and off, journal rolls every 30, 50 or 70
entries, 25 seeds) of the random graph of ``tests/unit/test_discovery_cash``:
200 visits through a ``JournaledStore``, the process killed (the journal as
the OS holds it, the lock released), the ``JOBDIR`` reopened and 100 visits
more, against 300 visits of one ``MemoryStore``. Printed: how many end with
other books (cash and history to 12 digits, as that test's ``_books``
compares them). ``--root`` runs another checkout's code (its tests too).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose code (and tests) to run (default: this one)")
    root = parser.parse_args().root
    if not (root / "tests/unit/test_discovery_cash.py").is_file():
        parser.error(f"{root} is not a checkout of scrapy-aopic (no tests/unit/test_discovery_cash.py)")
    sys.path.insert(0, str(root))  # its package and its tests, imported after the path is set

    from scrapy_aopic.engine import AopicEngine
    from scrapy_aopic.store import MemoryStore
    from scrapy_aopic.store.journal import JournaledStore
    from tests.unit.test_discovery_cash import SHARE, _books, _crawl, link

    runs = diverged = 0
    for share in (SHARE, 0.0):
        for roll in (30, 50, 70):
            for seed in range(25):
                with tempfile.TemporaryDirectory() as tmp:
                    rng = random.Random(seed)
                    engine = AopicEngine(JournaledStore(tmp, roll_entries=roll), discovery_cash=share,
                                         link_memory=True)
                    engine.add_seed(link("u0", "h0"))
                    _crawl(engine, rng, 200)
                    engine.store._journal.flush()
                    engine.store._lock.release()  # the kill
                    engine = AopicEngine(JournaledStore(tmp), discovery_cash=share, link_memory=True)
                    _crawl(engine, rng, 100)
                    reference = AopicEngine(MemoryStore(), discovery_cash=share, link_memory=True)
                    reference.add_seed(link("u0", "h0"))
                    _crawl(reference, random.Random(seed), 300)
                    assert engine.conservation_error() < 1e-9, "unbalanced"
                    runs += 1
                    if _books(engine.store) != _books(reference.store):
                        diverged += 1
                        print(f"diverged: discovery cash {share}, roll {roll}, seed {seed}")
                    engine.store.close()
    print(f"{root}: {diverged} of {runs} resumed crawls diverge from the uninterrupted crawl")


if __name__ == "__main__":
    main()
