"""A real crawl of a local site full of near-duplicates; writes a JSON report.

Usage: python dupcrawl.py OUT.json [SETTINGS.json]. Run in a subprocess (a
Twisted reactor starts once per process). The site, served on 127.0.0.1:

* ``/`` links to ``/article/<i>`` (distinct texts) and to each article's
  print version ``/article/<i>?print=1`` and timestamped copy
  ``/copy/<i>/<date>`` (same text, other template, timestamp, ads);
* ``/revision/<i>``: the article with two words changed;
* ``/news?ts=<n>`` for n in 0..29: one page under ever new timestamps,
  which should become a learned pattern;
* every page links to its own ``/trail/<path>`` page, reachable only from
  it: a duplicate's trail is fetched only if its links are followed.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_simhash import TEMPLATES, synthetic_text, synthetic_vocabulary  # noqa: E402
from scrapy import Spider  # noqa: E402
from scrapy.crawler import CrawlerProcess  # noqa: E402

from scrapy_aopic.frontier import Frontier  # noqa: E402
from scrapy_aopic.store.base import STATE_NAMES  # noqa: E402

ARTICLES = 6
NEWS = 30


def build_site(seed: int = 5) -> dict[str, str]:
    """path -> HTML of every page of the site."""
    rng = random.Random(seed)
    vocabulary = synthetic_vocabulary(rng, 2000)
    texts = [synthetic_text(rng, vocabulary, 500) for _ in range(ARTICLES + 1)]
    pages: dict[str, str] = {}

    def page(path: str, title: str, text: str, template, extra_links=()):
        words = text.split()
        paragraphs = [" ".join(words[i : i + 60]) for i in range(0, len(words), 60)]
        # Local links only (the templates' site menu points at a made-up host).
        html = template(title, paragraphs, rng).replace("https://scripture.example", "")
        links = [f"/trail{quote(path, safe='/')}", *extra_links]
        anchors = "".join(f'<p><a href="{href}">more: {href}</a></p>' for href in links)
        pages[path] = html.replace("</body>", f"{anchors}</body>", 1)

    index_links = []
    for i in range(ARTICLES):
        original = f"/article/{i}"
        page(original, f"Article {i}", texts[i], TEMPLATES[0])
        page(f"{original}?print=1", f"Article {i}", texts[i], TEMPLATES[1])
        page(f"/copy/{i}/2024-0{1 + i % 9}-1{i}", f"Article {i}", texts[i], TEMPLATES[2])
        # A revision: two words changed (a near-duplicate whose words differ).
        words = texts[i].split()
        for position in (len(words) // 3, 2 * len(words) // 3):
            words[position] = rng.choice(vocabulary)
        page(f"/revision/{i}", f"Article {i}", " ".join(words), TEMPLATES[0])
        index_links += [original, f"{original}?print=1", f"/copy/{i}/2024-0{1 + i % 9}-1{i}", f"/revision/{i}"]
    for n in range(NEWS):
        page(f"/news?ts={n}", "News", texts[ARTICLES], TEMPLATES[n % 3])
        index_links.append(f"/news?ts={n}")
    for path in list(pages):
        pages[f"/trail{quote(path, safe='/')}"] = (
            f"<html><body><p>Trail of {path}: {synthetic_text(rng, vocabulary, 40)}</p></body></html>"
        )
    pages["/"] = "<html><body>" + "".join(f'<a href="{h}">{h}</a> ' for h in index_links) + "</body></html>"
    return pages


class DupSite:
    """Serve :func:`build_site` on 127.0.0.1, counting hits per path."""

    def __init__(self):
        self.pages = build_site()
        self.hits: Counter[str] = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                site.hits[self.path] += 1
                body = site.pages.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = body.encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class DupSpider(Spider):
    name = "dups"
    allowed_domains = ["127.0.0.1"]  # the templates link to made-up hosts

    def __init__(self, seed_url: str = "", **kwargs):
        super().__init__(**kwargs)
        self.seed_url = seed_url

    async def start(self):
        from scrapy import Request

        yield Request(self.seed_url)

    def parse(self, response):
        yield {
            "url": response.url,
            "duplicate_of": response.meta.get("aopic_duplicate_of"),
            "distance": response.meta.get("aopic_duplicate_distance"),
        }
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def main(out: str, settings_path: str | None = None) -> None:
    site = DupSite()
    settings = {
        "ADDONS": {"scrapy_aopic.Addon": 0},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": 4,
    }
    if settings_path:
        settings.update(json.loads(Path(settings_path).read_text()))
    items: list[dict] = []
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(DupSpider)
    from scrapy import signals

    def collect(item, **kwargs):
        items.append(dict(item))

    crawler.signals.connect(collect, signal=signals.item_scraped)
    process.crawl(crawler, seed_url=site.url + "/")
    process.start()
    frontier = Frontier.from_crawler(crawler)
    accounts = {
        view.url: {"state": STATE_NAMES[view.state], "target": view.target,
                   "cash": view.cash, "history": view.history}  # fmt: skip
        for view in frontier.store.iter_accounts()
    }
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    report = {"base": site.url, "stats": stats, "items": items, "hits": dict(site.hits), "accounts": accounts}
    Path(out).write_text(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
