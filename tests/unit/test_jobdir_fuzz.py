"""Hostile input to the JOBDIR readers: a real snapshot (format 3, leases
open) with ONE value changed and the checksum sealed again, so only the
content checks stand between it and the crawl. Opened the way the
scheduler opens it, each case is either refused with a ``JobdirError``
saying "damaged" (the scheduler closes with ``jobdir_damaged``) from a
``ValueError`` (never a ``TypeError``, ``OverflowError``... surfacing), or
accepted with balanced books and consistent totals, and the crawl goes on.
The same for the re-crawl profile's ``periods`` (the planner's whole
state: ``test_recrawl_state_fuzz.py``). Salvage (``AOPIC_JOBDIR_RECOVERY =
"salvage"``) of a snapshot with one to three hostile values, sealed again
or not, its header readable or not, never refuses: it keeps the records
that pass their checks with balanced books, and the crawl goes on.
Seeded: the same cases every run."""

from __future__ import annotations

import copy
import math
import os
import random
import shutil

import pytest

from scrapy_aopic.recrawl.profile import RateProfile
from scrapy_aopic.store import Link, MemoryStore
from scrapy_aopic.store.journal import JobdirError, JournaledStore, read_snapshot, write_snapshot

from .test_resume_exact import TARGETS, Driver, add_seeds, engine_on

#: per lambda-targets setting (a deeper run: AOPIC_FUZZ_CASES=3000 AOPIC_FUZZ_SEED=x)
CASES = int(os.environ.get("AOPIC_FUZZ_CASES", 120))
SEED = os.environ.get("AOPIC_FUZZ_SEED", "")


def hostile(rng: random.Random, old):
    """A value a damaged or edited file can hold in place of ``old``."""
    choices = ["str", None, True, False, [], {}, -1, -1.5, 1e308, 10**400, 2**63, 0, 0.0, 1e-300, "1.5"]
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        choices += [-old, old * 2 + 1, old + 1, old - 1, float(old) + 0.5]
    if isinstance(old, list):
        choices += [old[:-1], old + old[-1:], [old], old[::-1]]
    return copy.deepcopy(rng.choice(choices))


def mutate(rng: random.Random, header: dict, records: list[list]) -> str:
    """Change one value (in place); returns where, for the failure message."""
    exact = header["exact"]
    where = rng.choice(["header", "exact", "exact", "marks", "leases", "leases", "record", "record"])
    if where == "header":
        key = rng.choice(sorted(k for k in header if k not in ("exact", "aopic_jobdir")))
        header[key] = hostile(rng, header[key])
        return f"header[{key}]={header[key]!r}"[:200]
    if where == "exact":
        key = rng.choice(sorted(exact))
        exact[key] = hostile(rng, exact[key])
        return f"exact[{key}]={exact[key]!r}"[:200]
    if where == "marks" and exact["marks"]:
        i = rng.randrange(len(exact["marks"]))
        exact["marks"][i] = hostile(rng, exact["marks"][i])
        return f"marks[{i}]={exact['marks'][i]!r}"
    if where == "leases" and exact["leases"]:
        leases = exact["leases"]
        i = rng.randrange(len(leases))
        kind = rng.randrange(4)
        if kind == 0:  # a duplicate lease (same URL and id), or only the id repeated
            twin = list(leases[i])
            if rng.random() < 0.5:
                twin[0] = twin[0] + "#twin"
            leases.append(twin)
        elif kind == 1:  # a lease naming a URL the snapshot does not hold
            leases[i][0] = "http://unknown.example/" + str(i)
        elif kind == 2:
            leases[i] = hostile(rng, leases[i])
        else:
            j = rng.randrange(3)
            leases[i][j] = hostile(rng, leases[i][j])
        return f"leases[{i}] ({kind})={leases[i]!r}"[:200]
    record = rng.choice(records)
    j = rng.randrange(len(record) + 1)
    if j == len(record):  # a record of another length
        if rng.random() < 0.5:
            record.pop()
        else:
            record.append(hostile(rng, 0))
        return f"record {record[0]!r} of length {len(record)}"
    if j == 12 and rng.random() < 0.5:
        record[12] = rng.choice([len(exact["marks"]), -1, 10**6, 10**400])
    else:
        record[j] = hostile(rng, record[j])
    return f"record {record[0]!r}[{j}]={record[j]!r}"[:200]


def written(tmp_path, targets):
    """A JOBDIR of a crawl killed with leases open (after a roll)."""
    engine = engine_on(JournaledStore(tmp_path, targets, roll_entries=20), 0.05)
    add_seeds(engine)
    Driver(2, 3).run(engine, 120)
    engine.store._lock.release()
    return tmp_path


def snapshot_of(jobdir):
    """The snapshot file of ``jobdir`` and what it holds: (path, header, records)."""
    (path,) = jobdir.glob("snapshot.*.jsonl")
    return (path, *read_snapshot(path))


def check_consistent(store: JournaledStore) -> None:
    accounts, lambda_cash, in_flight, injected = store.recount()
    assert abs(accounts + lambda_cash + in_flight - injected) <= 1e-9 * max(injected, 1.0)
    t = store.totals()
    views = list(store.iter_accounts())
    assert t.known == len(views)
    assert t.pending == sum(v.state == 0 for v in views)
    for v in views:
        assert isinstance(v.url, str) and isinstance(v.host, str)
        assert math.isfinite(v.cash) and v.cash >= 0 and math.isfinite(v.history) and v.history >= 0


def open_hostile(jobdir, targets):
    """``None`` when accepted (the crawl then goes on), else the message."""
    try:
        store = JournaledStore(jobdir, targets)
    except JobdirError as exc:
        cause = exc.__context__
        assert cause is None or isinstance(cause, ValueError), f"{type(cause).__name__}: {cause}"
        assert "damaged" in str(exc) or "journal" in str(exc)
        return str(exc)
    try:
        check_consistent(store)
        engine = engine_on(store, 0.05)
        Driver(7, 2).run(engine, 30)
        check_consistent(store)
    finally:
        store.close()
    return None


@pytest.mark.parametrize("targets", TARGETS)
def test_a_snapshot_with_one_hostile_value_is_refused_or_consistent(tmp_path, targets):
    template = written(tmp_path / "template", targets)
    path, header0, records0 = snapshot_of(template)
    rng = random.Random(f"fuzz-{targets}{SEED}")
    refused = 0
    failures = []
    for case in range(CASES):
        jobdir = tmp_path / str(case)
        shutil.copytree(template, jobdir)
        header, records = copy.deepcopy(header0), copy.deepcopy(records0)
        where = mutate(rng, header, records)
        write_snapshot(jobdir / path.name, header, records)  # sealed again: only the values are wrong
        try:
            refused += open_hostile(jobdir, targets) is not None
        except Exception as exc:  # noqa: BLE001 - every case is named in the failure
            failures.append(f"case {case}: {where}: {type(exc).__name__}: {str(exc)[:300]}")
        shutil.rmtree(jobdir)
    assert not failures, "\n".join(failures)
    assert refused > CASES // 3  # most hostile values are caught (a changed depth or seq need not be)


def test_an_unchanged_snapshot_opens(tmp_path):
    """The fuzz's template itself is fine (so a refusal is the mutation's)."""
    for targets in TARGETS:
        assert open_hostile(written(tmp_path / targets, targets), targets) is None


# -- the re-crawl profile's periods ------------------------------------------------------------------


def _profile_state():
    profile = RateProfile()
    for i in range(60):
        profile.observe(i * 3000.0, (i + 1) * 3000.0, 1.0 if i % 3 == 0 else 0.0)
    state = profile.to_state()
    assert state["periods"][2] is not None
    return state


def test_hostile_periods_are_refused_with_a_value_error():
    state0 = _profile_state()
    rng = random.Random(f"fuzz-periods{SEED}")
    for case in range(CASES * 2):
        state = copy.deepcopy(state0)
        periods = state["periods"]
        spot = rng.randrange(6)
        if spot == 5:
            state["periods"] = hostile(rng, periods)
        elif spot == 4 or not isinstance(periods[spot], list):
            periods[spot % 4] = hostile(rng, periods[spot % 4])
        else:
            periods[spot][rng.randrange(24)] = hostile(rng, 0.0)
        try:
            profile = RateProfile.from_state(state)
        except ValueError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"case {case}: periods {state['periods']!r}: {type(exc).__name__}: {exc}")
        # accepted: it plans with finite numbers
        again = profile.to_state()["periods"]
        assert again[0] is None or math.isfinite(again[0])
        assert again[3] is None or 0 <= again[3] <= 1
        for hours in again[1:3]:
            assert hours is None or all(math.isfinite(h) and h >= 0 for h in hours)


# -- each crash the fuzz found, named (each failed on main with the type said) --------------------------


def _first_record(r):
    return r[0]


@pytest.mark.parametrize("damage, needle", [
    (lambda h, r: h.update(injected=10**400), "injected"),  # OverflowError: int too large to convert
    (lambda h, r: h.update(history_sum={}), "history_sum"),  # TypeError from float()
    (lambda h, r: h.update(discovery_cash=None), "discovery_cash"),  # TypeError from float()
    (lambda h, r: h.update(visits=None), "visits"),  # TypeError from int()
    (lambda h, r: h.update(next_seq=2**40), "next_seq"),  # the names table cannot hold it
    (lambda h, r: _first_record(r).__setitem__(0, None), "URL"),  # AttributeError: no .find
    (lambda h, r: _first_record(r).__setitem__(1, []), "state"),  # TypeError from int()
    (lambda h, r: _first_record(r).__setitem__(2, []), "cash"),  # TypeError from float()
    (lambda h, r: _first_record(r).__setitem__(4, "str"), "last visit"),  # TypeError (a comparison)
    (lambda h, r: _first_record(r).__setitem__(4, 10**400), "last visit"),  # OverflowError: math.isfinite
    (lambda h, r: _first_record(r).__setitem__(5, -1.5), "visits"),  # KeyError 'Q' (array typecode)
    (lambda h, r: _first_record(r).__setitem__(6, 2**63), "depth"),  # KeyError 'q' (array typecode)
    (lambda h, r: _first_record(r).__setitem__(7, None), "seq"),  # TypeError from int()
    (lambda h, r: _first_record(r).__setitem__(7, 10**9), "seq"),  # hung: a gap of 10**9 empty names
    (lambda h, r: _first_record(r).__setitem__(8, 1e308), "host"),  # accepted: a host not a string
    (lambda h, r: _first_record(r).__setitem__(10, True), "links"),  # TypeError: not iterable
])
def test_a_hostile_value_the_fuzz_found_is_refused_by_name(tmp_path, damage, needle):
    jobdir = written(tmp_path, "pending-cash")
    path, header, records = snapshot_of(jobdir)
    damage(header, records)
    write_snapshot(path, header, records)
    with pytest.raises(JobdirError, match="damaged") as caught:
        JournaledStore(jobdir, "pending-cash")
    assert needle in str(caught.value)
    assert isinstance(caught.value.__context__, ValueError)


def test_a_record_seq_beyond_next_seq_is_refused_by_restore():
    """restore itself refuses it (salvage restores too, with the header's next_seq)."""
    store = MemoryStore("pending")
    store.inject(Link("http://h/a", "h", 0), 1.0)
    header, records = store.snapshot()
    records = [list(r) for r in records]
    records[0][7] = 10**9
    with pytest.raises(ValueError, match="seq 1000000000"):
        MemoryStore.restore(header, records)


@pytest.mark.parametrize("periods", [
    [10**400, None, [0.0] * 24, None],  # OverflowError from float()
    [0.0, [10**400] * 24, [0.0] * 24, None],
    [0.0, None, [0.0] * 23 + [10**400], 0.5],
    [0.0, None, [0.0] * 24, 10**400],
])
def test_periods_with_an_int_beyond_a_float_are_refused(periods):
    state = _profile_state()
    state["periods"] = periods
    with pytest.raises(ValueError, match="recrawl profile state"):
        RateProfile.from_state(state)


def test_the_planner_loader_refuses_hostile_periods_with_a_value_error():
    """What the re-crawl hook calls (it turns a ValueError into a logged
    fresh start; an OverflowError went through it before)."""
    from scrapy_aopic.recrawl.planner import RecrawlPlanner

    planner = RecrawlPlanner(budget=50.0)
    for i in range(300):
        planner.on_visit(f"https://example.com/p{i % 20}", "example.com", 1e9 + i * 7200.0,
                         changed=i % 3 == 0, new_links=0)
    state0 = planner.to_state()
    rng = random.Random(f"fuzz-planner{SEED}")
    refused = 0
    for _ in range(CASES):
        state = copy.deepcopy(state0)
        profile = rng.choice(list(state["profiles"].values()))
        periods = profile["periods"]
        spot = rng.randrange(4)
        if isinstance(periods[spot], list) and rng.random() < 0.7:
            periods[spot][rng.randrange(len(periods[spot]))] = hostile(rng, 0.0)
        else:
            periods[spot] = hostile(rng, periods[spot])
        try:
            RecrawlPlanner(budget=50.0).load_state(state)
        except ValueError:
            refused += 1
    assert refused > CASES // 2


# -- salvage (AOPIC_JOBDIR_RECOVERY="salvage") with hostile values ---------------------------------------


def _unsealed(path) -> None:
    """The snapshot's end marker no longer vouches for it (the salvage
    reader then checks line by line)."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b'"sha256":"', b'"sha256":"0')
    path.write_bytes(b"".join(lines))


def mutations(rng: random.Random, header: dict, records: list[list]) -> list[str]:
    """One to three values changed (a later change that meets what an
    earlier one left, a list no longer a list, is not made)."""
    where = []
    for _ in range(rng.randint(1, 3)):
        try:
            where.append(mutate(rng, header, records))
        except (TypeError, IndexError, KeyError, AttributeError, OverflowError):
            continue
    return where


def open_salvaged(jobdir, targets) -> str:
    """Salvage never refuses: it keeps what passes its checks (or starts
    afresh); either way the books balance and the crawl goes on."""
    store = JournaledStore(jobdir, targets, recovery="salvage")
    try:
        assert store.recovered in (None, "salvage")  # None: a change the content checks let through
        check_consistent(store)
        engine = engine_on(store, 0.05)
        Driver(11, 2).run(engine, 30)
        check_consistent(store)
        # memory follows the accounts, whatever seqs the file held
        assert len(store.memory._table.row_of) == store.totals().known
        return "kept" if store.totals().known else "fresh"
    finally:
        store.close()


@pytest.mark.parametrize("targets", TARGETS)
def test_salvage_of_a_snapshot_with_hostile_values_keeps_the_books(tmp_path, targets):
    template = written(tmp_path / "template", targets)
    path, header0, records0 = snapshot_of(template)
    rng = random.Random(f"fuzz-salvage-{targets}{SEED}")
    kept = 0
    failures = []
    cases = CASES // 2  # each opens, crawls 30 steps and closes: half as many keep the three under 10 s
    for case in range(cases):
        jobdir = tmp_path / str(case)
        shutil.copytree(template, jobdir)
        header, records = copy.deepcopy(header0), copy.deepcopy(records0)
        where = mutations(rng, header, records)
        seal = rng.choice(["sealed", "unsealed", "header lost"])
        if seal == "header lost":  # salvage rebuilds the header from the records
            header["lambda_targets"] = None
            header["next_seq"] = "lost"
        write_snapshot(jobdir / path.name, header, records)
        if seal != "sealed":
            _unsealed(jobdir / path.name)
        try:
            kept += open_salvaged(jobdir, targets) == "kept"
        except Exception as exc:  # noqa: BLE001 - every case is named in the failure
            failures.append(f"case {case} ({seal}): {where}: {type(exc).__name__}: {str(exc)[:300]}")
        shutil.rmtree(jobdir)
    assert not failures, "\n".join(failures)
    assert kept > cases // 2  # salvage keeps what reads back: a hostile value costs its record, not the rest


# -- each crash the salvage fuzz and the seq bound left, named (the failure on main is said) ---------------


def _edited(jobdir, edit, *, sealed=True):
    path, header, records = snapshot_of(jobdir)
    edit(header, records)
    write_snapshot(path, header, records)
    if not sealed:
        _unsealed(path)


@pytest.mark.timeout(60)
def test_a_next_seq_just_below_2_31_costs_no_memory(tmp_path):
    """Accepted before and after (a count below the 2**31 bound); on main the
    first new account then filled two billion empty names (hung, ~30 GB)."""
    jobdir = written(tmp_path, "pending")
    records = len(snapshot_of(jobdir)[2])
    _edited(jobdir, lambda h, r: h.update(next_seq=2**31 - 1))
    store = JournaledStore(jobdir, "pending")
    try:
        assert store.memory.unused_seqs == 2**31 - 1 - records  # counted (and logged)
        known = store.totals().known
        store.register(Link("http://new.example/1", "new.example", 1))
        assert store.totals().known == known + 1
        assert len(store.memory._table.row_of) == known + 1  # names: the accounts, no more
        Driver(5, 2).run(engine_on(store, 0.05), 30)
        check_consistent(store)
    finally:
        store.close()


def test_renumbering_keeps_the_order_and_a_whole_snapshot_as_written():
    """Seqs only order: gaps go, the order stays; a snapshot without gaps
    (every one a crawl writes unless salvage lost records) reads back with
    its very seqs, so a resume goes on bit for bit."""
    store = MemoryStore("pending")
    for i in range(6):
        store.inject(Link(f"http://h/{i}", "h", 0), 1.0)
    header, records = store.snapshot(exact=True)
    records = [list(r) for r in records]
    again = MemoryStore.restore(header, records)
    assert again.unused_seqs == 0
    assert sorted(r[7] for r in again.snapshot(exact=True)[1]) == list(range(6))
    gapped = copy.deepcopy(records)
    for r in gapped:
        r[7] = r[7] * 1000 + 7  # same order, far apart
    header = dict(header, next_seq=10**6)
    restored = MemoryStore.restore(header, gapped)
    assert restored.unused_seqs == 10**6 - 6
    by_url = {r[0]: r[7] for r in restored.snapshot(exact=True)[1]}
    assert by_url == {r[0]: r[7] for r in records}
    assert [restored.pop(lambda host: True).url for _ in range(6)] == [again.pop(lambda host: True).url for _ in range(6)]


@pytest.mark.timeout(60)
def test_salvage_with_the_header_lost_and_a_seq_near_2_31_costs_no_memory(tmp_path):
    """The rebuilt header's next_seq is the largest seq + 1: on main a record
    seq of 2**31 - 2 made restore fill two billion empty names (hung)."""
    jobdir = written(tmp_path, "pending")

    def edit(h, r):
        h.update(next_seq="lost")  # the header's totals are not counts: rebuilt from the records
        r[0][7] = 2**31 - 2

    _edited(jobdir, edit, sealed=False)
    store = JournaledStore(jobdir, "pending", recovery="salvage")
    try:
        assert store.recovered == "salvage" and store.header_lost
        assert len(store.memory._table.row_of) == store.totals().known
        Driver(5, 2).run(engine_on(store, 0.05), 30)
        check_consistent(store)
    finally:
        store.close()


@pytest.mark.parametrize("edit, failed_on_main", [
    (lambda h, r: r[0].__setitem__(8, 0), "accepted: a host not a string"),
    (lambda h, r: r[0].__setitem__(0, 1e-300), "AttributeError: 'float' object has no attribute 'find'"),
    (lambda h, r: r[0].__setitem__(7, [1]), "TypeError: unhashable type: 'list'"),
    (lambda h, r: h["exact"].update(leases=1e308), "TypeError: 'float' object is not iterable"),
    (lambda h, r: h["exact"].update(marks=[2**63] * len(h["exact"]["marks"])), "accepted: cash below zero"),
    (lambda h, r: h["exact"].update(dividend=1e-300), "accepted: cash below zero"),
])
def test_salvage_of_a_sealed_snapshot_with_a_hostile_value_keeps_the_books(tmp_path, edit, failed_on_main):
    """A sealed snapshot the content checks refuse is salvaged by checking
    each record (as a damaged one is) and trusting no dividend mark the
    dividend did not pass."""
    jobdir = written(tmp_path, "pending")
    _edited(jobdir, edit)
    with pytest.raises(JobdirError, match="damaged"):
        JournaledStore(jobdir, "pending")
    assert open_salvaged(jobdir, "pending") == "kept"


def test_salvage_keeps_the_records_when_one_seq_is_beyond_the_header_count(tmp_path):
    """A seq the header says was never handed out (an edit): on main salvage's
    restore refused it and the whole JOBDIR started afresh (0 accounts
    kept); now seqs are renumbered and every record is kept."""
    jobdir = written(tmp_path, "pending")
    records = len(snapshot_of(jobdir)[2])
    _edited(jobdir, lambda h, r: r[0].__setitem__(7, h["next_seq"] + 10**6))
    store = JournaledStore(jobdir, "pending", recovery="salvage")
    try:
        assert store.recovered == "salvage" and store.records_lost == 0
        assert store.totals().known >= records
        assert len(store.memory._table.row_of) == store.totals().known
        check_consistent(store)
    finally:
        store.close()
