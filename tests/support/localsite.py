"""A small local site for end-to-end crawls, with server-side hit counters.

Pages ``/p<i>`` link to each other (a skewed graph: low numbers are hubs)
and to the awkward cases: ``/missing`` (404), ``/error`` (500), ``/moved``
(301 to a page), ``/moved-known`` (301 to ``/p0``, already crawled),
``/slow`` (answers after ``slow_seconds``), ``/image.png`` (binary).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPECIAL = ["/missing", "/error", "/moved", "/moved-known", "/slow", "/image.png"]

#: serve_forever() arguments of the tests' local sites: shutdown() waits for
#: the serving loop's next poll, every 0.5 s by default (0.25 s on average
#: for each of the dozens of sites the suite starts and stops).
SERVE = {"poll_interval": 0.02}


def build_graph(pages: int, seed: int = 1) -> dict[str, list[str]]:
    rng = random.Random(seed)
    graph = {}
    for i in range(pages):
        # Preferential targets: page k is picked with weight ~ 1/(k+1).
        targets = {f"/p{int(pages ** rng.random()) - 1}" for _ in range(4)}
        targets.add(f"/p{(i + 1) % pages}")  # a ring keeps every page reachable
        if i % 7 == 0:
            targets.add(SPECIAL[(i // 7) % len(SPECIAL)])
        graph[f"/p{i}"] = sorted(targets)
    return graph


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a crawler killed or timing out resets its connections


class LocalSite:
    """Serve ``graph`` on 127.0.0.1; ``hits`` counts requests per path."""

    def __init__(self, pages: int = 60, seed: int = 1, delay: float = 0.0, slow_seconds: float = 3.0):
        self.graph = build_graph(pages, seed)
        self.delay = delay
        self.slow_seconds = slow_seconds
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path
                with site._lock:
                    site.hits[path] += 1
                if site.delay:
                    time.sleep(site.delay)
                if path in site.graph:
                    links = "".join(f'<a href="{href}">{href}</a> ' for href in site.graph[path])
                    self._send(200, f"<html><body><h1>{path}</h1>{links}</body></html>".encode(), "text/html")
                elif path == "/robots.txt" or path == "/missing":
                    self._send(404, b"not found", "text/plain")
                elif path == "/error":
                    self._send(500, b"boom", "text/plain")
                elif path == "/moved":
                    self._redirect("/p3")
                elif path == "/moved-known":
                    self._redirect("/p0")
                elif path == "/slow":
                    time.sleep(site.slow_seconds)
                    self._send(200, b"<html>late</html>", "text/html")
                elif path == "/image.png":
                    self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "image/png")
                else:
                    self._send(404, b"not found", "text/plain")

            def _send(self, status, body, content_type):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the crawler gave up (timeout) or was killed

            def _redirect(self, location):
                self.send_response(301)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs=SERVE, daemon=True)

    def __enter__(self) -> LocalSite:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reachable_pages(self, start: str = "/p0") -> set[str]:
        """Paths of HTML pages reachable from ``start`` (redirects followed)."""
        redirect = {"/moved": "/p3", "/moved-known": "/p0"}
        seen, todo = set(), [start]
        while todo:
            path = todo.pop()
            path = redirect.get(path, path)
            if path in seen or path not in self.graph:
                continue
            seen.add(path)
            todo.extend(self.graph[path])
        return seen


class MultiHostSite:
    """``pages`` pages spread over ``hosts`` loopback host names
    (``127.0.0.2``, ``127.0.0.3``, ...: distinct download slots), page ``i``
    on host ``i % hosts``, each host its own server; links are absolute, so
    most cross hosts. ``/moved`` on every host redirects to a page of the
    next host; ``/missing`` is a 404. ``hits`` counts requests per URL."""

    def __init__(self, pages: int = 120, hosts: int = 6, seed: int = 1, delay: float = 0.0):
        self.hosts = [f"127.0.0.{i + 2}" for i in range(hosts)]
        self.delay = delay
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.servers = []
        for host in self.hosts:
            self.servers.append(_QuietServer((host, 0), self._handler(host)))
        self.bases = [f"http://{host}:{server.server_address[1]}" for host, server in zip(self.hosts, self.servers)]
        rng = random.Random(seed)
        self.graph: dict[str, list[str]] = {}
        for i in range(pages):
            targets = {self.url(int(pages ** rng.random()) - 1) for _ in range(3)}
            targets.add(self.url((i + 1) % pages))  # a ring keeps every page reachable
            if i % 11 == 0:
                targets.add(self.bases[(i + 1) % hosts] + ("/moved" if i % 22 == 0 else "/missing"))
            self.graph[self.url(i)] = sorted(targets)
        self.redirects = {base + "/moved": self.url(hosts + (i + 1) % hosts) for i, base in enumerate(self.bases)}
        self._threads = [threading.Thread(target=s.serve_forever, kwargs=SERVE, daemon=True) for s in self.servers]

    def url(self, page: int) -> str:
        return f"{self.bases[page % len(self.bases)]}/p{page}"

    def _handler(self, host: str):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = site.bases[site.hosts.index(host)] + self.path
                with site._lock:
                    site.hits[url] += 1
                if site.delay:
                    time.sleep(site.delay)
                if url in site.graph:
                    links = "".join(f'<a href="{href}">{href}</a> ' for href in site.graph[url])
                    body = f"<html><body>{links}</body></html>".encode()
                    status, headers = 200, {"Content-Type": "text/html"}
                elif url in site.redirects:
                    body, status, headers = b"", 301, {"Location": site.redirects[url]}
                else:
                    body, status, headers = b"not found", 404, {"Content-Type": "text/plain"}
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

    def __enter__(self) -> MultiHostSite:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def reachable_pages(self, start: int = 0) -> set[str]:
        """URLs of HTML pages reachable from page ``start`` (redirects followed)."""
        seen, todo = set(), [self.url(start)]
        while todo:
            url = todo.pop()
            url = self.redirects.get(url, url)
            if url in seen or url not in self.graph:
                continue
            seen.add(url)
            todo.extend(self.graph[url])
        return seen
