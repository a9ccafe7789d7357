"""Crash-safe persistence of the in-memory store in ``JOBDIR``.

Two files per generation ``g`` in ``JOBDIR/aopic/``:

* ``snapshot.g.jsonl`` — the whole store at the start of the generation (a
  header line, then one line per account), written to a temporary file,
  fsynced and renamed, so it is either complete or absent;
* ``journal.g.jsonl`` — every change since, one JSON line per store
  operation, written through to the OS as it happens (a killed process loses
  nothing the OS has; ``AOPIC_JOURNAL_SYNC`` adds an fsync for power cuts).

Opening replays the newest complete snapshot and its journal (a torn last
line, from a kill in mid-write, is dropped), gives every lease that was open
back to the frontier — those requests were in flight when the process died,
so they are fetched again, with their cash, and no cash is created — then
starts the next generation. A clean close does the same, so a resume reads
one snapshot and an empty journal.

Scrapy's own JOBDIR writes its queues only at a clean close; this one
survives ``SIGKILL``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .base import AccountView, Credit, FrontierStore, Lease, Link, Totals
from .memory import MemoryStore

logger = logging.getLogger(__name__)

_FILE = re.compile(r"^(snapshot|journal)\.(\d+)\.jsonl$")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _link(data: list) -> Link:
    return Link(data[0], data[1], int(data[2]), data[3])


def _link_data(link: Link) -> list:
    return [link.url, link.host, link.depth, link.request]


class JournaledStore(FrontierStore):
    """A :class:`MemoryStore` whose every change is journaled to ``directory``.

    Reads go straight to the memory store; each successful change is appended
    to the journal before the call returns. Link memory: the links of a visit
    are rebuilt from its journaled credits, a virtual revisit is journaled as
    ``["revisit", url, lambda_tax]`` and snapshots carry the links.
    """

    supports_link_memory = True

    def __init__(self, directory: str | os.PathLike, lambda_targets: str = "pending", *, sync: bool = False):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sync = sync
        self.requeued_on_open = 0
        self.replayed = 0
        self._journal = None
        self.memory, generation = self._load(lambda_targets)
        self.lambda_targets = self.memory.lambda_targets
        if lambda_targets != self.lambda_targets:
            logger.warning(
                "aopic: JOBDIR was started with AOPIC_LAMBDA_TARGETS=%r; keeping it (asked %r)",
                self.lambda_targets,
                lambda_targets,
            )
        self._generation = generation
        self._start_generation()

    # -- files ----------------------------------------------------------------

    def _generations(self) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {"snapshot": set(), "journal": set()}
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if match:
                found[match.group(1)].add(int(match.group(2)))
        return found

    def _load(self, lambda_targets: str) -> tuple[MemoryStore, int]:
        found = self._generations()
        if not found["snapshot"]:
            store = MemoryStore(lambda_targets)
            generation = 0
        else:
            generation = max(found["snapshot"])
            store = self._read_snapshot(self.directory / f"snapshot.{generation}.jsonl")
        journal = self.directory / f"journal.{generation}.jsonl"
        if journal.exists():
            self.replayed = self._replay(store, journal)
        # Leases open at a crash (or a kill) were in flight: fetch them again.
        for url, lease_id in store.open_leases():
            store.settle_requeue(url, lease_id)
            self.requeued_on_open += 1
        if self.replayed or self.requeued_on_open:
            logger.info(
                "aopic: resumed JOBDIR %s: %d accounts, %d journal entries replayed, "
                "%d in-flight requests queued again",
                self.directory,
                store.totals().known,
                self.replayed,
                self.requeued_on_open,
            )
        return store, generation

    @staticmethod
    def _read_snapshot(path: Path) -> MemoryStore:
        with path.open(encoding="utf-8") as lines:
            header = json.loads(next(lines))
            return MemoryStore.restore(header, (json.loads(line) for line in lines))

    def _replay(self, store: MemoryStore, path: Path) -> int:
        count = 0
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.endswith("\n"):
                    logger.warning("aopic: dropped a torn last journal line (%s:%d)", path, number)
                    break
                try:
                    op, *args = json.loads(line)
                    _REPLAY[op](store, *args)
                except (ValueError, KeyError, TypeError) as exc:
                    logger.error(
                        "aopic: journal %s is corrupt at line %d (%s); later changes are lost",
                        path,
                        number,
                        exc,
                    )
                    break
                count += 1
        return count

    def _start_generation(self) -> None:
        """Write a snapshot of the current state as a new generation and
        start its empty journal; remove older generations."""
        if self._journal is not None:
            self._journal.close()
        old = self._generations()
        generation = self._generation + 1
        header, records = self.memory.snapshot()
        path = self.directory / f"snapshot.{generation}.jsonl"
        tmp = path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as out:
            out.write(_dumps(header) + "\n")
            for record in records:
                out.write(_dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        self._generation = generation
        self._journal = (self.directory / f"journal.{generation}.jsonl").open(
            "a", encoding="utf-8", buffering=1
        )
        for kind, generations in old.items():
            for g in generations:
                if g < generation:
                    (self.directory / f"{kind}.{g}.jsonl").unlink(missing_ok=True)

    def _log(self, *entry) -> None:
        self._journal.write(_dumps(entry) + "\n")
        if self.sync:
            os.fsync(self._journal.fileno())

    # -- FrontierStore: reads ---------------------------------------------------

    def totals(self) -> Totals:
        return self.memory.totals()

    def get(self, url: str) -> AccountView | None:
        return self.memory.get(url)

    def knows(self, url: str) -> bool:
        return self.memory.knows(url)

    def iter_accounts(self) -> Iterator[AccountView]:
        return self.memory.iter_accounts()

    def peek(self) -> tuple[str, float] | None:
        return self.memory.peek()

    def open_leases(self) -> list[tuple[str, int]]:
        return self.memory.open_leases()

    # -- FrontierStore: changes ----------------------------------------------

    def inject(self, link: Link, cash: float) -> bool:
        done = self.memory.inject(link, cash)
        if done:
            self._log("inject", _link_data(link), cash)
        return done

    def register(self, link: Link) -> int | None:
        before = self.memory.register(link)
        self._log("register", _link_data(link))
        return before

    def repend(self, link: Link) -> bool:
        done = self.memory.repend(link)
        if done:
            self._log("repend", _link_data(link))
        return done

    def pop(self, ready: Callable[[str], bool], min_share: float = 0.0) -> Lease | None:
        lease = self.memory.pop(ready, min_share)
        if lease is not None:
            self._log("take", lease.url)
        return lease

    def take(self, url: str) -> Lease | None:
        lease = self.memory.take(url)
        if lease is not None:
            self._log("take", url)
        return lease

    def visit_lambda(self) -> float:
        paid = self.memory.visit_lambda()
        if paid:
            self._log("lambda")
        return paid

    def settle_visit(
        self,
        url: str,
        lease_id: int,
        history: float,
        visited_at: float,
        credits: Iterable[Credit],
    ) -> bool:
        credits = list(credits)
        done = self.memory.settle_visit(url, lease_id, history, visited_at, credits)
        if done:
            self._log(
                "visit",
                url,
                history,
                visited_at,
                [_link_data(link) + [amount] for link, amount in credits],
            )
        return done

    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        done = self.memory.settle_failure(url, lease_id, refuse=refuse)
        if done:
            self._log("fail", url, refuse)
        return done

    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        done = self.memory.settle_transfer(url, lease_id, target)
        if done:
            self._log("transfer", url, _link_data(target))
        return done

    def settle_requeue(self, url: str, lease_id: int) -> bool:
        done = self.memory.settle_requeue(url, lease_id)
        if done:
            self._log("requeue", url)
        return done

    def refuse(self, url: str, host: str, depth: int) -> None:
        self.memory.refuse(url, host, depth)
        self._log("refuse", url, host, depth)

    def keep_links(self, enabled: bool) -> None:
        # Configuration, not books: not journaled (a replay keeps the links
        # of journaled visits; the engine switches them off again if asked).
        self.memory.keep_links(enabled)

    def peek_crawled(self) -> tuple[str, float] | None:
        return self.memory.peek_crawled()

    def remembered_links(self, url: str) -> list[Link] | None:
        return self.memory.remembered_links(url)

    def revisit(self, url: str, lambda_tax: float | None) -> tuple[float, float, int] | None:
        done = self.memory.revisit(url, lambda_tax)
        if done is not None:
            self._log("revisit", url, lambda_tax)
        return done

    def close(self) -> None:
        """Give open leases back, write a fresh snapshot, close the journal."""
        for url, lease_id in self.memory.open_leases():
            self.settle_requeue(url, lease_id)
        self._start_generation()
        self._journal.close()


def load_jobdir(directory: str | os.PathLike) -> MemoryStore:
    """The frontier saved in ``directory`` (``JOBDIR/aopic``), read-only:
    nothing is written, leases open at a crash are given back in the copy.
    For tools (``scrapy aopic top``) that inspect a crawl, even a running one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no AOPIC frontier in {directory} (is it a JOBDIR of an AOPIC crawl?)")
    reader = JournaledStore.__new__(JournaledStore)
    reader.directory = directory
    reader.replayed = 0
    reader.requeued_on_open = 0
    store, _ = reader._load("pending")
    return store


def _current_lease(store: MemoryStore, url: str) -> int:
    for lease_url, lease_id in store.open_leases():
        if lease_url == url:
            return lease_id
    raise KeyError(f"no open lease for {url}")


# Replaying an entry applies the same change to the memory store. Lease ids
# are not journaled: the replayed store hands out the same ids in the same
# order, and a settle always refers to the URL's one open lease.
_REPLAY: dict[str, Callable[..., object]] = {
    "inject": lambda s, link, cash: s.inject(_link(link), cash),
    "register": lambda s, link: s.register(_link(link)),
    "repend": lambda s, link: s.repend(_link(link)),
    "take": lambda s, url: s.take(url),
    "lambda": lambda s: s.visit_lambda(),
    "visit": lambda s, url, history, visited_at, credits: s.settle_visit(
        url,
        _current_lease(s, url),
        history,
        visited_at,
        [Credit(_link(c[:4]), c[4]) for c in credits],
    ),
    "fail": lambda s, url, refuse: s.settle_failure(url, _current_lease(s, url), refuse=refuse),
    "transfer": lambda s, url, target: s.settle_transfer(url, _current_lease(s, url), _link(target)),
    "requeue": lambda s, url: s.settle_requeue(url, _current_lease(s, url)),
    "refuse": lambda s, url, host, depth: s.refuse(url, host, depth),
    "revisit": lambda s, url, lambda_tax: s.revisit(url, lambda_tax),
}
