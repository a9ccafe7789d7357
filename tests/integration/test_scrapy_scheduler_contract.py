"""Scrapy's own scheduler tests, adapted to AopicScheduler where the contract applies.

Sources: Scrapy's tests/test_scheduler.py, tests/test_scheduler_base.py,
tests/test_dupefilters.py, tests/test_pqueues.py and
tests/test_engine_loop.py (Scrapy 2.19.0 sdist; 2.13.4 where a test is
older). Each test below names the original it ports; "adapted" says where
AOPIC's contract (cash order, the direct lane for priority > 0, the frontier
as duplicate filter) replaces Scrapy's.

test_migration passes by a warning: a JOBDIR of Scrapy's scheduler is not
read.

Not ported (Scrapy test: why):

test_scheduler.py
- TestIntegrationWithDownloaderAwareInMemory::test_integration_downloader_aware_priority_queue: expects 6 fetches of one URL under BaseDupeFilter; AOPIC ignores DUPEFILTER_CLASS and merges repeated seeds by design (AOPIC_REFETCH_SEEDS).
- TestIncompatibility::test_incompatibility: DownloaderAwarePriorityQueue vs CONCURRENT_REQUESTS_PER_IP; AOPIC uses no priority-queue class.
- test_scheduler_without_crawler: Scheduler(dupefilter) without a crawler; AOPIC's state is the per-crawler Frontier (settings, stats, signals), nothing to build without one.
- TestSchedulerWithDownloaderAware{InMemory,OnDisk}::test_length/test_dequeue/test_dequeue_priorities: the same tests with another SCHEDULER_PRIORITY_QUEUE, which AOPIC ignores; covered by the parametrized ports below.

test_scheduler_base.py
- TestBaseScheduler::test_methods: checks BaseScheduler's own NotImplementedError stubs, not a scheduler.
- TestMinimalScheduler::test_open_close, ::test_len: check that a duck-typed scheduler without open/close/__len__ raises AttributeError; AopicScheduler has them.

test_dupefilters.py
- TestRFPDupeFilter::test_df_from_crawler_scheduler, ::test_df_direct_scheduler: Scheduler.df built from DUPEFILTER_CLASS; AOPIC has no df (the frontier deduplicates; the setting is named as ignored).
- TestRFPDupeFilter::test_request_fingerprint: a custom REQUEST_FINGERPRINTER_CLASS changes what is a duplicate; AOPIC deduplicates by canonical URL (AOPIC_CANONICAL_*).
- TestRFPDupeFilter::test_seenreq_truncated: requests.seen file format; AOPIC keeps its own journal.
- TestRFPDupeFilter::test_log, ::test_log_debug: RFPDupeFilter's log lines and dupefilter/filtered; AOPIC counts aopic/duplicates_merged.
- TestRFPDupeFilter::test_fingerprints_deprecation, ::test_request_fingerprint_override_deprecation, TestBaseDupeFilter::test_log_deprecation: RFPDupeFilter deprecation shims.

test_pqueues.py (priority-queue classes, which AOPIC does not use)
- TestPriorityQueue::test_queue_push_pop_one, ::test_no_peek_raises, ::test_peek, ::test_queue_push_pop_priorities: ScrapyPriorityQueue's push/pop/peek API.
- TestPriorityQueue::test_init_prios_with_start_queue: startprios state of the start disk queue; AOPIC's JOBDIR state is its journal (persistence ported below).
- TestDownloaderAwarePriorityQueue::test_push_pop, ::test_no_peek_raises, ::test_peek, ::test_contains: DownloaderAwarePriorityQueue's API.
- TestDownloaderAwarePriorityQueue::test_tie_breaking_rotates_slots, ::test_tie_breaking_keeps_rotation_after_selected_slot_is_deleted, ::test_pop_prefers_slot_with_fewer_active_downloads: least-active-slot rotation; AOPIC only skips full slots, cash decides among the rest (slot fairness ported as test_logic below).
- test_slot_directory_removed_when_slot_drains: per-slot disk queue directories.

test_engine_loop.py
- TestMain::* (test_sleep, test_close_during_start_iteration, test_start_not_an_async_generator, test_start_error, test_close_spider_from_start): the engine's start iteration, with a stub scheduler.
- TestRequestSendOrder::test_default: same-priority non-start requests before start requests; in AOPIC a seed holds cash and goes first (the scheduler-level order is ported from test_pqueues.py::test_pop_order).
- TestRequestSendOrder::test_lifo_start, ::test_shared_queues: orders set by SCHEDULER_START_MEMORY_QUEUE, which AOPIC does not use (named as ignored: test_start_queue_settings_named_as_ignored).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader import Downloader, Slot
from scrapy.core.scheduler import BaseScheduler, Scheduler
from scrapy.utils.test import get_crawler

from scrapy_aopic.scheduler import AopicScheduler
from tests.support.localsite import LocalSite

RUNNER = Path(__file__).parents[1] / "support" / "contractrun.py"

# Scrapy's tests/test_scheduler.py data.
_PRIORITIES = [
    ("http://foo.com/a", -2),
    ("http://foo.com/d", 1),
    ("http://foo.com/b", -1),
    ("http://foo.com/c", 0),
    ("http://foo.com/e", 2),
]
_URLS = {"http://foo.com/a", "http://foo.com/b", "http://foo.com/c"}
_URLS_WITH_SLOTS = [
    ("http://foo.com/a", "a"),
    ("http://foo.com/b", "a"),
    ("http://foo.com/c", "b"),
    ("http://foo.com/d", "b"),
    ("http://foo.com/e", "c"),
    ("http://foo.com/f", "c"),
]
# Scrapy's tests/test_scheduler_base.py data.
_BASE_URLS = ["https://example.org/a", "https://example.org/b", "https://example.org/c"]


class ContractSpider(Spider):
    name = "spider"

    def parse(self, response):
        pass


def scrapy_settings(priority_queue_cls: str = "scrapy.pqueues.ScrapyPriorityQueue") -> dict:
    """The settings of Scrapy's tests/test_scheduler.py::MockCrawler (the
    queue and dupefilter classes are named as ignored by AOPIC)."""
    return {
        "SCHEDULER_DEBUG": False,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleLifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.LifoMemoryQueue",
        "SCHEDULER_PRIORITY_QUEUE": priority_queue_cls,
        "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
    }


def make(settings=None, jobdir=None, downloader=None):
    """An open AopicScheduler the way the add-on builds it."""
    settings = {"ADDONS": {"scrapy_aopic.Addon": 0}, **(settings or {})}
    if jobdir is not None:
        settings["JOBDIR"] = str(jobdir)
    crawler = get_crawler(ContractSpider, settings)
    scheduler = AopicScheduler.from_crawler(crawler)
    assert scheduler.open(ContractSpider()) is None
    scheduler.frontier.probe._downloader = downloader
    return scheduler


class Handler:
    """Scrapy's create_scheduler_for_assertions: with ``reopen`` (the OnDisk
    classes, JOBDIR) the scheduler is closed after the setup and a new one
    opened on the same JOBDIR for the assertions."""

    def __init__(self, reopen: bool, tmp_path: Path, settings=None):
        self.reopen = reopen
        self.jobdir = tmp_path / "job" if reopen else None
        self.settings = settings or {}

    def create(self, downloader=None):
        return make(self.settings, self.jobdir, downloader)

    def for_assertions(self, setup, downloader=None):
        scheduler = self.create(downloader)
        setup(scheduler)
        if self.reopen:
            scheduler.close("finished")
            scheduler = self.create(downloader)
        return scheduler


def drain(scheduler):
    out = []
    while scheduler.has_pending_requests():
        request = scheduler.next_request()
        assert request is not None
        out.append(request)
    assert scheduler.next_request() is None
    return out


ON_DISK = pytest.mark.parametrize("reopen", [False, True], ids=["in_memory", "on_disk"])
QUEUES = pytest.mark.parametrize(
    "pqueue", ["scrapy.pqueues.ScrapyPriorityQueue", "scrapy.pqueues.DownloaderAwarePriorityQueue"],
    ids=["scrapy_pq", "downloader_aware_pq"],
)


# -- tests/test_scheduler.py ------------------------------------------------------


@ON_DISK
@QUEUES
def test_length(tmp_path, reopen, pqueue):
    # Scrapy: tests/test_scheduler.py::TestSchedulerInMemory::test_length,
    # ::TestSchedulerOnDisk::test_length (and the DownloaderAware variants).
    def setup(scheduler):
        assert not scheduler.has_pending_requests()
        assert len(scheduler) == 0
        for url in _URLS:
            scheduler.enqueue_request(Request(url))

    scheduler = Handler(reopen, tmp_path, scrapy_settings(pqueue)).for_assertions(setup)
    assert scheduler.has_pending_requests()
    assert len(scheduler) == len(_URLS)


@ON_DISK
@QUEUES
def test_dequeue(tmp_path, reopen, pqueue):
    # Scrapy: tests/test_scheduler.py::TestSchedulerInMemory::test_dequeue,
    # ::TestSchedulerOnDisk::test_dequeue (and the DownloaderAware variants).
    def setup(scheduler):
        for url in _URLS:
            scheduler.enqueue_request(Request(url))

    scheduler = Handler(reopen, tmp_path, scrapy_settings(pqueue)).for_assertions(setup)
    urls = set()
    while scheduler.has_pending_requests():
        request = scheduler.next_request()
        assert request is not None
        urls.add(request.url)
    assert urls == _URLS
    assert len(scheduler) == 0


@ON_DISK
@QUEUES
def test_dequeue_priorities(tmp_path, reopen, pqueue):
    # Scrapy: tests/test_scheduler.py::TestSchedulerInMemory::test_dequeue_priorities,
    # ::TestSchedulerOnDisk::test_dequeue_priorities (and the DownloaderAware variants).
    # Adapted: Scrapy pops by priority (2, 1, 0, -1, -2). In AOPIC a positive
    # priority goes through the direct lane (highest first); a priority <= 0
    # does not change the cash order (equal cash here: first in, first out).
    # AOPIC_DIRECT_LANE_SHARE = 1.0 lets the lane go first whatever waits.
    def setup(scheduler):
        for url, priority in _PRIORITIES:
            assert scheduler.enqueue_request(Request(url, priority=priority))

    settings = {**scrapy_settings(pqueue), "AOPIC_DIRECT_LANE_SHARE": 1.0}
    scheduler = Handler(reopen, tmp_path, settings).for_assertions(setup)
    priorities = [request.priority for request in drain(scheduler)]
    assert priorities == [2, 1, -2, -1, 0]


@ON_DISK
def test_dequeue_priorities_default_lane_share(tmp_path, reopen):
    # Scrapy: tests/test_scheduler.py::TestSchedulerInMemory::test_dequeue_priorities,
    # ::TestSchedulerOnDisk::test_dequeue_priorities.
    # Adapted to the default AOPIC_DIRECT_LANE_SHARE (0.5): the lane takes at
    # most half of what is handed out while cash-ordered URLs wait, so the
    # lane and the cash order alternate, each in its own order.
    def setup(scheduler):
        for url, priority in _PRIORITIES:
            scheduler.enqueue_request(Request(url, priority=priority))

    scheduler = Handler(reopen, tmp_path).for_assertions(setup)
    out = drain(scheduler)
    assert [request.priority for request in out] == [2, -2, 1, -1, 0]
    assert {request.url for request in out} == {url for url, _ in _PRIORITIES}


def _is_scheduling_fair(enqueued_slots, dequeued_slots):
    # Scrapy's tests/test_scheduler.py::_is_scheduling_fair, verbatim.
    if len(dequeued_slots) != len(enqueued_slots):
        return False
    slots_number = len(set(enqueued_slots))
    for i in range(0, len(dequeued_slots), slots_number):
        part = dequeued_slots[i : i + slots_number]
        if len(part) != len(set(part)):
            return False
    return True


class SlotDownloader:
    """Scrapy's tests' MockDownloader (get_slot_key, increment, decrement)
    with real download slots, which the frontier reads (concurrency 1)."""

    def __init__(self):
        self.slots: dict[str, Slot] = {}

    def get_slot_key(self, request):
        if Downloader.DOWNLOAD_SLOT in request.meta:
            return request.meta[Downloader.DOWNLOAD_SLOT]
        return request.url.split("/")[2]

    def increment(self, slot_key, request):
        self.slots.setdefault(slot_key, Slot(1, 0, 0)).active.add(request)

    def decrement(self, slot_key, request):
        self.slots[slot_key].active.discard(request)


@ON_DISK
def test_logic(tmp_path, reopen):
    # Scrapy: tests/test_scheduler.py::TestSchedulerWithDownloaderAwareInMemory::test_logic,
    # ::TestSchedulerWithDownloaderAwareOnDisk::test_logic.
    # Adapted: DownloaderAwarePriorityQueue prefers the slot with the fewest
    # active downloads; AOPIC skips a slot that is full (concurrency 1 here)
    # and waits (next_request() None, has_pending_requests() True) when all
    # are. Downloads finish when nothing more can be handed out; the slots
    # must still come out fair, and none stay active.
    def setup(scheduler):
        for url, slot in _URLS_WITH_SLOTS:
            request = Request(url)
            request.meta[Downloader.DOWNLOAD_SLOT] = slot
            scheduler.enqueue_request(request)

    downloader = SlotDownloader()
    scheduler = Handler(reopen, tmp_path, scrapy_settings("scrapy.pqueues.DownloaderAwarePriorityQueue")).for_assertions(
        setup, downloader
    )
    dequeued_slots, active = [], []
    while scheduler.has_pending_requests():
        request = scheduler.next_request()
        if request is None:  # every slot with a request is full: downloads finish
            assert active
            for done in active:
                downloader.decrement(downloader.get_slot_key(done), done)
            active.clear()
            continue
        slot = downloader.get_slot_key(request)
        dequeued_slots.append(slot)
        downloader.increment(slot, request)
        active.append(request)
    for done in active:
        downloader.decrement(downloader.get_slot_key(done), done)
    assert _is_scheduling_fair([s for _, s in _URLS_WITH_SLOTS], dequeued_slots)
    assert sum(len(s.active) for s in downloader.slots.values()) == 0


def test_migration(tmp_path, caplog):
    # Scrapy: tests/test_scheduler.py::TestMigration::test_migration.
    # Adapted: Scrapy refuses (ValueError) a JOBDIR whose queue state the new
    # priority queue cannot read, instead of losing it. The AOPIC version:
    # resuming with AopicScheduler a JOBDIR that Scrapy's scheduler left
    # requests in must either refuse it or say so, never drop them quietly.
    crawler = get_crawler(Spider, {**scrapy_settings(), "JOBDIR": str(tmp_path)})
    prev = Scheduler.from_crawler(crawler)
    prev.open(Spider(name="spider"))
    for url in _URLS:
        prev.enqueue_request(Request(url))
    prev.close("finished")
    assert (tmp_path / "requests.queue").is_dir()

    with caplog.at_level(logging.WARNING):
        try:
            scheduler = make(jobdir=tmp_path)
        except ValueError:
            return
    if len(scheduler) == len(_URLS):
        return  # read back
    assert sum("requests.queue" in record.getMessage() for record in caplog.records) == 1
    assert scheduler.crawler.stats.get_value("aopic/ignored_scrapy_queue") == 1


@ON_DISK
def test_unserializable_requests(tmp_path, reopen, caplog):
    # Scrapy (2.19): tests/test_scheduler.py::test_unserializable_requests.
    # Adapted: scheduler-level and with http URLs (data: URLs are the xfail
    # below). With JOBDIR, requests that cannot be stored fall back to
    # memory: counted in scheduler/unserializable, said once in the log, and
    # still handed out. Without JOBDIR nothing needs storing.
    jobdir = tmp_path / "job" if reopen else None
    with caplog.at_level(logging.WARNING):
        scheduler = make({"SCHEDULER_DEBUG": True}, jobdir)
        for index in range(2):
            assert scheduler.enqueue_request(
                Request(f"http://foo.com/{index}", meta={"callable": lambda: None, "is_start_request": True})
            )
    stats = scheduler.crawler.stats
    assert len(scheduler) == 2
    assert {request.url for request in drain(scheduler)} == {"http://foo.com/0", "http://foo.com/1"}
    if reopen:
        assert stats.get_value("scheduler/unserializable") == 2
        assert caplog.text.count("cannot be stored as data") == 1
    else:
        assert stats.get_value("scheduler/unserializable") is None


@pytest.mark.parametrize("meta", [{"is_start_request": True}, {"aopic_link": False}], ids=["start", "non_link"])
def test_unserializable_requests_data_urls(meta):
    # Scrapy (2.19): tests/test_scheduler.py::test_unserializable_requests
    # (its requests are data: URLs, which Scrapy downloads). AopicScheduler
    # must queue and hand out a request Scrapy can download: start requests
    # and non-links go through the direct lane, without cash.
    scheduler = make()
    assert scheduler.enqueue_request(Request("data:,0", meta=dict(meta)))
    request = scheduler.next_request()
    assert request is not None and request.url == "data:,0"
    assert scheduler.frontier.engine.totals().injected == 0  # no seed cash for it


# -- tests/test_scheduler_base.py ---------------------------------------------------


def test_scheduler_class():
    # Scrapy: tests/test_scheduler_base.py::InterfaceCheckMixin::test_scheduler_class.
    scheduler = make()
    assert isinstance(scheduler, BaseScheduler)
    assert issubclass(scheduler.__class__, BaseScheduler)


def test_enqueue_dequeue():
    # Scrapy: tests/test_scheduler_base.py::TestSimpleScheduler::test_enqueue_dequeue,
    # ::TestMinimalScheduler::test_enqueue_dequeue.
    # Adapted: open() and close() return None (BaseScheduler's contract)
    # instead of SimpleScheduler's Deferreds.
    scheduler = make()  # asserts open() is None
    assert not scheduler.has_pending_requests()
    for url in _BASE_URLS:
        assert scheduler.enqueue_request(Request(url))
        assert not scheduler.enqueue_request(Request(url))
    assert scheduler.has_pending_requests()
    assert len(scheduler) == len(_BASE_URLS)
    dequeued = []
    while scheduler.has_pending_requests():
        dequeued.append(scheduler.next_request().url)
    assert set(dequeued) == set(_BASE_URLS)
    assert not scheduler.has_pending_requests()
    assert len(scheduler) == 0
    assert scheduler.close("") is None


def run_crawl(tmp_path, spider: str, site: LocalSite, base: str | None = None, **settings) -> dict:
    out = tmp_path / f"{spider}.json"
    config = tmp_path / f"{spider}.config.json"
    config.write_text(json.dumps({"spider": spider, "base": base or site.base, "settings": settings, "out": str(out)}))
    log_path = tmp_path / f"{spider}.log"
    with open(log_path, "w") as log:
        code = subprocess.run([sys.executable, str(RUNNER), str(config)], stdout=log, stderr=subprocess.STDOUT,
                              timeout=120).returncode
    log_text = log_path.read_text()
    assert code == 0, log_text[-3000:]
    assert "Traceback" not in log_text, log_text[-3000:]
    report = json.loads(out.read_text())
    report["log"] = log_text
    return report


def test_crawl(tmp_path):
    # Scrapy: tests/test_scheduler_base.py::TestMinimalSchedulerCrawl::test_crawl,
    # ::TestSimpleSchedulerCrawl::test_crawl.
    # Adapted: the add-on's scheduler instead of SCHEDULER, the local site's
    # /p0 /p1 /p2 instead of the mock server's /a /b /c.
    with LocalSite(pages=10) as site:
        report = run_crawl(tmp_path, "paths", site, LOG_LEVEL="DEBUG")
    paths = ["/p0", "/p1", "/p2"]
    assert sorted(item["path"] for item in report["items"]) == paths
    assert report["stats"]["item_scraped_count"] == len(paths)
    assert report["stats"]["finish_reason"] == "finished"
    for path in paths:
        assert f"{{'path': '{path}'}}" in report["log"]


@pytest.mark.parametrize("jobdir", [False, True], ids=["memory", "jobdir"])
def test_crawl_non_http_start_requests(tmp_path, jobdir):
    # Scrapy: tests/test_scheduler.py::test_unserializable_requests (data:
    # URLs, which Scrapy downloads), as a real crawl. Start requests for
    # data: and file: URLs and a non-link data: request are fetched (without
    # cash); a data: link is refused as a link; the books balance.
    page = tmp_path / "local.html"
    page.write_text("<html><body>local</body></html>")
    settings = {"JOBDIR": str(tmp_path / "job")} if jobdir else {}
    with LocalSite(pages=10) as site:
        report = run_crawl(tmp_path, "schemes", site, base=f"{site.base} {page.as_uri()}", **settings)
    urls = sorted(item["url"] for item in report["items"])
    assert urls == sorted(["data:text/html,start", page.as_uri(), f"{site.base}/p0", f"{site.base}/p1",
                           "data:,non-link"])
    stats = report["stats"]
    assert stats["finish_reason"] == "finished"
    assert stats["aopic/lane/not_http"] == 2
    assert stats["aopic/refused/unfetchable_url"] == 1
    assert stats["aopic/conservation_error"] <= 1e-9
    assert report["log"].count("are not followed") == 1


# -- tests/test_engine_loop.py --------------------------------------------------------


def test_lazy(tmp_path):
    # Scrapy: tests/test_engine_loop.py::TestRequestSendOrder::test_lazy.
    # start() yields its next request only once the scheduler is empty
    # (signals.scheduler_empty, sent when next_request() returns None); the
    # callback's request goes between. Same order as Scrapy: 1, 2, 3, 4.
    with LocalSite(pages=10, delay=0.2) as site:
        report = run_crawl(tmp_path, "lazy", site, CONCURRENT_REQUESTS=1)
    assert report["stats"]["finish_reason"] == "finished"
    assert report["order"] == [f"{site.base}/p{num}" for num in (1, 2, 3, 4)]


@pytest.mark.parametrize(
    "name, value",
    [
        ("SCHEDULER_START_MEMORY_QUEUE", "scrapy.squeues.LifoMemoryQueue"),
        ("SCHEDULER_START_MEMORY_QUEUE", None),
        ("SCHEDULER_START_DISK_QUEUE", None),
    ],
)
def test_start_queue_settings_named_as_ignored(name, value, caplog):
    # Scrapy: tests/test_engine_loop.py::TestRequestSendOrder::test_lifo_start
    # (LifoMemoryQueue), ::test_shared_queues (None).
    # Adapted: AOPIC does not use Scrapy's start queues (seeds are ordered by
    # cash); as for every setting of the scheduler it replaces, a project that
    # sets one is told so: one WARNING and aopic/ignored_setting/<NAME>.
    with caplog.at_level(logging.WARNING):
        scheduler = make({name: value})
    assert scheduler.crawler.stats.get_value(f"aopic/ignored_setting/{name}") == 1
    assert name in caplog.text


# -- tests/test_pqueues.py --------------------------------------------------------------


@pytest.mark.parametrize(
    "input_, scrapy_output, output",
    [
        # Scrapy: non-start requests are LIFO. AOPIC: equal cash, first in first out.
        ([{}, {}], [2, 1], [1, 2]),
        # Start requests are first in, first out (equal seed cash).
        ([{"start": True}, {"start": True}], [1, 2], [1, 2]),
        # Priority matters: a positive priority goes through the direct lane.
        ([{"priority": 1}, {"start": True}], [1, 2], [1, 2]),
        ([{}, {"start": True, "priority": 1}], [2, 1], [2, 1]),
        # Scrapy: for the same priority, start requests pop last. AOPIC: a
        # start request holds the seed cash, a request the spider enqueues
        # directly has none yet: the seed goes first.
        ([{}, {"start": True}], [1, 2], [2, 1]),
        ([{"start": True}, {}], [2, 1], [1, 2]),
    ],
)
def test_pop_order(input_, scrapy_output, output):
    # Scrapy: tests/test_pqueues.py::test_pop_order (the start-queue order
    # of Scrapy >= 2.13), through the scheduler. Adapted where noted.
    def make_url(index):
        return f"https://toscrape.com/{index}"

    scheduler = make()
    for index, data in enumerate(input_, start=1):
        meta = {"is_start_request": True} if data.get("start", False) else {}
        assert scheduler.enqueue_request(Request(make_url(index), priority=data.get("priority", 0), meta=meta))
    assert [request.url for request in drain(scheduler)] == [make_url(index) for index in output]


# -- tests/test_dupefilters.py ----------------------------------------------------------


def test_filter():
    # Scrapy: tests/test_dupefilters.py::TestRFPDupeFilter::test_filter,
    # through enqueue_request (False: filtered) as Scheduler uses its df.
    scheduler = make()
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")
    r3 = Request("http://scrapytest.org/2")
    assert scheduler.enqueue_request(r1)
    assert not scheduler.enqueue_request(r1)
    assert scheduler.enqueue_request(r2)
    assert not scheduler.enqueue_request(r3)
    assert len(scheduler) == 2


@pytest.mark.parametrize("fetched", [False, True], ids=["pending", "fetched"])
def test_dupefilter_path(tmp_path, fetched):
    # Scrapy: tests/test_dupefilters.py::TestRFPDupeFilter::test_dupefilter_path.
    # What was seen before close is still seen after reopening the JOBDIR,
    # whether still queued or already fetched.
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")
    scheduler = make(jobdir=tmp_path)
    assert scheduler.enqueue_request(r1)
    assert not scheduler.enqueue_request(r1)
    if fetched:
        request = scheduler.next_request()
        scheduler.frontier.engine.visit(scheduler.frontier.lease_of(request), [])
    scheduler.close("finished")

    scheduler2 = make(jobdir=tmp_path)
    assert scheduler2 is not scheduler
    assert not scheduler2.enqueue_request(Request("http://scrapytest.org/1"))
    assert scheduler2.enqueue_request(r2)
    assert not scheduler2.enqueue_request(Request("http://scrapytest.org/2"))
    assert len(scheduler2) == (1 if fetched else 2)


@ON_DISK
def test_dont_filter(tmp_path, reopen):
    # Scrapy: scrapy/core/scheduler.py::Scheduler.enqueue_request ("Unless
    # the received request is filtered out by the Dupefilter"): a
    # dont_filter request is never filtered (no dedicated test in Scrapy's
    # suite). Each one queued is handed out, after a restart too.
    def setup(scheduler):
        assert scheduler.enqueue_request(Request("http://foo.com/x"))
        assert not scheduler.enqueue_request(Request("http://foo.com/x"))
        assert scheduler.enqueue_request(Request("http://foo.com/x", dont_filter=True))
        assert scheduler.enqueue_request(Request("http://foo.com/x", dont_filter=True))

    scheduler = Handler(reopen, tmp_path).for_assertions(setup)
    assert len(scheduler) == 3
    out = drain(scheduler)
    assert [request.url for request in out] == ["http://foo.com/x"] * 3
    assert sum(request.dont_filter for request in out) == 2
