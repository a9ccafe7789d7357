"""Writes the format-2 JOBDIRs next to this file with the code of the
checkout it is run from (they were made from main at 637a029, before
snapshots became exact):

    git worktree add /tmp/old 637a029 && PYTHONPATH=/tmp/old python tests/data/jobdir_format2/make.py

Each case is a crawl killed after a journal roll with leases open (the
lock released as the OS would, nothing flushed but what the journal holds),
and ``expected.json`` the books that code reads back from it: a format-2
JOBDIR must resume as it always did (dividends settled, sums recounted).
"""

import json
import random
import shutil
import sys
from pathlib import Path

from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store.base import Link
from scrapy_aopic.store.journal import JournaledStore

HERE = Path(__file__).resolve().parent
CASES = {  # name: (lambda_targets, priority_horizon, discovery_cash)
    "pending": ("pending", 0.0, 0.05),
    "pending-cash": ("pending-cash", 0.0, 0.0),
    "all-horizon": ("all", 20.0, 0.0),
}


def crawl(engine, rng, steps):
    """Up to three leases open at a time, the oldest settled first."""
    open_leases = []
    for _ in range(steps):
        lease = engine.next()
        if lease is not None:
            open_leases.append(lease)
        if len(open_leases) <= 3 and lease is not None:
            continue
        if not open_leases:
            return
        done = open_leases.pop(0)
        links = [Link(f"http://h{rng.randrange(4)}/u{rng.randrange(150)}", f"h{rng.randrange(4)}", 1)
                 for _ in range(1 + rng.randrange(6))]
        if rng.random() < 0.05:
            engine.fail(done)
        else:
            engine.visit(done, links, now=float(rng.randrange(100)))


def books(store):
    t = store.totals()
    return {
        "totals": [t.injected, t.lambda_cash, t.lambda_history, t.history_sum, t.in_flight,
                   t.known, t.pending, t.leased, t.visits, t.lambda_visits, t.virtual_visits],
        "accounts": sorted([v.url, v.state, v.cash, v.leased, v.history, v.visits] for v in store.iter_accounts()),
    }


def main():
    for name, (targets, horizon, share) in CASES.items():
        jobdir = HERE / name
        shutil.rmtree(jobdir, ignore_errors=True)
        store = JournaledStore(jobdir, targets, roll_entries=40, priority_horizon=horizon)
        engine = AopicEngine(store, discovery_cash=share, link_memory=True, priority_horizon=horizon,
                             clock=lambda: 0.0)
        engine.add_seed(Link("http://h0/u0", "h0", 0))
        crawl(engine, random.Random(7), 90)
        assert store._generation > 1 and store.open_leases(), "a roll and open leases are the point"
        store._journal.flush()
        store._lock.release()  # the kill
        (jobdir / "lock").unlink()
        again = JournaledStore(jobdir, targets, priority_horizon=horizon)
        expected = books(again.memory)
        again._journal.close()
        again._lock.release()
        # Reopening wrote the next generation: put the killed files back.
        shutil.rmtree(jobdir)
        store_dir = jobdir
        del again
        # Re-run the same crawl to the same kill (deterministic) for the files.
        store = JournaledStore(store_dir, targets, roll_entries=40, priority_horizon=horizon)
        engine = AopicEngine(store, discovery_cash=share, link_memory=True, priority_horizon=horizon,
                             clock=lambda: 0.0)
        engine.add_seed(Link("http://h0/u0", "h0", 0))
        crawl(engine, random.Random(7), 90)
        store._journal.flush()
        store._lock.release()
        (store_dir / "lock").unlink()
        (HERE / f"{name}.expected.json").write_text(json.dumps(expected) + "\n")
        print(name, "generation", store._generation, "accounts", store.totals().known,
              "open leases", len(store.open_leases()), file=sys.stderr)


if __name__ == "__main__":
    main()
