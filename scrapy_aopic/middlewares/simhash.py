"""Downloader middleware: exact and near-duplicate pages (``docs/duplicates.rst``)."""

from __future__ import annotations

import json
import logging
import os
from array import array
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse

from .. import settings as aopic_settings
from .. import signals as aopic_signals
from ..frontier import Frontier
from ..meta import DEDUP, DUPLICATE_DISTANCE, DUPLICATE_OF, KEY
from ..hygiene.simhash import FINGERPRINT_MODES, Fingerprinter, Signature, body_checksum
from ..hygiene.visibletext import may_be_marked, tree_text, visible_text
from ..hygiene.simhash_index import NearDuplicateIndex
from ..hygiene.url_patterns import DuplicatePatterns

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: File in ``JOBDIR`` holding the index between runs.
STATE_FILE = Path("aopic", "simhash.npz")
_ACTIONS = ("flag", "drop")
#: Characters of visible text read per page: the start of a huge page is
#: enough to fingerprint it, and bounds the work one response can cause.
MAX_TEXT_CHARS = 200_000


class UrlTable:
    """Append-only list of URLs stored as one UTF-8 blob plus offsets
    (about ``len(url) + 8`` bytes each, not a Python object per URL)."""

    def __init__(self):
        self._blob = bytearray()
        self._ends = array("Q")

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> str:
        start = self._ends[i - 1] if i > 0 else 0
        return self._blob[start : self._ends[i]].decode("utf-8", "surrogatepass")

    def append(self, url: str) -> int:
        """Store ``url``; returns its position."""
        self._blob += url.encode("utf-8", "surrogatepass")
        self._ends.append(len(self._blob))
        return len(self._ends) - 1

    @property
    def nbytes(self) -> int:
        return len(self._blob) + self._ends.itemsize * len(self._ends)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.frombuffer(bytes(self._blob), dtype=np.uint8), np.array(self._ends, dtype=np.uint64)

    @classmethod
    def from_arrays(cls, blob: np.ndarray, ends: np.ndarray) -> UrlTable:
        table = cls()
        table._blob = bytearray(blob.tobytes())
        table._ends = array("Q", ends.astype(np.uint64).tolist())
        return table


class SimhashDedupMiddleware:
    """Flags (or drops) exact and near-duplicate HTML pages and gives their
    cash to the original (``docs/duplicates.rst``).

    For every 2xx :class:`~scrapy.http.HtmlResponse`:

    1. a 64-bit checksum of the body: a page byte-identical to an original
       is an *exact* duplicate;
    2. otherwise the visible text (boilerplate removed,
       ``AOPIC_SIMHASH_BOILERPLATE``) and its 64-bit SimHash
       (``AOPIC_SIMHASH_MODE``); a page within ``AOPIC_SIMHASH_DISTANCE``
       bits of an original, confirmed by a MinHash sketch of their word
       pairs (``AOPIC_SIMHASH_CONFIRM``; up to ``AOPIC_SIMHASH_FAR_DISTANCE``
       bits with the stricter ``AOPIC_SIMHASH_FAR_CONFIRM``), is a *near*
       duplicate. Pages with
       less than ``AOPIC_SIMHASH_MIN_CHARS`` word characters are not
       compared.

    A page that is neither is an original: its checksum, fingerprint and
    sketch are indexed under its canonical URL. A duplicate is never indexed, so a
    chain of small changes cannot drift away from the original.

    For a duplicate, the request's cash goes to the original's account and
    its URL becomes an alias of it (``frontier.transfer``), it is counted in
    ``aopic/duplicates/exact`` or ``aopic/duplicates/near``, and then, by
    ``AOPIC_DUPLICATE_ACTION``, flagged in
    ``response.meta["aopic_duplicate_of"]`` (the frontier does not follow
    its links) or dropped with ``IgnoreRequest``.

    URL patterns that keep producing duplicates are learned
    (``AOPIC_DUPLICATE_PATTERNS``): from then on, links matching them are
    refused by a frontier link filter (``aopic/refused/duplicate_pattern``),
    and requests already queued are refused before they are fetched
    (``aopic/duplicates/pattern_refused``), their cash going to lambda: by
    the frontier as they are leased (``Frontier.lease_refusals``, never
    reaching Scrapy's downloader), or here for those leased before the
    pattern was learned.

    Requests with ``meta["aopic_dedup"] = False`` are left alone. Stats:
    ``aopic/duplicates/fingerprinted``, ``too_short``, ``unconfirmed``
    (candidates within the distance refused by their sketch),
    ``unparsable``, ``dropped``, and at close ``index_size`` and
    ``patterns``.
    """

    def __init__(self, crawler: Crawler):
        settings = crawler.settings
        if not aopic_settings.get_bool(settings, "AOPIC_SIMHASH_ENABLED"):
            raise NotConfigured("AOPIC_SIMHASH_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.frontier = Frontier.from_crawler(crawler)
        self.distance = aopic_settings.get_int(settings, "AOPIC_SIMHASH_DISTANCE")
        self.action = aopic_settings.get(settings, "AOPIC_DUPLICATE_ACTION")
        if self.action not in _ACTIONS:
            raise ValueError(f"AOPIC_DUPLICATE_ACTION must be one of {_ACTIONS}, got {self.action!r}")
        self.mode = aopic_settings.get(settings, "AOPIC_SIMHASH_MODE")
        if self.mode not in FINGERPRINT_MODES:
            raise ValueError(f"AOPIC_SIMHASH_MODE must be one of {FINGERPRINT_MODES}, got {self.mode!r}")
        self.boilerplate = aopic_settings.get_bool(settings, "AOPIC_SIMHASH_BOILERPLATE")
        self.min_chars = aopic_settings.get_int(settings, "AOPIC_SIMHASH_MIN_CHARS")
        #: host -> [pages fingerprinted, pages too short (see _count_host), its
        #: last pages in a row whose values may mark boilerplate (see _visible_text)]
        self._host_counts: dict[str, list[int]] = {}
        self.min_similarity = aopic_settings.get_float(settings, "AOPIC_SIMHASH_CONFIRM")
        self.fingerprinter = Fingerprinter(self.mode)
        self.max_length_ratio = aopic_settings.get_float(settings, "AOPIC_SIMHASH_MAX_LENGTH_RATIO")
        self.far_distance = aopic_settings.get_int(settings, "AOPIC_SIMHASH_FAR_DISTANCE")
        self.far_similarity = aopic_settings.get_float(settings, "AOPIC_SIMHASH_FAR_CONFIRM")
        self.index = self._new_index()
        self.urls = UrlTable()  # URL id -> canonical URL of an original
        self.url_of_fingerprint = array("Q")  # index id -> URL id
        self.checksums: dict[int, int] = {}  # body checksum -> URL id
        self.patterns: DuplicatePatterns | None = None
        if aopic_settings.get_bool(settings, "AOPIC_DUPLICATE_PATTERNS"):
            self.patterns = DuplicatePatterns(
                min_duplicates=aopic_settings.get_int(settings, "AOPIC_DUPLICATE_PATTERN_MIN"),
                min_share=aopic_settings.get_float(settings, "AOPIC_DUPLICATE_PATTERN_SHARE"),
            )
            self.frontier.link_filters.register(self.patterns.link_filter)
            self.frontier.lease_refusals.append(self._refuse_leased)
        jobdir = settings.get("JOBDIR")
        persist = aopic_settings.get_bool(settings, "AOPIC_SIMHASH_PERSIST")
        self.state_path = Path(jobdir, STATE_FILE) if jobdir and persist else None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self._jobdir_refused, signal=aopic_signals.jobdir_refused)

    def _jobdir_refused(self, reason: str) -> None:
        self.state_path = None  # neither loaded nor saved over

    def _new_index(self) -> NearDuplicateIndex:
        return NearDuplicateIndex(
            k=self.distance,
            min_similarity=self.min_similarity,
            max_length_ratio=self.max_length_ratio,
            far_k=self.far_distance,
            far_similarity=self.far_similarity,
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashDedupMiddleware:
        return cls(crawler)

    # -- requests: refuse URLs of learned patterns --------------------------------

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        # Most are refused by the frontier as they are leased
        # (_refuse_leased); this catches those leased before their pattern
        # was learned.
        pattern = self._refuse(request)
        if pattern is not None:
            raise IgnoreRequest(f"URL matches learned duplicate pattern {pattern[2:]}")
        return None

    def _refuse_leased(self, request: Request) -> bool:
        """``Frontier.lease_refusals`` hook: refused before Scrapy sees it."""
        return self._refuse(request) is not None

    def _refuse(self, request: Request) -> str | None:
        """The learned pattern ``request`` matches, its lease settled as
        refused; ``None`` (nothing done) otherwise."""
        if self.patterns is None or request.meta.get(DEDUP) is False:
            return None
        if self.frontier.lease_of(request) is None:
            return None  # not an AOPIC link (API call, form): never refused here
        key = self._key(request.meta.get(KEY), request.url)
        pattern = self.patterns.match(key)
        if pattern is None:
            return None
        self.frontier.fail(request, "duplicate_pattern", refuse=True)
        self.stats.inc_value("aopic/duplicates/pattern_refused")
        return pattern

    # -- responses: fingerprint, compare, settle -----------------------------------

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        if (
            not isinstance(response, HtmlResponse)
            or not 200 <= response.status < 300
            or request.meta.get(DEDUP) is False
        ):
            return response
        key = self._key(request.meta.get(KEY), response.url)
        checksum = body_checksum(response.body)
        original_id = self.checksums.get(checksum)
        if original_id is not None:
            original = self.urls[original_id]
            if original == key:
                return response  # the same page again, unchanged (a re-crawl)
            return self._duplicate(request, response, key, original, "exact", 0)
        host = Frontier.host_of(request)
        counts = self._host_counts.get(host)
        if counts is None:
            counts = self._host_counts[host] = [0, 0, 0]
        try:
            text = self._visible_text(response, counts)
        except Exception:  # a decoding or parser bug must not lose the page
            logger.debug("aopic: no visible text for %s", response.url, exc_info=True)
            self.stats.inc_value("aopic/duplicates/unparsable")
            return response
        signature = self.fingerprinter.signature(text, sketch=self.min_similarity > 0)
        self.stats.inc_value("aopic/duplicates/fingerprinted")
        too_short = signature.chars < self.min_chars
        self._count_host(host, counts, too_short)
        if too_short:
            self.stats.inc_value("aopic/duplicates/too_short")
            self.checksums[checksum] = self._add_original(key, None)
            return response
        rejected = self.index.rejected
        match = self.index.find(signature.fingerprint, signature.sketch, signature.chars)
        if self.index.rejected > rejected:
            self.stats.inc_value("aopic/duplicates/unconfirmed", self.index.rejected - rejected)
        if match is not None:
            original = self.urls[self.url_of_fingerprint[match[0]]]
            if original != key:
                return self._duplicate(request, response, key, original, "near", match[1])
            return response  # the same URL again (a re-crawl): already indexed
        url_id = self._add_original(key, signature)
        self.checksums.setdefault(checksum, url_id)
        return response

    #: Pages of a host seen before its share of "too short" pages is judged.
    TOO_SHORT_SAMPLE = 20

    def _count_host(self, host: str, counts: list[int], too_short: bool) -> None:
        """Say once per host when most of its pages are too short to compare:
        near-duplicate detection is then silently off there otherwise."""
        counts[0] += 1
        counts[1] += too_short
        if counts[0] == self.TOO_SHORT_SAMPLE and counts[1] * 2 > counts[0]:
            self.stats.inc_value("aopic/duplicates/too_short_hosts")
            logger.warning(
                "aopic: %d of the first %d pages of %s have less than %d characters of visible "
                "text (AOPIC_SIMHASH_MIN_CHARS) after boilerplate removal: near-duplicates are not "
                "detected there. If its template hides the content, set AOPIC_SIMHASH_BOILERPLATE = "
                "False (said once per host)",
                counts[1], counts[0], host, self.min_chars,
            )

    #: A host's pages in a row whose class, id or role values may mark
    #: boilerplate, after which its next pages are walked without asking
    #: (``tree_text``'s ``marked``), and how often one is asked again.
    MARKED_RUN = 4
    MARKED_RECHECK = 16

    def _visible_text(self, response: HtmlResponse, counts: list[int]) -> str:
        """The page's visible text, read from the tree Scrapy's selector
        parses (and caches on the response): the spider's ``response.css``
        then reuses it, one parse per page instead of two.

        Whether a page's values may mark boilerplate chooses how its text is
        computed (the Python walk, or the stylesheet where no value marks),
        never what it is: the walk writes the same text on any page. Asking
        reads every class value of the page, and more if none marks (0.08 ms
        a page of the PostgreSQL manual, 0.6 of Python's, whose highlighted
        code carries thousands); a site's template marks all its pages or
        none, so once a host's last ``MARKED_RUN`` pages were marked, its
        pages are walked without asking, one in ``MARKED_RECHECK`` asked
        again (an unmarked answer starts the run over: an unmarked page
        walked costs about what asking saves, 0.09 ms more than the
        stylesheet on PostgreSQL's pages stripped of their values)."""
        try:
            root = response.selector.root
        except Exception:  # text lxml cannot parse at all: the spider will fail too
            root = None
        if root is None or not hasattr(root, "iter"):
            return visible_text(response.text, boilerplate=self.boilerplate, max_chars=MAX_TEXT_CHARS)
        marked = None
        if self.boilerplate:
            run = counts[2]
            if run < self.MARKED_RUN or run % self.MARKED_RECHECK == 0:
                marked = may_be_marked(root)
            else:
                marked = True
            counts[2] = run + 1 if marked else 0
        return tree_text(root, boilerplate=self.boilerplate, max_chars=MAX_TEXT_CHARS, marked=marked)

    def _key(self, key: str | None, url: str) -> str:
        if key:
            return key
        return self.frontier.canonicalize(url) or url

    def _add_original(self, key: str, signature: Signature | None) -> int:
        """Index an original page; returns its URL id. Pages too short to
        compare (no ``signature``) get a URL id for their checksum only."""
        if self.patterns is not None:
            self.patterns.record_original(key)
        url_id = self.urls.append(key)
        if signature is not None:
            self.index.add(signature.fingerprint, signature.sketch, signature.chars)
            self.url_of_fingerprint.append(url_id)
        return url_id

    def _duplicate(self, request: Request, response: Response, key: str, original: str, kind: str, distance: int):
        request.meta[DUPLICATE_OF] = original
        request.meta[DUPLICATE_DISTANCE] = int(distance)
        self.stats.inc_value(f"aopic/duplicates/{kind}")
        self.frontier.transfer(request, original, None)  # counted above
        logger.debug("aopic: %s is a%s duplicate of %s", key, "n exact" if kind == "exact" else " near", original)
        if self.patterns is not None:
            for pattern in self.patterns.record_duplicate(key, original):
                self.stats.inc_value("aopic/duplicates/patterns_learned")
                logger.info(
                    "aopic: learned duplicate URL pattern %s (%d duplicates, at most %d originals); "
                    "matching URLs are refused from now on",
                    pattern[2:],
                    self.patterns.duplicates_under(pattern),
                    self.patterns.originals_under(pattern),
                )
        if self.action == "drop":
            self.stats.inc_value("aopic/duplicates/dropped")
            raise IgnoreRequest(f"duplicate of {original}")
        return response

    # -- persistence ------------------------------------------------------------------

    def spider_opened(self, spider: Spider) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        try:
            self._load(self.state_path)
        except Exception:  # a damaged file must not stop the crawl
            logger.warning("aopic: could not load %s; starting with an empty index",
                           self.state_path, exc_info=True)  # fmt: skip
            return
        logger.info("aopic: loaded %d page fingerprints from %s", len(self.index), self.state_path)

    def spider_closed(self, spider: Spider) -> None:
        self.stats.set_value("aopic/duplicates/index_size", len(self.index))
        if self.patterns is not None:
            self.stats.set_value("aopic/duplicates/patterns", len(self.patterns.learned))
        if self.state_path is not None:
            self._save(self.state_path)

    def _save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        blob, ends = self.urls.arrays()
        checksums = np.array(list(self.checksums.items()), dtype=np.uint64).reshape(-1, 2)
        meta = {"mode": self.mode, "distance": self.distance}
        patterns = self.patterns.dumps() if self.patterns is not None else "null"
        sketch = self.patterns.state()["sketch"] if self.patterns is not None else np.zeros(0)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as out:
            np.savez(out, **self.index.arrays(),
                     url_of_fingerprint=np.array(self.url_of_fingerprint, dtype=np.uint64),
                     url_blob=blob, url_ends=ends,
                     checksums=checksums, meta=np.array(json.dumps(meta)),
                     patterns=np.array(patterns), sketch=sketch)  # fmt: skip
        os.replace(tmp, path)

    def _load(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("mode") != self.mode:
                logger.info("aopic: %s was made in SimHash mode %r, not %r: not loaded",
                            path, meta.get("mode"), self.mode)  # fmt: skip
                return
            index = self._new_index()
            index.load_arrays(data["fingerprints"], data["sketches"],
                              data["chars"] if "chars" in data.files else None)  # fmt: skip
            urls = UrlTable.from_arrays(data["url_blob"], data["url_ends"])
            url_of_fingerprint = array("Q", data["url_of_fingerprint"].tolist())
            checksums = {int(c): int(i) for c, i in data["checksums"].tolist()}
            patterns = str(data["patterns"])
            sketch = data["sketch"]
        self.index, self.urls, self.checksums = index, urls, checksums
        self.url_of_fingerprint = url_of_fingerprint
        if self.patterns is not None and patterns != "null":
            self.patterns.loads(patterns, sketch)
