"""Link graphs of real documentation sites: a Debian doc tree read from disk.

``rust-doc``, ``python3-doc`` and ``postgresql-doc-15`` install static HTML
sites under ``/usr/share/doc``; served by a web server they are real sites
with the shapes crawlers meet (navigation linked from every page, heavy
in-link skew, thousands of redirect stubs). :func:`build_docgraph` turns such
a tree into a :class:`~scrapy_aopic.sim.graph.Graph` the way a crawler would
see it:

- links are the ``href`` of ``<a>`` and ``<area>`` tags (Scrapy's
  ``LinkExtractor`` defaults), resolved against the page, with fragments and
  queries stripped and percent-escapes decoded;
- a link to a directory means its ``index.html``;
- a root-absolute link (``/license.html``) names a file of the tree served
  at the root of its site, as ``benchmarks/bench_crawl_order.py`` serves
  it (the tree's own absolute path on disk is read as such too);
- links leaving the tree, to non-HTML files or to missing files are dropped
  (a crawler would spend a fetch on a 404; that cost is not modelled);
- a page whose ``<meta http-equiv="refresh">`` points elsewhere is a redirect
  stub: it is not a node, and every link to it counts as a link to its final
  target (a crawler that follows redirects into one account sees the same);
- each top-level directory is one site (host); files at the top are ``_root``;
- the seed is the top ``index.html``.

Graphs are cached as ``.npz`` under ``~/.cache/scrapy-aopic/graphs/``
(``$SCRAPY_AOPIC_CACHE`` overrides), keyed by the tree's file list and sizes.
"""

from __future__ import annotations

import hashlib
import html
import os
import posixpath
import re
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from .graph import Graph

#: Bump when the builder's reading of a tree changes (invalidates caches).
BUILDER_VERSION = 2  # 2: root-absolute links resolved (version 1 dropped them)

#: Known Debian documentation trees: name -> HTML root.
DOC_TREES = {
    "rust-doc": "/usr/share/doc/rust-doc/html",
    "python3-doc": "/usr/share/doc/python3-doc/html",
    "postgresql-doc-15": "/usr/share/doc/postgresql-doc-15/html",
}

_HREF = re.compile(
    rb"""<(?:a|area)\b[^>]*?\shref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""",
    re.IGNORECASE | re.DOTALL,
)
_META = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE | re.DOTALL)
_REFRESH = re.compile(rb"""http-equiv\s*=\s*["']?refresh""", re.IGNORECASE)
_CONTENT = re.compile(rb"""content\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE | re.DOTALL)
_REFRESH_URL = re.compile(r"""^\s*[\d.]*\s*[;,]?\s*url\s*=\s*['"]?([^'"]*)""", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_HTML_SUFFIXES = (".html", ".htm")
#: Redirect stubs declare the refresh in their head; only that much is searched.
_HEAD_BYTES = 4096
_MAX_REDIRECTS = 10


def cache_dir() -> Path:
    """Where built graphs are cached (outside the repository)."""
    base = os.environ.get("SCRAPY_AOPIC_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "scrapy-aopic"
    return root / "graphs"


def _list_tree(root: Path) -> tuple[list[str], set[str], str]:
    """HTML files (relative posix paths, sorted), directories, and a
    fingerprint of the listing (paths and sizes) for the cache key."""
    files: list[tuple[str, int]] = []
    dirs: set[str] = {""}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirnames.sort()
        for d in dirnames:
            dirs.add(f"{rel_dir}/{d}" if rel_dir else d)
        for name in filenames:
            if name.lower().endswith(_HTML_SUFFIXES):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                files.append((rel, os.path.getsize(os.path.join(dirpath, name))))
    files.sort()
    digest = hashlib.sha1(f"v{BUILDER_VERSION}".encode())
    for rel, size in files:
        digest.update(f"{rel}\0{size}\n".encode())
    return [rel for rel, _ in files], dirs, digest.hexdigest()[:16]


class _Resolver:
    """Turns an ``href`` found on a page into a path in the tree, or None."""

    def __init__(self, files: set[str], dirs: set[str], root: Path):
        self.files = files
        self.dirs = dirs
        self.root_prefix = str(root).rstrip("/") + "/"
        self.cache: dict[tuple[str, bytes], str | None] = {}

    def __call__(self, page_dir: str, raw: bytes) -> str | None:
        key = (page_dir, raw)
        try:
            return self.cache[key]
        except KeyError:
            pass
        target = self._resolve(page_dir, raw)
        self.cache[key] = target
        return target

    def _resolve(self, page_dir: str, raw: bytes) -> str | None:
        href = raw.decode("utf-8", "replace").strip()
        if "&" in href:
            href = html.unescape(href)
        href = href.split("#", 1)[0].split("?", 1)[0]
        if not href or href.startswith("//") or _SCHEME.match(href):
            return None  # same page, or another site (file:, http:, mailto:...)
        href = unquote(href)
        if href.startswith("/"):
            if href.startswith(self.root_prefix):
                path = href[len(self.root_prefix) :]
            else:  # from the root of the site that serves the tree
                path = href.lstrip("/")
        else:
            path = posixpath.join(page_dir, href)
        is_dir = path.endswith("/")
        path = posixpath.normpath(path)
        if path == ".":
            path = ""
        if path.startswith("../") or path == "..":
            return None  # leaves the tree
        if is_dir or path in self.dirs:
            path = f"{path}/index.html" if path else "index.html"
        return path if path in self.files else None


def _refresh_target(head: bytes) -> str | None:
    """Target of a ``<meta http-equiv="refresh">`` in ``head``, if any."""
    for meta in _META.findall(head):
        if not _REFRESH.search(meta):
            continue
        content = _CONTENT.search(meta)
        if content is None:
            continue
        value = (content.group(1) or content.group(2) or b"").decode("utf-8", "replace")
        match = _REFRESH_URL.match(html.unescape(value))
        if match and match.group(1).strip():
            return match.group(1).strip()
    return None


def is_redirect_stub(path: Path) -> bool:
    """Whether the file at ``path`` is a ``<meta http-equiv="refresh">``
    redirect stub, as :func:`build_docgraph` folds them."""
    with open(path, "rb") as fh:
        return _refresh_target(fh.read(_HEAD_BYTES)) is not None


def build_docgraph(root: str | Path, name: str | None = None) -> Graph:
    """Parse the HTML tree under ``root`` into a :class:`Graph` (see module doc)."""
    started = time.perf_counter()
    root = Path(root).resolve()
    paths, dirs, fingerprint = _list_tree(root)
    if not paths:
        raise ValueError(f"no HTML files under {root}")
    file_set = set(paths)
    resolve = _Resolver(file_set, dirs, root)

    # Pass 1: read every page; stubs map to their (relative) refresh target,
    # real pages keep their distinct link targets in page order.
    redirects: dict[str, str | None] = {}
    page_links: dict[str, list[str]] = {}
    raw_links = 0
    for rel in paths:
        with open(root / rel, "rb") as fh:
            body = fh.read()
        page_dir = posixpath.dirname(rel)
        target = _refresh_target(body[:_HEAD_BYTES])
        if target is not None:
            redirects[rel] = resolve(page_dir, target.encode("utf-8"))
            continue
        hrefs = [a or b or c for a, b, c in _HREF.findall(body)]
        raw_links += len(hrefs)
        links: dict[str, None] = {}
        for raw in dict.fromkeys(hrefs):
            path = resolve(page_dir, raw)
            if path is not None:
                links[path] = None
        page_links[rel] = list(links)

    def final(path: str) -> str | None:
        """Follow redirect stubs to a real page (None: dead end or loop)."""
        for _ in range(_MAX_REDIRECTS):
            if path in page_links:
                return path
            if path not in redirects:
                return None
            path = redirects[path]
            if path is None:
                return None
        return None

    urls = list(page_links)  # sorted, real pages only
    node = {u: i for i, u in enumerate(urls)}
    final_id: dict[str, int | None] = {}
    src: list[int] = []
    dst: list[int] = []
    for u, links in page_links.items():
        i = node[u]
        for link in links:
            j = final_id.get(link, -1)
            if j == -1:
                f = final(link)
                j = final_id[link] = None if f is None else node[f]
            if j is not None:
                src.append(i)
                dst.append(j)

    host_of = [u.split("/", 1)[0] if "/" in u else "_root" for u in urls]
    host_names = sorted(set(host_of))
    host_ids = {h: k for k, h in enumerate(host_names)}
    seed_path = final("index.html") if "index.html" in file_set else None
    if seed_path is None:
        seed_path = next(u for u in urls if "/" not in u) if any("/" not in u for u in urls) else urls[0]
    graph = Graph.from_edges(
        len(urls),
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        host=np.array([host_ids[h] for h in host_of], dtype=np.int32),
        host_names=host_names,
        seeds=[node[seed_path]],
        urls=urls,
        name=name or root.parent.name,
        meta={
            "source": str(root),
            "fingerprint": fingerprint,
            "html_files": len(paths),
            "redirect_stubs": len(redirects),
            "hrefs_seen": raw_links,
            "build_seconds": round(time.perf_counter() - started, 1),
        },
    )
    return graph


def load_docgraph(name_or_root: str, *, rebuild: bool = False, verbose: bool = False) -> Graph:
    """The graph of a known tree (``"rust-doc"``...) or of any HTML root,
    from the cache when the tree has not changed."""
    root = Path(DOC_TREES.get(name_or_root, name_or_root))
    name = name_or_root if name_or_root in DOC_TREES else root.resolve().parent.name
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root} does not exist; install it with "
            f"'apt-get install -y --no-install-recommends {name}'"
        )
    _, _, fingerprint = _list_tree(root.resolve())
    path = cache_dir() / f"{name}-{fingerprint}.npz"
    if path.exists() and not rebuild:
        return Graph.load(path)
    if verbose:
        print(f"building the link graph of {root} ...", flush=True)
    graph = build_docgraph(root, name)
    graph.save(path)
    if verbose:
        print(f"  {graph.summary()} in {graph.meta['build_seconds']} s -> {path}", flush=True)
    return graph
