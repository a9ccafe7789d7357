"""Refusals count distinct URLs, and the live line shows offsite apart (issue 16, item 5)."""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_aopic.extensions.logstats import AopicLogStats, refused_urls
from scrapy_aopic.frontier import Frontier


def _frontier():
    crawler = get_crawler(Spider, settings_dict={"ADDONS": {"scrapy_aopic.Addon": 0}})
    frontier = Frontier.from_crawler(crawler)
    frontier.open(Spider("t"))
    return crawler, frontier


def test_a_url_linked_from_many_pages_is_refused_once():
    crawler, frontier = _frontier()
    frontier.link_filters.register(lambda url, key, request, depth: "offsite" if "other" in url else None)
    frontier.link_filters.register(lambda url, key, request, depth: "robots" if "/private/" in url else None)
    for n in range(5):  # five pages: each links the same offsite URL and private page
        frontier._count_refusal("offsite", "http://other.example/")
        frontier._count_refusal("robots", "http://a.example/private/1")
    frontier._count_refusal("offsite", "http://other.example/2")
    stats = crawler.stats.get_stats()
    assert stats["aopic/refused/offsite"] == 2 and stats["aopic/refused/robots"] == 1
    assert stats["aopic/refused_links"] == 11
    assert refused_urls(stats) == (1, 2)


def test_enqueue_counts_one_refusal_per_url():
    crawler, frontier = _frontier()
    frontier.link_filters.register(lambda url, key, request, depth: "trap/test" if "trap" in url else None)
    for _ in range(3):
        assert not frontier.enqueue(Request("http://a.example/trap", meta={"is_start_request": True}))
    assert crawler.stats.get_value("aopic/refused/trap/test") == 1
    assert crawler.stats.get_value("aopic/refused_links") == 3


def test_live_line_shows_offsite_apart():
    crawler, frontier = _frontier()
    for n in range(3):
        frontier._count_refusal("offsite", f"http://other.example/{n}")
    frontier._count_refusal("trap/calendar", "http://a.example/2025/01/")
    frontier._count_refusal("robots", "http://a.example/private/")
    line = AopicLogStats(crawler, 60.0).progress_line()
    assert "URLs refused 2 (traps 1, robots 1), offsite 3" in line, line


def test_live_line_counts_pending_urls_refused_at_fetch_time():
    """A pending URL refused when it comes up (a duplicate pattern learned
    after its link was accepted, robots.txt read late, a closed soft-404
    directory) is a refused URL too: a crawl refused 19,986 URLs by a
    learned pattern while its live line said "URLs refused 5"."""
    crawler, frontier = _frontier()
    frontier._count_refusal("robots", "http://a.example/private/")
    stats = crawler.stats
    stats.inc_value("aopic/failed/duplicate_pattern", 7)
    stats.inc_value("aopic/failed/trap/soft404", 2)
    stats.inc_value("aopic/failed/robots", 3)
    stats.inc_value("aopic/failed/http_404", 5)  # a failure, not a refusal
    assert refused_urls(stats.get_stats()) == (1 + 7 + 2 + 3, 0)
    line = AopicLogStats(crawler, 60.0).progress_line()
    assert "URLs refused 13 (traps 2, robots 4), offsite 0" in line, line
