"""A seeded, multi-host demo web site and its ground truth.

:func:`generate` builds a :class:`Site` in memory. The site is a small web of
content hosts (news-like sites with home pages, sections, paginated listings
and articles) whose article links follow preferential attachment, so a few
old articles become hubs with a huge in-degree while most are leaves. Around
that real content it puts what broad crawls meet in the wild: dead links,
server errors, redirect chains, a URL shortener host, a slow page, binary
files, pages disallowed by robots.txt, print and syndicated near-duplicates,
URL variants (session ids, tracking parameters) and crawler traps (an endless
calendar, a link farm host, session ids minted per page, a relative-link
loop, a counter parameter).

Everything is addressed by a *location* ``(host_index, target)`` where
``target`` is the path plus query string, so the site can be generated before
a port is known; :meth:`Site.url` turns a location into a URL for a port.
:meth:`Site.respond` answers one HTTP GET (the server in
:mod:`demosite.server` and the offline crawler in :mod:`demosite.reference`
both use it), and the ground-truth methods (:meth:`Site.real_pages`,
:meth:`Site.pagerank`, :attr:`Site.near_duplicates`, :attr:`Site.trap_patterns`
...) tell tests and benchmarks what a good crawler should have done.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import posixpath
import random
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

Loc = tuple[int, str]
"""A location on the site: ``(host_index, target)``, target = path[?query]."""

HTML_UTF8 = "text/html; charset=utf-8"

# Kinds of resource. REAL_KINDS are the real content pages: the ones a good
# crawler should fetch (once each) and the nodes of the ground-truth graph.
REAL_KINDS = frozenset({"home", "section", "listing", "article", "shop", "help", "gallery"})
DUPLICATE_KINDS = frozenset({"print", "syndicated", "mirror"})

SECTION_NAMES = (
    "news", "tech", "science", "culture", "travel", "food", "health",
    "money", "sport", "opinion", "books", "music",
)
HOST_NAMES = (
    "Daily Ledger", "Tech Notes", "Science Wire", "Culture Post", "Travel Log",
    "Kitchen Journal", "Health Weekly", "Money Brief", "Sport Desk", "Opinion Hub",
    "Book Review", "Music Scene", "City Herald", "Field Report", "Night Edition",
)
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December",
)

_SESSION_RE = re.compile(r";jsessionid=[^/?#]*", re.IGNORECASE)
_DROPPED_PARAMS = re.compile(r"^(?:sid|utm_[a-z]+)$", re.IGNORECASE)


class Ref(NamedTuple):
    """A link as the site writes it.

    ``style`` says how the href is spelled: ``"root"`` (``/path``), ``"rel"``
    (relative to the linking page), ``"abs"`` (full URL), ``"raw"`` (``target``
    is the literal href) or ``"sid"`` (root path plus a session id minted for
    the page being served). Links to another host are always absolute.
    """

    host: int
    target: str
    anchor: str
    style: str = "root"


@dataclass
class Resource:
    """One static resource of the site (a page, a redirect, a binary file)."""

    kind: str
    status: int = 200
    title: str = ""
    paragraphs: list[str] = field(default_factory=list)
    header: list[Ref] = field(default_factory=list)
    body: list[Ref] = field(default_factory=list)
    footer: list[Ref] = field(default_factory=list)
    note: str = ""  # dateline, ad block, breadcrumb: the part variants change
    next_link: Ref | None = None  # <link rel="next"> of paginated listings
    location: Ref | None = None  # redirect target
    original: Loc | None = None  # what a near-duplicate copies
    content_type: str = HTML_UTF8
    payload: bytes = b""  # body of binary resources


@dataclass(frozen=True)
class HostInfo:
    """One host of the site: its index, loopback IP, role and features."""

    index: int
    ip: str
    role: str  # "content", "shortener" or "farm"
    name: str
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrapPattern:
    """URLs of one crawler trap: ``regex`` searched in the target
    (path + query) of URLs on host ``host``."""

    name: str
    host: int
    regex: str
    description: str

    def matches(self, loc: Loc) -> bool:
        """Whether location ``loc`` belongs to this trap."""
        return loc[0] == self.host and re.search(self.regex, loc[1]) is not None


class Reply(NamedTuple):
    """The answer to one GET: what the server sends and what it was.

    ``page`` is the canonical location of the real page served (``None`` when
    the answer is not a real page), ``kind`` the resource kind (``"trap:NAME"``
    for trap pages, ``"missing"`` for 404s, ``"robots"`` for robots.txt).
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    kind: str
    page: Loc | None = None


def normalize_target(target: str) -> str:
    """The target the server really serves: fragment, ``;jsessionid=...``,
    ``sid`` and ``utm_*`` parameters removed, other parameters kept in order."""
    target = target.split("#", 1)[0]
    path, _, query = target.partition("?")
    path = _SESSION_RE.sub("", path)
    if query:
        kept = [p for p in query.split("&") if p and not _DROPPED_PARAMS.match(p.split("=", 1)[0])]
        query = "&".join(kept)
    return f"{path}?{query}" if query else path


def _pagerank(graph: dict[Loc, list[Loc]], damping: float, tol: float = 1e-13) -> dict[Loc, float]:
    """PageRank by power iteration; dangling pages spread their rank evenly."""
    nodes = list(graph)
    n = len(nodes)
    if n == 0:
        return {}
    index = {loc: i for i, loc in enumerate(nodes)}
    outs = [[index[t] for t in graph[loc]] for loc in nodes]
    rank = [1.0 / n] * n
    for _ in range(1000):
        new = [0.0] * n
        dangling = 0.0
        for i, targets in enumerate(outs):
            if targets:
                share = rank[i] / len(targets)
                for j in targets:
                    new[j] += share
            else:
                dangling += rank[i]
        base = (1.0 - damping) / n + damping * dangling / n
        new = [base + damping * x for x in new]
        delta = sum(abs(a - b) for a, b in zip(new, rank))
        rank = new
        if delta < tol:
            break
    total = sum(rank)
    return {loc: rank[i] / total for i, loc in enumerate(nodes)}


def _png(rng: random.Random, size: int) -> bytes:
    """A valid ``size`` x ``size`` RGB PNG of random pixels."""
    rows = b"".join(b"\x00" + rng.randbytes(size * 3) for _ in range(size))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _pdf(rng: random.Random) -> bytes:
    """A PDF-like body: the magic header, binary noise, the end marker."""
    return b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + rng.randbytes(2048) + b"\n%%EOF\n"


class Site:
    """A generated demo site; build it with :func:`generate`.

    Public attributes (ground truth): ``seed``, ``hosts`` (list of
    :class:`HostInfo`), ``seeds`` (seed locations: content home pages),
    ``trap_patterns`` (list of :class:`TrapPattern`), ``near_duplicates``
    (duplicate location -> original location), ``dead`` (locations linked but
    answering 404), ``errors`` (500), ``redirects`` (location -> next hop),
    ``binaries``, ``disallowed`` (robots.txt forbids them), ``slow``.
    """

    def __init__(self, seed: int, ip_offset: int, crawl_delay: float) -> None:
        self.seed = seed
        self.ip_offset = ip_offset
        self.crawl_delay = crawl_delay
        self.hosts: list[HostInfo] = []
        self.seeds: list[Loc] = []
        self.trap_patterns: list[TrapPattern] = []
        self.near_duplicates: dict[Loc, Loc] = {}
        self.dead: list[Loc] = []
        self.errors: list[Loc] = []
        self.redirects: dict[Loc, Loc] = {}
        self.binaries: list[Loc] = []
        self.disallowed: list[Loc] = []
        self.slow: list[Loc] = []
        self.resources: dict[Loc, Resource] = {}
        self.robots: dict[int, str | None] = {}
        self.calendar_host = self.shop_host = self.loop_host = self.counter_host = 0
        self.farm_host = self.short_host = 0
        self.calendar_start = (2024, 1)
        self.help_paragraphs: list[str] = []
        self.gallery_paragraphs: list[str] = []
        self.words: list[str] = []
        self._pagerank: dict[float, dict[Loc, float]] = {}

    # -- addressing ---------------------------------------------------------

    def ip(self, host: int) -> str:
        """Loopback IP address of host ``host``."""
        return self.hosts[host].ip

    def netloc(self, host: int, port: int | None) -> str:
        """``ip:port`` of a host (``ip`` alone when ``port`` is None)."""
        ip = self.hosts[host].ip
        return ip if port is None else f"{ip}:{port}"

    def url(self, loc: Loc, port: int | None = None) -> str:
        """Absolute URL of location ``loc`` when served on ``port``."""
        return f"http://{self.netloc(loc[0], port)}{loc[1]}"

    def loc(self, url: str) -> Loc | None:
        """Location of an absolute URL of this site (any port), or None."""
        match = re.match(r"^https?://([^/:?#]+)(?::\d+)?([^#]*)", url)
        if not match:
            return None
        for info in self.hosts:
            if info.ip == match.group(1):
                return info.index, match.group(2) or "/"
        return None

    def base_urls(self, port: int | None = None) -> list[str]:
        """``http://ip:port/`` of every host, in host order."""
        return [self.url((h.index, "/"), port) for h in self.hosts]

    # -- ground truth -------------------------------------------------------

    def real_pages(self) -> list[Loc]:
        """The real content pages (canonical locations), in generation order."""
        return [loc for loc, res in self.resources.items() if res.kind in REAL_KINDS]

    def kind(self, loc: Loc) -> str:
        """Kind of resource at ``loc`` (after URL-variant normalization):
        a resource kind, ``"trap:NAME"``, ``"robots"`` or ``"missing"``."""
        if loc[1] == "/robots.txt":
            return "robots"
        for trap in self.trap_patterns:
            if trap.name != "session_id" and trap.matches(loc):
                return f"trap:{trap.name}"
        res = self.resources.get((loc[0], normalize_target(loc[1])))
        return res.kind if res else "missing"

    def is_trap(self, loc: Loc) -> bool:
        """Whether ``loc`` (as spelled, before normalization) is a trap URL."""
        return any(trap.matches(loc) for trap in self.trap_patterns)

    def resolve(self, loc: Loc, max_hops: int = 10) -> Loc | None:
        """The real page a link to ``loc`` ends at (through URL variants and
        redirects), or None when it does not end at a real page."""
        for _ in range(max_hops + 1):
            loc = (loc[0], normalize_target(loc[1]))
            res = self.resources.get(loc)
            if res is None:
                return None
            if res.location is None:
                return loc if res.kind in REAL_KINDS else None
            loc = (res.location.host, res.location.target)
        return None

    def out_links(self, loc: Loc) -> list[Ref]:
        """Links a static page writes, in document order."""
        res = self.resources[loc]
        refs = list(res.header) + list(res.body) + list(res.footer)
        if res.next_link is not None:
            refs.append(res.next_link)
        return refs

    def real_graph(self) -> dict[Loc, list[Loc]]:
        """Link graph among real pages: each page's distinct real targets
        (links resolved through redirects and URL variants; self-links,
        traps, duplicates, dead and binary targets dropped)."""
        graph: dict[Loc, list[Loc]] = {}
        for loc in self.real_pages():
            targets: list[Loc] = []
            for ref in self.out_links(loc):
                if ref.style == "raw":
                    target = self._join_raw(loc, ref.target)
                else:
                    target = (ref.host, ref.target)
                final = self.resolve(target)
                if final is not None and final != loc and final not in targets:
                    targets.append(final)
            graph[loc] = targets
        return graph

    def pagerank(self, damping: float = 0.85) -> dict[Loc, float]:
        """True PageRank of the real-content graph (sums to 1)."""
        if damping not in self._pagerank:
            self._pagerank[damping] = _pagerank(self.real_graph(), damping)
        return self._pagerank[damping]

    def in_degrees(self) -> dict[Loc, int]:
        """In-degree of each real page in :meth:`real_graph`."""
        degrees = {loc: 0 for loc in self.real_pages()}
        for targets in self.real_graph().values():
            for target in targets:
                degrees[target] += 1
        return degrees

    def summary(self) -> dict[str, int]:
        """Counts of the site's parts, for printing."""
        kinds: dict[str, int] = {}
        for res in self.resources.values():
            kinds[res.kind] = kinds.get(res.kind, 0) + 1
        return {
            "hosts": len(self.hosts),
            "real_pages": len(self.real_pages()),
            "near_duplicates": len(self.near_duplicates),
            "dead_links": len(self.dead),
            "server_errors": len(self.errors),
            "redirects": len(self.redirects),
            "binaries": len(self.binaries),
            "disallowed": len(self.disallowed),
            "slow": len(self.slow),
            "traps": len(self.trap_patterns),
            **{f"kind_{k}": v for k, v in sorted(kinds.items())},
        }

    @staticmethod
    def _join_raw(loc: Loc, href: str) -> Loc:
        """Location of a raw relative href (``a/``, ``?counter=1``) on ``loc``."""
        path = loc[1].split("?", 1)[0]
        if href.startswith("?"):
            return loc[0], path + href
        directory = path if path.endswith("/") else posixpath.dirname(path) + "/"
        return loc[0], directory + href

    # -- serving ------------------------------------------------------------

    def respond(self, host: int, raw_target: str, port: int | None) -> Reply:
        """Answer ``GET raw_target`` on host ``host`` (links rendered for
        ``port``). Deterministic: the same request gives the same reply."""
        raw_target = raw_target.split("#", 1)[0] or "/"
        if raw_target.split("?", 1)[0] == "/robots.txt":
            text = self.robots.get(host)
            if text is None:
                return self._not_found("robots")
            return Reply(200, (("Content-Type", "text/plain; charset=utf-8"),), text.encode(), "robots")
        target = normalize_target(raw_target)
        loc = (host, target)
        res = self.resources.get(loc)
        if res is not None:
            return self._static(loc, raw_target, res, port)
        dynamic = self._dynamic(host, target, port)
        return dynamic if dynamic is not None else self._not_found("missing")

    def _not_found(self, kind: str) -> Reply:
        body = b"<!DOCTYPE html><html><head><title>Not found</title></head><body><h1>404 Not found</h1></body></html>"
        return Reply(404, (("Content-Type", HTML_UTF8),), body, kind)

    def _static(self, loc: Loc, raw_target: str, res: Resource, port: int | None) -> Reply:
        if res.location is not None:
            where = self.url((res.location.host, res.location.target), port)
            body = f'<html><body>Moved to <a href="{html.escape(where)}">here</a></body></html>'.encode()
            return Reply(res.status, (("Location", where), ("Content-Type", HTML_UTF8)), body, "redirect")
        if res.payload:
            return Reply(res.status, (("Content-Type", res.content_type),), res.payload, res.kind)
        if res.status >= 400:
            body = (f"<html><head><title>Error {res.status}</title></head>"
                    "<body><h1>Internal Server Error</h1></body></html>")
            return Reply(res.status, (("Content-Type", HTML_UTF8),), body.encode(), res.kind)
        body = self._render(loc, res, port, raw_target)
        page = loc if res.kind in REAL_KINDS else None
        return Reply(200, (("Content-Type", res.content_type),), body, res.kind, page)

    def _href(self, ref: Ref, here: Loc, port: int | None, raw_target: str) -> str:
        if ref.style == "raw":
            return ref.target
        if ref.host != here[0] or ref.style == "abs":
            return self.url((ref.host, ref.target), port)
        if ref.style == "sid":
            token = hashlib.sha1(f"{self.seed}|{raw_target}|{ref.target}".encode()).hexdigest()
            path, _, query = ref.target.partition("?")
            if path.endswith(".html"):
                return f"{path};jsessionid={token[:20].upper()}" + (f"?{query}" if query else "")
            return f"{path}?{query + '&' if query else ''}sid={token[:16]}"
        if ref.style == "rel":
            path, _, query = ref.target.partition("?")
            base = posixpath.dirname(here[1].split("?", 1)[0]) or "/"
            rel = posixpath.relpath(path, base)
            if path.endswith("/") and not rel.endswith("/"):
                rel += "/"
            return rel + (f"?{query}" if query else "")
        return ref.target

    def _render(self, loc: Loc, res: Resource, port: int | None, raw_target: str) -> bytes:
        """The HTML of a static page."""

        def anchor(ref: Ref) -> str:
            href = html.escape(self._href(ref, loc, port, raw_target), quote=True)
            return f'<a href="{href}">{html.escape(ref.anchor)}</a>'

        out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
               f"<title>{html.escape(res.title)}</title>"]
        if res.next_link is not None:
            out.append(f'<link rel="next" href="{html.escape(self._href(res.next_link, loc, port, raw_target))}">')
        out.append("<style>body{font-family:sans-serif;max-width:50em;margin:auto}</style>")
        out.append("<script>var pageViews = 0;</script></head><body>")
        if res.header:
            out.append("<nav>" + " | ".join(anchor(r) for r in res.header) + "</nav>")
        out.append(f"<main><h1>{html.escape(res.title)}</h1>")
        if res.note:
            out.append(f'<p class="meta">{html.escape(res.note)}</p>')
        # Articles carry their links inline, in order, spread over the
        # paragraphs; other pages list them after the text.
        inline = res.kind in ("article", "print", "syndicated", "mirror", "private")
        paragraphs = res.paragraphs or [""]
        per = -(-len(res.body) // len(paragraphs)) if res.body and inline else 0
        for i, text in enumerate(paragraphs):
            links = res.body[i * per:(i + 1) * per] if per else []
            extra = "".join(f" See {anchor(r)}." for r in links)
            out.append(f"<p>{html.escape(text)}{extra}</p>")
        if res.body and not inline:
            out.append("<ul>" + "".join(f"<li>{anchor(r)}</li>" for r in res.body) + "</ul>")
        out.append("</main>")
        if res.footer:
            out.append("<footer><ul>" + "".join(f"<li>{anchor(r)}</li>" for r in res.footer) + "</ul></footer>")
        out.append("</body></html>\n")
        return "\n".join(out).encode("utf-8")

    # -- trap pages (generated on request, endless) -------------------------

    def _dynamic(self, host: int, target: str, port: int | None) -> Reply | None:
        if host == self.farm_host:
            match = re.match(r"^/farm/(\d+)\.html$", target)
            if target == "/" or match:
                number = int(match.group(1)) if match else 0
                return self._farm_page(host, number, target, port)
            return None
        if host == self.calendar_host:
            match = re.match(r"^/calendar/(\d{4})/(\d{2})/(?:(\d{2})/)?$", target)
            if match and 1 <= int(match.group(2)) <= 12 and 1 <= int(match.group(1)) <= 9999:
                return self._calendar_page(host, target, port, *match.groups())
        if host == self.loop_host:
            match = re.match(r"^/docs/help/((?:[ab]/)+)$", target)
            if match:
                res = Resource(
                    "trap:relative_loop", title="Help center", paragraphs=self.help_paragraphs,
                    header=[Ref(host, "/", "Home")], note=f"You are in: /docs/help/{match.group(1)}",
                    body=[Ref(host, "a/", "Getting started", "raw"), Ref(host, "b/", "Billing questions", "raw")],
                )
                return Reply(200, (("Content-Type", HTML_UTF8),), self._render((host, target), res, port, target),
                             res.kind)
        if host == self.counter_host:
            match = re.match(r"^/gallery/\?counter=(\d+)$", target)
            if match:
                count = int(match.group(1))
                res = Resource(
                    "trap:counter", title="Photo gallery", paragraphs=self.gallery_paragraphs,
                    header=[Ref(host, "/", "Home")], note=f"You are visitor number {count}.",
                    body=[Ref(host, f"?counter={count + 1}", "Next photo", "raw")],
                )
                return Reply(200, (("Content-Type", HTML_UTF8),), self._render((host, target), res, port, target),
                             res.kind)
        return None

    def _calendar_page(self, host: int, target: str, port: int | None, year: str, month: str,
                       day: str | None) -> Reply:
        y, m = int(year), int(month)
        prev_y, prev_m = (y, m - 1) if m > 1 else (y - 1, 12)
        next_y, next_m = (y, m + 1) if m < 12 else (y + 1, 1)
        month_target = f"/calendar/{y:04d}/{m:02d}/"
        if day is None:
            title = f"Events in {MONTH_NAMES[m - 1]} {y}"
            body = [Ref(host, f"{month_target}{d:02d}/", f"Events on {MONTH_NAMES[m - 1]} {d}") for d in (3, 14, 25)]
            body.append(Ref(host, f"/calendar/{prev_y:04d}/{prev_m:02d}/", "Previous month"))
            body.append(Ref(host, f"/calendar/{next_y:04d}/{next_m:02d}/", "Next month"))
            note = "No events are scheduled this month."
        else:
            d = int(day)
            title = f"Events on {MONTH_NAMES[m - 1]} {d}, {y}"
            next_day = f"{month_target}{d + 1:02d}/" if d < 28 else f"/calendar/{next_y:04d}/{next_m:02d}/01/"
            body = [Ref(host, month_target, "Back to the month"), Ref(host, next_day, "Next day")]
            note = "No events are scheduled this day."
        res = Resource("trap:calendar", title=title, header=[Ref(host, "/", "Home")], body=body, note=note,
                       paragraphs=["Our events calendar lists readings, concerts and meetings."])
        return Reply(200, (("Content-Type", HTML_UTF8),), self._render((host, target), res, port, target), res.kind)

    def _farm_page(self, host: int, number: int, target: str, port: int | None) -> Reply:
        rng = random.Random(f"{self.seed}-farm-{number}")
        words = [rng.choice(self.words) for _ in range(120)]
        keywords = ["cheap", "best", "deals", "free", "casino", "pills", "loans", "offer"]
        text = " ".join(w if rng.random() > 0.25 else rng.choice(keywords) for w in words)
        body = [Ref(host, f"/farm/{rng.randrange(1_000_000)}.html", f"{rng.choice(keywords)} {rng.choice(self.words)}")
                for _ in range(10)]
        res = Resource("trap:link_farm", title=f"Best {rng.choice(keywords)} {rng.choice(self.words)} online",
                       paragraphs=[text], body=body, content_type="text/html")
        return Reply(200, (("Content-Type", "text/html"),), self._render((host, target), res, port, target), res.kind)


# -- generation ---------------------------------------------------------------


class _Text:
    """Deterministic pseudo-English text from a seeded vocabulary."""

    def __init__(self, rng: random.Random, size: int = 2500) -> None:
        self.rng = rng
        consonants, vowels = "bcdfghklmnprstvz", "aeiou"
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < size:
            word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        # Mildly skewed word frequencies, like a language (not so skewed that
        # unrelated pages start to look alike to SimHash).
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 20) for rank in range(size)))

    def sentence(self, n: int) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum_weights, k=n)
        return " ".join(words).capitalize() + "."

    def paragraph(self, n_words: int) -> str:
        out, left = [], n_words
        while left > 0:
            n = min(left, self.rng.randint(8, 16))
            out.append(self.sentence(n))
            left -= n
        return " ".join(out)

    def title(self) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum_weights, k=self.rng.randint(3, 6))
        return " ".join(w.capitalize() for w in words)


def generate(
    pages: int = 300,
    hosts: int = 8,
    seed: int = 42,
    *,
    ip_offset: int = 2,
    seed_hosts: int = 3,
    crawl_delay: float = 0.05,
) -> Site:
    """Generate a demo site.

    ``pages`` articles (the real content also has one home page per content
    host, section and listing pages and a small shop) spread over
    ``hosts - 2`` content hosts plus a URL-shortener host and a link-farm
    host (``hosts`` >= 4). Host ``i`` is served on ``127.0.0.(ip_offset+i)``.
    The seeds are the home pages of the first ``seed_hosts`` content hosts.
    ``crawl_delay`` is the ``Crawl-delay`` of the one host that declares one.
    The same arguments always give the same site.
    """
    if hosts < 4:
        raise ValueError("the demo site needs at least 4 hosts (2 content hosts, a shortener, a link farm)")
    if pages < 10:
        raise ValueError("the demo site needs at least 10 articles")
    if ip_offset < 1 or ip_offset + hosts - 1 > 254:
        raise ValueError("host IPs must stay within 127.0.0.2 .. 127.0.0.254")
    rng = random.Random(seed)
    text = _Text(rng)
    site = Site(seed, ip_offset, crawl_delay)
    site.words = text.words[:400]
    content = hosts - 2
    site.short_host, site.farm_host = content, content + 1

    # Which content host carries which feature (hosts may carry several).
    slow_host = 0
    site.calendar_host = robots_disallow_host = 1 % content
    site.shop_host = crawl_delay_host = 2 % content
    site.loop_host = 3 % content
    site.counter_host = 4 % content
    no_robots_host = 3 % content if 3 % content not in (robots_disallow_host, crawl_delay_host) else None

    names = rng.sample(HOST_NAMES, content) if content <= len(HOST_NAMES) else [
        f"{rng.choice(HOST_NAMES)} {i}" for i in range(content)]
    for h in range(content):
        features = []
        for feature, owner in (("slow", slow_host), ("calendar", site.calendar_host),
                               ("robots_disallow", robots_disallow_host), ("shop", site.shop_host),
                               ("crawl_delay", crawl_delay_host), ("relative_loop", site.loop_host),
                               ("counter", site.counter_host), ("no_robots", no_robots_host)):
            if owner == h:
                features.append(feature)
        site.hosts.append(HostInfo(h, f"127.0.0.{ip_offset + h}", "content", names[h], tuple(features)))
    site.hosts.append(HostInfo(site.short_host, f"127.0.0.{ip_offset + site.short_host}", "shortener", "sho.rt"))
    site.hosts.append(HostInfo(site.farm_host, f"127.0.0.{ip_offset + site.farm_host}", "farm", "Link Farm"))

    for h in range(hosts):
        if h == no_robots_host:
            site.robots[h] = None
            continue
        lines = ["User-agent: *"]
        if h == robots_disallow_host:
            lines.append("Disallow: /private/")
        if h == crawl_delay_host:
            lines.append(f"Crawl-delay: {crawl_delay:g}")
        if len(lines) == 1:
            lines.append("Disallow:")
        site.robots[h] = "\n".join(lines) + "\n"

    sections = {h: rng.sample(SECTION_NAMES, rng.randint(2, 4)) for h in range(content)}

    # Articles: host by a skewed weight (a few big sites, many small ones),
    # links by preferential attachment (a link goes to an older article with
    # probability proportional to its in-degree + 1), so early articles
    # become hubs. The first articles go one per host so no host is empty.
    host_weights = [1.0 / (h + 1) ** 0.8 for h in range(content)]
    article_host: list[int] = []
    article_loc: list[Loc] = []
    article_title: list[str] = []
    article_section: list[str] = []
    article_links: list[list[int]] = []
    pool_all: list[int] = []
    pool_host: dict[int, list[int]] = {h: [] for h in range(content)}
    for i in range(pages):
        h = i if i < content else rng.choices(range(content), host_weights)[0]
        section = rng.choice(sections[h])
        title = text.title()
        slug = "-".join(title.lower().split()[:4])
        article_host.append(h)
        article_section.append(section)
        article_title.append(title)
        article_loc.append((h, f"/{section}/{slug}-{i}.html"))
        wanted = min(i, 2 + min(10, int(rng.expovariate(1 / 3.0))))
        chosen: list[int] = []
        for _ in range(wanted * 4):
            if len(chosen) >= wanted:
                break
            pool = pool_host[h] if pool_host[h] and rng.random() < 0.7 else pool_all
            j = rng.choice(pool)
            if j not in chosen:
                chosen.append(j)
        for j in chosen:
            pool_all.append(j)
            pool_host[article_host[j]].append(j)
        pool_all.append(i)
        pool_host[h].append(i)
        article_links.append(chosen)

    # Per-article extras, then at least one of each so even tiny sites have all.
    def pick(p: float, allowed: list[int] | None = None) -> list[int]:
        candidates = allowed if allowed is not None else list(range(pages))
        chosen = [i for i in candidates if rng.random() < p]
        return chosen or [rng.choice(candidates)]

    on_robots_host = [i for i in range(pages) if article_host[i] == robots_disallow_host]
    extras = {
        "dead": pick(0.06), "error": pick(0.025), "image": pick(0.08), "pdf": pick(0.04),
        "octet": pick(0.01), "corrupt": pick(0.01), "print": pick(0.1), "syndicated": pick(0.05), "mirror": pick(0.05),
        "farm": pick(0.02), "private": pick(0.15, on_robots_host), "index_redirect": pick(0.1),
    }
    # The oldest articles are the hubs: some links to them go through redirects.
    chosen_for = {name: set(articles) for name, articles in extras.items()}
    in_links = Counter(pool_all)
    hubs = sorted(range(pages), key=lambda i: -in_links[i])[: max(3, pages // 50)]
    hub_set = set(hubs)

    def nav(h: int, home_target: str = "/") -> list[Ref]:
        refs = [Ref(h, home_target, "Home")]
        refs += [Ref(h, f"/{s}/", s.capitalize()) for s in sections[h]]
        if h == site.shop_host:
            refs.append(Ref(h, "/shop/", "Shop"))
        if h == site.loop_host:
            refs.append(Ref(h, "/docs/help/", "Help"))
        if h == site.counter_host:
            refs.append(Ref(h, "/gallery/", "Gallery"))
        return refs

    def host_footer(h: int) -> list[Ref]:
        # Trap entrances sit last on the page, where a LIFO crawler goes first.
        refs = []
        if h == site.calendar_host:
            year, month = site.calendar_start
            refs.append(Ref(h, f"/calendar/{year:04d}/{month:02d}/", "Events calendar"))
        return refs

    site.calendar_start = (rng.randint(2019, 2025), rng.randint(1, 12))
    short_codes: list[tuple[str, Ref]] = []

    def short_link(target: Ref) -> Ref:
        code = hashlib.sha1(f"{seed}|{len(short_codes)}|{target}".encode()).hexdigest()[:7]
        short_codes.append((code, target))
        return Ref(site.short_host, f"/s/{code}", target.anchor, "abs")

    counter = {"dead": 0, "error": 0, "media": 0, "private": 0}

    def body_link(i: int, j: int) -> Ref:
        h, (hj, tj) = article_host[i], article_loc[j]
        anchor = article_title[j]
        if hj == h:
            roll = rng.random()
            if j in hub_set and roll < 0.15:
                return Ref(h, f"/legacy/{j}.html" if roll < 0.05 else f"/old/{j}.html", anchor)
            style = "root" if roll < 0.7 else ("rel" if roll < 0.9 else "abs")
            return Ref(h, tj, anchor, style)
        roll = rng.random()
        if roll < 0.1:
            return short_link(Ref(hj, tj, anchor, "abs"))
        if roll < 0.2:
            return Ref(hj, f"{tj}?utm_source={h}&utm_medium=link", anchor, "abs")
        return Ref(hj, tj, anchor, "abs")

    paragraphs_of: list[list[str]] = []
    for i in range(pages):
        h, loc = article_host[i], article_loc[i]
        paragraphs = [text.paragraph(rng.randint(70, 100)) for _ in range(rng.randint(4, 5))]
        paragraphs_of.append(paragraphs)
        body = [body_link(i, j) for j in article_links[i]]
        footer: list[Ref] = []
        section = article_section[i]
        if i in chosen_for["dead"]:
            counter["dead"] += 1
            dead = (h, f"/{section}/removed-{counter['dead']}.html")
            site.dead.append(dead)
            body.insert(rng.randrange(len(body) + 1), Ref(h, dead[1], text.title()))
        if i in chosen_for["error"]:
            counter["error"] += 1
            err = (h, f"/{section}/flaky-{counter['error']}.html")
            site.resources[err] = Resource("error", status=500)
            site.errors.append(err)
            body.append(Ref(h, err[1], text.title()))
        for kind, path, ctype in (("image", "/media/img-{}.png", "image/png"),
                                  ("pdf", "/files/report-{}.pdf", "application/pdf"),
                                  ("octet", "/files/data-{}.bin", "application/octet-stream"),
                                  ("corrupt", "/files/corrupt-{}.html", HTML_UTF8)):
            if i in chosen_for[kind]:
                counter["media"] += 1
                media = (h, path.format(counter["media"]))
                payload = _png(rng, 16) if kind == "image" else _pdf(rng)
                site.resources[media] = Resource("binary", content_type=ctype, payload=payload)
                site.binaries.append(media)
                footer.append(Ref(h, media[1], f"Download {kind}"))
        if i in chosen_for["private"]:
            counter["private"] += 1
            private = (h, f"/private/{counter['private']}.html")
            site.resources[private] = Resource(
                "private", title=text.title(), paragraphs=[text.paragraph(80)], header=nav(h))
            site.disallowed.append(private)
            body.append(Ref(h, private[1], "Members only"))
        if i in chosen_for["farm"]:
            footer.append(Ref(site.farm_host, f"/farm/{rng.randrange(1_000_000)}.html", "Great deals here", "abs"))
        day, month = rng.randint(1, 28), rng.randint(1, 12)
        dateline = f"Published on {MONTH_NAMES[month - 1]} {day}, 2024."
        header = nav(h, "/index.html" if i in chosen_for["index_redirect"] else "/")
        footer += host_footer(h)
        if i in chosen_for["print"]:
            # The print layout: the same page with one more line.
            copy = (h, "/print" + loc[1])
            site.resources[copy] = Resource(
                "print", title=article_title[i], paragraphs=paragraphs, header=header, body=body,
                footer=list(footer), note=f"{dateline} Print version.", original=loc)
            site.near_duplicates[copy] = loc
            footer.insert(0, Ref(h, copy[1], "Print this article"))
        if i in chosen_for["mirror"]:
            # A CMS alias serving the very same page (same text, no redirect).
            copy = (h, f"/archive/{i}.html")
            footer.insert(0, Ref(h, copy[1], "Permanent link"))
            site.resources[copy] = Resource(
                "mirror", title=article_title[i], paragraphs=paragraphs, header=header, body=body,
                footer=footer, note=dateline, original=loc)
            site.near_duplicates[copy] = loc
        site.resources[loc] = Resource(
            "article", title=article_title[i], paragraphs=paragraphs, header=header, body=body,
            footer=footer, note=dateline)

    # Syndicated copies: the same article on another content host, with that
    # host's chrome, another dateline and an ad block.
    syndicated_on: dict[int, list[Ref]] = {h: [] for h in range(content)}
    for i in extras["syndicated"]:
        other = rng.choice([h for h in range(content) if h != article_host[i]])
        copy = (other, f"/syndicated/{i}.html")
        original = site.resources[article_loc[i]]
        site.resources[copy] = Resource(
            "syndicated", title=article_title[i], paragraphs=original.paragraphs,
            header=[Ref(other, "/", "Home")], body=original.body, original=article_loc[i],
            note=f"Syndicated on {MONTH_NAMES[rng.randrange(12)]} {rng.randint(1, 28)}. Ad: {text.sentence(4)}")
        site.near_duplicates[copy] = article_loc[i]
        syndicated_on[other].append(Ref(other, copy[1], article_title[i]))

    # Navigation: home pages, sections and paginated listings (newest first,
    # so the old hub articles sit on the last listing pages).
    per_page = 10
    for h in range(content):
        mine = [i for i in range(pages) if article_host[i] == h]
        for section in sections[h]:
            in_section = [i for i in reversed(mine) if article_section[i] == section]
            n_pages = max(1, -(-len(in_section) // per_page))
            for p in range(n_pages):
                target = f"/{section}/" if p == 0 else f"/{section}/?page={p + 1}"
                chunk = in_section[p * per_page:(p + 1) * per_page]
                body = [Ref(h, article_loc[i][1], article_title[i]) for i in chunk]
                footer = []
                if p > 0:
                    footer.append(Ref(h, f"/{section}/" if p == 1 else f"/{section}/?page={p}", "Newer articles"))
                next_ref = Ref(h, f"/{section}/?page={p + 2}", "Older articles") if p + 1 < n_pages else None
                if next_ref:
                    footer.append(next_ref)
                site.resources[(h, target)] = Resource(
                    "section" if p == 0 else "listing", title=f"{names[h]}: {section} (page {p + 1})",
                    paragraphs=[text.paragraph(30)], header=nav(h), body=body,
                    footer=footer + host_footer(h), next_link=next_ref)
        featured = [Ref(h, article_loc[i][1], article_title[i]) for i in list(reversed(mine))[:6]]
        blogroll = [Ref(o, "/", names[o], "abs") for o in range(content) if o != h]
        footer = []
        if h == slow_host:
            slow = (h, "/reports/annual.html")
            site.resources[slow] = Resource("slow", title="Annual report", paragraphs=[text.paragraph(60)],
                                            header=nav(h))
            site.slow.append(slow)
            footer.append(Ref(h, slow[1], "Annual report"))
        site.resources[(h, "/")] = Resource(
            "home", title=names[h], paragraphs=[text.paragraph(40)], header=nav(h),
            body=featured + syndicated_on[h] + blogroll, footer=footer + host_footer(h))
        # /index.html redirects to / which is linked from every page anyway.
        site.resources[(h, "/index.html")] = Resource("redirect", status=301, location=Ref(h, "/", "Home"))
        site.redirects[(h, "/index.html")] = (h, "/")

    for j in hubs:
        hj, tj = article_loc[j]
        site.resources[(hj, f"/old/{j}.html")] = Resource("redirect", status=301, location=Ref(hj, tj, ""))
        site.resources[(hj, f"/legacy/{j}.html")] = Resource("redirect", status=302,
                                                             location=Ref(hj, f"/old/{j}.html", ""))
        site.redirects[(hj, f"/old/{j}.html")] = (hj, tj)
        site.redirects[(hj, f"/legacy/{j}.html")] = (hj, f"/old/{j}.html")

    # The shortener: a few more codes for the odd cases (to a redirect chain,
    # to a dead page), linked from home pages.
    chain_target = Ref(article_loc[hubs[0]][0], f"/legacy/{hubs[0]}.html", article_title[hubs[0]], "abs")
    dead_target = Ref(site.dead[0][0], site.dead[0][1], "Old story", "abs")
    home0 = site.resources[(0, "/")]
    home0.body.append(short_link(chain_target))
    site.resources[(1 % content, "/")].body.append(short_link(dead_target))
    for code, target in short_codes:
        src = (site.short_host, f"/s/{code}")
        site.resources[src] = Resource("redirect", status=301, location=target)
        site.redirects[src] = (target.host, target.target)
    site.resources[(site.short_host, "/")] = Resource(
        "other", title="sho.rt link shortener", paragraphs=["Short links for everyone."])

    # The shop: real pages whose links all carry a session id minted per page.
    shop_items = 8 if pages >= 100 else 4
    h = site.shop_host
    item_refs = [Ref(h, f"/shop/item-{n}.html", text.title(), "sid") for n in range(shop_items)]
    site.resources[(h, "/shop/")] = Resource(
        "shop", title=f"{names[h]} shop", paragraphs=[text.paragraph(50)], header=nav(h), body=list(item_refs),
        footer=host_footer(h))
    for n, ref in enumerate(item_refs):
        others = [item_refs[(n + k) % shop_items] for k in (1, 2, 3)]
        site.resources[(h, ref.target)] = Resource(
            "shop", title=ref.anchor, paragraphs=[text.paragraph(60)],
            header=nav(h)[:1] + [Ref(h, "/shop/", "Shop", "sid")], body=others, footer=host_footer(h))

    # Help center with relative links that loop (/docs/help/a/b/a/...).
    site.help_paragraphs = [text.paragraph(60), text.paragraph(60)]
    site.resources[(site.loop_host, "/docs/help/")] = Resource(
        "help", title="Help center", paragraphs=site.help_paragraphs, header=nav(site.loop_host),
        note="You are in: /docs/help/",
        body=[Ref(site.loop_host, "a/", "Getting started", "raw"),
              Ref(site.loop_host, "b/", "Billing questions", "raw")],
        footer=host_footer(site.loop_host))
    # Gallery with a visitor counter parameter that never ends.
    site.gallery_paragraphs = [text.paragraph(60)]
    site.resources[(site.counter_host, "/gallery/")] = Resource(
        "gallery", title="Photo gallery", paragraphs=site.gallery_paragraphs, header=nav(site.counter_host),
        note="You are visitor number 0.", body=[Ref(site.counter_host, "?counter=1", "Next photo", "raw")],
        footer=host_footer(site.counter_host))

    site.trap_patterns = [
        TrapPattern("calendar", site.calendar_host, r"^/calendar/\d{4}/\d{2}/",
                    "endless events calendar: every month links the previous and the next month"),
        TrapPattern("link_farm", site.farm_host, r"^/",
                    "link farm host: endless pages of spam text that link only each other"),
        TrapPattern("session_id", site.shop_host, r";jsessionid=|[?&]sid=",
                    "shop links carry a session id minted per page: endless spellings of a few real pages"),
        TrapPattern("relative_loop", site.loop_host, r"^/docs/help/(?:[ab]/)+",
                    "relative links a/ and b/ resolve to ever longer paths serving the same help page"),
        TrapPattern("counter", site.counter_host, r"^/gallery/\?(?:.*&)?counter=\d+",
                    "a counter query parameter incremented on every page: endless near-duplicates"),
    ]
    site.seeds = [(h, "/") for h in range(min(seed_hosts, content))]
    return site
