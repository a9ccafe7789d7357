"""False soft-404 refusals on a real documentation tree (issue 16, item 3).

Serves a directory of HTML (e.g. the Python documentation Debian ships:
``apt-get download python3.11-doc && dpkg -x python3.11-doc_*.deb x``, then
``x/usr/share/doc/python3.11/html``) on 127.0.0.1 and crawls it with the
add-on. With ``--soft404`` every unknown path answers 200 with a templated
"not found" page linking five fresh random pages of its own directory
(a soft-404 space inside every real directory). Counts, server-side and from
the frontier's accounts: fetches, soft-404 fetches, and real files refused
(an account refused, or a directory closed as a soft-404 space that holds
real files).

    .venv/bin/python benchmarks/bench_soft404_docs.py DIR [--budget 3000] [--soft404]
"""

from __future__ import annotations

import argparse
import os
import posixpath
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from tests.support.trapsite import run_crawl  # noqa: E402


def serve(root: str, soft404: bool):
    log: list[tuple[str, str]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            path = unquote(urlsplit(self.path).path)
            local = os.path.join(root, posixpath.normpath(path).lstrip("/"))
            if os.path.isdir(local):
                local = os.path.join(local, "index.html")
            if path == "/robots.txt":
                status, body, kind, ctype = 200, b"User-agent: *\n", "robots", "text/plain"
            elif os.path.isfile(local) and os.path.realpath(local).startswith(os.path.realpath(root)):
                with open(local, "rb") as f:
                    body = f.read()
                ctype = "text/html; charset=utf-8" if local.endswith(".html") else "application/octet-stream"
                status, kind = 200, "real"
            elif soft404:
                rng = random.Random(self.path)
                directory = path.rsplit("/", 1)[0] + "/"
                links = "".join(f'<li><a href="{directory}{rng.getrandbits(40):010x}.html">Page {rng.getrandbits(40):010x}</a></li>'
                                for _ in range(5))
                body = (f"<html><head><title>Not found</title></head><body><h1>Sorry</h1><p>We could not find "
                        f"{path}. Maybe one of these?</p><ul>{links}</ul></body></html>").encode()
                status, kind, ctype = 200, "soft404", "text/html; charset=utf-8"
            else:
                status, body, kind, ctype = 404, b"<html><body>Not found</body></html>", "missing", "text/html"
            with lock:
                log.append((self.path, kind))
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, log


def main() -> None:
    from arglists import setting  # benchmarks/, the directory of the script run

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root")
    parser.add_argument("--budget", type=int, default=3000)
    parser.add_argument("--soft404", action="store_true")
    parser.add_argument("--seconds", type=int, default=240, help="CLOSESPIDER_TIMEOUT")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting(), help="a Scrapy setting (int)")
    args = parser.parse_args()
    from scrapy_aopic.hygiene.canonical import canonical_url

    httpd, log = serve(args.root, args.soft404)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    report = run_crawl([base + "/index.html"], {"ADDONS": {"scrapy_aopic.Addon": 0}, "CLOSESPIDER_PAGECOUNT": args.budget,
                                                 "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
                                                 "DOWNLOAD_TIMEOUT": 20, "CLOSESPIDER_TIMEOUT": args.seconds,
                                                 **{k: int(v) for k, v in (a.split("=", 1) for a in args.set)}}, timeout=900)
    httpd.shutdown()
    real = {}
    for dirpath, _, files in os.walk(args.root):
        for name in files:
            if name.endswith(".html"):
                rel = os.path.relpath(os.path.join(dirpath, name), args.root).replace(os.sep, "/")
                real[canonical_url(f"{base}/{rel}")] = rel
    accounts = report.get("accounts", {})
    refused_accounts = sorted(real[u] for u, a in accounts.items() if a["state"] == "refused" and u in real)
    closed = report.get("soft404_closed", [])
    from scrapy_aopic.hygiene.soft404 import parent_of

    in_closed = sorted(rel for u, rel in real.items() if parent_of(u) in closed)
    kinds: dict[str, int] = {}
    for _, kind in log:
        kinds[kind] = kinds.get(kind, 0) + 1
    stats = report["stats"]
    fetched_real = len({p for p, k in log if k == "real"})
    print(f"tree: {len(real)} HTML files; fetches {len(log)}: {kinds}; distinct real fetched {fetched_real}")
    print(f"soft-404 waste: {kinds.get('soft404', 0) / max(len(log), 1):.1%}")
    print(f"refusals: { {k: v for k, v in stats.items() if 'soft404' in k} }")
    print(f"directories closed: {closed}")
    print(f"real files refused (account refused): {len(refused_accounts)} {refused_accounts[:10]}")
    print(f"real files in a closed directory: {len(in_closed)} {in_closed[:10]}")
    print(f"conservation error {stats.get('aopic/conservation_error')}")


if __name__ == "__main__":
    main()
