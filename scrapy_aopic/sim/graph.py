"""A link graph in compressed sparse row form, with sites, seeds and labels.

Every graph the simulator crawls (a Debian documentation tree, a synthetic
web, a graph recorded from a real crawl) becomes one :class:`Graph`: node ids
``0..n-1``, the out-links of node ``u`` in the order they appear on the page
(``indices[indptr[u]:indptr[u+1]]``, distinct, no self-links), the site
(host) of every node, the seed nodes a crawl starts from and, for synthetic
graphs, a label per node (normal, trap, link farm) to measure waste.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Node labels (synthetic graphs): ordinary page, crawler trap, link farm.
NORMAL = 0
TRAP = 1
FARM = 2
LABEL_NAMES = {NORMAL: "normal", TRAP: "trap", FARM: "farm"}

#: Bump when the on-disk layout of :meth:`Graph.save` changes.
FORMAT_VERSION = 1


@dataclass
class Graph:
    """A directed link graph ready to be crawled by the simulator.

    :param indptr: ``int64[n+1]``; out-links of ``u`` are
        ``indices[indptr[u]:indptr[u+1]]``.
    :param indices: ``int32[m]`` link targets, in page order, distinct per
        page and never the page itself.
    :param host: ``int32[n]`` site of every node (an index into ``host_names``).
    :param host_names: name of every site (the engine's politeness key).
    :param seeds: ``int32`` nodes a crawl starts from.
    :param urls: URL (or path) of every node, or ``None`` for synthetic graphs.
    :param labels: ``int8[n]`` (:data:`NORMAL`, :data:`TRAP`, :data:`FARM`) or
        ``None`` when the graph has no injected traps.
    :param name: short name used in file names and reports.
    :param meta: free-form facts about how the graph was made (JSON-able).
    """

    indptr: np.ndarray
    indices: np.ndarray
    host: np.ndarray
    host_names: list[str]
    seeds: np.ndarray
    urls: list[str] | None = None
    labels: np.ndarray | None = None
    name: str = "graph"
    meta: dict = field(default_factory=dict)

    # -- shape ----------------------------------------------------------------

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.indptr) - 1

    @property
    def m(self) -> int:
        """Number of links."""
        return int(self.indptr[-1])

    def out(self, u: int) -> np.ndarray:
        """Out-links of ``u`` in page order."""
        return self.indices[self.indptr[u] : self.indptr[u + 1]]

    def out_degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def in_degree(self) -> np.ndarray:
        return np.bincount(self.indices, minlength=self.n)

    def key(self, u: int) -> str:
        """Human-readable name of node ``u`` (its URL when known)."""
        return self.urls[u] if self.urls is not None else f"#{u}"

    # -- construction ---------------------------------------------------------

    @classmethod
    def from_edges(
        cls,
        n: int,
        src: np.ndarray,
        dst: np.ndarray,
        *,
        host: np.ndarray,
        host_names: list[str],
        seeds,
        urls: list[str] | None = None,
        labels: np.ndarray | None = None,
        name: str = "graph",
        meta: dict | None = None,
    ) -> Graph:
        """Build from edge arrays listed in page order (the order of
        ``(src, dst)`` pairs with the same ``src`` is kept). Self-links and
        repeated links are dropped, keeping each link's first occurrence."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        keep = src != dst
        src, dst = src[keep], dst[keep]
        if len(src):
            # First occurrence of every (src, dst) pair, then a stable sort by
            # src: links stay in page order.
            _, first = np.unique(src * n + dst, return_index=True)
            first.sort()
            src, dst = src[first], dst[first]
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
        counts = np.bincount(src, minlength=n) if len(src) else np.zeros(n, np.int64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(
            indptr=indptr,
            indices=dst.astype(np.int32),
            host=np.asarray(host, dtype=np.int32),
            host_names=list(host_names),
            seeds=np.asarray(seeds, dtype=np.int32).reshape(-1),
            urls=urls,
            labels=None if labels is None else np.asarray(labels, dtype=np.int8),
            name=name,
            meta=dict(meta or {}),
        )

    @classmethod
    def from_adjacency(
        cls,
        adjacency: dict[str, list[str]],
        seeds: list[str],
        *,
        hosts: dict[str, str] | None = None,
        name: str = "graph",
    ) -> Graph:
        """Small graphs for tests and docs: ``{"A": ["B", "C"], ...}``.

        Every name mentioned becomes a node; ``hosts`` maps names to sites
        (default: one site per node named like the node)."""
        names: dict[str, int] = {}
        for page, links in adjacency.items():
            names.setdefault(page, len(names))
            for link in links:
                names.setdefault(link, len(names))
        for seed in seeds:
            names.setdefault(seed, len(names))
        urls = list(names)
        src = [names[p] for p, links in adjacency.items() for _ in links]
        dst = [names[link] for links in adjacency.values() for link in links]
        host_of = [(hosts or {}).get(u, u) for u in urls]
        host_names = sorted(set(host_of))
        host_ids = {h: i for i, h in enumerate(host_names)}
        return cls.from_edges(
            len(urls),
            np.array(src, dtype=np.int64),
            np.array(dst, dtype=np.int64),
            host=np.array([host_ids[h] for h in host_of]),
            host_names=host_names,
            seeds=[names[s] for s in seeds],
            urls=urls,
            name=name,
        )

    # -- questions ------------------------------------------------------------

    def reachable(self) -> np.ndarray:
        """Boolean mask of nodes reachable from the seeds."""
        return self.bfs_distance() >= 0

    def bfs_distance(self) -> np.ndarray:
        """Hops from the nearest seed (``-1``: unreachable)."""
        dist = np.full(self.n, -1, dtype=np.int32)
        indptr, indices = self.indptr, self.indices
        queue = deque()
        for s in self.seeds.tolist():
            if dist[s] < 0:
                dist[s] = 0
                queue.append(s)
        while queue:
            u = queue.popleft()
            d = dist[u] + 1
            for v in indices[indptr[u] : indptr[u + 1]].tolist():
                if dist[v] < 0:
                    dist[v] = d
                    queue.append(v)
        return dist

    def summary(self) -> dict:
        """Size facts for reports."""
        facts = {
            "nodes": self.n,
            "links": self.m,
            "sites": len(self.host_names),
            "seeds": len(self.seeds),
            "reachable": int(self.reachable().sum()),
        }
        if self.labels is not None:
            for label, label_name in LABEL_NAMES.items():
                if label != NORMAL:
                    facts[f"{label_name}_nodes"] = int((self.labels == label).sum())
        return facts

    # -- persistence ----------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write a compressed ``.npz`` (strings as one newline-joined blob)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {
            "indptr": self.indptr,
            "indices": self.indices,
            "host": self.host,
            "seeds": self.seeds,
            "host_names": _pack_strings(self.host_names),
            "header": np.frombuffer(
                json.dumps(
                    {"format": FORMAT_VERSION, "name": self.name, "meta": self.meta}
                ).encode(),
                dtype=np.uint8,
            ),
        }
        if self.urls is not None:
            arrays["urls"] = _pack_strings(self.urls)
        if self.labels is not None:
            arrays["labels"] = self.labels
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Graph:
        """Read a graph written by :meth:`save`."""
        with np.load(path) as data:
            header = json.loads(data["header"].tobytes().decode())
            if header.get("format") != FORMAT_VERSION:
                raise ValueError(f"{path}: graph format {header.get('format')}, expected {FORMAT_VERSION}")
            return cls(
                indptr=data["indptr"],
                indices=data["indices"],
                host=data["host"],
                host_names=_unpack_strings(data["host_names"]),
                seeds=data["seeds"],
                urls=_unpack_strings(data["urls"]) if "urls" in data else None,
                labels=data["labels"] if "labels" in data else None,
                name=header.get("name", "graph"),
                meta=header.get("meta", {}),
            )


def _pack_strings(strings: list[str]) -> np.ndarray:
    # Newlines cannot occur in URLs we keep (they are stripped by HTML parsing).
    return np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8)


def _unpack_strings(blob: np.ndarray) -> list[str]:
    text = blob.tobytes().decode("utf-8")
    return text.split("\n") if text else []
