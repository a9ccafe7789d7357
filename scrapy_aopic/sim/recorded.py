"""Link graphs recorded from real crawls (``AOPIC_EXPORT_GRAPH``).

The format is JSON Lines, one object per visited page::

    {"url": "https://example.com/", "links": ["https://example.com/a", ...], "host": "example.com"}

``url`` is the page's canonical URL, ``links`` the distinct canonical URLs it
links to (in page order), ``host`` its politeness key (the download slot).
Other keys are ignored, except an optional ``"depth"``: pages recorded at
depth 0 are the crawl's seeds. Files ending in ``.gz`` are read through gzip.

URLs that are linked but were never visited (the crawl stopped, or they
failed) are kept as nodes without out-links by default (``unvisited="keep"``:
a crawler replaying the graph can discover and fetch them, it just learns
nothing from them), or dropped with ``unvisited="drop"`` (the graph of the
visited pages only). Seeds: the ``depth == 0`` pages when the file says so,
otherwise the first page recorded plus every visited page no recorded page
links to (it can only have been a start URL).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from .graph import Graph


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_records(path: str | Path) -> Iterator[dict]:
    """The objects of a recorded graph file, validated; blank lines skipped."""
    path = Path(path)
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON: {exc}") from None
            if not isinstance(record, dict) or not isinstance(record.get("url"), str):
                raise ValueError(f"{path}:{lineno}: expected an object with a string 'url'")
            links = record.get("links", [])
            if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
                raise ValueError(f"{path}:{lineno}: 'links' must be a list of strings")
            yield record


def _host_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def graph_from_records(
    records: Iterable[dict], *, unvisited: str = "keep", name: str = "recorded"
) -> Graph:
    """Build a :class:`Graph` from recorded page objects (see module doc)."""
    if unvisited not in ("keep", "drop"):
        raise ValueError(f"unvisited must be 'keep' or 'drop', got {unvisited!r}")
    pages: dict[str, tuple[list[str], str, int | None]] = {}
    for record in records:
        url = record["url"]
        if url in pages:  # a page recorded twice (a re-crawl): keep the last links
            del pages[url]
        depth = record.get("depth")
        host = record.get("host")
        pages[url] = (
            list(dict.fromkeys(record.get("links", []))),
            host if isinstance(host, str) and host else _host_of(url),
            depth if isinstance(depth, int) else None,
        )
    if not pages:
        raise ValueError("the recorded graph has no pages")
    node: dict[str, int] = {url: i for i, url in enumerate(pages)}
    hosts = [host for _, host, _ in pages.values()]
    src: list[int] = []
    dst: list[int] = []
    linked: set[int] = set()
    for i, (links, _, _) in enumerate(pages.values()):
        for link in links:
            j = node.get(link)
            if j is None:
                if unvisited == "drop":
                    continue
                j = node[link] = len(node)
                hosts.append(_host_of(link))
            src.append(i)
            dst.append(j)
            if j != i:
                linked.add(j)
    urls = list(node)
    depths = [d for _, _, d in pages.values()]
    if any(d == 0 for d in depths):
        seeds = [i for i, d in enumerate(depths) if d == 0]
    else:
        seeds = [0] + [i for i in range(1, len(pages)) if i not in linked]
    host_names = sorted(set(hosts))
    host_ids = {h: k for k, h in enumerate(host_names)}
    return Graph.from_edges(
        len(urls),
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        host=np.array([host_ids[h] for h in hosts], dtype=np.int32),
        host_names=host_names,
        seeds=seeds,
        urls=urls,
        name=name,
        meta={"visited": len(pages), "unvisited": unvisited},
    )


def read_recorded_graph(path: str | Path, *, unvisited: str = "keep") -> Graph:
    """Read an ``AOPIC_EXPORT_GRAPH`` file into a :class:`Graph`."""
    path = Path(path)
    name = path.name.split(".")[0] or "recorded"
    return graph_from_records(iter_records(path), unvisited=unvisited, name=name)


def write_recorded_graph(graph: Graph, path: str | Path, visited=None) -> Path:
    """Write ``graph`` in the recorded format (tests, and to turn any graph
    into a file users can replay). ``visited``: nodes to write (default: all
    nodes with out-links and the seeds), in order; seeds get ``depth: 0``."""
    path = Path(path)
    if visited is None:
        degree = graph.out_degree()
        seeds = set(graph.seeds.tolist())
        visited = [u for u in range(graph.n) if degree[u] > 0 or u in seeds]
    seeds = set(graph.seeds.tolist())
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for u in visited:
            record = {
                "url": graph.key(u),
                "links": [graph.key(v) for v in graph.out(u).tolist()],
                "host": graph.host_names[graph.host[u]],
            }
            if u in seeds:
                record["depth"] = 0
            fh.write(json.dumps(record) + "\n")
    return path
