"""Generated sites served on several loopback hosts, for benchmark crawls.

Scrapy's download slots are per hostname, so a broad crawl needs several
hosts: :class:`LoopbackSite` runs one threaded HTTP/1.1 server per address
127.0.0.2, 127.0.0.3, ... on one shared free port, in this process. A
subclass says what each path serves (:meth:`LoopbackSite.page`).
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietServer(ThreadingHTTPServer):
    """A threaded server for benchmark crawls: daemon threads, a deep
    accept queue, and no traceback when the crawler hangs up."""

    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass  # a crawler closing its connections at its page budget is expected


class LoopbackSite:
    """HTML pages on ``hosts`` loopback addresses; use as a context manager."""

    def __init__(self, hosts: int):
        self.hosts = hosts
        self.port = 0
        self.servers: list[ThreadingHTTPServer] = []

    def host(self, i: int) -> str:
        """Address of host ``i % hosts``."""
        return f"127.0.0.{2 + i % self.hosts}"

    def page(self, path: str) -> bytes | None:
        """The HTML body served at ``path``, or None for a 404."""
        raise NotImplementedError

    def __enter__(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                body = site.page(self.path)
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                if body:
                    self.wfile.write(body)

        with socket.socket() as probe:
            probe.bind((self.host(0), 0))
            self.port = probe.getsockname()[1]
        for h in range(self.hosts):
            server = QuietServer((self.host(h), self.port), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
        return self

    def __exit__(self, *exc) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
