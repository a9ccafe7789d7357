"""Learned duplicate URL patterns: stop fetching URLs that keep being copies.

When near-duplicates keep arriving from URLs that differ only in one query
parameter's value (``?sessionid=…``, ``?ts=…``, ``?print=1`` across articles)
or in the numbers of their path (a counter, a calendar date), the next URL of
that shape is most likely another copy (``docs/duplicates.rst``). :class:`DuplicatePatterns`
keeps, for every URL, a few *signatures*, each the URL with one variable part
replaced by a wildcard:

* ``q:`` signatures, one per query parameter: the URL with that parameter's
  value replaced by ``{*}`` (``http://h/a?id=7&print={*}``,
  ``http://h/a?id={*}&print=1``);
* a ``p:`` signature when the path holds digits: every run of digits
  replaced by ``{n}`` (``http://h/calendar/{n}/{n}?view=day``).

Duplicates are counted per signature exactly; originals (pages that were not
duplicates) in a fixed-size count-min sketch, so memory does not grow with the
crawl (it can only over-count originals, which makes learning more cautious).
A signature becomes a learned pattern once it has at least ``min_duplicates``
duplicates and duplicates make at least ``min_share`` of the pages seen under
it. URLs matching a learned pattern are then refused before they are
fetched — except the originals the duplicates were copies of.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

import numpy as np

__all__ = ["DuplicatePatterns", "url_signatures"]

_DIGITS = re.compile(r"\d+")
#: Longest query considered: URLs with more parameters get no ``q:`` signatures.
MAX_QUERY_PARAMS = 12


def url_signatures(url: str) -> list[str]:
    """The pattern signatures of canonical ``url`` (see the module docstring).

    >>> url_signatures("http://h.example/a/2024?id=7&print=1")
    ['p:http://h.example/a/{n}?id=7&print=1', 'q:http://h.example/a/2024?id={*}&print=1', 'q:http://h.example/a/2024?id=7&print={*}']
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    base = f"{parts.scheme}://{parts.netloc}"
    path, query = parts.path or "/", parts.query
    signatures = []
    if _DIGITS.search(path):
        generic = _DIGITS.sub("{n}", path)
        signatures.append(f"p:{base}{generic}?{query}" if query else f"p:{base}{generic}")
    if query:
        params = query.split("&")
        if len(params) <= MAX_QUERY_PARAMS:
            for i, param in enumerate(params):
                name = param.split("=", 1)[0]
                wildcarded = params[:i] + [f"{name}={{*}}"] + params[i + 1 :]
                signatures.append(f"q:{base}{path}?{'&'.join(wildcarded)}")
    return signatures


def _host_of(url: str) -> str:
    """The ``scheme://netloc`` prefix of ``url`` (fast, no parsing)."""
    end = url.find("/", url.find("//") + 2)
    return url if end < 0 else url[:end]


class DuplicatePatterns:
    """Learns URL patterns of near-duplicates and refuses URLs matching them.

    :param min_duplicates: duplicates a signature needs before it is learned.
    :param min_share: smallest share of duplicates among the pages seen under
        a signature (duplicates and originals) for it to be learned.
    :param sketch_width: counters per row of the originals' count-min sketch
        (4 rows of 32-bit counters: ``16 * sketch_width`` bytes).
    """

    SKETCH_ROWS = 4

    def __init__(self, min_duplicates: int = 5, min_share: float = 0.8, sketch_width: int = 1 << 18):
        if min_duplicates < 1:
            raise ValueError(f"min_duplicates must be >= 1, got {min_duplicates!r}")
        if not 0.0 < min_share <= 1.0:
            raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")
        self.min_duplicates = min_duplicates
        self.min_share = min_share
        self._originals = np.zeros((self.SKETCH_ROWS, sketch_width), dtype=np.uint32)
        self._duplicates: dict[str, int] = {}
        self._learned: dict[str, int] = {}  # pattern -> duplicates seen when learned
        self._learned_hosts: set[str] = set()
        self._exempt: set[str] = set()  # originals of duplicates: never refused

    # -- counting ---------------------------------------------------------------

    def _cells(self, signature: str) -> tuple[np.ndarray, np.ndarray]:
        digest = hashlib.blake2b(signature.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        columns = np.frombuffer(digest, dtype=np.uint32).astype(np.intp) % self._originals.shape[1]
        return np.arange(self.SKETCH_ROWS), columns

    def originals_under(self, signature: str) -> int:
        """Originals counted under ``signature`` (an upper bound)."""
        return int(self._originals[self._cells(signature)].min())

    def duplicates_under(self, signature: str) -> int:
        """Duplicates counted under ``signature``."""
        return self._duplicates.get(signature, 0)

    def record_original(self, url: str) -> None:
        """Canonical ``url`` was fetched and is not a duplicate."""
        for signature in url_signatures(url):
            rows, columns = self._cells(signature)
            self._originals[rows, columns] += 1

    def record_duplicate(self, url: str, original: str) -> list[str]:
        """Canonical ``url`` was a (near-)duplicate of ``original``; returns
        the patterns this duplicate made learned (usually none)."""
        self._exempt.add(original)
        learned = []
        for signature in url_signatures(url):
            count = self._duplicates.get(signature, 0) + 1
            self._duplicates[signature] = count
            if signature in self._learned or count < self.min_duplicates:
                continue
            if count / (count + self.originals_under(signature)) >= self.min_share:
                self._learned[signature] = count
                self._learned_hosts.add(_host_of(signature[2:]))
                learned.append(signature)
        return learned

    # -- refusing ---------------------------------------------------------------

    @property
    def learned(self) -> list[str]:
        """The learned patterns, in the order they were learned."""
        return list(self._learned)

    def match(self, url: str) -> str | None:
        """The learned pattern canonical ``url`` matches, if any (originals
        of known duplicates never match)."""
        if not self._learned or _host_of(url) not in self._learned_hosts or url in self._exempt:
            return None
        for signature in url_signatures(url):
            if signature in self._learned:
                return signature
        return None

    def link_filter(self, url: str, canonical: str, request, depth: int) -> str | None:
        """A :attr:`Frontier.link_filters <scrapy_aopic.frontier.Frontier.link_filters>`
        rule: ``"duplicate_pattern"`` for URLs matching a learned pattern."""
        return "duplicate_pattern" if self.match(canonical) else None

    # -- persistence -------------------------------------------------------------

    def state(self) -> dict:
        """What :meth:`restore` needs, JSON-able except the sketch (numpy)."""
        return {
            "duplicates": self._duplicates,
            "learned": self._learned,
            "exempt": sorted(self._exempt),
            "sketch": self._originals,
        }

    def restore(self, state: dict) -> None:
        """Load a :meth:`state` written by an earlier run."""
        sketch = np.asarray(state["sketch"], dtype=np.uint32)
        if sketch.shape == self._originals.shape:
            self._originals = sketch.copy()
        self._duplicates = dict(state["duplicates"])
        self._learned = dict(state["learned"])
        self._learned_hosts = {_host_of(p[2:]) for p in self._learned}
        self._exempt = set(state["exempt"])

    def dumps(self) -> str:
        """The JSON part of :meth:`state`."""
        state = self.state()
        del state["sketch"]
        return json.dumps(state)

    def loads(self, text: str, sketch: Iterable | None = None) -> None:
        """Restore from :meth:`dumps` output and a sketch array."""
        state = json.loads(text)
        state["sketch"] = self._originals if sketch is None else sketch
        self.restore(state)
