"""Issue 12 items 2-7: every lease settled once, requests never changed,
user semantics (dont_filter, priority, non-links, seeds) kept.

Each test drives the scheduler and the frontier the way Scrapy's engine
and middlewares do, and checks the books after.
"""

from __future__ import annotations

import gc
import logging

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest, HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_aopic.meta import DUPLICATE_OF, KEY, LEASE, REGISTERED
from scrapy_aopic.scheduler import AopicScheduler
from tests.integration.test_scheduler import drain, seed


class LoginSpider(Spider):
    name = "login"

    def parse(self, response):
        pass

    def after_login(self, response):
        pass


def make(settings=None, jobdir=None):
    settings = {"ADDONS": {"scrapy_aopic.Addon": 0}, **(settings or {})}
    if jobdir is not None:
        settings["JOBDIR"] = str(jobdir)
    crawler = get_crawler(LoginSpider, settings)
    spider = LoginSpider()
    scheduler = AopicScheduler.from_crawler(crawler)
    scheduler.open(spider)
    scheduler.frontier.probe._downloader = None
    return scheduler, crawler


def page(request, links=(), status=200):
    body = "".join(f'<a href="{u}">x</a>' for u in links).encode()
    return HtmlResponse(request.url, status=status, body=body, request=request)


def books_balanced(scheduler):
    engine = scheduler.frontier.engine
    return engine.conservation_error() <= 1e-9 * max(1.0, engine.totals().injected)


# -- item 2: a lease is settled as soon as its request's path is known ----------


def test_offsite_redirect_dropped_by_scrapy_settles_the_lease_at_once():
    scheduler, crawler = make()
    scheduler.enqueue_request(seed("http://a.example/"))
    request = scheduler.next_request()
    # RedirectMiddleware's follow-up keeps the meta; Scrapy's OffsiteMiddleware
    # raises IgnoreRequest in request_scheduled and the engine sends
    # request_dropped instead of calling enqueue_request.
    follow_up = request.replace(url="http://elsewhere.example/")
    from scrapy import signals

    crawler.signals.send_catch_log(signals.request_dropped, request=follow_up, spider=None)
    assert crawler.stats.get_value("aopic/failed/dropped") == 1
    assert len(scheduler.frontier.ledger) == 0
    assert books_balanced(scheduler)
    # A second drop of the same request moves nothing.
    crawler.signals.send_catch_log(signals.request_dropped, request=follow_up, spider=None)
    assert crawler.stats.get_value("aopic/failed/dropped") == 1


def test_a_request_gone_without_a_hook_is_settled_when_it_is_collected():
    scheduler, crawler = make()
    scheduler.enqueue_request(seed("http://a.example/"))
    scheduler.enqueue_request(seed("http://b.example/"))
    kept = scheduler.next_request()
    scheduler.next_request()  # dropped on the floor, as a middleware raising
    gc.collect()              # IgnoreRequest in process_response would
    assert len(scheduler.frontier.ledger) == 2
    scheduler.next_request()  # any later call settles it
    assert crawler.stats.get_value("aopic/failed/vanished") == 1
    assert scheduler.frontier.lease_of(kept) is not None
    assert books_balanced(scheduler)



def test_vanished_requests_are_said_once_and_all_counted(caplog):
    """A site's redirect loops make many vanished requests: one WARNING,
    the rest at DEBUG, every one counted."""
    scheduler, crawler = make()
    for host in "abcd":
        scheduler.enqueue_request(seed(f"http://{host}.example/"))
    with caplog.at_level(logging.DEBUG, logger="scrapy_aopic"):
        for _ in range(3):
            scheduler.next_request()  # each dropped on the floor
        gc.collect()
        scheduler.next_request()
    said = [r for r in caplog.records if "vanished" in r.getMessage()]
    assert crawler.stats.get_value("aopic/failed/vanished") == 3
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG, logging.DEBUG], said
    assert books_balanced(scheduler)


# -- item 3: keys the frontier issues count only for their own request ----------


def test_links_built_with_response_meta_get_their_cash():
    # The amounts below are AOPIC's own splits: no discovery cash on top.
    scheduler, crawler = make({"AOPIC_DISCOVERY_CASH": 0})
    scheduler.enqueue_request(seed("http://a.example/"))
    request = scheduler.next_request()
    response = page(request)
    request.meta[DUPLICATE_OF] = None  # nothing flagged
    links = [Request(f"http://a.example/{i}", meta=response.meta) for i in range(3)]
    assert all(LEASE in link.meta for link in links)  # copied, as spiders do
    passed = scheduler.frontier.visit(response, links)
    assert len(passed) == 3
    assert all(link.meta.get(REGISTERED) for link in passed)
    for link in passed:
        assert scheduler.enqueue_request(link)
    assert crawler.stats.get_value("aopic/cash_to_links") == pytest.approx(0.75)
    out = drain(scheduler)
    assert sorted(r.url for r in out) == [f"http://a.example/{i}" for i in range(3)]
    # 0.25 each from the page, and lambda's 0.25 paid back to the three.
    assert [r.meta["aopic_cash"] for r in out] == pytest.approx([1 / 3] * 3)
    assert books_balanced(scheduler)


def test_a_copied_duplicate_flag_does_not_drop_the_links_of_another_page():
    scheduler, _ = make()
    scheduler.enqueue_request(seed("http://a.example/"))
    first = scheduler.next_request()
    first.meta[DUPLICATE_OF] = "http://a.example/original"  # this page was a duplicate
    follow = Request("http://a.example/next", meta=first.meta)
    scheduler.frontier.visit(page(first), [])
    assert scheduler.enqueue_request(follow)
    second = scheduler.next_request()
    assert second.url == "http://a.example/next" and DUPLICATE_OF not in second.meta
    passed = scheduler.frontier.visit(page(second), [Request("http://a.example/deeper")])
    assert [r.url for r in passed] == ["http://a.example/deeper"]


def test_an_errback_request_with_copied_meta_is_queued_not_lost():
    scheduler, _ = make()
    scheduler.enqueue_request(seed("http://a.example/"))
    request = scheduler.next_request()
    scheduler.frontier.fail(request, "TimeoutError")  # process_exception settled it
    retry = Request("http://a.example/other", meta=request.meta)
    assert scheduler.enqueue_request(retry)
    assert [r.url for r in drain(scheduler)] == ["http://a.example/other"]


# -- item 4: a rejected settlement does not pass links on as queued ---------------


def test_links_of_a_rejected_visit_are_queued_the_whole_way(monkeypatch):
    scheduler, crawler = make()
    frontier = scheduler.frontier
    scheduler.enqueue_request(seed("http://a.example/"))
    request = scheduler.next_request()
    monkeypatch.setattr(frontier.store, "settle_visit", lambda *a, **k: False)
    passed = frontier.visit(page(request), [Request("http://a.example/x")])
    monkeypatch.undo()
    assert not passed[0].meta.get(REGISTERED) and KEY not in passed[0].meta
    assert scheduler.enqueue_request(passed[0])
    assert frontier.store.get("http://a.example/x") is not None
    assert crawler.stats.get_value("aopic/visit_rejected") == 1


# -- item 5: requests are never changed on the way --------------------------------


def test_a_form_post_with_a_foreign_callback_is_kept_as_it_is(tmp_path, caplog):
    scheduler, crawler = make(jobdir=tmp_path)
    post = FormRequest("http://a.example/login", formdata={"user": "u"},
                       callback=lambda response: None, meta={"is_start_request": True})
    with caplog.at_level(logging.WARNING):
        assert scheduler.enqueue_request(post)
        assert scheduler.enqueue_request(FormRequest("http://a.example/login2", formdata={"x": "1"},
                                                     callback=lambda r: None))
    (out1, out2) = drain(scheduler)
    assert out1 is post and out1.method == "POST" and out1.body == b"user=u"
    assert out2.method == "POST" and out2.body == b"x=1"
    assert crawler.stats.get_value("scheduler/unserializable") == 2
    assert sum("cannot be stored as data" in r.getMessage() for r in caplog.records) == 1


def test_a_form_post_with_a_spider_callback_goes_through_the_journal(tmp_path):
    scheduler, _ = make(jobdir=tmp_path)
    spider = scheduler.frontier.spider
    post = FormRequest("http://a.example/login", formdata={"user": "u"}, callback=spider.after_login,
                       meta={"is_start_request": True})
    assert scheduler.enqueue_request(post)
    (out,) = drain(scheduler)
    assert out.method == "POST" and out.body == b"user=u" and out.callback == spider.after_login


def test_undecodable_stored_data_is_never_fetched_as_a_plain_get(caplog):
    scheduler, crawler = make()
    frontier = scheduler.frontier
    scheduler.enqueue_request(seed("http://a.example/good"))
    from scrapy_aopic.store.base import Link

    frontier.engine.add_seed(Link("http://a.example/bad", "a.example", 0, {"url": 42, "method": []}), 5.0)
    with caplog.at_level(logging.WARNING):
        out = drain(scheduler)
    assert [r.url for r in out] == ["http://a.example/good"]
    assert crawler.stats.get_value("aopic/failed/undecodable") == 1
    assert books_balanced(scheduler)


# -- item 6: dont_filter, priority, non-links -------------------------------------


def test_three_identical_dont_filter_requests_are_fetched_three_times():
    scheduler, _ = make()
    for _ in range(3):
        assert scheduler.enqueue_request(Request("http://a.example/refresh", dont_filter=True))
    out = drain(scheduler)
    assert [r.url for r in out] == ["http://a.example/refresh"] * 3


def test_a_dont_filter_link_to_a_crawled_page_is_fetched_again():
    scheduler, _ = make()
    scheduler.enqueue_request(seed("http://a.example/"))
    first = scheduler.next_request()
    again = Request("http://a.example/", dont_filter=True)
    plain = Request("http://a.example/")
    passed = scheduler.frontier.visit(page(first), [again, plain])
    assert all(scheduler.enqueue_request(r) for r in passed)
    # Fetched again once: the plain link to a crawled page is not.
    assert [r.url for r in drain(scheduler)] == ["http://a.example/"]
    assert books_balanced(scheduler)


def test_non_link_requests_are_fetched_before_a_long_cash_queue():
    scheduler, crawler = make({"AOPIC_DIRECT_LANE_SHARE": 0.5})
    for i in range(50):
        scheduler.enqueue_request(seed(f"http://a.example/{i}"))
    api = Request("http://api.example/page/2", meta={"aopic_link": False})
    assert scheduler.enqueue_request(api)
    assert not scheduler.enqueue_request(Request("http://api.example/page/2", meta={"aopic_link": False}))
    out = [scheduler.next_request() for _ in range(3)]
    assert api in out
    assert crawler.stats.get_value("aopic/lane/duplicates") == 1
    assert "aopic_lease" not in api.meta  # no cash rides on it


def test_positive_priority_links_go_first_and_keep_their_cash():
    scheduler, _ = make({"AOPIC_DISCOVERY_CASH": 0})  # the amounts are AOPIC's splits alone
    scheduler.enqueue_request(seed("http://a.example/"))
    first = scheduler.next_request()
    links = [Request(f"http://a.example/{i}") for i in range(5)] + [Request("http://a.example/urgent", priority=10)]
    for link in scheduler.frontier.visit(page(first), links):
        scheduler.enqueue_request(link)
    out = drain(scheduler)
    assert out[0].url == "http://a.example/urgent"
    assert out[0].meta["aopic_cash"] == pytest.approx(1 / 7)
    assert len(out) == 6 and len({r.url for r in out}) == 6
    assert books_balanced(scheduler)


@pytest.mark.parametrize("name, value", [
    ("DUPEFILTER_CLASS", "scrapy_redis.dupefilter.RFPDupeFilter"),
    ("DEPTH_PRIORITY", 1),
    ("SCHEDULER_PRIORITY_QUEUE", "myproject.queues.CustomPriorityQueue"),
])
def test_replaced_scheduler_settings_are_named_once(name, value, caplog):
    with caplog.at_level(logging.WARNING):
        _, crawler = make({name: value})
    warnings = [r.getMessage() for r in caplog.records if "does not use these settings" in r.getMessage()]
    assert len(warnings) == 1 and name in warnings[0]
    assert crawler.stats.get_value(f"aopic/ignored_setting/{name}") == 1


def test_default_settings_warn_nothing(caplog):
    with caplog.at_level(logging.WARNING):
        make()
    assert not [r for r in caplog.records if "does not use these settings" in r.getMessage()]


# -- item 7: a seed already crawled is not fetched again --------------------------


def test_seeds_are_not_fetched_again_on_resume(tmp_path):
    scheduler, _ = make(jobdir=tmp_path)
    scheduler.enqueue_request(seed("http://a.example/", dont_filter=True))  # Scrapy's default
    request = scheduler.next_request()
    scheduler.frontier.visit(page(request), [])
    scheduler.close("finished")
    again, crawler = make(jobdir=tmp_path)
    assert not again.enqueue_request(seed("http://a.example/", dont_filter=True))
    assert crawler.stats.get_value("aopic/seeds_known") == 1
    assert again.next_request() is None
    again.close("finished")
    refetch, _ = make({"AOPIC_REFETCH_SEEDS": True}, jobdir=tmp_path)
    assert refetch.enqueue_request(seed("http://a.example/", dont_filter=True))
    assert [r.url for r in drain(refetch)] == ["http://a.example/"]


def test_the_direct_lane_survives_a_jobdir_resume(tmp_path):
    scheduler, crawler = make(jobdir=tmp_path)
    scheduler.enqueue_request(Request("http://api.example/1", meta={"aopic_link": False, "k": [1]}))
    scheduler.enqueue_request(FormRequest("http://api.example/2", formdata={"a": "b"}, callback=lambda r: None,
                                          meta={"aopic_link": False}))
    scheduler.close("shutdown")
    assert crawler.stats.get_value("aopic/lane/saved") == 1
    assert crawler.stats.get_value("aopic/lane/lost") == 1
    again, crawler2 = make(jobdir=tmp_path)
    (out,) = drain(again)
    assert out.url == "http://api.example/1" and out.meta["k"] == [1]
    assert crawler2.stats.get_value("aopic/lane/resumed") == 1


# -- a shared store that stalls: writes held, in order, nothing lost ------------


def test_writes_held_while_the_store_stalls_are_made_in_order_with_their_leases():
    """A store that does not answer (StoreStalled) changes nothing: the
    ledger keeps the lease open, the frontier holds the failure, the visit
    and the follow-up request, and makes them in order when the store is
    back; the books balance and the links are scheduled."""
    from scrapy_aopic.store.base import StoreStalled

    scheduler, crawler = make()
    frontier = scheduler.frontier
    scheduler.enqueue_request(seed("http://a.example/"))
    scheduler.enqueue_request(seed("http://b.example/"))
    first, second = scheduler.next_request(), scheduler.next_request()
    store = frontier.store
    stalled = {"on": True}
    for name in ("settle_failure", "settle_visit", "register", "settle_requeue", "settle_transfer"):
        original = getattr(store, name)

        def stalling(*args, _original=original, **kwargs):
            if stalled["on"]:
                raise StoreStalled("test: Redis paused")
            return _original(*args, **kwargs)

        setattr(store, name, stalling)
    frontier.fail(first, "http_500")  # held: the lease stays open here
    assert frontier.lease_of(first) is not None and len(frontier.held) == 1
    passed = frontier.visit(page(second, ["http://b.example/x"]), [Request("http://b.example/x")])
    assert passed == [] and frontier.lease_of(second) is not None and len(frontier.held) == 2
    crawled = []
    crawler.engine = type("Engine", (), {"crawl": staticmethod(crawled.append)})()
    stalled["on"] = False
    assert frontier.held.replay() == 2 and not frontier.held
    assert frontier.lease_of(first) is None and frontier.lease_of(second) is None
    assert [r.url for r in crawled] == ["http://b.example/x"]
    assert crawler.stats.get_value("aopic/failed/http_500") == 1
    assert crawler.stats.get_value("aopic/redis_stall/replayed") == 2
    assert books_balanced(scheduler)


# -- issue 18 item 4: one signal receiver per scheduled link ---------------------


def _add_on_receivers(crawler, signal):
    from pydispatch import dispatcher

    receivers = dispatcher.liveReceivers(dispatcher.getAllReceivers(crawler.signals.sender, signal))
    return [r for r in receivers if (getattr(r, "__module__", None) or "").startswith("scrapy_aopic")]


@pytest.mark.parametrize("signal_name", ["request_scheduled", "request_dropped"])
def test_a_gated_request_s_follow_up_frees_the_gate_through_the_frontier_s_one_receiver(signal_name):
    """Every link of every page is scheduled, and each receiver costs a
    PyDispatcher call (about 3 microseconds): the add-on has one receiver
    of each signal, the frontier's, which frees the soft-404 gate a
    redirect or a retry of a gated request carries, as the middleware's
    own receiver did."""
    from scrapy import signals
    from scrapy_aopic.middlewares.traps import GATE, Soft404Middleware, guard_of

    scheduler, crawler = make()
    Soft404Middleware.from_crawler(crawler)  # registers the gate's hook with the frontier
    signal = getattr(signals, signal_name)
    assert len(_add_on_receivers(crawler, signal)) == 1
    gate = guard_of(crawler).gate
    keys = gate.keys("http://a.example/dir/page")
    assert keys and gate.enter(keys)
    assert not gate.enter(keys)  # held
    follow_up = Request("http://a.example/dir/page2", meta={GATE: keys})
    crawler.signals.send_catch_log(signal, request=follow_up, spider=None)
    assert GATE not in follow_up.meta
    assert gate.enter(keys)  # freed
    # A link without the key leaves the gate alone.
    crawler.signals.send_catch_log(signal, request=Request("http://a.example/dir/other"), spider=None)
    assert not gate.enter(keys)
