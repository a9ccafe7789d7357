"""Trap rules (SPEC 6): each rule, its limit, 0 = off; and in a real crawl."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_aopic.hygiene.canonical import canonical_url
from scrapy_aopic.hygiene.traps import RULES, TrapGuard, TrapLimits, calendar_key, url_rule

OFF = TrapLimits(0, 0, 0, 0, 0, 0, 0, 0)


def rule(url, depth=1, limits=None, guard=None):
    key = canonical_url(url)
    assert key is not None, url
    if guard is not None:
        return guard.rule(url, key, depth)
    return url_rule(url, key, depth, limits or TrapLimits())


def test_defaults_from_spec():
    limits = TrapLimits()
    assert (limits.max_hops, limits.max_path_segments, limits.max_segment_repeats) == (20, 20, 2)
    assert limits.max_url_length == 2083 and limits.max_subdomains == 10
    assert TrapLimits.from_settings(Settings()) == limits
    assert TrapLimits.from_settings(Settings({"AOPIC_TRAP_MAX_HOPS": 3})).max_hops == 3
    with pytest.raises(ValueError):
        TrapLimits.from_settings(Settings({"AOPIC_TRAP_MAX_HOPS": -1}))


def test_depth():
    assert rule("http://a.com/x", depth=20) is None
    assert rule("http://a.com/x", depth=21) == "depth"
    assert rule("http://a.com/x", depth=21, limits=OFF) is None


def test_path_segments():
    ok = "http://a.com/" + "/".join(f"s{i}" for i in range(20))
    assert rule(ok) is None
    assert rule(ok + "/s20") == "path_segments"
    assert rule(ok + "/s20", limits=OFF) is None


@pytest.mark.parametrize(
    "path,refused",
    [
        ("/a/b/a/b/", False),  # twice is allowed
        ("/a/b/a/b/a/b", True),  # the example
        ("/docs/help/a/a/a/", True),
        ("/a/b/b/a/a/b/", True),  # not consecutive: still a loop
        ("/2001/01/01/", False),
        ("/x//x//x", True),  # duplicate slashes fold first: /x/x/x
    ],
)
def test_repeated_segment(path, refused):
    got = rule("http://a.com" + path)
    assert (got == "repeated_segment") is refused, got
    assert rule("http://a.com" + path, limits=OFF) is None


def test_relative_loop_resolves_before_counting():
    # ../ segments are resolved by canonicalization: no false positive.
    assert rule("http://a.com/a/b/../b/../b/") is None


def test_url_length_counts_the_url_as_written():
    long_tracking = "http://a.com/x?" + "utm_source=" + "z" * 2100
    # The canonical form drops the tracker, but the fetched URL is too long.
    assert rule(long_tracking) == "url_length"
    assert rule("http://a.com/" + "x" * 2000) is None
    assert rule(long_tracking, limits=OFF) is None


def test_query_params():
    url = "http://a.com/s?" + "&".join(f"p{i}=1" for i in range(20))
    assert rule(url) is None
    assert rule(url + "&p20=1") == "query_params"
    # Tracking parameters do not count: they are not part of the key.
    assert rule(url + "&utm_source=1&utm_medium=2") is None


def test_scheme_rule_on_keys():
    assert url_rule("ftp://a.com/", "ftp://a.com/", 0, TrapLimits()) == "scheme"


@pytest.mark.parametrize(
    "url,expected",
    [
        ("http://a.com/cal/2024/05/", ("a.com/cal/{d}/?", "2024/05")),
        ("http://a.com/cal/2024/05/17/", ("a.com/cal/{d}/?", "2024/05/17")),
        ("http://a.com/events?date=2024-05-17", ("a.com/events?date={d}", "2024-05-17")),
        ("http://a.com/events?year=2024&month=5", ("a.com/events?month={d}&year={d}", "month=5|year=2024")),
        ("http://a.com/day/20240517.html", ("a.com/day/{d}.html?", "20240517")),
        ("http://a.com/item/123456", None),
        ("http://a.com/v/2024/99/", None),
    ],
)
def test_calendar_key(url, expected):
    assert calendar_key(canonical_url(url)) == expected


def test_calendar_template_counts_distinct_dates():
    guard = TrapGuard(TrapLimits(calendar_dates=3))
    months = [f"http://a.com/cal/2024/{m:02d}/" for m in range(1, 6)]
    assert [rule(u, guard=guard) for u in months] == [None, None, None, "calendar", "calendar"]
    # Asked again, an admitted date still passes; a refused one stays refused.
    assert rule(months[0], guard=guard) is None and rule(months[4], guard=guard) == "calendar"
    # Dated articles each have their own template: never refused.
    for day in range(1, 29):
        assert rule(f"http://a.com/2024/05/{day:02d}/story-{day}.html", guard=guard) is None
    assert guard.counts["calendar"] == 3
    off = TrapGuard(TrapLimits(calendar_dates=0))
    assert all(rule(u, guard=off) is None for u in months)


def test_subdomains_per_registered_domain():
    guard = TrapGuard(TrapLimits(max_subdomains=3))
    got = [rule(f"http://s{i}.farm.co.uk/", guard=guard) for i in range(5)]
    assert got == [None, None, None, "subdomains", "subdomains"]
    assert rule("http://s0.farm.co.uk/other", guard=guard) is None  # known host
    # Private suffixes: blogs are separate registered domains.
    assert all(rule(f"http://blog{i}.blogspot.com/", guard=guard) is None for i in range(6))
    # IP hosts are their own domain.
    assert rule("http://127.0.0.1:8080/", guard=guard) is None


def test_host_page_budget_counts_fetches():
    guard = TrapGuard(TrapLimits(host_pages=2, max_subdomains=0))
    key = canonical_url("http://a.com/1")
    assert guard.rule("http://a.com/1", key, 1, fetching=True) is None
    assert guard.rule("http://a.com/2", canonical_url("http://a.com/2"), 1, fetching=True) is None
    assert guard.fetches("a.com") == 2
    # The budget is spent: links and fetches to the host are refused, others pass.
    assert rule("http://a.com/3", guard=guard) == "host_pages"
    assert guard.rule("http://a.com/3", canonical_url("http://a.com/3"), 1, fetching=True) == "host_pages"
    assert rule("http://b.com/3", guard=guard) is None
    assert guard.fetches("a.com") == 2


def test_every_rule_is_named_and_has_a_setting():
    from scrapy_aopic import settings as aopic_settings
    from scrapy_aopic.hygiene.traps import SETTING_OF

    assert len(RULES) == len(set(RULES)) == 11
    for name in SETTING_OF.values():
        assert name in aopic_settings.SETTINGS


# -- end to end: a crawl of the trap site with tight limits ----------------------

E2E_LIMITS = {"AOPIC_TRAP_CALENDAR_DATES": 3, "AOPIC_TRAP_MAX_HOPS": 8, "AOPIC_TRAP_HOST_PAGES": 60}


@pytest.fixture(scope="module")
def trap_crawl():
    from tests.support.trapsite import SiteServer, TrapSite, run_crawl

    site = TrapSite(articles=60, sections=3, per_listing=10, traps=True)
    with SiteServer(site) as server:
        settings = {"ADDONS": {"scrapy_aopic.Addon": 0}, "CLOSESPIDER_PAGECOUNT": 400, **E2E_LIMITS}
        report = run_crawl([server.base + "/"], settings)
        log = server.take_log()
    return site, server, report, log


def test_traps_stop_at_their_limits(trap_crawl):
    from collections import Counter

    _, _, report, log = trap_crawl
    kinds = Counter(kind for _, _, kind, _ in log)
    assert 1 <= kinds["trap:calendar"] <= 3
    assert kinds["trap:loop"] <= 18  # {a,b} paths with each segment at most twice
    assert kinds["trap:counter"] <= 8  # hop limit
    per_host = Counter(host for host, target, _, _ in log if target != "/robots.txt")
    assert per_host["127.0.0.1"] <= 60 and per_host["localhost"] <= 60
    assert report["stats"]["finish_reason"] == "finished"  # the frontier ran dry: no endless space left


def test_trap_refusals_counted_at_both_points(trap_crawl):
    stats = trap_crawl[2]["stats"]
    # Link time: refused links get no share (the frontier counts the reason).
    assert stats["aopic/refused/trap/calendar"] >= 1
    assert stats["aopic/refused/trap/host_pages"] >= 1
    # Fetch time: URLs queued before the host budget was spent.
    assert stats["aopic/failed/trap/host_pages"] >= 1
    # One name per fact: no second counter of the same refusals (requests
    # the first-answer gate held are not refusals; pages spared,
    # aopic/trap/soft404_spared, passed: broken links of a section that
    # mints nothing; pages passed unread, aopic/trap/soft404_unread).
    assert not [k for k in stats if k.startswith("aopic/trap/") and not k.startswith("aopic/trap/soft404_gate_")
                and k not in ("aopic/trap/soft404_spared", "aopic/trap/soft404_unread",
                              "aopic/trap/soft404_shapes")]


def test_trapped_urls_hold_no_cash_and_books_balance(trap_crawl):
    _, server, report, _ = trap_crawl
    accounts, stats = report["accounts"], report["stats"]
    calendar = [u for u in accounts if "/events/20" in u]
    assert 1 <= len(calendar) <= 3
    refused = [a for a in accounts.values() if a["state"] == "refused"]
    assert refused and all(a["cash"] == 0 for a in refused)
    assert stats["aopic/conservation_error"] <= 1e-9 * stats["aopic/cash_injected_total"]


# -- the middlewares on a frontier, without a network ----------------------------


def _frontier(settings=None):
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.frontier import Frontier

    crawler = get_crawler(Spider, settings_dict={"ADDONS": {"scrapy_aopic.Addon": 0}, **(settings or {})})
    frontier = Frontier.from_crawler(crawler)
    frontier.open(Spider("t"))
    return crawler, frontier


def test_guard_refuses_at_fetch_time_and_keeps_the_books():
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest

    from scrapy_aopic.middlewares.traps import TrapGuardMiddleware

    crawler, frontier = _frontier({"AOPIC_TRAP_HOST_PAGES": 1})
    guard = TrapGuardMiddleware.from_crawler(crawler)
    assert guard.link_filter in frontier.link_filters
    for path in ("/1", "/2"):
        assert frontier.enqueue(Request(f"http://a.example/{path}", meta={"is_start_request": True}))
    first, second = frontier.next_request(), frontier.next_request()
    assert guard.process_request(first) is None  # within the budget
    with pytest.raises(IgnoreRequest):
        guard.process_request(second)  # budget spent since it was queued
    assert frontier.store.get(second.meta["aopic_key"]).state == 4  # REFUSED
    assert frontier.lease_of(second) is None
    stats = crawler.stats.get_stats()
    assert stats["aopic/failed/trap/host_pages"] == 1
    # A link to the host now gets no share and no account.
    assert guard.link_filter("http://a.example/3", "http://a.example/3", Request("http://a.example/3"), 1) == "trap/host_pages"
    # Requests the frontier did not hand out pass untouched.
    assert guard.process_request(Request("http://a.example/robots.txt")) is None
    frontier.fail(first, "test")
    assert frontier.engine.conservation_error() <= 1e-12


def test_normalize_keys_requests_and_moves_cash_of_a_changed_url():
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest

    from scrapy_aopic.middlewares.normalize import UrlNormalizeMiddleware

    crawler, frontier = _frontier()
    mw = UrlNormalizeMiddleware.from_crawler(crawler)
    plain = Request("HTTP://B.example:80/x?utm_source=1#f")
    mw.process_request(plain)
    assert plain.meta["aopic_key"] == "http://b.example/x"
    for url in ("http://b.example/known", "http://b.example/other"):
        frontier.enqueue(Request(url, meta={"is_start_request": True}))
    leased = frontier.next_request()
    mw.process_request(leased)  # unchanged URL: keyed by its account
    assert leased.meta["aopic_key"] == "http://b.example/known"
    other = frontier.next_request()
    moved = other.replace(url="http://B.example/known?utm_medium=x")  # same lease, new URL
    with pytest.raises(IgnoreRequest):
        mw.process_request(moved)
    view = frontier.store.get("http://b.example/other")
    assert view.state == 5 and view.target == "http://b.example/known"  # ALIAS
    assert crawler.stats.get_value("aopic/normalize/aliased_known") == 1
    frontier.fail(leased, "test")
    assert frontier.engine.conservation_error() <= 1e-12


def test_soft404_middleware_reads_no_page_that_passes_whatever_its_shape(monkeypatch):
    """Pages of a directory settled as real (four distinct shapes) on a host
    with no error shape are not read for their soft-404 facts, counted
    ``aopic/trap/soft404_unread``; a page linked by a page of an error shape,
    and every page once the host has an error shape, is read again."""
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import HtmlResponse

    from scrapy_aopic.middlewares.traps import Soft404Middleware

    crawler, frontier = _frontier()
    mw = Soft404Middleware.from_crawler(crawler)
    read = []
    facts = Soft404Middleware._facts
    monkeypatch.setattr(Soft404Middleware, "_facts", staticmethod(lambda response: read.append(response.url) or facts(response)))

    def fetch(url: str, body: str, referer: str | None = None):
        assert frontier.enqueue(Request(url, meta={"is_start_request": True}))
        request = frontier.next_request()
        if referer:
            request.headers["Referer"] = referer
        response = HtmlResponse(url, body=f"<html><body>{body}</body></html>".encode(), encoding="utf-8", request=request)
        try:
            return mw.process_response(request, response)
        except IgnoreRequest:
            return None
        finally:
            if frontier.lease_of(request) is not None:
                frontier.fail(request, "test")

    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    for n in range(6):
        fetch(f"http://a.example/docs/p{n}.html", f"<p>Page {' '.join(words[n:] + words[:n])} of the manual</p>")
    stats = crawler.stats.get_stats()
    assert len(read) == 4 and stats["aopic/trap/soft404_unread"] == 2
    # A "not found" space elsewhere on the host: its shape becomes an error shape.
    not_found = "<p>Not found, sorry: the page you asked for is not here any more, try the index</p>"
    answers = [fetch(f"http://a.example/old/x{n}.html", f"{not_found}<a href='y{n}.html'>more</a>") for n in range(3)]
    assert answers[2] is None and mw.guard.soft404.error_shapes  # the third: refused
    before = len(read)
    fetch("http://a.example/docs/p9.html", "<p>Page of the manual about omega and alpha, read again</p>")
    assert len(read) == before + 1 and crawler.stats.get_value("aopic/trap/soft404_unread") == 2
    # Another host's settled directory: unread, unless linked by a page of an error shape.
    for n in range(4):
        fetch(f"http://b.example/docs/p{n}.html", f"<p>Page {' '.join(words[n:] + words[:n])} of the manual</p>")
    before = len(read)
    fetch("http://b.example/docs/p4.html", f"<p>Page {' '.join(words[4:] + words[:4])} of the manual</p>")
    assert len(read) == before and crawler.stats.get_value("aopic/trap/soft404_unread") == 3
    fetch("http://b.example/docs/p5.html", f"<p>Page {' '.join(words[5:] + words[:5])} of the manual</p>",
          referer="http://a.example/old/x2.html")
    assert len(read) == before + 1 and crawler.stats.get_value("aopic/trap/soft404_unread") == 3
    assert frontier.engine.conservation_error() <= 1e-12


def test_error_shapes_learned_are_counted_and_said_once(caplog):
    """Every page shape learned as an error shape is counted; the log says
    it once (a documentation site learns hundreds, nearly all spared)."""
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import HtmlResponse

    from scrapy_aopic.middlewares.traps import Soft404Middleware

    crawler, frontier = _frontier()
    mw = Soft404Middleware.from_crawler(crawler)

    def fetch(url: str, body: str):
        assert frontier.enqueue(Request(url, meta={"is_start_request": True}))
        request = frontier.next_request()
        response = HtmlResponse(url, body=f"<html><body>{body}</body></html>".encode(), encoding="utf-8",
                                request=request)
        try:
            mw.process_response(request, response)
        except IgnoreRequest:
            pass
        finally:
            if frontier.lease_of(request) is not None:
                frontier.fail(request, "test")

    pages = ["<p>Not found, sorry: the page you asked for is not here any more, try the index</p>",
             "<p>No results for your search in the archive of this site, go back and try other words</p>"]
    with caplog.at_level("INFO", logger="scrapy_aopic.middlewares.traps"):
        for space, body in enumerate(pages):
            for n in range(3):
                fetch(f"http://a.example/s{space}/x{n}.html", f"{body}<a href='y{n}.html'>more</a>")
    assert len(mw.guard.soft404.error_shapes) == 2
    assert crawler.stats.get_value("aopic/trap/soft404_shapes") == 2
    said = [r.getMessage() for r in caplog.records if "soft 404s found" in r.getMessage()]
    assert len(said) == 1 and "aopic/trap/soft404_shapes" in said[0]
    assert frontier.engine.conservation_error() <= 1e-12
