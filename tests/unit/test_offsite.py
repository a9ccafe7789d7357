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
