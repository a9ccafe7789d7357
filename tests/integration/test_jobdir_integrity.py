"""A damaged or shared JOBDIR: never a silent restart, never two crawls
mixed, one process per JOBDIR (issue 13).

Most cases damage the JOBDIR of a real crawl (stopped with
``CLOSESPIDER_PAGECOUNT`` or killed), then resume it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_aopic.store.base import PENDING, Credit, Link
from scrapy_aopic.store.journal import JobdirError, JobdirInUse, JournaledStore, load_jobdir
from tests.integration.test_crawl import finish, start_crawl
from tests.support.localsite import SPECIAL, LocalSite


def crawl(tmp_path, name, site, jobdir, **settings):
    """A real crawl of ``site`` with ``jobdir``; its report and its log."""
    # No discovery cash: the seed's 1.0 is then the whole of what came in,
    # which proves no part of another crawl's state was mixed in.
    process, out = start_crawl(tmp_path, name, [site.base + "/p0"], {
        "JOBDIR": str(jobdir), "RETRY_TIMES": 0, "DOWNLOAD_TIMEOUT": 2, "AOPIC_DISCOVERY_CASH": 0, **settings})
    process.wait(timeout=120)
    log = (tmp_path / f"{name}.log").read_text()
    report = json.loads(out.read_text()) if out.exists() else {"stats": {}}
    return report["stats"], log


@pytest.fixture(scope="module")
def _stopped_crawl_once(tmp_path_factory):
    """The crawl behind ``stopped_crawl``, run once for the module (a
    subprocess crawl is seconds; eleven tests damage a copy of its JOBDIR):
    the site, the JOBDIR and the site's hit counts when the crawl stopped."""
    root = tmp_path_factory.mktemp("stopped")
    with LocalSite(pages=120) as site:
        jobdir = root / "job"
        stats, _ = crawl(root, "first", site, jobdir, CLOSESPIDER_PAGECOUNT=30)
        assert stats["aopic/pages_visited"] >= 20
        yield site, jobdir, dict(site.hits)


@pytest.fixture
def stopped_crawl(tmp_path, _stopped_crawl_once):
    """A site and the JOBDIR of a crawl of it stopped after 30 pages: the
    test's own copy of the JOBDIR, and the site's hit counts as that crawl
    left them (what an earlier test's resume fetched is forgotten). The
    first crawl's process has exited, so no request of it is still coming."""
    import shutil

    site, original, hits = _stopped_crawl_once
    jobdir = tmp_path / "job"
    shutil.copytree(original, jobdir)
    with site._lock:
        site.hits.clear()
        site.hits.update(hits)
    return site, jobdir


def files(jobdir: Path, pattern: str) -> list[Path]:
    return sorted((jobdir / "aopic").glob(pattern))


def books(stats) -> float:
    return stats["aopic/conservation_error"] / max(1.0, stats["aopic/cash_injected_total"])


# -- 1. a lost snapshot, an orphan journal: a clear stop, never a restart from zero ----------


def test_a_lost_snapshot_stops_the_crawl_with_the_way_out(tmp_path, stopped_crawl):
    site, jobdir = stopped_crawl
    for snapshot in files(jobdir, "snapshot.*.jsonl"):
        snapshot.unlink()
    journal = files(jobdir, "journal.*.jsonl")
    stats, log = crawl(tmp_path, "resumed", site, jobdir)
    assert "but no snapshot" in log and journal[0].name in log
    assert "AOPIC_JOBDIR_RECOVERY=fresh" in log
    assert not stats.get("aopic/pages_visited")  # nothing crawled from zero
    assert files(jobdir, "journal.*.jsonl") == journal  # nothing appended or deleted
    # The way out: the damaged files go aside, the crawl starts afresh and is
    # one crawl (no entries of the old one mixed in).
    stats, log = crawl(tmp_path, "fresh", site, jobdir, AOPIC_JOBDIR_RECOVERY="fresh")
    assert stats["aopic/jobdir/recovered/fresh"] == 1
    assert stats["aopic/cash_injected_total"] == 1.0 and books(stats) <= 1e-9
    assert list((jobdir / "aopic").glob("damaged-*/journal.*.jsonl"))
    stats, _ = crawl(tmp_path, "again", site, jobdir)
    assert stats["aopic/cash_injected_total"] == 1.0 and books(stats) <= 1e-9


def test_a_journal_newer_than_the_snapshot_is_not_replayed(tmp_path, stopped_crawl):
    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    generation = int(snapshot.name.split(".")[1])
    orphan = jobdir / "aopic" / f"journal.{generation + 1}.jsonl"
    orphan.write_text('{"journal":{"crawl":"another","generation":%d}}\n["lambda"]\n' % (generation + 1))
    stats, log = crawl(tmp_path, "resumed", site, jobdir)
    assert orphan.name in log and "newer than the newest snapshot" in log
    assert not stats.get("aopic/pages_visited")


def test_a_journal_of_another_crawl_is_refused(tmp_path, stopped_crawl):
    site, jobdir = stopped_crawl
    (journal,) = files(jobdir, "journal.*.jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["journal"]["crawl"] = "someone-else"
    journal.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    stats, log = crawl(tmp_path, "resumed", site, jobdir)
    assert "two crawls' files are mixed" in log and journal.name in log
    assert not stats.get("aopic/pages_visited")


# -- 2. a torn last line, whatever bytes it holds -------------------------------------------


def test_a_torn_multibyte_character_at_the_end_is_dropped(tmp_path):
    store = JournaledStore(tmp_path / "aopic")
    store.inject(Link("http://a.example/", "a.example", 0), 1.0)
    store._journal.flush()
    store._journal.close()
    store._lock.release()
    journal = files(tmp_path, "journal.*.jsonl")[0]
    entry = json.dumps(["inject", ["http://a.example/ünïcödé", "a.example", 0, {"meta": {"k": "日本語"}}], 1.0],
                       ensure_ascii=False).encode("utf-8")
    with journal.open("ab") as out:
        out.write(entry[: entry.index("日".encode()) + 1])  # killed inside a character
    again = JournaledStore(tmp_path / "aopic")
    assert again.totals().injected == 1.0 and again.totals().known == 1
    again.close()


# -- 3. a damaged snapshot is detected when it is read --------------------------------------


def _truncate_at_line(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: len(lines) * 2 // 3]))


def _truncate_mid_line(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(2000))


def _bad_header(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b'{"hello": 1}\n' + b"".join(lines[1:]))


def _edited(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    record[2] = record[2] + 5.0  # cash out of nowhere
    lines[2] = (json.dumps(record) + "\n").encode()
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("damage", [_truncate_at_line, _truncate_mid_line, _garbage, _bad_header, _edited])
def test_a_damaged_snapshot_is_refused_by_name(tmp_path, stopped_crawl, damage):
    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    damage(snapshot)
    stats, log = crawl(tmp_path, "resumed", site, jobdir)
    assert f"snapshot {snapshot} is damaged" in log, log[-2000:]
    assert "AOPIC_JOBDIR_RECOVERY" in log
    assert not stats.get("aopic/pages_visited")
    assert "Traceback" not in log.split("is damaged")[0][-300:]  # the message comes first


def test_salvage_keeps_what_can_be_read_and_balances_the_books(tmp_path, stopped_crawl):
    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    _truncate_at_line(snapshot)
    stats, log = crawl(tmp_path, "salvaged", site, jobdir, AOPIC_JOBDIR_RECOVERY="salvage")
    assert "salvaged JOBDIR" in log and stats["aopic/jobdir/recovered/salvage"] == 1
    assert books(stats) <= 1e-9
    assert stats["aopic/cash_injected_total"] < 1.0  # the lost part is said, not hidden


# -- 4. a corrupt journal line: the state before it kept, the file kept, the loss said -------


def test_a_corrupt_journal_line_is_kept_and_reported(tmp_path, caplog):
    store = JournaledStore(tmp_path / "aopic")
    for i in range(6):
        store.inject(Link(f"http://a.example/{i}", "a.example", 0), 1.0)
    lease = store.pop(lambda host: True)
    store._journal.close()
    store._lock.release()
    journal = files(tmp_path, "journal.*.jsonl")[0]
    lines = journal.read_text().splitlines(keepends=True)
    lines.insert(4, "this is not json\n")  # after the header and three injects
    journal.write_text("".join(lines))
    with caplog.at_level(logging.ERROR):
        again = JournaledStore(tmp_path / "aopic")
    assert again.totals().injected == 3.0 and again.totals().known == 3
    accounts, lambda_cash, in_flight, injected = again.recount()
    assert abs(accounts + lambda_cash + in_flight - injected) < 1e-12
    assert again.entries_lost == 5  # the bad line, three injects, the take
    corrupt = journal.with_name(journal.name + ".corrupt")
    assert corrupt.exists()
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "line 5" in message and "5 entries" in message and lease.url in message
    again.close()
    assert corrupt.exists()  # not deleted by the next generation


# -- 5. one process per JOBDIR ---------------------------------------------------------------


def test_a_second_store_on_a_live_jobdir_is_refused(tmp_path):
    first = JournaledStore(tmp_path / "aopic")
    with pytest.raises(JobdirInUse, match=f"pid {os.getpid()}"):
        JournaledStore(tmp_path / "aopic")
    first.close()
    JournaledStore(tmp_path / "aopic").close()  # free again after close


def test_a_second_crawl_on_a_live_jobdir_stops_and_leaves_the_first_alone(tmp_path):
    with LocalSite(pages=200, delay=0.02) as site:
        jobdir = tmp_path / "job"
        first, out = start_crawl(tmp_path, "first", [site.base + "/p0"],
                                 {"JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": 2, "RETRY_TIMES": 0})
        deadline = time.monotonic() + 60
        while sum(site.hits.values()) < 20:
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        stats, log = crawl(tmp_path, "second", site, jobdir)
        assert "is in use by pid" in log and not stats.get("aopic/pages_visited")
        report = finish(first, out)
        reachable = site.reachable_pages()
        hits = dict(site.hits)
    assert all(hits.get(p, 0) == 1 for p in reachable)
    assert books(report["stats"]) <= 1e-9


# -- 6. non-finite numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_in_the_journal_is_a_corrupt_line(tmp_path, number, caplog):
    store = JournaledStore(tmp_path / "aopic")
    store.inject(Link("http://a.example/", "a.example", 0), 1.0)
    store._journal.write(f'["inject",["http://a.example/x","a.example",0,null],{number}]\n')
    store._journal.close()
    store._lock.release()
    with caplog.at_level(logging.ERROR):
        again = JournaledStore(tmp_path / "aopic")
    assert again.totals().injected == 1.0
    assert "line 3" in " ".join(r.getMessage() for r in caplog.records)
    again.close()
    assert not list((tmp_path / "aopic").glob("*.tmp"))


@pytest.mark.parametrize("edit", [
    lambda v: v.__setitem__(2, "abc"),            # history not a number: failed half-way through
    lambda v: v[4][0].__setitem__(4, -5.0),       # a negative credit: an account below zero
    lambda v: v[4][0].__setitem__(4, 1e308),      # finite, and cash out of nothing
    lambda v: v[4][0].__setitem__(4, 1.5),        # more than the lease held
    lambda v: v[4][0].__setitem__(4, True),
    lambda v: v.__setitem__(4, [v[4][0][:3]]),   # a credit cut short (IndexError went through)
], ids=["history-str", "negative", "huge", "more-than-held", "bool", "short-credit"])
def test_a_visit_line_with_impossible_cash_is_a_corrupt_line(tmp_path, edit, caplog):
    """A journal line is data to check, not to trust: a visit whose numbers
    are not amounts of cash, or pay out more than the lease held, is a
    corrupt line (nothing of it applied), not books silently broken (a
    resumed crawl ended with 'cash conservation broken: error 0.1')."""
    store = JournaledStore(tmp_path / "aopic")
    store.inject(Link("http://a.example/", "a.example", 0), 1.0)
    lease = store.pop(lambda host: True)
    store.settle_visit(lease.url, lease.lease_id, 1.0, 1.0e9,
                       [Credit(Link("http://a.example/x", "a.example", 1), 0.4)])
    store._journal.close()
    store._lock.release()
    journal = files(tmp_path, "journal.*.jsonl")[0]
    lines = journal.read_text().splitlines(keepends=True)
    entry = json.loads(lines[-1])
    assert entry[0] == "visit"
    edit(entry)
    lines[-1] = json.dumps(entry) + "\n"
    journal.write_text("".join(lines))
    with caplog.at_level(logging.ERROR):
        again = JournaledStore(tmp_path / "aopic")
    assert f"line {len(lines)}" in " ".join(r.getMessage() for r in caplog.records)
    accounts, lambda_cash, in_flight, injected = again.recount()
    assert injected == 1.0 and abs(accounts + lambda_cash + in_flight - injected) < 1e-12
    assert not again.knows("http://a.example/x")  # the state before the line
    assert all(view.cash >= 0 for view in again.iter_accounts()) and lambda_cash >= 0
    again.close()


# -- 7. the journal rolls over: resume time stays bounded ----------------------------------------


def test_the_journal_rolls_and_a_resume_replays_at_most_one_roll(tmp_path):
    store = JournaledStore(tmp_path / "aopic", roll_entries=50)
    for i in range(10):
        store.inject(Link(f"http://a.example/{i}", "a.example", 0), 1.0)
    leases = []
    for _ in range(200):  # a long crawl: take, settle, keep 2 in flight
        lease = store.pop(lambda host: True)
        if lease is None:
            break
        leases.append(lease)
        if len(leases) > 2:
            done = leases.pop(0)
            store.settle_visit(done.url, done.lease_id, done.cash, 0.0, [])
            store.register(Link(f"http://a.example/n{len(leases)}{done.url[-2:]}", "a.example", 1))
        store.inject(Link(f"http://b.example/{_}", "b.example", 0), 1.0)
    generation = store._generation
    assert generation >= 3  # it rolled (at least twice after the first snapshot)
    in_flight = len(store.open_leases())
    store._journal.close()
    store._lock.release()  # killed
    again = JournaledStore(tmp_path / "aopic", roll_entries=50)
    assert again.replayed <= max(50, 2 * again.totals().known) + in_flight + 1
    assert again.requeued_on_open == in_flight
    accounts, lambda_cash, in_flight_cash, injected = again.recount()
    assert abs(accounts + lambda_cash + in_flight_cash - injected) < 1e-9
    assert injected == store.totals().injected
    again.close()


def test_a_tool_reading_a_jobdir_changes_nothing(tmp_path):
    store = JournaledStore(tmp_path / "aopic")
    store.inject(Link("http://a.example/", "a.example", 0), 1.0)
    store._journal.write("garbage\n")
    store._journal.flush()
    before = sorted(p.name for p in (tmp_path / "aopic").iterdir())
    assert load_jobdir(tmp_path / "aopic").totals().injected == 1.0  # while it runs
    assert sorted(p.name for p in (tmp_path / "aopic").iterdir()) == before
    store._journal.close()
    store._lock.release()


# -- kills at random moments, many times in a row ------------------------------------------------


def test_killed_again_and_again_then_finished(tmp_path):
    """Killed with SIGKILL at random moments — in mid-crawl, in mid-snapshot
    (the journal rolls every 40 changes), in mid-resume — then crawled to
    the end: every reachable page fetched, re-fetches no more than what was
    in flight at each kill, the books balanced (with AOPIC_DISCOVERY_CASH
    on: the journal replays each URL's discovery cash once)."""
    rng = random.Random(13)
    concurrency = 3
    jobdir = tmp_path / "job"
    settings = {"JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": concurrency, "RETRY_TIMES": 0,
                "DOWNLOAD_TIMEOUT": 2, "AOPIC_JOURNAL_ROLL_ENTRIES": 40, "AOPIC_DISCOVERY_CASH": 0.01}
    kills = 0
    # The kills are timed by fetch counts, not by the clock: the site's delay
    # only paces the crawl (and the last crawl waits for it on every page).
    with LocalSite(pages=400, delay=0.02, slow_seconds=1.0) as site:
        seeds = [site.base + "/p0"]
        for round_ in range(7):
            before = sum(site.hits.values())
            process, _ = start_crawl(tmp_path, f"killed{round_}", seeds, settings)
            if round_ % 3 == 2:  # in mid-start: opening the JOBDIR, replaying
                time.sleep(rng.uniform(0.05, 0.6))
            else:  # in mid-crawl, after a random number of fetches
                target = before + rng.randint(5, 40)
                deadline = time.monotonic() + 60
                while sum(site.hits.values()) < target and process.poll() is None:
                    assert time.monotonic() < deadline, "no progress"
                    time.sleep(0.005)
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                kills += 1
            process.wait()
        process, out = start_crawl(tmp_path, "last", seeds, settings)
        report = finish(process, out)
        hits = dict(site.hits)
        reachable = site.reachable_pages()
    stats = report["stats"]
    assert kills >= 5
    assert all(hits.get(p, 0) >= 1 for p in reachable)
    twice = sum(hits.get(p, 0) - 1 for p in reachable)
    # Each resume says how many requests were in flight at the kill before.
    requeued = sum(int(n) for log in tmp_path.glob("*.log")
                   for n in re.findall(r"(\d+) in-flight requests queued again", log.read_text()))
    assert twice <= requeued, (twice, requeued, kills)
    # The seed once, and 0.01 (set above) per URL a link made known: every
    # account but the seed and a redirect's target, if new; never twice.
    known = load_jobdir(jobdir / "aopic").totals().known
    discovered = (stats["aopic/cash_injected_total"] - 1.0) / 0.01
    assert discovered == pytest.approx(round(discovered), abs=1e-6)
    assert known - 1 - len(SPECIAL) <= round(discovered) <= known - 1
    assert books(stats) <= 1e-9
    assert not list((jobdir / "aopic").glob("*.corrupt"))


@pytest.mark.parametrize("mode", ["fresh", "salvage"])
def test_recovery_afresh_says_what_it_did_not_what_to_run(tmp_path, mode, caplog):
    """Starting afresh under AOPIC_JOBDIR_RECOVERY, the warning names the
    damage and the mode, once prefixed, and does not tell the user to run
    with the mode they ran with ('aopic: aopic: ... run it with -s
    AOPIC_JOBDIR_RECOVERY=salvage' under salvage)."""
    store = JournaledStore(tmp_path / "aopic")
    store.inject(Link("http://a.example/", "a.example", 0), 1.0)
    store.close()
    (snapshot,) = files(tmp_path, "snapshot.*.jsonl")
    snapshot.write_bytes(snapshot.read_bytes()[:40])  # the header cut off
    with caplog.at_level(logging.WARNING):
        again = JournaledStore(tmp_path / "aopic", recovery=mode)
    (message,) = [r.getMessage() for r in caplog.records if "afresh" in r.getMessage()]
    assert "is damaged" in message and f"AOPIC_JOBDIR_RECOVERY={mode}: " in message
    assert "aopic: aopic:" not in message and "run it with" not in message
    again.close()


# -- 8. a refused JOBDIR under `scrapy crawl`: one ERROR, exit status 1, no traceback ---------


def _orphan_journal(path: Path) -> None:
    generation = int(path.name.split(".")[1])
    orphan = path.with_name(f"journal.{generation + 1}.jsonl")
    orphan.write_text('{"journal":{"crawl":"another","generation":%d}}\n["lambda"]\n' % (generation + 1))


def _lost_snapshot(path: Path) -> None:
    path.unlink()


@pytest.fixture(scope="module")
def scrapy_crawled(tmp_path_factory):
    """A `scrapy crawl` project, a site, and the JOBDIR of a crawl of it
    stopped after 15 pages."""
    from tests.integration.test_commands import make_project, run_scrapy

    root = tmp_path_factory.mktemp("refused")
    with LocalSite(pages=60) as site:
        project = make_project(root / "project")
        jobdir = root / "job"
        args = ["crawl", "followall", "-a", f"seeds={site.base}/p0", "-s", "CLOSESPIDER_PAGECOUNT=15"]
        first = run_scrapy(args + ["-s", f"JOBDIR={jobdir}"], project)
        assert first.returncode == 0, first.stderr[-3000:]
        yield project, jobdir, args


def _digests(directory: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "lock"}


@pytest.mark.parametrize("damage", [_truncate_mid_line, _truncate_at_line, _garbage, _bad_header, _edited,
                                    _orphan_journal, _lost_snapshot, "in_use"],
                         ids=lambda d: d if isinstance(d, str) else d.__name__.strip("_"))
def test_scrapy_crawl_on_a_refused_jobdir_ends_cleanly(tmp_path, scrapy_crawled, damage):
    """Before: the ERROR came after Scrapy's own cleanup tracebacks
    ("Scraper close failure", CoreStats and SpiderState assertions, "Task
    exception was never retrieved"). Now: one ERROR naming the file and the
    recovery settings, a close with its own reason, exit status 1, nothing
    in the JOBDIR changed (not even the saved stats, simhash or recrawl
    state of the crawl it belongs to)."""
    import shutil

    from tests.integration.test_commands import run_scrapy

    project, original, args = scrapy_crawled
    jobdir = tmp_path / "job"
    shutil.copytree(original, jobdir)
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    holder = None
    if damage == "in_use":
        holder = JournaledStore(jobdir / "aopic")
        named, expected = str(jobdir), "is in use by pid"
    else:
        damage(snapshot)
        named = "journal." if damage in (_orphan_journal, _lost_snapshot) else snapshot.name
        expected = "AOPIC_JOBDIR_RECOVERY=fresh"
    before = _digests(jobdir)
    try:
        result = run_scrapy(args + ["-s", f"JOBDIR={jobdir}"], project)
    finally:
        if holder is not None:
            holder.close()
    log = result.stderr
    assert result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-5000:]
    errors = [line for line in log.splitlines() if "] ERROR: " in line or "] CRITICAL: " in line]
    assert len(errors) == 1, errors
    assert named in errors[0] and expected in errors[0], errors[0]
    if damage != "in_use":
        assert "AOPIC_JOBDIR_RECOVERY=salvage" in errors[0]
    reason = "jobdir_in_use" if damage == "in_use" else "jobdir_damaged"
    assert f"Spider closed ({reason})" in log
    assert f"'aopic/{reason}': 1" in log
    if holder is None:
        assert _digests(jobdir) == before


def test_a_refused_jobdir_closes_a_spider_that_keeps_itself_open(tmp_path, stopped_crawl):
    """A spider that never closes when idle (DontCloseSpider, as queue-fed
    spiders do) is closed all the same: the close is asked for as soon as
    the engine runs, not left to the idle signal."""
    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    _garbage(snapshot)
    started = time.monotonic()
    stats, log = crawl(tmp_path, "kept-open", site, jobdir, EXTENSIONS={"__main__.KeepOpen": 0})
    assert time.monotonic() - started < 60
    assert "Spider closed (jobdir_damaged)" in log and stats["aopic/jobdir_damaged"] == 1
    assert "Traceback" not in log


# -- 9. salvage when the snapshot's header is damaged ------------------------------------------


def _site_frontier(directory: Path, pages: int = 12):
    """A frontier of a small linked site: a crawl closed cleanly (snapshot
    of every account), reopened, a few more visits journaled, then killed.
    Returns the crawl id and the state a resume must find."""
    from scrapy_aopic.engine import AopicEngine

    def link(i, depth=1):
        return Link(f"http://s.example/{i}", "s.example", depth)

    store = JournaledStore(directory)
    engine = AopicEngine(store)
    engine.add_seed(link(0, 0), 1.0)
    engine.add_seed(Link("http://t.example/", "t.example", 0), 1.0)
    for _ in range(6):
        lease = engine.next()
        n = int(lease.url.rsplit("/", 1)[1] or 0) if "s.example" in lease.url else 0
        engine.visit(lease, [link((n * 3 + k) % pages) for k in (1, 2, 5)])
    store.close()
    store = JournaledStore(directory)  # generation 3: its snapshot, then a journal
    engine = AopicEngine(store)
    for _ in range(3):
        lease = engine.next()
        engine.visit(lease, [link(pages + 1), link(pages + 2)])
    in_flight = engine.next()  # leased at the kill: given back on resume
    crawl = store.crawl_id
    accounts, lambda_cash, _, injected = store.recount()
    expected = {v.url: (PENDING if v.url == in_flight.url else v.state,
                        v.cash + (in_flight.cash if v.url == in_flight.url else 0.0))
                for v in store.iter_accounts()}
    store._journal.close()
    store._lock.release()  # killed
    return crawl, expected, lambda_cash, injected


def _replace_line(path: Path, index: int, data: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[index] = data
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("header", [b'{"hello": 1}\n', b"\x00\xffgarbage\n",
                                    b'{"lambda_targets":"pending","injected":-1}\n'],
                         ids=["not-a-header", "garbage", "bad-totals"])
def test_salvage_rebuilds_the_accounts_of_a_snapshot_whose_header_is_damaged(tmp_path, header, caplog):
    """Before: salvage gave up on a damaged header and started afresh (every
    page fetched again). Now every account is kept from its own record, the
    journal since the snapshot is replayed (its header names the crawl),
    and what is lost is said: lambda's cash at the snapshot, which only the
    header held."""
    directory = tmp_path / "aopic"
    crawl, expected, lambda_cash, injected = _site_frontier(directory)
    (snapshot,) = files(tmp_path, "snapshot.*.jsonl")
    lambda_at_snapshot = json.loads(snapshot.read_bytes().splitlines()[0])["lambda_cash"]
    assert lambda_at_snapshot > 0
    _replace_line(snapshot, 0, header)
    with pytest.raises(JobdirError, match="is damaged"):
        JournaledStore(directory)
    with caplog.at_level(logging.WARNING):
        again = JournaledStore(directory, recovery="salvage")
    try:
        got = {v.url: (v.state, v.cash) for v in again.iter_accounts()}
        assert got.keys() == expected.keys()
        # Every account in the state it had; its cash short only of its
        # share of what lambda held at the snapshot (lambda visits since
        # paid pending pages out of it).
        for url, (state, cash) in expected.items():
            assert got[url][0] == state and got[url][1] <= cash + 1e-12, url
        assert again.crawl_id == crawl and again.replayed > 0
        assert again.header_lost and again.records_lost == 0 and again.cash_lost is None
        accounts, lambda_now, in_flight, injected_now = again.recount()
        assert in_flight == 0.0
        assert abs(accounts + lambda_now - injected_now) <= 1e-12  # the books balance
        # What is lost is exactly lambda's cash at the snapshot.
        assert injected_now == pytest.approx(injected - lambda_at_snapshot, abs=1e-12)
        message = " ".join(r.getMessage() for r in caplog.records)
        assert "header is unreadable" in message and "lambda's cash" in message and "0 records lost" in message
        assert (snapshot.parent / (snapshot.name + ".corrupt")).exists()
    finally:
        again.close()
    reopened = JournaledStore(directory)  # the salvaged state is a sound JOBDIR
    assert {v.url for v in reopened.iter_accounts()} == expected.keys()
    reopened.close()


def test_salvage_skips_a_bad_record_counts_and_names_it_and_keeps_the_rest(tmp_path, caplog):
    directory = tmp_path / "aopic"
    _, expected, _, _ = _site_frontier(directory)
    (snapshot,) = files(tmp_path, "snapshot.*.jsonl")
    lines = snapshot.read_bytes().splitlines(keepends=True)
    # Two accounts the journal since does not name (a replay stops at an
    # entry about an account that is not there): one gets cash below zero,
    # the other's line is unreadable; the header is gone too.
    journal = files(tmp_path, "journal.*.jsonl")[0].read_text()
    untouched = [i for i, line in enumerate(lines[1:-1], 1)  # records: line 2 is the exact part (format 3)
                 if isinstance(json.loads(line), list) and f'"{json.loads(line)[0]}"' not in journal]
    crawled, pending = untouched[:2]
    record = json.loads(lines[crawled])
    record[2] = -5.0
    lines[crawled] = (json.dumps(record) + "\n").encode()
    unreadable = json.loads(lines[pending])[0]
    lines[pending] = b"\xff\xfe not json\n"
    lines[0] = b"{}\n"
    snapshot.write_bytes(b"".join(lines))
    with caplog.at_level(logging.WARNING):
        again = JournaledStore(directory, recovery="salvage")
    try:
        assert again.records_lost == 2 and again.header_lost
        message = " ".join(r.getMessage() for r in caplog.records)
        assert "2 records lost" in message and record[0] in message
        known = {v.url for v in again.iter_accounts()}
        assert record[0] not in known
        assert known >= expected.keys() - {record[0], unreadable}
        accounts, lambda_now, in_flight, injected_now = again.recount()
        assert abs(accounts + lambda_now + in_flight - injected_now) <= 1e-12
        assert all(v.cash >= 0 for v in again.iter_accounts())
    finally:
        again.close()


def test_a_crawl_salvaged_from_a_damaged_header_fetches_nothing_twice(tmp_path, stopped_crawl):
    """End to end: a crawl stopped after 30 pages, its snapshot's header
    overwritten, resumed with AOPIC_JOBDIR_RECOVERY=salvage: the pages
    crawled before are not fetched again, the rest are, the books balance."""
    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    _bad_header(snapshot)
    stats, log = crawl(tmp_path, "salvaged", site, jobdir, AOPIC_JOBDIR_RECOVERY="salvage")
    assert "header is unreadable" in log
    assert stats["aopic/jobdir/recovered/salvage"] == 1 and stats["aopic/jobdir/header_lost"] == 1
    assert "aopic/jobdir/records_lost" not in stats
    assert books(stats) <= 1e-9
    hits = dict(site.hits)
    reachable = site.reachable_pages()
    assert all(hits.get(page, 0) == 1 for page in reachable), {p: hits.get(p) for p in reachable if hits.get(p) != 1}


def test_a_raised_next_seq_resumes_counted_logged_once_and_balanced(tmp_path, stopped_crawl):
    """A snapshot whose header's next_seq was raised (an edit, sealed again so
    only the content checks see it; salvage of lost records leaves the same
    gap) resumes: the accounts are numbered again, the gap is the stat
    ``aopic/jobdir/unused_seqs`` and one log line, and the crawl finishes
    with balanced books, fetching nothing twice."""
    import scrapy_aopic
    from scrapy_aopic.store.journal import read_snapshot, write_snapshot

    site, jobdir = stopped_crawl
    (snapshot,) = files(jobdir, "snapshot.*.jsonl")
    header, records = read_snapshot(snapshot)
    gap = 1000
    assert header["next_seq"] == len(records)  # a crawl's own snapshot: no gap
    header["next_seq"] += gap
    write_snapshot(snapshot, header, records)
    stats, log = crawl(tmp_path, "resumed", site, jobdir)
    assert stats.get("aopic/jobdir/unused_seqs") == gap, log[-2000:]
    assert log.count("sequence numbers handed out in JOBDIR") == 1, log[-2000:]
    assert f"{gap} sequence numbers handed out in JOBDIR {jobdir / 'aopic'}" in log
    assert stats.get("finish_reason") == "finished"
    assert f'File "{os.path.dirname(scrapy_aopic.__file__)}' not in log  # the site's /slow times out: not ours
    assert books(stats) <= 1e-9
    hits = dict(site.hits)
    reachable = site.reachable_pages()
    assert all(hits.get(page, 0) == 1 for page in reachable), {p: hits.get(p) for p in reachable if hits.get(p) != 1}
