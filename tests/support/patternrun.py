"""Run one spider pattern of the conformance suite as a real crawl with the
add-on (in this process; a reactor runs once per process) and write a JSON
report of its stats.

Usage: python patternrun.py CONFIG.json — CONFIG has ``pattern`` (a key of
:data:`SPIDERS`), ``base`` (the pattern site's URL), ``settings`` and ``out``.
"""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import IgnoreRequest
from scrapy.http import FormRequest, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider


class _Base(scrapy.Spider):
    def __init__(self, base="", **kwargs):
        super().__init__(**kwargs)
        self.base = base


class FollowMeta(_Base):
    """``response.follow(href, meta=response.meta)``: the frontier's keys
    come along in every link."""

    name = "followmeta"

    async def start(self):
        yield scrapy.Request(self.base + "/p0", meta={"trail": ["p0"]})

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, meta=response.meta)
        yield {"url": response.url}


class Crawl(CrawlSpider):
    name = "crawlspider"
    rules = (Rule(LinkExtractor(allow=r"/p\d+$"), callback="parse_item", follow=True),)

    def __init__(self, base="", **kwargs):
        self.start_urls = [base + "/p0"]
        super().__init__(**kwargs)

    def parse_item(self, response):
        yield {"url": response.url}


class Sitemap(SitemapSpider):
    name = "sitemap"

    def __init__(self, base="", **kwargs):
        self.sitemap_urls = [base + "/sitemap.xml"]
        super().__init__(**kwargs)

    def parse(self, response):
        yield {"url": response.url}


class Login(_Base):
    """A form login (a spider method callback), a second form post whose
    callback is not a spider method, then a crawl of the members' pages."""

    name = "login"

    async def start(self):
        yield FormRequest(self.base + "/login", formdata={"user": "u", "pass": "p"}, callback=self.after_login)
        yield FormRequest(self.base + "/login", formdata={"user": "u", "pass": "p", "again": "1"},
                          callback=lambda response: None, meta={"aopic_link": False}, dont_filter=True)

    def after_login(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.member)

    def member(self, response):
        yield {"url": response.url}


class Refresh(_Base):
    """Three identical ``dont_filter`` requests, and one to a crawled page."""

    name = "refresh"

    async def start(self):
        yield scrapy.Request(self.base + "/p0")

    def parse(self, response):
        if response.url.endswith("/p0") and not response.meta.get("again"):
            for _ in range(3):
                yield scrapy.Request(self.base + "/p1", dont_filter=True, callback=self.leaf)
            yield scrapy.Request(self.base + "/p0", dont_filter=True, meta={"again": True}, callback=self.leaf)

    def leaf(self, response):
        yield {"url": response.url}


class Errback(_Base):
    """An errback that retries by yielding a new request."""

    name = "errback"
    custom_settings = {"RETRY_ENABLED": False}

    async def start(self):
        yield scrapy.Request(self.base + "/flaky", errback=self.retry)

    def retry(self, failure):
        yield failure.request.replace(dont_filter=True)

    def parse(self, response):
        yield {"url": response.url}


class Redirects(_Base):
    name = "redirects"
    allowed_domains = ["127.0.0.1"]

    async def start(self):
        yield scrapy.Request(self.base + "/redirect-off")
        yield scrapy.Request(self.base + "/redirect-on")
        yield scrapy.Request(self.base + "/p5")

    def parse(self, response):
        yield {"url": response.url}


class Refuse:
    """A downloader middleware that raises IgnoreRequest for /p5 when the
    request goes out and for /p8 when its response comes back."""

    def process_request(self, request, spider=None):
        if request.url.endswith("/p5"):
            raise IgnoreRequest("refused on the way out")

    def process_response(self, request, response, spider=None):
        if request.url.endswith("/p8"):
            raise IgnoreRequest("refused on the way back")
        return response


class BreakOnTheWayBack:
    """A downloader middleware whose ``process_response`` raises for /p8,
    as Scrapy's redirect middleware does on a ``Location: javascript:...``
    (ValueError, "Missing scheme"): the request reaches no hook, and its
    traceback keeps it alive in a reference cycle."""

    def process_response(self, request, response, spider=None):
        if request.url.endswith("/p8"):
            raise ValueError(f"cannot follow {request.url}")
        return response


class FollowAll(_Base):
    """Follows every link (for DEPTH_LIMIT, CLOSESPIDER_*, AUTOTHROTTLE, JOBDIR)."""

    name = "followall"

    async def start(self):
        yield scrapy.Request(self.base + "/p0")

    def parse(self, response):
        if isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)
        yield {"url": response.url}


class Api(_Base):
    """Pagination of an API: not links (``aopic_link: False``), and a page
    crawl competing for the same budget."""

    name = "api"

    async def start(self):
        yield scrapy.Request(self.base + "/p0")
        yield scrapy.Request(self.base + "/api?page=1", callback=self.api, meta={"aopic_link": False})

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)

    def api(self, response):
        data = json.loads(response.text)
        if data["next"]:
            yield scrapy.Request(f"{self.base}/api?page={data['next']}", callback=self.api,
                                 meta={"aopic_link": False})
        yield data


SPIDERS = {cls.name: cls for cls in (FollowMeta, Crawl, Sitemap, Login, Refresh, Errback, Redirects, FollowAll, Api)}


def main(config_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SPIDERS[config["pattern"]])
    process.crawl(crawler, base=config["base"])
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(config["out"], "w") as f:
        json.dump({"stats": stats}, f)


if __name__ == "__main__":
    main(sys.argv[1])
