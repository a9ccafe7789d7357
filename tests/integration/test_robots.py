"""robots.txt-aware cash (SPEC 6): disallowed links get no share, are never
fetched, Crawl-delay is honoured and the books balance."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.robotstxt import ProtegoRobotParser

from scrapy_aopic.hygiene.canonical import canonical_url
from scrapy_aopic.middlewares.robots import RobotsRules
from tests.support.trapsite import SiteServer, TrapSite, fetch_figures, run_crawl

ROBOTS = b"User-agent: *\nDisallow: /private/\n\nUser-agent: picky\nDisallow: /\n"


def make_rules() -> RobotsRules:
    rules = RobotsRules("mybot")
    rules.add("example.com", ProtegoRobotParser(ROBOTS, None))
    return rules


def check(rules, url, headers=None, meta=None):
    return rules.link_filter(url, canonical_url(url), Request(url, headers=headers, meta=meta), 1)


def test_link_filter_refuses_only_known_disallowed():
    rules = make_rules()
    assert check(rules, "http://example.com/private/x.html") == "robots"
    assert check(rules, "http://EXAMPLE.com:80/private/y?utm_source=z") == "robots"  # keyed canonically
    assert check(rules, "http://example.com/public.html") is None
    # Rules unknown for this host: the link is let through (refused at fetch time).
    assert check(rules, "http://other.example/private/x.html") is None
    assert rules.allowed("http://other.example/private/", "http://other.example/private/") is None
    # The request's own user agent and dont_obey_robotstxt are honoured.
    assert check(rules, "http://example.com/public.html", headers={"User-Agent": "picky"}) == "robots"
    assert check(rules, "http://example.com/private/x", meta={"dont_obey_robotstxt": True}) is None


def test_fallback_parsers_and_broken_parser():
    class Broken:
        def allowed(self, url, agent):
            raise RuntimeError("bad robots.txt")

    parsers = {"a.example:8080": ProtegoRobotParser(ROBOTS, None), "b.example": Broken()}
    rules = RobotsRules("mybot", fallback=parsers.get)
    assert check(rules, "http://a.example:8080/private/1") == "robots"
    assert check(rules, "http://a.example:8080/ok") is None
    assert check(rules, "http://b.example/private/1") is None  # a broken parser allows


# Short: the test tells a delay from none (gaps of ms), not its length; every
# fetch of the ~60-page crawl waits for it.
CRAWL_DELAY = 0.1


@pytest.fixture(scope="module")
def robots_crawl():
    site = TrapSite(articles=30, sections=3, per_listing=10, traps=False, crawl_delay=CRAWL_DELAY)
    with SiteServer(site) as server:
        report = run_crawl([server.base + "/"], {"ADDONS": {"scrapy_aopic.Addon": 0}, "CLOSESPIDER_PAGECOUNT": 300})
        times = list(server.times)
        log = server.take_log()
    return site, server, report, log, times


def test_disallowed_urls_never_fetched(robots_crawl):
    site, server, report, log, _ = robots_crawl
    figures = fetch_figures(log, site.real_pages())
    assert site.private  # the site links private pages
    assert figures["private_fetches"] == 0
    assert not [target for _, target, _, _ in log if target.startswith("/private/")]
    # Every real page was still reached: only disallowed ones were left out.
    assert figures["real_reached"] == len(site.real_pages())


def test_disallowed_links_get_no_share_and_no_account(robots_crawl):
    site, server, report, _, _ = robots_crawl
    stats = report["stats"]
    assert stats["aopic/refused/robots"] >= len(site.private) > 0
    private_links = [link for _, links, _ in report["visits"] for link in links if "/private/" in link]
    assert private_links == [f"http://localhost:{server.port}/private/from-home.html"]
    on_main_host = [u for u in report["accounts"] if "/private/" in u and "127.0.0.1" in u]
    assert on_main_host == []


def test_link_found_before_rules_refused_at_fetch_time(robots_crawl):
    _, server, report, _, _ = robots_crawl
    stats = report["stats"]
    url = f"http://localhost:{server.port}/private/from-home.html"
    assert report["accounts"][url]["state"] == "refused"
    assert report["accounts"][url]["cash"] == 0
    assert stats["aopic/failed/robots"] == 1
    assert "aopic/failed/ignored" not in stats


def test_crawl_delay_becomes_slot_delay(robots_crawl):
    from scrapy_aopic.compat import ROBOTS_PARSED

    _, _, report, _, times = robots_crawl
    if ROBOTS_PARSED is None:
        # A Scrapy without the robots_parsed signal: said once, counted, and
        # the crawl goes on without the delay.
        assert report["stats"]["aopic/robots/crawl_delay_unsupported"] == 1
        assert "aopic/robots/crawl_delay_hosts" not in report["stats"]
        return
    assert report["stats"]["aopic/robots/crawl_delay_hosts"] == 1
    main = [t for t, host, target in times if host == "127.0.0.1" and target != "/robots.txt"]
    gaps = [b - a for a, b in zip(main, main[1:])]
    assert len(gaps) > 20
    # Scrapy jitters slot delays by +-50 %; without the delay gaps are ~ms.
    # The times are the server's: on a loaded machine its thread can take up
    # a request late and the next on time, so one gap in twenty may look
    # short (the one before it then looks long); the median cannot.
    short = [gap for gap in gaps if gap < 0.45 * CRAWL_DELAY]
    assert len(short) <= len(gaps) // 20, short
    assert sorted(gaps)[len(gaps) // 2] >= 0.8 * CRAWL_DELAY, sorted(gaps)


def test_books_balance(robots_crawl):
    stats = robots_crawl[2]["stats"]
    assert stats["aopic/conservation_error"] <= 1e-9 * stats["aopic/cash_injected_total"]
