"""Offline reference crawls of a demo site (no sockets, no Scrapy).

:func:`reference_crawl` crawls a :class:`~demosite.generator.Site` through
:meth:`Site.respond` in one of the classic orders, counting fetches the way
Scrapy's ``CLOSESPIDER_PAGECOUNT`` does (every response except redirect hops
and robots.txt), and reports the share of true PageRank the fetched real
pages hold. It is a yardstick for the demo ("what would depth-first have
captured with the same budget?"), not a model of Scrapy in every detail: no
retries, no concurrency, redirects followed at once.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from protego import Protego
from w3lib.url import canonicalize_url

from .generator import DUPLICATE_KINDS, Loc, Site

_HREF = re.compile(r'<(?:a|link rel="next")\s[^>]*?href="([^"]*)"', re.IGNORECASE)
ORDERS = ("dfs", "bfs", "omniscient")


@dataclass
class ReferenceResult:
    """What a reference crawl fetched."""

    order: str
    fetches: int = 0
    real_pages: set[Loc] = field(default_factory=set)
    captured_pagerank: float = 0.0
    trap_fetches: int = 0
    duplicate_fetches: int = 0
    fetched: list[str] = field(default_factory=list)


def _links(body: bytes, base: str) -> list[str]:
    text = body.decode("utf-8", "replace")
    out = []
    for href in _HREF.findall(text):
        url = urljoin(base, href.replace("&amp;", "&")).split("#", 1)[0]
        if urlsplit(url).scheme in ("http", "https"):
            out.append(url)
    return out


def reference_crawl(site: Site, order: str = "bfs", budget: int | None = None,
                    port: int | None = 8000, obey_robots: bool = True) -> ReferenceResult:
    """Crawl ``site`` from its seeds in ``order`` for ``budget`` fetches.

    ``order``: ``"dfs"`` (LIFO, Scrapy's default scheduler), ``"bfs"``
    (FIFO) or ``"omniscient"`` (the discovered URL with the highest true
    PageRank first: the ceiling). Duplicate URLs are filtered the way
    Scrapy's default dupefilter does (``canonicalize_url``), so session ids
    and counters are *not* recognised. ``budget`` None: the number of real
    pages.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}")
    budget = len(site.real_pages()) if budget is None else budget
    ranks = site.pagerank()
    result = ReferenceResult(order)
    robots: dict[int, Protego | None] = {}
    seen: set[str] = set()
    stack: list[str] = []
    queue: deque[str] = deque()
    heap: list[tuple[float, int, str]] = []
    tick = 0

    def push(url: str) -> None:
        nonlocal tick
        key = canonicalize_url(url)
        if key in seen:
            return
        seen.add(key)
        tick += 1
        if order == "dfs":
            stack.append(url)
        elif order == "bfs":
            queue.append(url)
        else:
            loc = site.loc(url)
            final = site.resolve(loc) if loc else None
            heapq.heappush(heap, (-ranks.get(final, 0.0), tick, url))

    def pop() -> str | None:
        if order == "dfs":
            return stack.pop() if stack else None
        if order == "bfs":
            return queue.popleft() if queue else None
        while heap:
            priority, when, url = heapq.heappop(heap)
            loc = site.loc(url)
            final = site.resolve(loc) if loc else None
            if priority < 0 and final in result.real_pages:
                # Another spelling of a page already fetched is worth nothing
                # now; ranks only fall, so re-checking at pop time is enough.
                heapq.heappush(heap, (0.0, when, url))
                continue
            return url
        return None

    def allowed(loc: Loc, url: str) -> bool:
        if not obey_robots:
            return True
        if loc[0] not in robots:
            reply = site.respond(loc[0], "/robots.txt", port)
            robots[loc[0]] = Protego.parse(reply.body.decode()) if reply.status == 200 else None
        rules = robots[loc[0]]
        return rules is None or rules.can_fetch(url, "*")

    for seed in site.seeds:
        push(site.url(seed, port))
    while result.fetches < budget:
        url = pop()
        if url is None:
            break
        for _hop in range(10):
            loc = site.loc(url)
            if loc is None or not allowed(loc, url):
                reply = None
                break
            reply = site.respond(loc[0], loc[1], port)
            if reply.status not in (301, 302):
                break
            target = dict(reply.headers)["Location"]
            key = canonicalize_url(target)
            if key in seen:
                reply = None  # Scrapy's dupefilter drops a redirect to a seen URL
                break
            seen.add(key)
            url = target
        if reply is None:
            continue
        result.fetches += 1
        result.fetched.append(url)
        if reply.page is not None:
            result.real_pages.add(reply.page)
        if reply.kind.startswith("trap:") or site.is_trap(loc):
            result.trap_fetches += 1
        if reply.kind in DUPLICATE_KINDS:
            result.duplicate_fetches += 1
        if reply.status == 200 and dict(reply.headers)["Content-Type"].startswith("text/html"):
            for link in _links(reply.body, url):
                push(link)
    result.captured_pagerank = sum(ranks[loc] for loc in result.real_pages)
    return result
