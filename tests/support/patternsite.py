"""A local site for the spider-pattern conformance suite.

Serves on 127.0.0.1 (and answers for any Host header, so ``localhost`` is
"another host" for offsite tests) and records every request (method, path,
body):

* ``/p0`` .. ``/p<N-1>``: pages in a ring plus a few shortcuts, each with a
  link to the next and to ``/p0``;
* ``/sitemap.xml`` (and ``/robots.txt`` naming it);
* ``/login``: a form; ``POST /login`` with ``user=u&pass=p`` sets a cookie and
  redirects to ``/members``, which lists ``/m0`` .. ``/m2`` (403 without the
  cookie);
* ``/api?page=N``: JSON, ``next`` until page 3;
* ``/flaky``: 500 the first time, 200 after;
* ``/redirect-off``: 301 to ``http://localhost:<port>/p1`` (another host);
  ``/redirect-on``: 301 to ``/p3``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.localsite import SERVE


class PatternSite:
    """``with PatternSite(pages=12) as site:`` — ``site.base``, ``site.requests``."""

    def __init__(self, pages: int = 12):
        self.pages = pages
        self.requests: list[tuple[str, str, bytes]] = []
        self._lock = threading.Lock()
        self._flaky = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _record(self, body: bytes = b"") -> None:
                with site._lock:
                    site.requests.append((self.command, self.path, body))

            def _send(self, status: int, body: bytes, ctype: str = "text/html", headers=()) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._record(body)
                form = parse_qs(body.decode())
                if self.path == "/login" and form.get("user") == ["u"] and form.get("pass") == ["p"]:
                    self._send(302, b"", headers=[("Location", "/members"), ("Set-Cookie", "session=ok; Path=/")])
                else:
                    self._send(403, b"<html><body>denied</body></html>")

            def do_GET(self):
                self._record()
                parts = urlsplit(self.path)
                path = parts.path
                port = self.server.server_address[1]
                if path.startswith("/p") and path[2:].isdigit() and int(path[2:]) < site.pages:
                    i = int(path[2:])
                    links = [f"/p{(i + 1) % site.pages}", "/p0", f"/p{(i * 3 + 2) % site.pages}"]
                    html = "".join(f'<a href="{href}">{href}</a> ' for href in links)
                    self._send(200, f"<html><body><h1>Page {i}</h1><p>Text of page {i}.</p>{html}</body></html>".encode())
                elif path == "/robots.txt":
                    self._send(200, f"User-agent: *\nAllow: /\nSitemap: http://127.0.0.1:{port}/sitemap.xml\n".encode(), "text/plain")
                elif path == "/sitemap.xml":
                    urls = "".join(f"<url><loc>http://127.0.0.1:{port}/p{i}</loc></url>" for i in range(site.pages))
                    xml = f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
                    self._send(200, xml.encode(), "application/xml")
                elif path == "/login":
                    self._send(200, b'<html><body><form method="post" action="/login"><input name="user">'
                                    b'<input name="pass" type="password"></form></body></html>')
                elif path == "/members":
                    if "session=ok" not in (self.headers.get("Cookie") or ""):
                        self._send(403, b"<html><body>log in first</body></html>")
                    else:
                        self._send(200, b"<html><body>" + b"".join(
                            f'<a href="/m{i}">m{i}</a> '.encode() for i in range(3)) + b"</body></html>")
                elif path in ("/m0", "/m1", "/m2"):
                    self._send(200, f"<html><body><p>Member page {path}.</p></body></html>".encode())
                elif path == "/api":
                    page = int(parse_qs(parts.query).get("page", ["1"])[0])
                    data = {"page": page, "next": page + 1 if page < 3 else None}
                    self._send(200, json.dumps(data).encode(), "application/json")
                elif path == "/flaky":
                    with site._lock:
                        site._flaky += 1
                        first = site._flaky == 1
                    if first:
                        self._send(500, b"<html><body>oops</body></html>")
                    else:
                        self._send(200, b'<html><body><p>Fine now.</p><a href="/p2">p2</a></body></html>')
                elif path == "/redirect-off":
                    self._send(301, b"", headers=[("Location", f"http://localhost:{port}/p1")])
                elif path == "/redirect-on":
                    self._send(301, b"", headers=[("Location", "/p3")])
                else:
                    self._send(404, b"<html><body>not found</body></html>")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> PatternSite:
        threading.Thread(target=self.server.serve_forever, kwargs=SERVE, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def hits(self, method: str = "GET") -> Counter:
        """Requests per path (query included) with ``method``."""
        with self._lock:
            return Counter(path for m, path, _ in self.requests if m == method)

    def bodies(self, path: str) -> list[bytes]:
        """Bodies of the POSTs to ``path``."""
        with self._lock:
            return [body for m, p, body in self.requests if m == "POST" and p == path]
