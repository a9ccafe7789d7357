"""AopicScheduler against Scrapy's scheduler contract, politeness and JOBDIR."""

from __future__ import annotations

import json
import math

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader import Slot
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.test import get_crawler

from scrapy_aopic.frontier import Frontier
from scrapy_aopic.frontier.requestcodec import decode_request, encode_request
from scrapy_aopic.scheduler import AopicScheduler
from scrapy_aopic.store import PENDING, Link
from tests.support.redis_server import redis_backend_settings


class BroadSpider(Spider):
    name = "broad"

    def parse(self, response):
        pass

    def parse_other(self, response):
        pass


class FakeDownloader:
    """Just the part of Scrapy's Downloader the frontier reads: its slots."""

    def __init__(self):
        self.slots: dict[str, Slot] = {}
        #: requests the engine pulled that are not in a slot yet (in the downloader middlewares)
        self.pulled: set[Request] = set()

    def fill(self, host: str, active: int, concurrency: int = 2, delay: float = 0.0, transferring: int = 0):
        """``active`` requests in ``host``'s slot: ``transferring`` of them
        downloading, the others waiting in the slot's queue (for the delay,
        or for a transfer place)."""
        slot = Slot(concurrency, delay, 0)
        requests = [Request(f"http://{host}/busy{i}", meta={"download_slot": host}) for i in range(active)]
        slot.active = set(requests)
        slot.transferring = set(requests[:transferring])
        slot.queue.extend((request, None) for request in requests[transferring:])
        self.slots[host] = slot

    @property
    def active(self) -> set[Request]:
        return self.pulled | {request for slot in self.slots.values() for request in slot.active}

    def place(self, request: Request, concurrency: int = 2) -> None:
        """``request`` leaves the middlewares for its slot, to download."""
        self.pulled.discard(request)
        host = request.url.split("/")[2]
        slot = self.slots.setdefault(host, Slot(concurrency, 0.0, 0))
        slot.active.add(request)
        slot.transferring.add(request)


def make_scheduler(settings=None, downloader=None, spider=None):
    spider = spider or BroadSpider()
    crawler = get_crawler(type(spider), {"ADDONS": {"scrapy_aopic.Addon": 0}, **(settings or {})})
    scheduler = AopicScheduler.from_crawler(crawler)
    scheduler.open(spider)
    scheduler.frontier.probe._downloader = downloader
    return scheduler, crawler


def seed(url, **kwargs):
    return Request(url, meta={"is_start_request": True}, **kwargs)


def drain(scheduler):
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def test_is_a_scrapy_scheduler():
    assert issubclass(AopicScheduler, BaseScheduler)
    scheduler, crawler = make_scheduler()
    assert crawler.settings["SCHEDULER"] is AopicScheduler
    assert not scheduler.has_pending_requests()
    assert len(scheduler) == 0
    assert scheduler.next_request() is None


def test_length_and_dequeue():
    scheduler, _ = make_scheduler()
    urls = [f"http://h{i % 3}.example/{i}" for i in range(10)]
    for url in urls:
        assert scheduler.enqueue_request(seed(url))
    assert len(scheduler) == 10 and scheduler.has_pending_requests()
    out = drain(scheduler)
    assert sorted(r.url for r in out) == sorted(urls)
    assert len(scheduler) == 0 and not scheduler.has_pending_requests()
    # Equal cash: first come, first served.
    assert [r.url for r in out] == urls


def test_known_url_merges_instead_of_queueing_twice():
    scheduler, crawler = make_scheduler()
    assert scheduler.enqueue_request(seed("http://a.example/x"))
    assert not scheduler.enqueue_request(Request("http://a.example/x"))
    assert not scheduler.enqueue_request(Request("http://a.example/x#fragment"))
    assert len(scheduler) == 1
    assert crawler.stats.get_value("aopic/duplicates_merged") == 2


def test_priority_does_not_break_it():
    scheduler, _ = make_scheduler()
    scheduler.enqueue_request(seed("http://a.example/1", priority=-100))
    scheduler.enqueue_request(seed("http://a.example/2", priority=100))
    out = drain(scheduler)
    assert {r.url for r in out} == {"http://a.example/1", "http://a.example/2"}
    # A positive priority goes through the direct lane, ahead of the cash
    # order; a negative one is the cash order's; both stay on the request.
    assert [r.priority for r in out] == [100, -100]


def test_requests_come_back_whole():
    scheduler, _ = make_scheduler()
    request = Request(
        "http://a.example/api",
        method="POST",
        body=b"q=1",
        headers={"X-Token": "t"},
        callback=BroadSpider().parse_other,
        meta={"is_start_request": True, "custom": [1, 2]},
        cb_kwargs={"page": 3},
    )
    scheduler.enqueue_request(request)
    out = scheduler.next_request()
    assert out.method == "POST" and out.body == b"q=1"
    assert out.headers[b"X-Token"] == b"t"
    assert out.meta["custom"] == [1, 2]
    assert out.cb_kwargs == {"page": 3}
    assert out.callback.__name__ == "parse_other"


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("url", ["http://a.example/p", "http://A.example/p#frag"])
def test_followed_links_with_a_referer_are_stored_small_and_come_back_whole(portable, url):
    """Scrapy's RefererMiddleware gives every followed link a Referer
    header: such a link is stored as the header and URL, not as a Request."""
    spider = BroadSpider()
    link = Request(url, callback=spider.parse, headers={"Referer": "http://a.example/"}, meta={"depth": 2})
    data = encode_request(link, "http://a.example/p", spider, portable=portable)
    assert not isinstance(data, Request)
    if portable:
        data = json.loads(json.dumps(data))
    out = decode_request("http://a.example/p", data, spider)
    assert out.url == link.url and out.method == "GET" and out.callback is None
    assert out.headers.getlist(b"Referer") == [b"http://a.example/"]
    # Any other header makes it a full request again.
    link.headers[b"X-Other"] = b"1"
    assert isinstance(encode_request(link, "http://a.example/p", spider, portable=False), Request)


@pytest.mark.parametrize("portable", [False, True])
def test_a_crawl_spiders_own_parse_callback_is_kept(portable):
    """Where a request without a callback runs something else than
    ``parse`` (a CrawlSpider's ``_parse`` runs its rules), an explicit
    ``callback=spider.parse`` is not stored as "no callback"."""
    from scrapy.spiders import CrawlSpider

    class RulesSpider(CrawlSpider):
        name = "rules"

        def parse(self, response):
            pass

    spider = RulesSpider()
    link = Request("http://a.example/p", callback=spider.parse, headers={"Referer": "http://a.example/"})
    data = encode_request(link, "http://a.example/p", spider, portable=portable)
    if portable:
        data = json.loads(json.dumps(data))
    out = decode_request("http://a.example/p", data, spider)
    assert out.callback is not None and out.callback.__name__ == "parse"
    # On a plain spider the same link is stored small and runs parse as before.
    plain = BroadSpider()
    link = Request("http://a.example/p", callback=plain.parse, headers={"Referer": "http://a.example/"})
    assert not isinstance(encode_request(link, "http://a.example/p", plain, portable=False), Request)


def test_dont_filter_queues_a_crawled_url_again():
    scheduler, _ = make_scheduler()
    scheduler.enqueue_request(seed("http://a.example/x"))
    request = scheduler.next_request()
    frontier = scheduler.frontier
    frontier.engine.visit(frontier.lease_of(request), [])
    assert not scheduler.enqueue_request(Request("http://a.example/x"))
    assert scheduler.enqueue_request(Request("http://a.example/x", dont_filter=True))
    assert scheduler.next_request().url == "http://a.example/x"


def test_dominant_host_does_not_starve_others():
    downloader = FakeDownloader()
    scheduler, _ = make_scheduler(downloader=downloader)
    for i in range(500):
        scheduler.enqueue_request(seed(f"http://big.example/{i}"))
    scheduler.enqueue_request(seed("http://small.example/a"))
    scheduler.enqueue_request(seed("http://other.example/a"))
    downloader.fill("big.example", active=2, concurrency=2)
    out = [scheduler.next_request(), scheduler.next_request()]
    assert {r.url for r in out} == {"http://small.example/a", "http://other.example/a"}
    assert scheduler.next_request() is None  # only the full host is left
    assert scheduler.has_pending_requests()
    downloader.fill("big.example", active=1, concurrency=2)
    assert scheduler.next_request().url.startswith("http://big.example/")


def test_delayed_slot_takes_one_request_at_a_time():
    downloader = FakeDownloader()
    scheduler, _ = make_scheduler(downloader=downloader)
    scheduler.enqueue_request(seed("http://slow.example/1"))
    scheduler.enqueue_request(seed("http://slow.example/2"))
    downloader.fill("slow.example", active=1, concurrency=8, delay=2.0)
    assert scheduler.next_request() is None


def test_delayed_slot_with_a_slow_download_takes_the_next_request():
    """A page still downloading does not stop its host: Scrapy sends the
    next request after the delay, up to the slot's concurrency."""
    downloader = FakeDownloader()
    scheduler, _ = make_scheduler(downloader=downloader)
    scheduler.enqueue_request(seed("http://slow.example/1"))
    scheduler.enqueue_request(seed("http://slow.example/2"))
    downloader.fill("slow.example", active=1, concurrency=2, delay=0.1, transferring=1)
    assert scheduler.next_request().url.startswith("http://slow.example/")
    downloader.fill("slow.example", active=2, concurrency=2, delay=0.1, transferring=1)  # one waits
    assert scheduler.next_request() is None
    downloader.fill("slow.example", active=2, concurrency=2, delay=0.1, transferring=2)  # at concurrency
    assert scheduler.next_request() is None


def _rich_and_poor(settings=None):
    """``rich.example`` holds far more cash than ``poor.example`` (less than
    AOPIC_MIN_CASH_SHARE of it); both have pending URLs."""
    downloader = FakeDownloader()
    scheduler, _ = make_scheduler(settings, downloader=downloader)
    engine = scheduler.frontier.engine
    from scrapy_aopic.store import Link

    engine.add_seed(Link("http://rich.example/1", "rich.example", 0), 10.0)
    engine.add_seed(Link("http://rich.example/2", "rich.example", 0), 9.0)
    engine.add_seed(Link("http://poor.example/1", "poor.example", 0), 1.0)
    return scheduler, downloader


def test_polite_crawl_never_idles_a_free_slot_with_a_pending_url():
    """Every full slot throttled by a delay: the free slot of the poor host
    is filled (waiting for the rich host would not fetch it any sooner)."""
    scheduler, downloader = _rich_and_poor()
    downloader.fill("rich.example", active=1, concurrency=2, delay=0.1)  # waits for its delay
    request = scheduler.next_request()
    assert request is not None and request.url == "http://poor.example/1"
    downloader.slots["rich.example"].queue.clear()
    downloader.slots["rich.example"].active.clear()
    assert scheduler.next_request().url == "http://rich.example/1"


def test_min_share_still_waits_for_an_unthrottled_host():
    """No delay: the rich host's slot frees when its responses come back,
    and a poor fetch competes with them; the min-share rule waits."""
    scheduler, downloader = _rich_and_poor()
    downloader.fill("rich.example", active=2, concurrency=2)
    assert scheduler.next_request() is None
    # One unthrottled full slot among throttled ones is enough to wait.
    downloader.fill("other.example", active=1, concurrency=2, delay=0.1)
    assert scheduler.next_request() is None


def test_min_share_for_delayed_slots_is_a_setting():
    scheduler, downloader = _rich_and_poor({"AOPIC_MIN_CASH_SHARE_DELAYED": 0.5})
    downloader.fill("rich.example", active=1, concurrency=2, delay=0.1)
    assert scheduler.next_request() is None
    scheduler, downloader = _rich_and_poor({"AOPIC_MIN_CASH_SHARE": 0.0})
    downloader.fill("rich.example", active=2, concurrency=2)
    assert scheduler.next_request().url == "http://poor.example/1"


def test_a_free_slot_takes_no_url_the_page_budget_cannot_reach():
    """With CLOSESPIDER_PAGECOUNT, a URL of a free host that passes the
    min-share rule but ranks below the pages the budget still allows waits
    (it would never be reached in cash order); it goes when it ranks within
    them, and without a budget or with the setting off."""
    from scrapy_aopic.store import Link

    def crawl(settings):
        downloader = FakeDownloader()
        scheduler, _ = make_scheduler(settings, downloader=downloader)
        engine = scheduler.frontier.engine
        for n in range(4):  # four rich pages on the busy host
            engine.add_seed(Link(f"http://rich.example/{n}", "rich.example", 0), 10.0 - n)
        engine.add_seed(Link("http://farm.example/1", "farm.example", 0), 6.0)  # above 0.5 of the richest
        downloader.fill("rich.example", active=2, concurrency=2)
        return scheduler, downloader

    scheduler, _ = crawl({"CLOSESPIDER_PAGECOUNT": 3})  # 3 pages left: ranks 1-3 are rich.example's
    assert scheduler.next_request() is None
    assert scheduler.frontier.stats.get_value("aopic/spare_beyond_budget") == 1
    frontier = scheduler.frontier
    assert frontier.store.get("http://farm.example/1").cash == 6.0  # back in its place, as it was
    frontier._check_books()
    assert frontier.stats.get_value("aopic/conservation_error") <= 1e-12
    scheduler, _ = crawl({"CLOSESPIDER_PAGECOUNT": 6})  # it ranks 4th of 5: within the budget
    assert scheduler.next_request().url == "http://farm.example/1"
    for settings in ({}, {"CLOSESPIDER_PAGECOUNT": 3, "AOPIC_SPARE_WITHIN_BUDGET": False}):
        scheduler, _ = crawl(settings)
        assert scheduler.next_request().url == "http://farm.example/1"


def test_polite_crawl_hands_out_whenever_a_slot_with_a_pending_url_is_free():
    """Random slot states, all throttled by a delay, default settings:
    ``next_request`` returns None only when no host with a pending URL has
    room, and otherwise a URL of a host with room."""
    import random

    rng = random.Random(18)
    for _ in range(30):
        downloader = FakeDownloader()
        scheduler, _ = make_scheduler(downloader=downloader)
        hosts = [f"h{i}.example" for i in range(6)]
        handed_out = []
        engine = scheduler.frontier.engine
        from scrapy_aopic.store import Link

        for i in range(40):
            host = rng.choice(hosts)
            engine.add_seed(Link(f"http://{host}/{i}", host, 0), rng.choice([0.01, 0.1, 1.0, 10.0]))
        while True:
            for host in hosts:
                if rng.random() < 0.6:
                    transferring = rng.randint(0, 2)
                    downloader.fill(host, active=transferring + rng.randint(0, 1), concurrency=2,
                                    delay=0.1, transferring=transferring)
                else:
                    downloader.slots.pop(host, None)
            probe = scheduler.frontier.probe
            pending = {account.host for account in scheduler.frontier.store.iter_accounts()
                       if account.state == PENDING}
            free = {host for host in pending if probe.host_ready(host)}
            request = scheduler.next_request()
            if request is None:
                assert not free
                if not pending:
                    break
            else:
                assert request.url.split("/")[2] in free
                handed_out.append(request)  # kept: a lost request's lease is settled as vanished


def test_requests_on_their_way_fill_a_slot_without_delay():
    """With the asyncio reactor the engine pulls up to CONCURRENT_REQUESTS
    requests before any reaches its download slot: the ones on their way
    (in the downloader, not in their slot yet) count against the slot's
    concurrency (a slot without a delay), so the next one goes to another
    host, or waits for the slot, rather than queueing up in it ahead of
    richer URLs found meanwhile."""
    from scrapy_aopic.store import Link

    downloader = FakeDownloader()
    scheduler, _ = make_scheduler({"CONCURRENT_REQUESTS_PER_DOMAIN": 2}, downloader=downloader)
    engine = scheduler.frontier.engine
    for i in range(4):
        engine.add_seed(Link(f"http://rich.example/{i}", "rich.example", 0), 10.0 - i / 10)
    engine.add_seed(Link("http://other.example/0", "other.example", 0), 8.0)

    def pull():
        request = scheduler.next_request()
        if request is not None:
            downloader.pulled.add(request)  # as Downloader.fetch does, before the middlewares
        return request

    def host(request):
        return request.url.split("/")[2]

    first = [pull() for _ in range(3)]
    assert [host(request) for request in first] == ["rich.example", "rich.example", "other.example"]
    assert pull() is None  # rich.example's slot will be full: two on their way
    downloader.place(first[0])
    assert pull() is None  # one in the slot, one on its way
    downloader.pulled.discard(first[1])  # answered by a downloader middleware (a cache)
    third = pull()
    assert host(third) == "rich.example"
    assert pull() is None
    assert scheduler.frontier.probe.busy_hosts() == ["rich.example"]
    downloader.pulled.discard(third)  # dropped by a downloader middleware
    assert scheduler.frontier.probe.busy_hosts() == []
    assert host(pull()) == "rich.example"


def test_requests_on_their_way_leave_a_delayed_slot_its_queue():
    """A slot throttled by a delay keeps the requests on their way as its
    queue (it sends one per delay without waiting for the engine to ask)."""
    from scrapy_aopic.store import Link

    scheduler, _ = make_scheduler({"CONCURRENT_REQUESTS_PER_DOMAIN": 2, "DOWNLOAD_DELAY": 0.1},
                                  downloader=FakeDownloader())
    engine = scheduler.frontier.engine
    for i in range(4):
        engine.add_seed(Link(f"http://rich.example/{i}", "rich.example", 0), 10.0 - i / 10)
    assert [request.url for request in drain(scheduler)] == [f"http://rich.example/{i}" for i in range(4)]


@pytest.mark.parametrize("horizon", [0.0, 3.0])
def test_jobdir_close_and_reopen_keeps_the_state(tmp_path, horizon):

    settings = {"JOBDIR": str(tmp_path / "job"), "AOPIC_PRIORITY_HORIZON": horizon}
    scheduler, _ = make_scheduler(settings)
    for i in range(20):
        scheduler.enqueue_request(seed(f"http://h{i % 4}.example/{i}"))
    frontier = scheduler.frontier
    first = scheduler.next_request()
    frontier.visit(_html(first), [Request(f"http://h0.example/new{i}") for i in range(3)])
    in_flight = scheduler.next_request()  # still in flight at close
    before = {v.url: (v.state, v.cash + v.leased, v.history) for v in frontier.store.iter_accounts()}
    totals = frontier.engine.totals()
    pending_before_close = len(scheduler)
    scheduler.close("shutdown")

    again, _ = make_scheduler(settings)
    store = again.frontier.store
    after = {v.url: (v.state, v.cash, v.history) for v in store.iter_accounts()}
    assert after.keys() == before.keys()
    for url, (state, cash, history) in before.items():
        expected_state = PENDING if url == in_flight.meta["aopic_key"] else state
        assert after[url] == (expected_state, pytest.approx(cash), pytest.approx(history))
    assert store.totals().injected == totals.injected
    assert store.totals().history_sum == pytest.approx(totals.history_sum)
    assert len(again) == pending_before_close + 1  # the in-flight request is queued again
    assert again.frontier.engine.conservation_error() < 1e-12


@pytest.mark.parametrize("horizon", [0.0, 3.0])
def test_jobdir_survives_a_crash_without_close(tmp_path, horizon):
    """No close at all (as after SIGKILL): the journal alone restores it."""
    settings = {"JOBDIR": str(tmp_path / "job"), "AOPIC_PRIORITY_HORIZON": horizon}
    scheduler, _ = make_scheduler(settings)
    for i in range(10):
        scheduler.enqueue_request(seed(f"http://h.example/{i}"))
    leased = [scheduler.next_request() for _ in range(3)]
    scheduler.frontier.visit(_html(leased[0]), [Request("http://h.example/found")])
    injected = scheduler.frontier.engine.totals().injected
    # Simulate the kill: drop the objects without closing anything (the
    # operating system releases a dead process's lock).
    scheduler.frontier.store._journal.close()
    scheduler.frontier.store._lock.release()

    again, crawler = make_scheduler(settings)
    totals = again.frontier.engine.totals()
    assert totals.injected == injected
    assert again.frontier.store.get("http://h.example/found").state == PENDING
    assert len(again) == 10 - 3 + 2 + 1  # 7 untouched, 2 in flight back, 1 found
    assert again.frontier.engine.conservation_error() < 1e-12
    assert crawler.stats.get_value("aopic/resumed_in_flight") == 2


@pytest.mark.parametrize("allowed, setting, expected", [
    (["h.example"], None, 0.01),  # a site crawl: the default brings discovery cash
    (None, None, 0.0),  # an open crawl: none
    ([], None, 0.0),
    (["h.example"], 0, 0.0),  # a number is used as given, on any crawl
    (None, 0.03, 0.03),
])
def test_discovery_cash_by_default_only_on_a_site_crawl(allowed, setting, expected, caplog):
    spider = BroadSpider()
    if allowed is not None:
        spider.allowed_domains = allowed
    settings = {} if setting is None else {"AOPIC_DISCOVERY_CASH": setting}
    with caplog.at_level("INFO", logger="scrapy_aopic.frontier"):
        engine = make_scheduler(settings, spider=spider)[0].frontier.engine
    assert engine.discovery_cash == expected
    engine.add_seed(Link("http://h.example/", "h.example", 0))
    lease = engine.next()
    engine.visit(lease, [Link("http://h.example/a", "h.example", 1)])
    assert engine.store.get("http://h.example/a").cash > 0
    assert engine.totals().injected == pytest.approx(1.0 + expected)
    assert engine.conservation_error() < 1e-12
    said = [r.getMessage() for r in caplog.records if "AOPIC_DISCOVERY_CASH" in r.getMessage()]
    assert len(said) == (1 if setting is None else 0)  # the choice is said once, when it was made
    if setting is None:
        assert ("a site crawl" if allowed else "an open crawl") in said[0]


def test_resume_with_another_discovery_cash_is_counted(tmp_path):
    """The amount changes on resume: the store logs it, the stats count it
    once; resuming again with the amount now in force counts nothing."""
    settings = {"JOBDIR": str(tmp_path / "job"), "AOPIC_DISCOVERY_CASH": 0.05}
    scheduler, _ = make_scheduler(settings)
    scheduler.enqueue_request(seed("http://h.example/0"))
    scheduler.frontier.visit(_html(scheduler.next_request()), [Request("http://h.example/found")])
    scheduler.frontier.store._journal.close()
    scheduler.frontier.store._lock.release()  # killed

    again, crawler = make_scheduler({**settings, "AOPIC_DISCOVERY_CASH": 0.0})
    assert crawler.stats.get_value("aopic/jobdir/discovery_cash_changed") == 1
    assert again.frontier.engine.conservation_error() < 1e-12
    again.frontier.store._journal.close()
    again.frontier.store._lock.release()

    _, crawler = make_scheduler({**settings, "AOPIC_DISCOVERY_CASH": 0.0})
    assert crawler.stats.get_value("aopic/jobdir/discovery_cash_changed") is None


def test_torn_journal_line_is_dropped(tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job")}
    scheduler, _ = make_scheduler(settings)
    for i in range(5):
        scheduler.enqueue_request(seed(f"http://h.example/{i}"))
    journal = scheduler.frontier.store._journal
    journal.write('["inject",["http://h.example/torn","h.example",0,nu')  # killed mid-write
    journal.close()
    scheduler.frontier.store._lock.release()
    again, _ = make_scheduler(settings)
    assert len(again) == 5
    assert again.frontier.engine.conservation_error() < 1e-12


def _html(request):
    from scrapy.http import HtmlResponse

    return HtmlResponse(request.url, body=b"<html></html>", request=request)


def test_frontier_is_shared_per_crawler():
    scheduler, crawler = make_scheduler()
    assert Frontier.from_crawler(crawler) is scheduler.frontier


def test_handed_out_requests_keep_offsite_filtering():
    """Scrapy's OffsiteMiddleware skips dont_filter requests: the frontier
    must not set it, or allowed_domains would be ignored."""
    scheduler, _ = make_scheduler()
    scheduler.enqueue_request(seed("http://a.example/x"))
    assert scheduler.next_request().dont_filter is False


@pytest.mark.parametrize("backend", ["memory", "jobdir", "redis"])
def test_download_slot_of_the_spider_is_kept_and_scrapys_is_not(tmp_path, request, backend):
    """A ``download_slot`` the spider set comes back on the request handed
    out (and on copies of its meta, as with Scrapy's scheduler); the one
    Scrapy's downloader writes on every fetched request does not leak into
    links built with ``meta=response.meta``, redirects or retries."""
    settings = {}
    if backend == "jobdir":
        settings["JOBDIR"] = str(tmp_path / "job")
    elif backend == "redis":
        settings.update(redis_backend_settings(request.getfixturevalue("redis_url"), "slots"))
    scheduler, crawler = make_scheduler(settings)
    frontier = scheduler.frontier

    def fetched(request):
        # What Scrapy's downloader does to every request it fetches.
        request.meta.setdefault("download_slot", request.url.split("/")[2])
        return _html(request)

    def out_by_url():
        return {r.url: r for r in drain(scheduler)}

    assert scheduler.enqueue_request(Request("http://a.example/", meta={"is_start_request": True, "download_slot": "mine"}))
    assert scheduler.enqueue_request(seed("http://c.example/"))
    out = out_by_url()
    assert out["http://a.example/"].meta["download_slot"] == "mine"
    assert "download_slot" not in out["http://c.example/"].meta
    page_a, page_c = fetched(out["http://a.example/"]), fetched(out["http://c.example/"])
    assert page_c.meta["download_slot"] == "c.example"
    links = frontier.visit(page_c, [
        Request("http://b.example/1", meta=page_c.meta),  # Scrapy's slot, copied: dropped
        Request("http://b.example/2", meta={**page_c.meta, "download_slot": "own"}),  # the spider's
    ]) + frontier.visit(page_a, [Request("http://b.example/3", meta=page_a.meta)])  # the spider's, copied
    for link in links:
        assert scheduler.enqueue_request(link)
    out = out_by_url()
    assert set(out) == {"http://b.example/1", "http://b.example/2", "http://b.example/3"}
    assert "download_slot" not in out["http://b.example/1"].meta
    assert out["http://b.example/2"].meta["download_slot"] == "own"
    assert out["http://b.example/3"].meta["download_slot"] == "mine"
    # A redirect to another host (Scrapy's RedirectMiddleware copies meta)
    # and a retry of a request with the spider's slot.
    fetched(out["http://b.example/1"])
    fetched(out["http://b.example/2"])
    assert scheduler.enqueue_request(out["http://b.example/1"].replace(url="http://d.example/"))
    assert scheduler.enqueue_request(out["http://b.example/2"].copy())
    out = out_by_url()
    assert set(out) == {"http://d.example/", "http://b.example/2"}
    assert "download_slot" not in out["http://d.example/"].meta
    assert out["http://b.example/2"].meta["download_slot"] == "own"
    assert frontier.ledger.fail(frontier.lease_of(out["http://d.example/"]), "test")
    assert frontier.ledger.fail(frontier.lease_of(out["http://b.example/2"]), "test")
    scheduler.close("finished")
    assert crawler.stats.get_value("aopic/conservation_error") < 1e-9


@pytest.mark.parametrize("jobdir", [False, True], ids=["memory", "jobdir"])
def test_non_http_start_and_non_link_requests_are_scheduled_links_are_not(tmp_path, caplog, jobdir):
    """Scrapy downloads data:, file:, ftp:, s3: URLs: a start request or a
    non-link request for one is fetched as it is (the direct lane, no cash;
    kept across a JOBDIR restart); a followed link to one is refused as a
    link, counted and said once."""
    import logging

    settings = {"JOBDIR": str(tmp_path / "job")} if jobdir else {}
    scheduler, crawler = make_scheduler(settings)
    with caplog.at_level(logging.INFO, logger="scrapy_aopic"):
        assert scheduler.enqueue_request(seed("data:,start"))
        assert scheduler.enqueue_request(seed("file:///tmp/start.html"))
        assert scheduler.enqueue_request(Request("ftp://a.example/f", meta={"aopic_link": False}))
        assert scheduler.enqueue_request(Request("s3://bucket/k", meta={"aopic_link": False}))
        assert not scheduler.enqueue_request(Request("s3://bucket/k", meta={"aopic_link": False}))  # a duplicate
        assert scheduler.enqueue_request(seed("http://a.example/"))
        assert not scheduler.enqueue_request(Request("data:,link"))  # a link
        assert not scheduler.enqueue_request(Request("file:///etc/passwd"))
    stats = crawler.stats
    assert stats.get_value("aopic/lane/not_http") == 2
    assert stats.get_value("aopic/refused/unfetchable_url") == 2
    assert caplog.text.count("are not followed") == 1
    assert caplog.text.count("has no canonical http(s) URL") == 1
    assert scheduler.frontier.engine.totals().injected == scheduler.frontier.seed_cash  # the http seed only
    assert len(scheduler) == 5
    if jobdir:
        scheduler.close("shutdown")
        scheduler, crawler = make_scheduler(settings)
        assert crawler.stats.get_value("aopic/lane/resumed") == 4
    out = drain(scheduler)
    assert sorted(r.url for r in out) == sorted([
        "data:,start", "file:///tmp/start.html", "ftp://a.example/f", "s3://bucket/k", "http://a.example/"])
    links = scheduler.frontier.visit(_html(next(r for r in out if r.url.startswith("http:"))),
                                     [Request("data:,in-page"), Request("http://a.example/b")])
    assert [r.url for r in links] == ["http://a.example/b"]
    assert crawler.stats.get_value("aopic/refused/unfetchable_url") >= 1
    scheduler.close("finished")
    assert crawler.stats.get_value("aopic/conservation_error") < 1e-9


def _as_given(request):
    """What a request is, less the bookkeeping the frontier adds to meta
    (and a callback that is the spider's ``parse`` read as ``None``: the
    codec's rule for plain links, which Scrapy calls ``parse`` for)."""
    from scrapy_aopic.frontier.requestcodec import TRANSIENT_META

    callback = None if getattr(request.callback, "__name__", None) == "parse" else request.callback
    return (
        type(request), request.url, request.method, request.body, request.headers.to_unicode_dict(),
        request.cookies, request.encoding, request.priority, request.dont_filter, request.flags,
        request.cb_kwargs, getattr(callback, "__name__", callback),
        getattr(request.errback, "__name__", request.errback),
        {k: v for k, v in request.meta.items() if k not in TRANSIENT_META and not k.startswith("aopic_")},
    )


def test_every_kind_of_request_comes_back_as_given_while_pending_in_rows():
    """Memory backend: followed links (a Referer naming a known page, an
    unknown one, another spelling) and requests that are anything but plain
    wait as pending rows and come back exactly as the spider gave them."""
    from scrapy import FormRequest

    scheduler, _ = make_scheduler()
    spider = scheduler.frontier.spider
    page = "http://a.example/page"
    assert scheduler.enqueue_request(seed(page))
    marker = object()
    given = []
    for i in range(40):
        url = f"http://h{i % 4}.example/{i}"
        kind = i % 10
        if kind < 3:
            request = Request(url, callback=spider.parse, headers={"Referer": page})
        elif kind == 3:
            request = Request(url, headers={"Referer": "http://unknown.example/x?a=%C3%A9"})
        elif kind == 4:
            request = Request(url + "#part", headers={"Referer": page})
        elif kind == 5:
            request = FormRequest(url, formdata={"q": str(i)}, callback=spider.parse_other)
        elif kind == 6:
            request = Request(url, priority=7, flags=["f"], cb_kwargs={"i": i}, dont_filter=True,
                              headers={"Referer": page, "X-A": "b"}, cookies={"c": "1"})
        elif kind == 7:
            request = Request(url, meta={"custom": {"i": i}, "marker": marker}, errback=spider.parse_other)
        elif kind == 8:
            request = Request(url, encoding="latin-1", headers={"Referer": page})
        else:
            request = Request(url, meta={"download_slot": "own-slot"})
        given.append(request)
        assert scheduler.enqueue_request(request)
    store = scheduler.frontier.store
    assert sum(1 for code in store._table.row_of if code <= -2) == len(given) + 1
    out = {request.url: request for request in drain(scheduler)}
    assert len(out) == len(given) + 1
    for request in given:
        back = out[request.url]
        assert _as_given(back) == _as_given(request), request
        if "marker" in request.meta:
            assert back.meta["marker"] is marker


@pytest.mark.parametrize("jobdir", [False, True], ids=["memory", "jobdir"])
def test_priority_horizon_reaches_the_store_and_survives_a_resume(tmp_path, jobdir):
    """AOPIC_PRIORITY_HORIZON is read once and given to the store (and the
    JOBDIR's snapshots): a resumed crawl goes on in the order the first run
    would have gone on with; the books balance."""
    settings = {"AOPIC_PRIORITY_HORIZON": 3.0}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    scheduler, crawler = make_scheduler(settings)
    frontier = scheduler.frontier
    assert frontier.engine.priority_horizon == 3.0 and frontier.store.priority_horizon == 3.0
    assert crawler.stats.get_value("aopic/priority_horizon_ignored") is None
    for i in range(30):
        scheduler.enqueue_request(seed(f"http://h{i % 3}.example/{i}"))
    for n in range(12):  # later pages credit new links: their priority outgrows older cash
        request = scheduler.next_request()
        frontier.visit(_html(request), [Request(f"http://h{n % 3}.example/new{n}-{j}") for j in range(3)])
        assert frontier.engine.conservation_error() < 1e-12
    memory = frontier.store.memory if jobdir else frontier.store
    order = [memory.order_at_rank(r) for r in range(1, 20)]
    assert order == sorted(order, reverse=True) and order[0] > -math.inf
    if not jobdir:
        return
    scheduler.close("shutdown")
    again, crawler2 = make_scheduler(settings)
    assert crawler2.stats.get_value("aopic/priority_fallback") is None
    assert [again.frontier.store.order_at_rank(r) for r in range(1, 20)] == order
    assert again.frontier.engine.conservation_error() < 1e-12


def test_links_passed_on_carry_the_url_parse_scrapys_offsite_check_asks_for():
    """Scrapy's OffsiteMiddleware parses every scheduled link's URL
    (``urlparse_cached``) to ask the rule the frontier's offsite filter has
    just applied: the links the frontier passes on carry that parse
    already, equal to ``urlparse`` of their URL, one value per URL string
    (but for URLs with a fragment).
    What is refused and fetched stays the same."""
    from urllib.parse import urlparse

    from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
    from scrapy.http import HtmlResponse
    from scrapy.utils.httpobj import _urlparse_cache, urlparse_cached

    class Sites(BroadSpider):
        allowed_domains = ["a.example"]

    crawler = get_crawler(Sites, {"ADDONS": {"scrapy_aopic.Addon": 0}})
    spider = Sites()
    offsite = OffsiteMiddleware.from_crawler(crawler)
    offsite.spider_opened(spider)
    scheduler = AopicScheduler.from_crawler(crawler)
    frontier = scheduler.frontier
    frontier.probe.downloader_middlewares = lambda: [offsite]
    scheduler.open(spider)
    scheduler.enqueue_request(seed("http://a.example/"))
    request = scheduler.next_request()
    urls = ["http://a.example/p?x=1", "http://a.example/p?x=1#f", "http://b.example/q",
            "http://A.example:80/r;s?t#u", "http://a.example/p?x=1"]  # fmt: skip
    links = [Request(url) for url in urls]
    passed = frontier.visit(HtmlResponse(request.url, body=b"<p>links</p>", request=request), links)
    assert [r.url for r in passed] == [links[i].url for i in (0, 1, 3, 4)]  # b.example refused
    assert passed[1] not in _urlparse_cache  # "#f": left to Scrapy
    for link in passed:
        # Scrapy will not parse it again (a URL with a fragment, another
        # string for each section of a page, is left to Scrapy).
        assert "#" in link.url or link in _urlparse_cache
        assert urlparse_cached(link) == urlparse(link.url)
        assert offsite.should_follow(link, spider)
    assert urlparse_cached(passed[0]) is urlparse_cached(passed[3])  # one parse per URL string
    assert crawler.stats.get_value("aopic/refused/offsite") == 1
