"""``broad``: a generic broad-crawl spider that follows every link.

Usage::

    scrapy crawl broad -a seeds=https://example.org/,https://example.com/
    scrapy crawl broad -a seeds_file=seeds.txt      # one URL per line

It yields one small item per page (``url``, ``title``, ``status``,
``content_type``) and follows every ``<a href>`` and ``<link rel="next">``
of HTML pages; which link is fetched when is left to the scheduler (with
scrapy-aopic: the one with the most cash). Binary responses (images, PDFs)
are recorded but not parsed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse

FOLLOWED_SCHEMES = ("http", "https")


def read_seeds(seeds: str | None = None, seeds_file: str | None = None) -> list[str]:
    """Seed URLs from a comma-separated string and/or a file (one per line,
    ``#`` comments and blank lines ignored), duplicates removed, order kept."""
    urls: list[str] = []
    if seeds:
        urls += [u.strip() for u in seeds.split(",")]
    if seeds_file:
        for line in Path(seeds_file).read_text(encoding="utf-8").splitlines():
            urls.append(line.split("#", 1)[0].strip())
    return list(dict.fromkeys(u for u in urls if u))


class BroadSpider(scrapy.Spider):
    """Crawl from the given seeds, following every link on every host
    (or only on ``-a allowed_domains=...``, comma-separated)."""

    name = "broad"

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        allowed_domains: str | None = None,
        *args: Any,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        if allowed_domains:  # -a allowed_domains=a.example,b.example: stay on these
            self.allowed_domains = [d.strip() for d in allowed_domains.split(",") if d.strip()]
        self.seed_urls = read_seeds(seeds, seeds_file)
        if not self.seed_urls:
            raise ValueError("no seeds: pass -a seeds=URL,URL or -a seeds_file=PATH")
        bad = [u for u in self.seed_urls if urlsplit(u).scheme not in FOLLOWED_SCHEMES]
        if bad:
            raise ValueError(f"seeds must be http(s) URLs: {bad}")

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seed_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[Any]:
        content_type = response.headers.get(b"Content-Type", b"").decode("latin-1")
        if not isinstance(response, TextResponse):
            # An image, a PDF, an archive: nothing to parse, no links.
            yield {"url": response.url, "title": None, "status": response.status, "content_type": content_type}
            return
        title = None
        hrefs: list[str] = []
        try:
            title = response.css("title::text").get()
            hrefs = response.css("a::attr(href), link[rel~=next]::attr(href)").getall()
        except ValueError:
            # Text that is not markup at all (JSON, plain text, garbage
            # declared as HTML): keep the page, follow nothing.
            pass
        yield {
            "url": response.url,
            "title": title.strip() if title else None,
            "status": response.status,
            "content_type": content_type,
        }
        for href in hrefs:
            href = href.strip()
            if not href or href.startswith("#"):
                continue
            url = response.urljoin(href)
            if urlsplit(url).scheme in FOLLOWED_SCHEMES:
                yield response.follow(url, callback=self.parse)
