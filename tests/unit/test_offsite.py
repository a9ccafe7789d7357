"""Offsite links are refused as they come in, by Scrapy's own rule."""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.utils.test import get_crawler

from scrapy_aopic.frontier.offsite import OffsiteLinkFilter


class Sites(Spider):
    name = "sites"
    allowed_domains = ["a.example"]


def make_filter(middleware_class=OffsiteMiddleware):
    crawler = get_crawler(Sites)
    spider = Sites()
    crawler.spider = spider
    middleware = middleware_class.from_crawler(crawler)
    middleware.spider_opened(spider)
    link_filter = OffsiteLinkFilter.for_middlewares([object(), middleware], spider)
    return link_filter, spider


def refusal(link_filter, url, **kwargs):
    return link_filter(url, url, Request(url, **kwargs), 1)


def test_refuses_what_scrapy_would_drop_and_nothing_else():
    link_filter, _ = make_filter()
    assert refusal(link_filter, "http://a.example/x") is None
    assert refusal(link_filter, "https://www.a.example:8080/y?q#f") is None  # a subdomain
    assert refusal(link_filter, "http://b.example/x") == "offsite"
    assert refusal(link_filter, "http://a.example.evil.test/") == "offsite"
    assert refusal(link_filter, "http://b.example/x", dont_filter=True) is None
    assert refusal(link_filter, "http://b.example/x", meta={"allow_offsite": True}) is None


def test_memo_is_forgotten_when_allowed_domains_change():
    link_filter, spider = make_filter()
    assert refusal(link_filter, "http://b.example/1") == "offsite"

    def scrapy_says(url):
        follow = link_filter.middleware.should_follow(Request(url), spider)
        return None if follow else "offsite"

    # Whatever Scrapy's own middleware answers after the change (2.13 keeps
    # the rule it built at spider_opened, later releases follow the
    # change), the filter answers the same: its memo is not stale.
    spider.allowed_domains = ["a.example", "b.example"]
    assert refusal(link_filter, "http://b.example/2") == scrapy_says("http://b.example/2")
    spider.allowed_domains = []
    assert refusal(link_filter, "http://c.example/") == scrapy_says("http://c.example/")


def test_a_custom_rule_is_asked_about_every_link():
    class PathRule(OffsiteMiddleware):
        def should_follow(self, request, spider):
            return "/public/" in request.url

    link_filter, _ = make_filter(PathRule)
    assert refusal(link_filter, "http://a.example/public/1") is None
    assert refusal(link_filter, "http://a.example/private/1") == "offsite"


def test_no_offsite_middleware_no_filter():
    assert OffsiteLinkFilter.for_middlewares([object()], Sites()) is None


def _origin_by_find(url: str) -> str:
    """``origin_of`` as it was written before the regular expression: the
    reference the faster one must agree with on every string."""
    start = url.find("://")
    if start < 0:
        return url
    end = len(url)
    for mark in "/?#":
        i = url.find(mark, start + 3)
        if 0 <= i < end:
            end = i
    return url[:end]


def test_origin_of_and_the_link_host_origin_agree_with_the_find_based_reading():
    import random

    from scrapy_aopic.hygiene.domains import origin_of, scheme_origin_of

    rng = random.Random(18)
    pieces = ["http", "://", ":", "/", "?", "#", "a", ".", "\n", "é", "[::1]", "@", "x://y"]
    samples = ["http://a.example/p?q#f", "https://a.example", "mailto:a@b", "://x/y", "a/b://c/d",
               "http://h?x=http://i/j", "", "http:/x", "http://h\n/x"]  # fmt: skip
    samples += ["".join(rng.choice(pieces) for _ in range(rng.randrange(12))) for _ in range(20000)]
    for url in samples:
        assert origin_of(url) == _origin_by_find(url), url
        # Frontier._link_host reads the origin (scheme_origin_of) where the first ":"
        # opens the first "://" after a scheme, and asks host_of otherwise.
        start = url.find("://")
        fast = start > 0 and url.find(":") == start
        origin = scheme_origin_of(url)
        assert (origin is not None) == fast, url
        if fast:
            assert origin == _origin_by_find(url), url
