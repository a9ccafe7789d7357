"""A local web site with real content next to crawler traps, and a crawl runner.

:class:`TrapSite` generates the site; :class:`SiteServer` serves it on
127.0.0.1 (and the link farm on ``localhost``, a second host) and logs every
GET with what it was, so tests and the benchmark count server-side what a
crawl fetched. ``python trapsite.py CONFIG.json`` runs one real Scrapy crawl
(in its own process: a Twisted reactor cannot start twice) and writes its
stats, the frontier's accounts and the visits it paid.

Real content: a home page, sections with numbered listing pages, articles
linking each other (a few hubs), a small shop, a help page, a gallery, an
events page. Spellings of real pages the canonicalizer must fold: tracking
parameters, fragments, session ids, upper-case host, a 301 short link and a
meta-refresh alias. ``/private/`` is disallowed by robots.txt.

Traps (``traps=True``), entered from the footer every real page carries
(last on the page, where a LIFO crawler goes first) and from some articles:

* ``calendar``: ``/events/2025/06/`` with previous / next month and day pages, forever;
* ``session``: shop links carry a session id minted per page view;
* ``loop``: the help page links ``a/`` and ``b/``, which serve it again, forever;
* ``counter``: the gallery links ``?view=N+1``, forever;
* ``farm``: ``http://localhost:PORT/farm/N.html``, ten links to other farm pages each;
* ``soft404``: unknown paths answer 200 "not found" with five fresh random links.

Soft-404 spaces of one directory each (``soft404=`` a tuple of
:data:`SOFT404_VARIANTS`), entered from every real page's footer and from
some articles, each answering 200 for any token with links to fresh ones:

* ``words``: ``/wiki/<Random_words>``, "no article about <words> yet",
  links labelled with other random words;
* ``noresults``: ``/search/<hex token>/``, a templated "No results for
  <token>" page with "recent searches" (more tokens);
* ``query``: ``/catalog/?ref=<hex>&sort=<word>``: random query values, the same
  empty catalogue page, with a random request id and time in it.
* ``template``: ``/kb/<word>-<word>.html``, "not found" in the real
  articles' own template (a long body of site text, five links to real
  articles chosen per URL, five "related" links to fresh ``/kb/`` pages
  with random titles);
* ``pathquery``: ``/find/<hex>?page=<n>``: the random token in the path
  *and* a query, so every URL is a directory (``parent_of``) of its own;
  they share only their wider directory ``/find/?page=`` (``space_of``);
* ``dates``: ``/archive/?day=<yyyy-mm-dd>``: "no posts on <date>" with the
  previous and next day and a random other date (a date space of another
  shape than the calendar's ``/yyyy/mm/``).
* ``varylen``: ``/lookup/<hex>.html``: "nothing matches <token>" whose
  length varies from URL to URL (the token echoed one to six times, zero
  to forty reference numbers, two to nine "did you mean" links to fresh
  tokens).

Two more variants of the older traps (issue 16, to check the rules on
generators they were not written for): ``event_days`` puts real events
(pages of their own text) on a share of the calendar's days of 2024 to
2026, so the calendar holds real pages next to its endless empty months;
``farm_share`` is the share of articles linking the link farm (0.02 by
default; 0.002 is a farm linked from few pages).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

_WORDS = None

#: Soft-404 spaces :class:`TrapSite` can add (``soft404=``).
SOFT404_VARIANTS = ("words", "noresults", "query", "template", "pathquery", "dates", "varylen")


def _vocabulary() -> list[str]:
    global _WORDS
    if _WORDS is None:
        rng = random.Random(7)
        consonants, vowels = "bcdfghklmnprstvz", "aeiou"
        _WORDS = sorted({"".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))) for _ in range(3000)})
    return _WORDS


class Reply(NamedTuple):
    status: int
    headers: dict
    body: bytes
    kind: str  #: "real", "trap:<name>", "redirect", "robots", "private", "missing"
    page: str | None = None  #: id of the real page served


class TrapSite:
    """The site. ``articles`` real articles in ``sections`` sections."""

    def __init__(
        self,
        articles: int = 2000,
        sections: int = 10,
        per_listing: int = 20,
        seed: int = 1,
        traps: bool = True,
        crawl_delay: float | None = None,
        soft404: tuple[str, ...] = (),
        api: tuple[int, int] = (0, 0),
        event_days: float = 0.0,
        farm_share: float = 0.02,
    ):
        unknown = set(soft404) - set(SOFT404_VARIANTS)
        if unknown:
            raise ValueError(f"unknown soft-404 variants {sorted(unknown)}")
        self.soft404 = tuple(soft404) if traps else ()
        #: (distinct, template): an API reference in ``/api/``, an index and
        #: pages of functions: ``distinct`` with documentation of their own,
        #: then ``template`` whose only difference is their name (rustdoc's
        #: ``fn.vcopy_lane_s8`` .. ``_u64``): real pages of one shape.
        self.api = api
        self.articles = articles
        #: share of the calendar's days 3, 14 and 25 of 2024-2026 with a real event page
        self.event_days = event_days if traps else 0.0
        self.sections = sections
        self.per_listing = per_listing
        self.traps = traps
        self.crawl_delay = crawl_delay
        self.shop_items = 8
        rng = random.Random(seed)
        self._text_seed = seed
        # Related links: preferential attachment over earlier articles, so
        # early articles become hubs; plus random ones.
        self.related: list[list[int]] = []
        pool: list[int] = []
        for i in range(articles):
            links = set()
            for _ in range(2):
                if pool:
                    links.add(rng.choice(pool))
            for _ in range(2):
                links.add(rng.randrange(articles))
            links.discard(i)
            self.related.append(sorted(links))
            pool.extend(links)
            pool.append(i)
        self.private = {i for i in range(articles) if rng.random() < 0.05}
        self.farm_links = {i for i in range(articles) if rng.random() < farm_share} if traps else set()
        self.broken_links = {i for i in range(articles) if rng.random() < 0.03} if traps else set()
        self.tracking = {i for i in range(articles) if rng.random() < 0.1}
        self.shortlinks = {i for i in range(articles) if rng.random() < 0.05}
        self.refresh_links = {i for i in range(articles) if rng.random() < 0.02}
        self._session = 0
        self._lock = threading.Lock()

    # -- ground truth -----------------------------------------------------

    def listing_pages(self, section: int) -> int:
        count = len(range(section, self.articles, self.sections))
        return max(1, -(-count // self.per_listing))

    def real_pages(self) -> set[str]:
        """Ids of the real pages (the path that serves each)."""
        pages = {"/", "/about.html", "/events/", "/shop/", "/docs/help/", "/gallery/"}
        pages |= {f"/shop/item-{n}.html" for n in range(self.shop_items)}
        for s in range(self.sections):
            pages.add(f"/s/{s}/")
            pages |= {f"/s/{s}/?page={p}" for p in range(2, self.listing_pages(s) + 1)}
        pages |= {self.article_path(i) for i in range(self.articles)}
        pages |= self.event_pages()
        if sum(self.api):
            pages |= {"/api/index.html"} | {f"/api/fn.{self._api_name(n)}.html" for n in range(sum(self.api))}
        return pages

    def _is_event(self, y: int, mo: int, d: int) -> bool:
        return (self.event_days > 0 and 2024 <= y <= 2026 and d in (3, 14, 25)
                and random.Random(f"event|{y}|{mo}|{d}").random() < self.event_days)

    def event_pages(self) -> set[str]:
        """The calendar's days with a real event (``event_days``)."""
        return {f"/events/{y:04d}/{mo:02d}/{d:02d}/" for y in range(2024, 2027) for mo in range(1, 13)
                for d in (3, 14, 25) if self._is_event(y, mo, d)}

    def _api_name(self, n: int) -> str:
        """Function ``n``'s name: words of the vocabulary (``distinct`` ones),
        then ``vcopy_lane_<lane>`` (the template ones)."""
        if n < self.api[0]:
            return "_".join(_vocabulary()[(n * 7 + k) % len(_vocabulary())] for k in range(2))
        return f"vcopy_lane_{'su'[n % 2]}{8 << (n % 4)}_{n}"

    def _api(self, path: str) -> Reply:
        count = sum(self.api)
        names = [self._api_name(n) for n in range(count)]
        if path == "/api/index.html":
            links = [(f"fn.{name}.html", name) for name in names]
            return self._html(self._page("API reference", links, "api-index"), "real", path)
        m = re.fullmatch(r"/api/fn\.(\w+)\.html", path)
        if not m or m.group(1) not in names:
            return self._missing(path)
        n = names.index(m.group(1))
        name = names[n]
        links = [("index.html", "Module index"), (f"fn.{names[(n + 1) % count]}.html", "Next function")]
        key = f"api-{n}" if n < self.api[0] else "api-template"
        return self._html(self._page(f"Function {name}", links, key), "real", path)

    def broken_link_paths(self) -> set[str]:
        """Paths real articles link to that hold no page (broken links: the
        trap site answers them with a soft 404). Any crawler pays one fetch
        to learn that a link is broken, as it pays for a link to a 404."""
        return {f"/s/{i % self.sections}/old-{i}.html" for i in self.broken_links}

    #: Path prefixes of the trap spaces (their real entry pages aside).
    TRAP_PREFIXES = ("/events/", "/shop/", "/docs/help/", "/gallery/", "/wiki/", "/search/", "/catalog/", "/kb/", "/find/",
                     "/archive/", "/lookup/")

    def is_trap_url(self, url: str) -> bool:
        """Whether ``url`` (absolute) lies in a trap: the link farm, or a trap
        space's URL that is not one of its real pages."""
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.path.startswith("/private/"):
            return False
        if parts.hostname == "localhost":
            return True  # the link farm's host
        real = self.__dict__.get("_real")
        if real is None:
            real = self._real = self.real_pages()
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        return parts.path.startswith(self.TRAP_PREFIXES) and target not in real

    def article_path(self, i: int) -> str:
        return f"/s/{i % self.sections}/{i}.html"

    # -- rendering ----------------------------------------------------------

    def _text(self, key: str, words: int = 120) -> str:
        rng = random.Random(f"{self._text_seed}|{key}")
        vocab = _vocabulary()
        return " ".join(rng.choice(vocab) for _ in range(words))

    def _sid(self) -> str:
        with self._lock:
            self._session += 1
            return hashlib.sha1(f"s{self._session}".encode()).hexdigest()[:24].upper()

    def _page(self, title: str, links: list[tuple[str, str]], text_key: str, extra_head: str = "") -> bytes:
        out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>{extra_head}</head><body>",
               f"<h1>{title}</h1><p>{self._text(text_key)}</p><ul>"]
        out += [f'<li><a href="{href}">{label}</a></li>' for href, label in links]
        out.append("</ul><footer>")
        footer = [("/about.html", "About"), ("mailto:editor@example.com", "Mail us"), ("javascript:void(0)", "Print"),
                  ("ftp://files.example.com/archive.zip", "Archive")]
        if self.traps:
            footer += [("/events/2025/06/", "This month's events"), ("/shop/;jsessionid=" + self._sid(), "Shop"),
                       ("/docs/help/", "Help"), ("/gallery/?view=1", "Next photo")]
            footer += [(self._soft404_link(v, text_key), label) for v, label in
                       (("words", "Wiki"), ("noresults", "Search"), ("query", "Catalogue"), ("template", "Knowledge base"),
                        ("pathquery", "Find"), ("dates", "Archive"), ("varylen", "Lookup")) if v in self.soft404]
        else:
            footer += [("/events/", "Events"), ("/shop/", "Shop"), ("/docs/help/", "Help"), ("/gallery/", "Gallery")]
        out += [f'<a href="{href}">{label}</a> ' for href, label in footer]
        out.append("</footer></body></html>")
        return "".join(out).encode()

    # -- soft-404 spaces -------------------------------------------------------

    def _soft404_link(self, variant: str, key: str) -> str:
        """A link into a soft-404 space, fixed per (variant, key)."""
        rng = random.Random(f"{variant}|{key}")
        return self._soft404_url(variant, rng)

    @staticmethod
    def _soft404_url(variant: str, rng: random.Random) -> str:
        vocab = _vocabulary()
        if variant == "words":
            return "/wiki/" + "_".join(rng.choice(vocab).capitalize() for _ in range(rng.randint(1, 3)))
        if variant == "noresults":
            return f"/search/{rng.getrandbits(48):012x}/"
        if variant == "template":
            return f"/kb/{rng.choice(vocab)}-{rng.choice(vocab)}.html"
        if variant == "pathquery":
            return f"/find/{rng.getrandbits(36):09x}?page={rng.randrange(1, 9)}"
        if variant == "varylen":
            return f"/lookup/{rng.getrandbits(40):010x}.html"
        if variant == "dates":
            return f"/archive/?day={rng.randrange(1990, 2030)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        return f"/catalog/?ref={rng.getrandbits(40):010x}&sort={rng.choice(vocab)}"

    def _soft404_space(self, variant: str, path: str, query: str) -> Reply:
        target = f"{path}?{query}" if query else path
        rng = random.Random(f"soft404|{target}")
        links = [self._soft404_url(variant, rng) for _ in range(5)]
        if variant == "words":
            words = path[len("/wiki/"):].replace("_", " ")
            title = f"{words} - Wiki"
            links = [(href, href[len("/wiki/"):].replace("_", " ")) for href in links]
            extra = f"<p>There is no article about <b>{words}</b> yet. You can search for {words} in other pages.</p>"
        elif variant == "noresults":
            token = path.strip("/").rpartition("/")[2]
            title = f"Search: {token}"
            links = [(href, f"Recent search {href.strip('/').rpartition('/')[2]}") for href in links]
            extra = f"<p>No results for &ldquo;{token}&rdquo;. Check the spelling or try other words.</p>"
        elif variant == "template":
            slug = path[len("/kb/"):-len(".html")]
            title = f"{slug.replace('-', ' ').title()} - Knowledge base"
            links = [(href, " ".join(w.title() for w in href[4:-5].split("-"))) for href in links]
            # links to real articles, different for every URL (not siblings: their labels stay)
            links += [(self.article_path(j), f"Article {j}") for j in (rng.randrange(self.articles) for _ in range(5))]
            extra = (f"<p>The article {slug} could not be found. It may have been moved or deleted.</p>"
                     f"<p>{self._text('kb-template', 60)}</p>")
        elif variant == "pathquery":
            token = path.strip("/").rpartition("/")[2]
            title = f"Find {token}"
            links = [(href, "Next results") for href in links]
            extra = f"<p>Nothing found for {token} on this page. Try another search.</p>"
        elif variant == "dates":
            day = query.partition("day=")[2]
            title = f"Archive {day}"
            try:
                y, m, d = (int(x) for x in day.split("-"))
                date = datetime.date(y, m, d)
                near = [date - datetime.timedelta(days=1), date + datetime.timedelta(days=1)]
                links = [(f"/archive/?day={n.isoformat()}", n.isoformat()) for n in near] + [(links[0], "Random day")]
            except ValueError:
                links = [(href, "Another day") for href in links]
            extra = f"<p>There are no posts on {day}. Choose another day.</p>"
        elif variant == "varylen":
            token = path[len("/lookup/"):-len(".html")]
            title = f"Lookup {token}"
            links += [self._soft404_url(variant, rng) for _ in range(rng.randint(0, 4))]
            links = [(href, f"Did you mean {href[8:-5]}?") for href in links[:rng.randint(2, 9)]]
            numbers = " ".join(str(rng.randrange(10**6)) for _ in range(rng.randint(0, 40)))
            extra = (f"<p>{' '.join([f'Nothing matches {token}.'] * rng.randint(1, 6))}</p>"
                     f"<p>Reference numbers: {numbers}</p><p>Try fewer words or check the spelling.</p>")
        else:
            title = "Catalogue"
            links = [(href, "Show more") for href in links]
            extra = (f"<p>No products match your filter. Request {rng.getrandbits(32):08x} "
                     f"served at {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.</p>")
        body = self._page(title, links, f"soft404-{variant}").replace(b"</h1>", b"</h1>" + extra.encode(), 1)
        return self._html(body, f"trap:soft404-{variant}")

    def _html(self, body: bytes, kind: str, page: str | None = None) -> Reply:
        return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, body, kind, page)

    def respond(self, host: str, target: str, port: int) -> Reply:
        """Answer ``GET target`` sent to host name ``host``."""
        target = target.split("#", 1)[0]
        path, _, query = target.partition("?")
        if path == "/robots.txt":
            lines = ["User-agent: *", "Disallow: /private/"]
            if self.crawl_delay and host != "localhost":
                lines.append(f"Crawl-delay: {self.crawl_delay:g}")
            return Reply(200, {"Content-Type": "text/plain"}, ("\n".join(lines) + "\n").encode(), "robots")
        if path.startswith("/private/"):
            return self._html(self._page("Members only", [("/", "Home")], path), "private")
        if host == "localhost":
            return self._farm(path)
        m = re.fullmatch(r"/go/(\d+)", path)
        if m and int(m.group(1)) < self.articles:
            return Reply(301, {"Location": self.article_path(int(m.group(1))), "Content-Type": "text/html"}, b"moved", "redirect")
        m = re.fullmatch(r"/refresh/(\d+)", path)
        if m and int(m.group(1)) < self.articles:
            head = f'<meta http-equiv="refresh" content="0; url={self.article_path(int(m.group(1)))}">'
            return self._html(f"<html><head>{head}</head><body>Moved</body></html>".encode(), "redirect")
        # Session ids and tracking parameters do not change the page.
        path = re.sub(r";jsessionid=[^/?]*", "", path)
        params = [p for p in query.split("&") if p and not p.startswith(("utm_", "sid="))]
        query = "&".join(params)
        if path == "/":
            links = [(f"/s/{s}/", f"Section {s}") for s in range(self.sections)]
            links += [(self.article_path(i), f"Featured {i}") for i in range(min(10, self.articles))]
            # Aliases of featured articles: a 301 short link and a meta refresh.
            links += [("/go/0", "Top story"), ("/refresh/1", "Second story")]
            # A disallowed page on a host whose robots.txt is not known yet.
            links.append((f"http://localhost:{port}/private/from-home.html", "Partner area"))
            if sum(self.api):
                links.append(("/api/index.html", "API reference"))
            return self._html(self._page("Home", links, "home"), "real", "/")
        if sum(self.api) and path.startswith("/api/") and not query:
            return self._api(path)
        if path == "/about.html" and not query:
            return self._html(self._page("About", [("/", "Home")], "about"), "real", "/about.html")
        m = re.fullmatch(r"/s/(\d+)/", path)
        if m and int(m.group(1)) < self.sections:
            return self._listing(int(m.group(1)), query)
        m = re.fullmatch(r"/s/(\d+)/(\d+)\.html", path)
        if m and int(m.group(2)) < self.articles and int(m.group(2)) % self.sections == int(m.group(1)) and not query:
            return self._article(int(m.group(2)), port)
        if "words" in self.soft404 and path.startswith("/wiki/") and len(path) > 6:
            return self._soft404_space("words", path, query)
        if "noresults" in self.soft404 and re.fullmatch(r"/search/[0-9a-f]+/", path):
            return self._soft404_space("noresults", path, query)
        if "query" in self.soft404 and path == "/catalog/" and query:
            return self._soft404_space("query", path, query)
        if "template" in self.soft404 and re.fullmatch(r"/kb/[a-z]+-[a-z]+\.html", path):
            return self._soft404_space("template", path, query)
        if "pathquery" in self.soft404 and re.fullmatch(r"/find/[0-9a-f]+", path) and query:
            return self._soft404_space("pathquery", path, query)
        if "varylen" in self.soft404 and re.fullmatch(r"/lookup/[0-9a-f]+\.html", path):
            return self._soft404_space("varylen", path, query)
        if "dates" in self.soft404 and path == "/archive/" and query.startswith("day="):
            return self._soft404_space("dates", path, query)
        if path.startswith("/events/"):
            return self._events(path)
        if path.startswith("/shop/"):
            return self._shop(path, query)
        if path.startswith("/docs/help/"):
            return self._help(path)
        if path == "/gallery/":
            return self._gallery(query)
        return self._missing(target)

    def _listing(self, section: int, query: str) -> Reply:
        pages = self.listing_pages(section)
        m = re.fullmatch(r"(?:page=(\d+))?", query)
        page = int(m.group(1)) if m and m.group(1) else 1
        if not m or not 1 <= page <= pages or query == "page=1":
            return self._missing(f"/s/{section}/?{query}")
        ids = list(range(section, self.articles, self.sections))[(page - 1) * self.per_listing: page * self.per_listing]
        links = [(self.article_path(i), f"Article {i}") for i in ids]
        links += [(f"/s/{section}/" + (f"?page={p}" if p > 1 else ""), f"Page {p}") for p in range(1, pages + 1)]
        page_id = f"/s/{section}/" + (f"?page={page}" if page > 1 else "")
        return self._html(self._page(f"Section {section} page {page}", links, page_id), "real", page_id)

    def _article(self, i: int, port: int) -> Reply:
        links = [("/", "Home"), (f"/s/{i % self.sections}/", "Section")]
        for j in self.related[i]:
            href = self.article_path(j)
            if j in self.tracking:
                href += "?utm_source=related&utm_medium=web#comments"
            if j in self.shortlinks:
                href = f"/go/{j}"
            elif j in self.refresh_links:
                href = f"/refresh/{j}"
            elif j % 13 == 0:
                href = f"HTTP://127.0.0.1:{port}{href}"
            links.append((href, f"Article {j}"))
        if i in self.private:
            links.append((f"/private/{i}.html", "Members only"))
        if i in self.broken_links:
            links.append((f"/s/{i % self.sections}/old-{i}.html", "Old version"))
        if i in self.farm_links:
            links.append((f"http://localhost:{port}/farm/{i}.html", "Great deals"))
        for variant in self.soft404:
            if i % 17 == SOFT404_VARIANTS.index(variant):
                links.append((self._soft404_link(variant, f"article{i}"), "See also"))
        path = self.article_path(i)
        return self._html(self._page(f"Article {i}", links, path), "real", path)

    def _events(self, path: str) -> Reply:
        if path == "/events/":
            return self._html(self._page("Events", [("/", "Home")], "events"), "real", "/events/")
        m = re.fullmatch(r"/events/(\d{4})/(\d{2})/(?:(\d{2})/)?", path)
        if not self.traps or not m:
            return self._missing(path)
        y, mo = int(m.group(1)), int(m.group(2))
        if m.group(3) and self._is_event(y, mo, int(m.group(3))):
            d = int(m.group(3))
            links = [("/events/", "All events"), (f"/events/{y:04d}/{mo:02d}/", "This month")]
            return self._html(self._page(f"Event of {y}-{mo:02d}-{d:02d}", links, f"event|{y}|{mo}|{d}"), "real", path)
        prev = (y, mo - 1) if mo > 1 else (y - 1, 12)
        nxt = (y, mo + 1) if mo < 12 else (y + 1, 1)
        links = [(f"/events/{prev[0]:04d}/{prev[1]:02d}/", "Previous month"), (f"/events/{nxt[0]:04d}/{nxt[1]:02d}/", "Next month")]
        links += [(f"/events/{y:04d}/{mo:02d}/{d:02d}/", f"Day {d}") for d in (3, 14, 25)]
        return self._html(self._page(f"Events {y}-{mo:02d}", links, "calendar"), "trap:calendar")

    def _shop(self, path: str, query: str) -> Reply:
        sid = self._sid()
        if path == "/shop/":
            links = [(f"/shop/item-{n}.html;jsessionid={sid}" if self.traps else f"/shop/item-{n}.html", f"Item {n}")
                     for n in range(self.shop_items)]
            return self._html(self._page("Shop", links, "shop"), "real", "/shop/")
        m = re.fullmatch(r"/shop/item-(\d+)\.html", path)
        if not m or int(m.group(1)) >= self.shop_items:
            return self._missing(path)
        n = int(m.group(1))
        others = [(n + k) % self.shop_items for k in (1, 2, 3)]
        links = [(f"/shop/item-{o}.html;jsessionid={sid}" if self.traps else f"/shop/item-{o}.html", f"Item {o}") for o in others]
        links.append((f"/shop/?sid={sid.lower()}" if self.traps else "/shop/", "Back to the shop"))
        return self._html(self._page(f"Item {n}", links, path), "real", path)

    def _help(self, path: str) -> Reply:
        links = [("a/", "Getting started"), ("b/", "Billing")] if self.traps else [("/", "Home")]
        if path == "/docs/help/":
            return self._html(self._page("Help", links, "help"), "real", "/docs/help/")
        if self.traps and re.fullmatch(r"/docs/help/(?:[ab]/)+", path):
            return self._html(self._page("Help", links, "help"), "trap:loop")
        return self._missing(path)

    def _gallery(self, query: str) -> Reply:
        if not query:
            return self._html(self._page("Gallery", [("?view=1", "Next photo")] if self.traps else [], "gallery"), "real", "/gallery/")
        m = re.fullmatch(r"view=(\d+)", query)
        if not self.traps or not m:
            return self._missing("/gallery/?" + query)
        n = int(m.group(1))
        return self._html(self._page("Gallery", [(f"?view={n + 1}", "Next photo")], "gallery"), "trap:counter")

    def _farm(self, path: str) -> Reply:
        m = re.fullmatch(r"/farm/(\d+)\.html", path)
        if not self.traps or not m:
            return Reply(404, {"Content-Type": "text/html"}, b"<html><body>Not found</body></html>", "missing")
        rng = random.Random(f"farm{m.group(1)}")
        links = [(f"/farm/{rng.randrange(10**9)}.html", "Best deals") for _ in range(10)]
        return self._html(self._page("Cheap deals", links, f"farm{rng.randrange(50)}"), "trap:farm")

    def _missing(self, target: str) -> Reply:
        if not self.traps:
            return Reply(404, {"Content-Type": "text/html"}, b"<html><body>Not found</body></html>", "missing")
        # A soft 404: status 200 and fresh links to more pages that do not exist.
        rng = random.Random(target)
        links = [(f"/{rng.choice(_vocabulary())}/{rng.randrange(10**9)}.html", "You may also like") for _ in range(5)]
        return self._html(self._page("Page not found", links, "soft404"), "trap:soft404")


class SiteServer:
    """Serve ``site`` on 127.0.0.1 (any free port); ``log`` holds one
    ``(host, target, kind, page)`` tuple per GET."""

    def __init__(self, site: TrapSite):
        self.site = site
        self.log: list[tuple[str, str, str, str | None]] = []
        self.times: list[tuple[float, str, str]] = []  #: (monotonic time, host, target)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                host = (self.headers.get("Host") or "127.0.0.1").rsplit(":", 1)[0].lower()
                reply = server.site.respond(host, self.path, server.port)
                with server._lock:
                    server.log.append((host, self.path, reply.kind, reply.page))
                    server.times.append((time.monotonic(), host, self.path))
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        # A short poll: shutdown() waits for the next one (as tests.support.
        # localsite.SERVE; not imported: this file also runs as a script).
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> SiteServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def take_log(self) -> list[tuple[str, str, str, str | None]]:
        """The log so far, emptied."""
        with self._lock:
            log, self.log, self.times = self.log, [], []
        return log


def fetch_figures(log, real_pages: set[str], broken_links: set[str] = frozenset()) -> dict:
    """Server-side figures of one crawl: fetches, trap and duplicate fetches,
    distinct real pages reached. ``broken_links``: paths real pages link to
    that hold no page (:meth:`TrapSite.broken_link_paths`); the first fetch
    of each is counted apart (``broken_first``) and left out of
    ``waste_beyond_broken``, as a fetch of a link answering 404 is never
    counted as waste (kind ``missing``). ``waste`` counts them."""
    kinds = Counter(kind.split(":")[0] for _, _, kind, _ in log)
    served = Counter(page for _, _, kind, page in log if kind == "real")
    fetches = len(log)
    traps = kinds["trap"]
    duplicates = sum(n - 1 for n in served.values())
    broken_first = len({target for host, target, kind, _ in log
                        if kind.startswith("trap") and host != "localhost" and target in broken_links})
    return {
        "fetches": fetches,
        "trap_fetches": traps,
        "duplicate_fetches": duplicates,
        "waste": (traps + duplicates) / fetches if fetches else 0.0,
        "broken_first": broken_first,
        "waste_beyond_broken": (traps - broken_first + duplicates) / fetches if fetches else 0.0,
        "real_reached": len(set(served) & real_pages),
        "private_fetches": kinds["private"],
        "by_kind": dict(Counter(kind for _, _, kind, _ in log)),
    }


def real_refused(report: dict, site: TrapSite, base: str) -> list[str]:
    """Real pages the crawl refused: accounts marked refused (at fetch
    time, or as soft 404s) and pages in a directory closed as a soft-404
    space (their links refused), robots.txt refusals aside."""
    from scrapy_aopic.hygiene.canonical import canonical_url

    real = {canonical_url(base + path): path for path in site.real_pages()}
    accounts = report.get("accounts", {})
    refused = {real[url] for url, a in accounts.items() if a["state"] == "refused" and url in real}
    closed = set(report.get("soft404_closed", ()))
    if closed:
        from scrapy_aopic.hygiene import soft404

        space_of = getattr(soft404, "space_of", lambda url: None)  # (a build before space_of: benchmarks side by side)
        refused |= {path for url, path in real.items() if soft404.parent_of(url) in closed or space_of(url) in closed}
    return sorted(refused)


# -- the crawl runner (runs in a subprocess) -------------------------------------


def _probe_lambda(site: TrapSite) -> dict:
    """Measure, at each lambda visit of the memory store, what the pending
    trap URLs (``site.is_trap_url``) received: the change of their cash
    across the payout (O(accounts) per visit: a benchmark probe). Returns
    the dict ``{"paid", "to_traps", "visits"}`` it keeps up to date."""
    from scrapy_aopic.store.base import PENDING
    from scrapy_aopic.store.memory import MemoryStore

    figures = {"paid": 0.0, "to_traps": 0.0, "visits": 0}
    original = MemoryStore.visit_lambda
    trap: dict[str, bool] = {}

    def held(store) -> float:
        total = 0.0
        for url, acc in store._accounts.items():
            if acc.state == PENDING:
                is_trap = trap.get(url)
                if is_trap is None:
                    is_trap = trap[url] = site.is_trap_url(url)
                if is_trap:
                    total += store._effective_cash(acc)
        return total

    def visit_lambda(store) -> float:
        before = held(store)
        paid = original(store)
        if paid:
            figures["paid"] += paid
            figures["to_traps"] += held(store) - before
            figures["visits"] += 1
        return paid

    MemoryStore.visit_lambda = visit_lambda
    return figures


def run_crawl_here(config: dict) -> dict:
    """Crawl ``config["seeds"]`` with ``config["settings"]``; the report has
    ``stats``, ``accounts`` (when the AOPIC frontier ran) and ``visits``."""
    from scrapy import Spider
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse

    class LinkSpider(Spider):
        name = "links"
        if config.get("allowed_domains"):
            allowed_domains = config["allowed_domains"]

        async def start(self):
            for url in config["seeds"]:
                yield self.make_request(url) if hasattr(self, "make_request") else __import__("scrapy").Request(url)

        def parse(self, response):
            if isinstance(response, TextResponse):
                for href in response.css("a::attr(href)").getall():
                    try:
                        yield response.follow(href)
                    except ValueError:  # mailto:, javascript: (Scrapy refuses them)
                        continue

    if config.get("lambda_probe"):
        report_lambda = _probe_lambda(TrapSite(**config["lambda_probe"]))

    settings = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": True}
    settings.update(config.get("settings", {}))
    process = CrawlerProcess(settings, install_root_handler=config.get("log", False))
    crawler = process.create_crawler(LinkSpider)
    visits: list = []
    report: dict = {"visits": visits}
    try:
        from scrapy_aopic import signals as aopic_signals

        def on_visit(url, links, lease, **kwargs):
            visits.append([url, list(links), lease.cash])

        crawler.signals.connect(on_visit, signal=aopic_signals.page_visited, weak=False)
    except ImportError:
        pass
    process.crawl(crawler)
    process.start()
    try:  # what the soft-404 detector learned
        from scrapy_aopic.middlewares.traps import guard_of

        report["soft404_closed"] = list(guard_of(crawler).soft404.closed)
    except ImportError:
        pass
    if config.get("lambda_probe"):
        report["lambda"] = report_lambda
    report["stats"] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in crawler.stats.get_stats().items()}
    try:
        from scrapy_aopic.frontier import Frontier
        from scrapy_aopic.store.base import STATE_NAMES

        frontier = Frontier.from_crawler(crawler)
        if frontier.store is not None:
            report["accounts"] = {
                v.url: {"state": STATE_NAMES[v.state], "cash": v.cash, "target": v.target}
                for v in frontier.store.iter_accounts()
            }
    except ImportError:
        pass
    return report


def run_crawl(seeds: list[str], settings: dict, timeout: float = 300, lambda_probe: dict | None = None,
              allowed_domains: list[str] | None = None) -> dict:
    """Run :func:`run_crawl_here` in a fresh Python process; its report.
    ``lambda_probe``: the :class:`TrapSite` arguments of the site crawled,
    to measure lambda's payouts to its traps (``report["lambda"]``);
    ``allowed_domains``: the spider's (None: an open crawl)."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "config.json")
        out = os.path.join(tmp, "report.json")
        with open(cfg, "w") as f:
            json.dump({"seeds": seeds, "settings": settings, "out": out, "lambda_probe": lambda_probe,
                       "allowed_domains": allowed_domains}, f)
        result = subprocess.run([sys.executable, os.path.abspath(__file__), cfg], capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"crawl failed ({result.returncode}):\n{result.stderr[-4000:]}")
        with open(out) as f:
            return json.load(f)


def main(config_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    report = run_crawl_here(config)
    with open(config["out"], "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
