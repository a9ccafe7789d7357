"""Crash-safe persistence of the in-memory store in ``JOBDIR``.

Files in ``JOBDIR/aopic/``, per generation ``g``:

* ``snapshot.g.jsonl`` — the whole store at the start of the generation: a
  header line (the store's totals, the crawl's identity and ``g``), one line
  per account, and a trailer written last with the number of records and the
  SHA-256 of every byte before it. It is written to a temporary file,
  fsynced and renamed, and checked when read: a snapshot that is truncated
  (even at a line boundary), padded or edited is refused, never half-loaded.
  It holds the store exactly as it is held (format 3: raw cash and dividend
  marks, lambda's dividend, the pending-cash sum's partials, open leases;
  :meth:`MemoryStore.snapshot`), each value checked when read, so that with
  the journal replayed on it a resume goes on bit for bit.
* ``journal.g.jsonl`` — every change since, one JSON line per store
  operation after a header line naming the crawl and ``g``, written through
  to the OS as it happens (a killed process loses nothing the OS has;
  ``AOPIC_JOURNAL_SYNC`` adds an fsync for power cuts). It is created by its
  generation and never appended to by another one.
* ``lock`` — held (``flock``) by the one process using the ``JOBDIR``; the
  operating system releases it when that process dies.

Opening reads the newest snapshot, replays its journal, gives every lease that
was open back to the frontier (those requests were in flight when the
process died: they are fetched again, with their cash, and no cash is
created), then starts the next generation. A clean close does the same, and
a long crawl rolls to a new generation when its journal grows
(``AOPIC_JOURNAL_ROLL_ENTRIES``), so resuming never replays more than that.

What is damaged is said, never silently skipped:

* a torn last journal line (a kill in mid-write, whatever bytes it holds) is
  dropped: it was never acknowledged;
* a bad line inside the journal (invalid UTF-8 or JSON, a non-finite number,
  an unknown operation) ends the replay there: the changes before it are a
  consistent state; the file is kept as ``journal.g.jsonl.corrupt`` and the
  log says how many entries were lost and which URLs will be fetched again;
* anything that leaves no consistent state — no snapshot but a journal, a
  journal of another generation or crawl, a damaged snapshot — stops the
  crawl with :class:`JobdirError`, which names the file and the way out
  (``AOPIC_JOBDIR_RECOVERY``: ``"fresh"`` moves the damaged state aside and
  starts again, ``"salvage"`` keeps every record that reads back and passes
  its checks, even when the header is lost, and says what it lost).

Scrapy's own JOBDIR writes its queues only at a clean close; this one
survives ``SIGKILL``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .base import ALIAS, CRAWLED, FAILED, LEASED, PENDING, REFUSED, AccountView, Credit, FrontierStore, Lease, Link, Totals
from .memory import MemoryStore, checked_amount

logger = logging.getLogger(__name__)

_FILE = re.compile(r"^(snapshot|journal)\.(\d+)\.jsonl$")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
#: Version of the files' layout (headers and trailer); files without it were
#: written by scrapy-aopic 0.1 and are read without the checks. 3: the
#: snapshot holds the store exactly as it was held (raw cash and dividend
#: marks, lambda's dividend, the pending-cash sum, open leases), so a resume
#: goes on bit for bit; 2 (and 0.1) are read as before, dividends settled.
FORMAT = 3
#: Key of the crawl's identity in a snapshot header.
IDENTITY = "aopic_jobdir"
#: What the error messages offer as ways out.
WAY_OUT = (
    "To start this crawl afresh (the damaged files are moved aside, not deleted), run it with "
    "-s AOPIC_JOBDIR_RECOVERY=fresh; to keep what can still be read, -s AOPIC_JOBDIR_RECOVERY=salvage "
    "(see docs/troubleshooting.rst)."
)
RECOVERY_MODES = (None, "fresh", "salvage")


class JobdirError(RuntimeError):
    """A ``JOBDIR`` that cannot be used as it is: the message names the file
    and the way out."""


class JobdirInUse(JobdirError):
    """Another process holds the ``JOBDIR``."""


class DamagedFile(ValueError):
    """A snapshot or journal line that does not read back as written."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {text}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


#: Built once: ``json.loads`` with these options builds a decoder (and its
#: scanner) per call, half the time of parsing a snapshot's short lines.
_decode = json.JSONDecoder(parse_float=_finite, parse_constant=_reject_constant).decode


def parse_line(raw: bytes) -> Any:
    """One JSON line as written by :data:`_dumps`: UTF-8, finite numbers only
    (raises :class:`ValueError` otherwise)."""
    return _decode(raw.decode("utf-8"))


def _link(data: list) -> Link:
    return Link(data[0], data[1], int(data[2]), data[3])


def _link_data(link: Link) -> list:
    return [link.url, link.host, link.depth, link.request]


# -- the lock ------------------------------------------------------------------------


class JobdirLock:
    """An exclusive ``flock`` on ``directory/lock``, held while the store is
    open; the operating system drops it when the process dies, so a killed
    crawl never leaves its ``JOBDIR`` locked."""

    def __init__(self, directory: Path):
        self.path = directory / "lock"
        self._file = None

    def acquire(self) -> None:
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise JobdirInUse(
                f"aopic: JOBDIR {self.path.parent.parent} is in use by {holder} (lock {self.path}). "
                "Two crawls on one JOBDIR would requeue each other's requests and delete each other's "
                "files: stop the other crawl first, or give this one its own JOBDIR."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


# -- snapshots -----------------------------------------------------------------------


def write_snapshot(path: Path, header: dict, records: Iterable[list]) -> int:
    """Write a self-checking snapshot (temporary file, fsync, rename);
    returns the number of records. The header's ``"exact"`` part (format 3)
    is a line of its own after it: a damaged header then loses lambda's
    cash, not what the records' raw cash is owed (salvage settles it)."""
    header = dict(header)
    exact = header.pop("exact", None)
    tmp = path.with_suffix(".jsonl.tmp")
    digest = hashlib.sha256()
    count = 0
    with tmp.open("wb") as out:

        def put(line: str) -> None:
            data = line.encode("utf-8") + b"\n"
            digest.update(data)
            out.write(data)

        put(_dumps(header))
        if exact is not None:
            put(_dumps({"exact": exact}))
        for record in records:
            put(_dumps(record))
            count += 1
        out.write((_dumps({"end": {"records": count, "sha256": digest.hexdigest()}}) + "\n").encode("utf-8"))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return count


def read_snapshot(path: Path) -> tuple[dict, list[list]]:
    """``(header, records)`` of a snapshot. A snapshot that is damaged in
    any way (a bad line, a missing or wrong trailer) raises
    :class:`DamagedFile` (see :func:`salvage_snapshot`)."""
    digest = hashlib.sha256()
    header: dict | None = None
    records: list[list] = []
    trailer = None
    damage = None
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            if trailer is not None:
                damage = f"line {number}: data after the end marker"
                break
            if not raw.endswith(b"\n"):
                damage = f"line {number}: cut off in mid-line"
                break
            try:
                value = parse_line(raw)
            except ValueError as exc:
                damage = f"line {number}: {exc}"
                break
            if number == 1:
                if not isinstance(value, dict) or "lambda_targets" not in value:
                    damage = "line 1: not a snapshot header"
                    break
                header = value
            elif number == 2 and isinstance(value, dict) and "exact" in value:
                header["exact"] = value["exact"]
            elif isinstance(value, dict) and "end" in value and header.get(IDENTITY):
                trailer = value["end"]
                continue
            elif isinstance(value, list) and len(value) >= 10:
                records.append(value)
            else:
                damage = f"line {number}: not an account record"
                break
            digest.update(raw)
    if damage is None and header is None:
        damage = "empty file"
    if damage is None and header.get(IDENTITY):  # format 2: the trailer proves it whole
        if trailer is None:
            damage = f"no end marker after {len(records)} records (the file was cut short)"
        elif not isinstance(trailer, dict) or trailer.get("records") != len(records):
            damage = f"{len(records)} records where the end marker counts {trailer.get('records')!r}"
        elif trailer.get("sha256") != digest.hexdigest():
            damage = "checksum mismatch (the file was changed after it was written)"
    if damage is not None:
        raise DamagedFile(damage)
    return header, records


class Salvaged:
    """What :func:`salvage_snapshot` could read from a damaged snapshot."""

    def __init__(self) -> None:
        #: the exact part of a format-3 snapshot (line 2), if it was read
        self.exact: dict | None = None
        #: the header, or ``None`` when line 1 is unreadable or not a header
        self.header: dict | None = None
        #: records that passed :func:`check_record`, in file order
        self.records: list[list] = []
        #: what was wrong, one entry per damaged place
        self.damage: list[str] = []
        #: lines that held, or may have held, an account and were not kept
        self.lost = 0
        #: URLs of those that still named one
        self.lost_urls: list[str] = []
        #: the record count of the trailer, if it was read
        self.expected: int | None = None

    def lose(self, damage: str, value: Any) -> None:
        """A line that held, or may have held, an account, not kept:
        ``damage`` says where and why; its URL is kept if it names one."""
        self.damage.append(damage)
        self.lost += 1
        if isinstance(value, list) and value and isinstance(value[0], str):
            self.lost_urls.append(value[0])


def salvage_snapshot(path: Path) -> Salvaged:
    """Every account record of a damaged snapshot that reads back and
    passes :func:`check_record`, read past bad lines (a snapshot is one
    point in time: a record after a damaged line is as good as one
    before). The checksum cannot vouch for any of it, so each record is
    checked on its own, and every line not kept is counted (by the
    trailer's count when it was read)."""
    out = Salvaged()
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            if not raw.endswith(b"\n"):
                out.damage.append(f"line {number}: cut off in mid-line")
                out.lost += 1  # perhaps a record: counted, to be safe
                break
            try:
                value = parse_line(raw)
            except ValueError as exc:
                value, error = None, str(exc)
            else:
                error = None
            if number == 1:
                if _header_ok(value):
                    out.header = value
                elif isinstance(value, dict) and "lambda_targets" in value:
                    out.damage.append("line 1: the header's totals are not amounts or counts")
                else:
                    out.damage.append(f"line 1: {error or 'not a snapshot header'}")
                continue
            if number == 2 and isinstance(value, dict) and isinstance(value.get("exact"), dict):
                out.exact = value["exact"]
                continue
            if isinstance(value, dict) and isinstance(value.get("end"), dict):
                count = value["end"].get("records")
                out.expected = count if type(count) is int and count >= 0 else None
                continue
            try:
                if error is not None:
                    raise ValueError(error)
                out.records.append(check_record(value))
            except ValueError as exc:
                out.lose(f"line {number}: {exc}", value)
    if out.expected is not None:
        # The trailer counts the records written: lines lost whole (a cut)
        # are counted by it; more lines than it counts were added.
        out.lost = max(out.lost, out.expected - len(out.records))
    elif not out.damage or "cut off" not in out.damage[-1]:
        out.damage.append("no end marker (the file was cut short: the records after it are not counted)")
    return out


def check_record(value: Any) -> list:
    """``value`` if it is a snapshot's account record whose fields are what
    a store writes (finite cash and history not below zero, counters and
    sequence numbers not below zero, a state an account can be saved in);
    raises :class:`ValueError` otherwise."""
    # Runs for every record of a resume: the checks inline, their messages
    # built only for a value that fails (type() in (int, float): JSON's
    # numbers, never a bool, as checked_amount has it).
    if not isinstance(value, list) or len(value) < 10:
        raise ValueError("not an account record")
    url, state, cash, history, last_visit, visits, depth, seq, host, _request = value[:10]
    if not isinstance(url, str) or not url or not isinstance(host, str):
        raise ValueError("not an account record (URL or host)")
    if type(state) is not int or state not in _SAVED_STATES:
        raise ValueError(f"{url}: state {state!r}")
    if type(cash) not in _NUMBERS or not 0 <= cash < 1e30:
        checked_amount(cash, f"{url}: cash")
    if type(history) not in _NUMBERS or not 0 <= history < 1e30:
        checked_amount(history, f"{url}: history")
    # A range, not math.isfinite: that raises OverflowError on an int beyond a float's.
    if last_visit is not None and (type(last_visit) not in _NUMBERS or not -1e300 < last_visit < 1e300):
        raise ValueError(f"{url}: last visit {last_visit!r}")
    # Below 2**31: the store keeps them in arrays of machine integers (a
    # bigger one is no count this store wrote, and would not fit).
    if type(visits) is not int or not 0 <= visits < 2**31:
        raise ValueError(f"{url}: visits {visits!r}")
    if type(depth) is not int or not 0 <= depth < 2**31:
        raise ValueError(f"{url}: depth {depth!r}")
    if type(seq) is not int or not 0 <= seq < 2**31:
        raise ValueError(f"{url}: seq {seq!r}")
    links = value[10] if len(value) > 10 else None
    if links is not None:
        if not isinstance(links, list):
            raise ValueError(f"{url}: links")
        for link in links:
            if not isinstance(link, str):
                raise ValueError(f"{url}: links")
    return value


_SAVED_STATES = frozenset((PENDING, LEASED, CRAWLED, FAILED, REFUSED, ALIAS))
_NUMBERS = (int, float)


#: Header fields that are counts (the rest of :data:`_HEADER_AMOUNTS` are cash or history).
_HEADER_COUNTS = ("lambda_visits", "visits", "next_seq", "next_lease")
_HEADER_AMOUNTS = ("injected", "lambda_cash", "lambda_history", "history_sum")


def check_header(header: dict) -> dict:
    """``header`` if its totals are amounts and counts (and its optional
    fields, when present, too); raises :class:`ValueError` naming the
    first that is not (so a bad value is refused by name, before
    :meth:`MemoryStore.restore` meets it: ``float([])`` would be a
    ``TypeError``, ``float(10**400)`` an ``OverflowError``)."""
    for name in _HEADER_AMOUNTS:
        checked_amount(header.get(name), f"header {name}")
    if "discovery_cash" in header:
        checked_amount(header["discovery_cash"], "header discovery_cash")
    for name in _HEADER_COUNTS + ("virtual_visits",) * ("virtual_visits" in header):
        value = header.get(name)
        if type(value) is not int or value < 0:
            raise ValueError(f"header {name} {value!r} is not a count")
    if header["next_seq"] >= 2**31:  # the names table's slots are 32-bit
        raise ValueError(f"header next_seq {header['next_seq']!r} is beyond the store's 2**31 accounts")
    return header


def _header_ok(header: dict | None) -> bool:
    try:
        return isinstance(header, dict) and bool(check_header(header))
    except ValueError:
        return False


def _rebuilt_header(records: list[list], lambda_targets: str) -> dict:
    """A header for records whose own is lost: what the records hold is
    summed from them (history, visits, the next sequence number); lambda's
    cash and history and its visit count are held nowhere else and start
    from zero; no saved priority is trusted (there is no horizon to match)."""
    return {
        "lambda_targets": lambda_targets,
        "injected": 0.0,  # set to what was read once the journal is replayed
        "lambda_cash": 0.0,
        "lambda_history": 0.0,
        "history_sum": math.fsum(record[3] for record in records),
        "lambda_visits": 0,
        "visits": sum(record[5] for record in records),
        "next_seq": max((record[7] for record in records), default=-1) + 1,
        "next_lease": 0,
    }


# -- the store -----------------------------------------------------------------------


class JournaledStore(FrontierStore):
    """A :class:`MemoryStore` whose every change is journaled to ``directory``.

    Reads go straight to the memory store; each successful change is appended
    to the journal before the call returns. Link memory: the links of a visit
    are rebuilt from its journaled credits, a virtual revisit is journaled as
    ``["revisit", url, lambda_tax]`` and snapshots carry the links.

    ``roll_entries``: a journal of at least this many changes, and at least
    as large as the last snapshot (so that rewriting the snapshot costs no
    more than the journal written since), starts a new generation: a resume
    then reads one snapshot and at most about as much journal. ``recovery``: what to do with a damaged
    ``JOBDIR`` (``None``: raise :class:`JobdirError`; ``"fresh"``;
    ``"salvage"``).

    What happened when it opened is in :attr:`requeued_on_open`,
    :attr:`replayed`, :attr:`entries_lost` and :attr:`recovered`.
    """

    supports_link_memory = True
    supports_priority = True
    supports_discovery_cash = True
    #: Set for tools that only read a JOBDIR (see :func:`load_jobdir`).
    _read_only = False

    def __init__(
        self,
        directory: str | os.PathLike,
        lambda_targets: str = "pending",
        *,
        sync: bool = False,
        roll_entries: int = 0,
        recovery: str | None = None,
        priority_horizon: float = 0.0,
    ):
        if recovery not in RECOVERY_MODES:
            raise ValueError(f"AOPIC_JOBDIR_RECOVERY must be one of {RECOVERY_MODES}, got {recovery!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sync = sync
        self.roll_entries = roll_entries
        self.recovery = recovery
        self.requeued_on_open = 0
        self.replayed = 0
        #: journal entries after a damaged line, not replayed
        self.entries_lost = 0
        #: how the state was recovered ("fresh", "salvage") or None
        self.recovered: str | None = None
        #: salvage: snapshot records not kept, whether its header was lost,
        #: the cash lost with them (None: unknown, or nothing lost)
        self.records_lost = 0
        self.header_lost = False
        self.cash_lost: float | None = None
        #: (written, resumed with): the discovery cash per new URL changed on
        #: resume (None: unchanged, or nothing crawled yet)
        self.discovery_cash_change: tuple[float, float] | None = None
        self.priority_horizon = float(priority_horizon)
        self._journal = None
        self._entries = 0
        self._journal_chars = 0
        self._snapshot_bytes = 0
        self._lock = JobdirLock(self.directory)
        self._lock.acquire()
        try:
            self.memory, self.crawl_id, generation = self._load(lambda_targets)
            self.lambda_targets = self.memory.lambda_targets
            self.priority_fallbacks = self.memory.priority_fallbacks
            if self.memory.unused_seqs:
                logger.info(
                    "aopic: %d sequence numbers handed out in JOBDIR %s name no account (accounts an earlier "
                    "salvage lost, or an edited snapshot): the accounts are numbered again, in the same order",
                    self.memory.unused_seqs, self.directory,
                )
            if self.priority_fallbacks:
                logger.warning(
                    "aopic: %d pending URLs in JOBDIR %s had no usable saved priority (a snapshot written "
                    "before AOPIC_PRIORITY_HORIZON, under another horizon, or a corrupt value): ordered from "
                    "their cash as of this resume",
                    self.priority_fallbacks,
                    self.directory,
                )
            if lambda_targets != self.lambda_targets:
                logger.warning(
                    "aopic: JOBDIR was started with AOPIC_LAMBDA_TARGETS=%r; keeping it (asked %r)",
                    self.lambda_targets,
                    lambda_targets,
                )
            self._generation = generation
            self._start_generation()
        except BaseException:
            self._lock.release()
            raise

    # -- files ----------------------------------------------------------------

    def _generations(self) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {"snapshot": set(), "journal": set()}
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if match:
                found[match.group(1)].add(int(match.group(2)))
        return found

    def _load(self, lambda_targets: str) -> tuple[MemoryStore, str, int]:
        try:
            return self._load_checked(lambda_targets)
        except JobdirError as exc:
            if self.recovery is None:
                raise
            return self._recover(lambda_targets, exc)

    def _load_checked(self, lambda_targets: str) -> tuple[MemoryStore, str, int]:
        found = self._generations()
        if not found["snapshot"]:
            if found["journal"]:
                names = ", ".join(f"journal.{g}.jsonl" for g in sorted(found["journal"]))
                raise JobdirError(
                    f"aopic: JOBDIR state in {self.directory} is incomplete: {names} but no snapshot, "
                    f"so the crawl cannot be resumed and would silently restart from zero. {WAY_OUT}"
                )
            return MemoryStore(lambda_targets, priority_horizon=self.priority_horizon), uuid.uuid4().hex, 0
        generation = max(found["snapshot"])
        newer = sorted(g for g in found["journal"] if g > generation)
        if newer:
            raise JobdirError(
                f"aopic: {self.directory / f'journal.{newer[-1]}.jsonl'} is newer than the newest snapshot "
                f"(snapshot.{generation}.jsonl): it belongs to a generation whose snapshot is lost, or to "
                f"another crawl. {WAY_OUT}"
            )
        path = self.directory / f"snapshot.{generation}.jsonl"
        try:
            header, records = read_snapshot(path)
            _check_format(path, header)
            # The checksum proves the file is the one written, not that what
            # was written (or edited and sealed again) holds: each value is
            # checked, as salvage checks it, so a bad one is named.
            check_header(header)
            for record in records:
                check_record(record)
            store = MemoryStore.restore(header, records, priority_horizon=self.priority_horizon)
        except (DamagedFile, ValueError, KeyError, TypeError) as exc:
            raise JobdirError(f"aopic: snapshot {path} is damaged ({exc}). {WAY_OUT}") from None
        identity = header.get(IDENTITY) or {}
        crawl_id = identity.get("crawl") or uuid.uuid4().hex
        journal = self.directory / f"journal.{generation}.jsonl"
        if journal.exists():
            self.replayed = self._replay(store, journal, crawl_id if identity else None, generation)
        self._requeue_open_leases(store)
        if self.replayed or self.requeued_on_open:
            logger.info(
                "aopic: resumed JOBDIR %s: %d accounts, %d journal entries replayed, "
                "%d in-flight requests queued again",
                self.directory,
                store.totals().known,
                self.replayed,
                self.requeued_on_open,
            )
        return store, crawl_id, generation

    def _requeue_open_leases(self, store: MemoryStore) -> None:
        # Leases open at a crash (or a kill) were in flight: fetch them again.
        for url, lease_id in store.open_leases():
            store.settle_requeue(url, lease_id)
            self.requeued_on_open += 1

    def _replay(self, store: MemoryStore, path: Path, crawl_id: str | None, generation: int) -> int:
        """Apply ``path``'s entries to ``store``; returns how many. A bad line
        ends the replay (what came before is a consistent state)."""
        count = 0
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, 1):
                if not raw.endswith(b"\n"):
                    logger.warning("aopic: dropped a torn last journal line (%s:%d)", path, number)
                    break
                try:
                    entry = parse_line(raw)
                    if number == 1 and isinstance(entry, dict):
                        self._check_journal_header(path, entry, crawl_id, generation)
                        continue
                    if number == 1 and crawl_id is not None:
                        raise JobdirError(
                            f"aopic: journal {path} has no header: it was not written by this crawl's "
                            f"generation {generation}. {WAY_OUT}"
                        )
                    op, *args = entry
                    _REPLAY[op](store, *args)
                except JobdirError:
                    raise
                except (ValueError, KeyError, TypeError, IndexError) as exc:
                    self._corrupt_journal(path, number, exc, lines)
                    break
                count += 1
        return count

    @staticmethod
    def _check_journal_header(path: Path, header: dict, crawl_id: str | None, generation: int) -> None:
        identity = header.get("journal") or {}
        if identity.get("crawl") != crawl_id or identity.get("generation") != generation:
            raise JobdirError(
                f"aopic: journal {path} belongs to crawl {identity.get('crawl')!r} generation "
                f"{identity.get('generation')!r}, not to the snapshot's ({crawl_id!r}, {generation}): "
                f"two crawls' files are mixed in this JOBDIR. {WAY_OUT}"
            )

    def _corrupt_journal(self, path: Path, number: int, exc: Exception, rest: Iterator[bytes]) -> None:
        """Keep the damaged journal for inspection; say what is lost."""
        lost = 1
        refetched: dict[str, None] = {}
        for raw in rest:
            lost += 1
            try:
                op, url, *_ = parse_line(raw)
            except (ValueError, TypeError):
                continue
            if op in ("take", "visit") and isinstance(url, str):
                refetched[url] = None
        self.entries_lost = lost
        kept = path.with_name(path.name + ".corrupt")
        if self._read_only:
            kept = path  # a tool reading a JOBDIR changes nothing in it
        else:
            os.replace(path, kept)
        sample = ", ".join(list(refetched)[:10])
        logger.error(
            "aopic: journal %s is corrupt at line %d (%s): %d entries from there on are lost; the state "
            "before that line is kept, and the pages whose visits were lost will be fetched again "
            "(%d known: %s%s). The damaged file is kept as %s.",
            path, number, exc, lost, len(refetched), sample, "..." if len(refetched) > 10 else "", kept,
        )

    def _recover(self, lambda_targets: str, error: JobdirError) -> tuple[MemoryStore, str, int]:
        """``AOPIC_JOBDIR_RECOVERY``: start afresh, or keep what can be read."""
        self.recovered = self.recovery
        if self.recovery == "salvage":
            salvaged = self._salvage(lambda_targets)
            if salvaged is not None:
                return salvaged
        aside = self.directory / f"damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir()
        for path in self.directory.iterdir():
            if path.name.startswith(("snapshot.", "journal.")):
                os.replace(path, aside / path.name)
        # The error's own advice (run with AOPIC_JOBDIR_RECOVERY=...) is what
        # this run did: said without it, and without a second "aopic:".
        damage = str(error).removeprefix("aopic: ").replace(f" {WAY_OUT}", "")
        nothing = "nothing could be salvaged; " if self.recovery == "salvage" else ""
        logger.warning("aopic: %s\naopic: AOPIC_JOBDIR_RECOVERY=%s: %sstarting this JOBDIR afresh; the damaged "
                       "files are in %s", damage, self.recovery, nothing, aside)
        self.replayed = 0
        store = MemoryStore(lambda_targets, priority_horizon=self.priority_horizon)
        return store, uuid.uuid4().hex, max(self._all_generations(aside), default=0)

    @staticmethod
    def _all_generations(directory: Path) -> list[int]:
        numbers = []
        for path in directory.iterdir():
            match = _FILE.match(path.name.removesuffix(".corrupt"))
            if match:
                numbers.append(int(match.group(2)))
        return numbers

    def _salvage(self, lambda_targets: str) -> tuple[MemoryStore, str, int] | None:
        """The newest snapshot's records that read back and pass their
        checks (past bad lines; with a header rebuilt from them when its own
        is unreadable), then its journal up to its first bad line, the books
        rebalanced to what was read; ``None`` when there is no snapshot at
        all. The damaged snapshot is kept as ``snapshot.N.jsonl.corrupt``."""
        found = self._generations()
        if not found["snapshot"]:
            return None
        generation = max(found["snapshot"])
        path = self.directory / f"snapshot.{generation}.jsonl"
        journal = self.directory / f"journal.{generation}.jsonl"
        try:
            header, records = read_snapshot(path)
        except DamagedFile:
            read = salvage_snapshot(path)
        else:  # whole, but refused for what it holds: each record checked as salvage_snapshot checks it
            read = Salvaged()
            read.header, read.exact = header, header.pop("exact", None)
            for number, record in enumerate(records, 2 + (read.exact is not None)):
                try:
                    read.records.append(check_record(record))
                except ValueError as exc:
                    read.lose(f"line {number}: {exc}", record)
        if read.header is None and not read.records:
            return None  # nothing of the snapshot: start afresh, the files set aside
        records = _unique(read)
        header_lost = not _header_ok(read.header)
        if header_lost:
            header = _rebuilt_header(records, lambda_targets)
            crawl_id = _journal_crawl(journal, generation)
        else:
            header = {"lambda_targets": lambda_targets, **read.header}
            crawl_id = (read.header.get(IDENTITY) or {}).get("crawl")
        # Salvage reads what it can, not the exact store: every record as it
        # stands (dividends settled), leased ones back as pending accounts
        # with their lease's cash, taken again so that the journal replays.
        header, records, taken = _settled(header, records, read.exact)
        if records:  # a seq beyond the header's count (an edit) costs nothing kept (restore renumbers)
            header["next_seq"] = max(header["next_seq"], max(record[7] for record in records) + 1)
        try:
            store = MemoryStore.restore(header, records, priority_horizon=self.priority_horizon)
        except (ValueError, KeyError, TypeError):
            return None
        for url in taken:
            store.take(url)
        if journal.exists():
            try:
                self.replayed = self._replay(store, journal, crawl_id, generation)
            except JobdirError:
                pass  # a journal of another crawl: nothing of it is this state
        self._requeue_open_leases(store)
        accounts, lambda_cash, in_flight, injected = store.recount()
        held = math.fsum((accounts, lambda_cash, in_flight))
        store.totals().injected = held  # what was read is all there is
        for stale in (g for g in found["journal"] if g > generation):
            os.replace(self.directory / f"journal.{stale}.jsonl",
                       self.directory / f"journal.{stale}.jsonl.corrupt")
        if read.damage and not self._read_only:
            os.replace(path, path.with_name(path.name + ".corrupt"))
        self.records_lost = read.lost
        self.header_lost = header_lost
        if header_lost:
            cash = (f"the snapshot's header is unreadable: lambda's cash and history at that point are held "
                    f"nowhere else and are lost (amount unknown); the books now count the {held:.6g} the "
                    f"accounts and the journal hold")
        elif held <= injected:
            self.cash_lost = injected - held
            cash = (f"cash {injected - held:.6g} of {injected:.6g} injected was lost with the damaged part, "
                    f"and the books now count {held:.6g}")
        else:  # an edited record: the checksum said so, no record can be told from the others
            cash = (f"the records hold {held - injected:.6g} more cash than the {injected:.6g} injected (an "
                    f"edited record), and the books now count {held:.6g}")
        named = ", ".join(read.lost_urls[:10]) + ("..." if len(read.lost_urls) > 10 else "")
        logger.warning(
            "aopic: salvaged JOBDIR %s from %s (%s): %d accounts read, %d records lost%s; %d journal entries "
            "replayed (crawl %s); %s. The damaged snapshot is kept as %s.corrupt.",
            self.directory, path, "; ".join(read.damage[:5]) or "journal damaged", store.totals().known,
            read.lost, f" ({named})" if named else "", self.replayed,
            crawl_id or "unknown: a new identity", cash, path.name,
        )
        return store, crawl_id or uuid.uuid4().hex, generation

    def _start_generation(self) -> None:
        """Write a snapshot of the current state as a new generation and
        start its empty journal; remove older generations.

        Leases still open (a roll in mid-crawl) are in the snapshot as they
        are (format 2 wrote them as pending accounts and journaled their
        takes again: the lease's cash merged with what the account held)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        old = self._generations()
        generation = self._generation + 1
        # Exact: the next process goes on with the very floats this one holds.
        header, records = self.memory.snapshot(exact=True)
        header[IDENTITY] = {"format": FORMAT, "crawl": self.crawl_id, "generation": generation}
        path = self.directory / f"snapshot.{generation}.jsonl"
        write_snapshot(path, header, records)
        self._snapshot_bytes = path.stat().st_size
        self._generation = generation
        # "x": a journal is only ever written by the generation that created it.
        self._journal = (self.directory / f"journal.{generation}.jsonl").open(
            "x", encoding="utf-8", buffering=1
        )
        self._journal.write(_dumps({"journal": {"crawl": self.crawl_id, "generation": generation}}) + "\n")
        self._entries = 0
        self._journal_chars = 0
        for kind, generations in old.items():
            for g in generations:
                if g < generation:
                    (self.directory / f"{kind}.{g}.jsonl").unlink(missing_ok=True)
        for stale in self.directory.glob("*.jsonl.tmp"):  # a kill in mid-snapshot
            stale.unlink(missing_ok=True)

    def _log(self, *entry) -> None:
        line = _dumps(entry) + "\n"
        self._journal.write(line)
        if self.sync:
            os.fsync(self._journal.fileno())
        self._entries += 1
        self._journal_chars += len(line)

    def _roll_if_due(self) -> None:
        """A new generation when the journal is long (called between
        operations, never inside one)."""
        if (
            self.roll_entries
            and self._entries >= self.roll_entries
            and self._journal_chars >= self._snapshot_bytes
        ):
            self._start_generation()

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

    def order_at_rank(self, rank: int) -> float | None:
        return self.memory.order_at_rank(rank)

    def set_priority_horizon(self, horizon: float) -> None:
        # Not journaled: every run passes its horizon when it opens the JOBDIR
        # (a replay must order as the run that wrote the journal did).
        self.memory.set_priority_horizon(horizon)
        self.priority_horizon = self.memory.priority_horizon
        self.priority_fallbacks = self.memory.priority_fallbacks

    def open_leases(self) -> list[tuple[str, int]]:
        return self.memory.open_leases()

    @property
    def discovery_cash(self) -> float:
        return self.memory.discovery_cash

    def set_discovery_cash(self, cash: float) -> None:
        # Books, not only configuration: a visit's new accounts bring it in.
        # The snapshot header holds the amount in force when it was written
        # and this entry every change after, so a replay brings in exactly
        # what the run that wrote the journal did, whatever the resuming
        # run's setting (which applies from the resume on).
        before = self.memory.discovery_cash
        self.memory.set_discovery_cash(cash)
        if self.memory.discovery_cash != before:
            if self.memory.totals().visits:
                self.discovery_cash_change = (before, self.memory.discovery_cash)
                logger.warning(
                    "aopic: JOBDIR %s was crawled with %g discovery cash per new URL; %g from this resume "
                    "on (AOPIC_DISCOVERY_CASH x AOPIC_SEED_CASH)", self.directory, before, cash,
                )
            self._log("discovery", self.memory.discovery_cash)

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
        self._roll_if_due()
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
        """Give open leases back, write a fresh snapshot, close the journal,
        release the ``JOBDIR``."""
        try:
            for url, lease_id in self.memory.open_leases():
                self.settle_requeue(url, lease_id)
            self._start_generation()
            self._journal.close()
        finally:
            self._lock.release()


def load_jobdir(directory: str | os.PathLike) -> MemoryStore:
    """The frontier saved in ``directory`` (``JOBDIR/aopic``), read-only:
    nothing is written and nothing is locked (it may be a running crawl),
    leases open at a crash are given back in the copy. For tools
    (``scrapy aopic top``) that inspect a crawl. Raises :class:`JobdirError`
    for a damaged state."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no AOPIC frontier in {directory} (is it a JOBDIR of an AOPIC crawl?)")
    reader = JournaledStore.__new__(JournaledStore)
    reader.directory = directory
    reader.replayed = 0
    reader.requeued_on_open = 0
    reader.entries_lost = 0
    reader.recovery = None
    reader.priority_horizon = 0.0  # a tool reads the books, in cash order
    reader._read_only = True
    store, _, _ = reader._load_checked("pending")
    return store


def _unique(read: Salvaged) -> list[list]:
    """``read.records`` with one record per URL and per sequence number (the
    first; a later one is an edit or a copy, counted as lost)."""
    urls: set[str] = set()
    seqs: set[int] = set()
    kept = []
    for record in read.records:
        if record[0] in urls or record[7] in seqs:
            read.lose(f"{record[0]}: a second record of the same URL or sequence number", record)
            continue
        urls.add(record[0])
        seqs.add(record[7])
        kept.append(record)
    return kept


def _check_format(path: Path, header: dict) -> None:
    """A snapshot this version can read: raises :class:`JobdirError` for a
    newer format, :class:`ValueError` for a format-3 header without its
    exact part."""
    identity = header.get(IDENTITY)
    version = identity.get("format") if isinstance(identity, dict) else None
    if type(version) is int and version > FORMAT:
        raise JobdirError(
            f"aopic: snapshot {path} was written by a newer scrapy-aopic (format {version}; this version "
            f"reads formats up to {FORMAT}): resume this JOBDIR with that version. {WAY_OUT}"
        )
    if type(version) is int and version >= 3 and not isinstance(header.get("exact"), dict):
        raise ValueError("a format-3 header without its exact part")


def _settled(header: dict, records: list[list], exact: dict | None) -> tuple[dict, list[list], list[str]]:
    """A snapshot read as format 2 (for salvage): each record's cash with the
    dividends it is owed (when the exact part still says them), each leased
    account a pending one holding its lease's cash (when the exact part
    still says it); also the URLs of those, in lease order."""
    exact = exact if isinstance(exact, dict) else {}
    lease_cash: dict[str, float] = {}
    leases = exact.get("leases")
    for lease in leases if isinstance(leases, list) else ():
        try:
            if isinstance(lease[0], str):
                lease_cash[lease[0]] = checked_amount(lease[2], "lease cash")
        except (TypeError, IndexError, KeyError, ValueError):
            continue
    by_cash = exact.get("lambda_targets", header.get("lambda_targets")) == "pending-cash"
    # A dividend (or scale) only grows from where it started, and a mark is
    # one it passed: a mark above it would owe less than nothing (cash
    # below zero); a mark or dividend out of range is lost, its accounts
    # keep their raw cash.
    low = 1.0 if by_cash else 0.0
    try:
        dividend = checked_amount(exact["dividend"], "dividend")
        if dividend < low:
            raise ValueError(f"dividend {dividend!r} below {low}")
        marks = [mark if type(mark) in _NUMBERS and low <= mark <= dividend else None
                 for mark in exact["marks"]]
    except (TypeError, KeyError, ValueError):
        dividend, marks = None, []

    def owed(record: list) -> float:
        """The record's cash with its owed dividends (raw when they are lost)."""
        index = record[12] if len(record) > 12 else None
        if dividend is None or type(index) is not int or not 0 <= index < len(marks) or marks[index] is None:
            return record[2]
        mark = marks[index]
        if by_cash:
            return record[2] * dividend / mark if mark else record[2]
        return record[2] + (dividend - mark)

    header = {key: value for key, value in header.items() if key != "exact"}
    taken = []
    settled = []
    for record in records:
        record = [*record[:2], owed(record), *record[3:12]]
        if record[1] == LEASED:
            record[1] = PENDING
            record[2] += lease_cash.get(record[0], 0.0)
            taken.append(record[0])
        settled.append(record)
    order = {url: n for n, url in enumerate(lease_cash)}
    taken.sort(key=lambda url: order.get(url, len(order)))
    return header, settled, taken


def _journal_crawl(journal: Path, generation: int) -> str | None:
    """The crawl a journal's header names, if it is ``generation``'s (the
    identity of a snapshot whose own header is lost)."""
    try:
        with journal.open("rb") as lines:
            identity = parse_line(lines.readline()).get("journal") or {}
    except (OSError, ValueError, AttributeError):
        return None
    crawl = identity.get("crawl")
    return crawl if identity.get("generation") == generation and isinstance(crawl, str) else None


def _current_lease(store: MemoryStore, url: str) -> int:
    for lease_url, lease_id in store.open_leases():
        if lease_url == url:
            return lease_id
    raise KeyError(f"no open lease for {url}")


def _replay_visit(s: MemoryStore, url: str, history: Any, visited_at: Any, credits: Any) -> bool:
    """A visit entry, checked whole before it is applied (a line that failed
    half-way would leave the books unbalanced): the links' credits are
    amounts of cash that sum to at most what the page's lease held."""
    lease_id = _current_lease(s, url)
    checked_amount(history, "history")
    if isinstance(visited_at, bool) or not isinstance(visited_at, (int, float)) or not math.isfinite(visited_at):
        raise ValueError(f"visit time {visited_at!r} is not a number")
    parsed = [Credit(_link(c[:4]), checked_amount(c[4], "credit")) for c in credits]
    held = s.get(url).leased
    paid = math.fsum(credit.amount for credit in parsed)
    if paid > held * (1 + 1e-9) + 1e-12:
        raise ValueError(f"credits {paid!r} exceed the {held!r} the lease on {url} held")
    return s.settle_visit(url, lease_id, history, visited_at, parsed)


# Replaying an entry applies the same change to the memory store. Lease ids
# are not journaled: the replayed store hands out the same ids in the same
# order, and a settle always refers to the URL's one open lease.
_REPLAY: dict[str, Callable[..., object]] = {
    "inject": lambda s, link, cash: s.inject(_link(link), checked_amount(cash, "seed cash")),
    "register": lambda s, link: s.register(_link(link)),
    "repend": lambda s, link: s.repend(_link(link)),
    "take": lambda s, url: s.take(url),
    "lambda": lambda s: s.visit_lambda(),
    "visit": _replay_visit,
    "fail": lambda s, url, refuse: s.settle_failure(url, _current_lease(s, url), refuse=refuse),
    "transfer": lambda s, url, target: s.settle_transfer(url, _current_lease(s, url), _link(target)),
    "requeue": lambda s, url: s.settle_requeue(url, _current_lease(s, url)),
    "refuse": lambda s, url, host, depth: s.refuse(url, host, depth),
    "discovery": lambda s, cash: s.set_discovery_cash(checked_amount(cash, "discovery cash")),
    "revisit": lambda s, url, lambda_tax: s.revisit(
        url, None if lambda_tax is None else checked_amount(lambda_tax, "lambda tax")),
}
