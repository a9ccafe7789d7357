"""Serve a generated :class:`~demosite.generator.Site` on loopback addresses.

Every host of the site gets its own IP (``127.0.0.2``, ``127.0.0.3``, ...) and
all share one port, so Scrapy (whose download slots are keyed by hostname,
port excluded) sees distinct hosts. :func:`serve` is a context manager that
starts one threaded HTTP server per host and yields a :class:`ServedSite`,
which knows the URLs, the ground truth in URL form and what the crawler
fetched (every request is counted server-side).
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .generator import Loc, Site, TrapPattern


class Fetch(NamedTuple):
    """One request the server answered, in arrival order."""

    time: float  # time.monotonic() when the request arrived
    url: str  # as requested (host, port, path and query)
    status: int
    kind: str  # see generator.Reply.kind
    page: str | None  # canonical URL of the real page served, if one was


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a slow page must not hold up shutdown
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], served: ServedSite, host: int) -> None:
        self.served = served
        self.host_index = host
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client closing its keep-alive connection is not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError) or self.served.verbose:
            super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Scrapy reuses connections
    server_version = "demosite/1.0"
    timeout = 10  # idle keep-alive connections end on their own

    def setup(self) -> None:
        super().setup()
        self.server.served._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.served._track(self.connection, False)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer(with_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(with_body=False)

    def _answer(self, with_body: bool) -> None:
        served: ServedSite = self.server.served
        reply = served.site.respond(self.server.host_index, self.path, served.port)
        served._record(self.server.host_index, self.path, reply)
        if reply.kind == "slow" and served.stopping.wait(served.slow_seconds):
            return  # shutting down: drop the request
        try:
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if with_body:
                self.wfile.write(reply.body)
        except OSError:
            self.close_connection = True  # the client went away

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        if self.server.served.verbose:
            super().log_message(format, *args)


class ServedSite:
    """A site being served, its URLs, its ground truth and its request counts.

    Created by :func:`serve`. ``site`` is the generated site, ``port`` the
    port all hosts share, ``base_urls`` one ``http://127.0.0.x:port/`` per
    host, ``seeds`` the seed URLs. URL-level ground truth: :meth:`real_urls`,
    :meth:`pagerank`, :meth:`near_duplicates`, :meth:`is_trap`. What was
    fetched: :meth:`fetch_counts`, :meth:`page_fetch_counts`, :attr:`log`.
    """

    def __init__(self, site: Site, port: int, slow_seconds: float, verbose: bool) -> None:
        self.site = site
        self.port = port
        self.slow_seconds = slow_seconds
        self.verbose = verbose
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._pages: Counter[str] = Counter()
        self.log: list[Fetch] = []
        self._connections: set[socket.socket] = set()

    # -- addresses ----------------------------------------------------------

    @property
    def base_urls(self) -> list[str]:
        """``http://ip:port/`` of every host."""
        return self.site.base_urls(self.port)

    @property
    def seeds(self) -> list[str]:
        """Seed URLs: the home pages of the first content hosts."""
        return [self.url(loc) for loc in self.site.seeds]

    def url(self, loc: Loc) -> str:
        """URL of a site location."""
        return self.site.url(loc, self.port)

    def loc(self, url: str) -> Loc | None:
        """Site location of a URL, or None if it is not on this site."""
        return self.site.loc(url)

    # -- ground truth in URLs ------------------------------------------------

    def real_urls(self) -> list[str]:
        """Canonical URLs of the real content pages."""
        return [self.url(loc) for loc in self.site.real_pages()]

    def pagerank(self, damping: float = 0.85) -> dict[str, float]:
        """True PageRank of the real-content graph, by canonical URL."""
        return {self.url(loc): rank for loc, rank in self.site.pagerank(damping).items()}

    def real_graph(self) -> dict[str, list[str]]:
        """Real-content link graph, by canonical URL."""
        return {self.url(a): [self.url(b) for b in bs] for a, bs in self.site.real_graph().items()}

    def near_duplicates(self) -> dict[str, str]:
        """Near-duplicate URL -> URL of the page it copies."""
        return {self.url(a): self.url(b) for a, b in self.site.near_duplicates.items()}

    @property
    def trap_patterns(self) -> list[TrapPattern]:
        """The site's traps (regexes over path + query, per host index)."""
        return self.site.trap_patterns

    def is_trap(self, url: str) -> bool:
        """Whether a URL, as spelled, is inside a crawler trap."""
        loc = self.loc(url)
        return loc is not None and self.site.is_trap(loc)

    def canonical(self, url: str) -> str | None:
        """Canonical URL of the real page a URL ends at, or None."""
        loc = self.loc(url)
        final = self.site.resolve(loc) if loc else None
        return self.url(final) if final else None

    # -- what was fetched -----------------------------------------------------

    def _record(self, host: int, raw_target: str, reply) -> None:
        url = self.site.url((host, raw_target), self.port)
        page = self.url(reply.page) if reply.page is not None else None
        with self._lock:
            self._counts[url] += 1
            if page is not None:
                self._pages[page] += 1
            self.log.append(Fetch(time.monotonic(), url, reply.status, reply.kind, page))

    def _track(self, conn: socket.socket, opened: bool) -> None:
        with self._lock:
            if opened:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def fetch_counts(self) -> Counter[str]:
        """Requests per URL as requested (robots.txt included)."""
        with self._lock:
            return Counter(self._counts)

    def page_fetch_counts(self) -> Counter[str]:
        """Times each real page was served, by canonical URL, whatever
        spelling (session id, tracking parameters) the request used."""
        with self._lock:
            return Counter(self._pages)

    def fetched_real_urls(self) -> set[str]:
        """Canonical URLs of the real pages served at least once."""
        with self._lock:
            return set(self._pages)

    def captured_pagerank(self, urls: Iterable[str] | None = None) -> float:
        """Share of true PageRank held by ``urls`` (canonical real-page URLs;
        default: the real pages served so far)."""
        ranks = self.pagerank()
        chosen = self.fetched_real_urls() if urls is None else set(urls)
        return sum(ranks.get(u, 0.0) for u in chosen)

    def total_requests(self, exclude_robots: bool = True) -> int:
        """Number of requests served (robots.txt excluded by default)."""
        with self._lock:
            return sum(1 for f in self.log if not (exclude_robots and f.kind == "robots"))

    def kind_counts(self) -> Counter[str]:
        """Requests per reply kind (``article``, ``trap:calendar``, ``missing`` ...)."""
        with self._lock:
            return Counter(f.kind for f in self.log)

    def reset_counts(self) -> None:
        """Forget every request counted so far."""
        with self._lock:
            self._counts.clear()
            self._pages.clear()
            self.log.clear()

    def _close_connections(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def _bind_all(site: Site, served: ServedSite, port: int, attempts: int) -> list[_Server]:
    """One server per host, all on one port: bind host 0 (on ``port``, or a
    free port when 0) and retry with a new port if another host's IP has it."""
    last_error: OSError | None = None
    for _ in range(attempts):
        servers: list[_Server] = []
        try:
            first = _Server((site.ip(0), port), served, 0)
            servers.append(first)
            chosen = first.server_address[1]
            for info in site.hosts[1:]:
                servers.append(_Server((info.ip, chosen), served, info.index))
            served.port = chosen
            return servers
        except OSError as exc:
            for server in servers:
                server.server_close()
            if exc.errno != errno.EADDRINUSE:
                raise
            last_error = exc
            if port:
                break  # a fixed port is taken on some host: nothing to retry
    raise OSError(errno.EADDRINUSE, f"no port free on all {len(site.hosts)} demo-site IPs: {last_error}")


@contextlib.contextmanager
def serve(
    site: Site,
    *,
    port: int = 0,
    slow_seconds: float = 10.0,
    verbose: bool = False,
) -> Iterator[ServedSite]:
    """Serve ``site`` on its loopback IPs, all on ``port`` (0: a free one).

    The slow page answers after ``slow_seconds`` (set it above the crawler's
    ``DOWNLOAD_TIMEOUT`` to get a timeout). Yields a :class:`ServedSite`;
    everything stops (in well under a second) when the block exits.
    """
    served = ServedSite(site, port, slow_seconds, verbose)
    servers = _bind_all(site, served, port, attempts=20)
    threads = [
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         name=f"demosite-{s.server_address[0]}", daemon=True)
        for s in servers
    ]
    for thread in threads:
        thread.start()
    try:
        yield served
    finally:
        served.stopping.set()
        # shutdown() waits for the serve_forever loop; ask every loop at once.
        stoppers = [threading.Thread(target=s.shutdown, daemon=True) for s in servers]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        for server in servers:
            server.server_close()
        served._close_connections()
