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

import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_aopic.engine import AopicEngine  # noqa: E402
from scrapy_aopic.store import MemoryStore  # noqa: E402
from scrapy_aopic.store.journal import JournaledStore  # noqa: E402
from tests.unit.test_discovery_cash import SHARE, _books, _crawl, link  # noqa: E402


def main() -> None:
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
    print(f"{ROOT}: {diverged} of {runs} resumed crawls diverge from the uninterrupted crawl")


if __name__ == "__main__":
    main()
