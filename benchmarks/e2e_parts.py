"""Extension for ``bench_e2e_parts.py``: thread CPU of named parts inside a crawl.

Enabled with ``-s EXTENSIONS={"e2e_parts.CrawlParts": 0}`` and
``-s E2E_PARTS_FILE=PATH``. It wraps, for this crawl process only, the
functions below with a CPU-time clock (``time.thread_time``: the crawl's
own thread, not the other jobs on the machine), times Python's garbage
collections by generation (``gc.callbacks``: CPU, passes, objects
collected), and at close writes one JSON object ``{part: [CPU ms, calls]}``
(a part that ran inside another timed part, or a collection that did, is
also written as ``"PART [inside: OUTER]"``: the near-duplicate middleware
is the first to ask for ``response.selector``, so Scrapy's parse, which
plain Scrapy pays in the spider, runs inside it)
plus the process CPU since the crawler was built and, under the key
``"gc census"``, the collector's view of the heap: the objects it tracks at
close (in total and in the oldest generation) and the most numerous tracked
types (with ``E2E_PARTS_CENSUS``, also before every full pass). Wrapping
costs about 1 µs a call: these are per-page functions, so the crawl's
figures move by about 0.01 ms a page.
"""

from __future__ import annotations

import collections
import gc
import json
import sys
import time
from pathlib import Path

from scrapy import signals
from scrapy.exceptions import NotConfigured

#: (module, class or None, function, part): what is timed, where it exists.
PARTS = [
    ("parsel.selector", None, "create_root_node", "parse (Scrapy's selector)"),
    ("scrapy_aopic.middlewares.simhash", "SimhashDedupMiddleware", "process_response", "near-dup: whole middleware"),
    ("scrapy_aopic.middlewares.simhash", None, "body_checksum", "near-dup: body checksum"),
    ("scrapy_aopic.middlewares.simhash", None, "tree_text", "near-dup: visible text"),
    ("scrapy_aopic.middlewares.simhash", "Fingerprinter", "signature", "near-dup: signature"),
    ("scrapy_aopic.middlewares.simhash", "NearDuplicateIndex", "find", "near-dup: index find"),
    ("scrapy_aopic.middlewares.simhash", "SimhashDedupMiddleware", "_add_original", "near-dup: index add"),
    ("scrapy_aopic.middlewares.traps", "Soft404Middleware", "process_response", "soft-404 middleware"),
    ("scrapy_aopic.frontier", "Frontier", "visit", "frontier: a page's links"),
]

#: With ``E2E_PARTS_LINKS``, the steps of the frontier's link work too, each
#: timed per call (per link for most: the wrappers add about 1 µs a call, 0.02
#: ms a PostgreSQL page each, to the frontier's total; read that total from a
#: run without them). Wrapped on their classes (static and class methods
#: kept as such), before the crawl builds the frontier and the middlewares
#: that bind them (extensions come first).
LINK_PARTS = [
    ("scrapy_aopic.hygiene.canonical", "Canonicalizer", "__call__", "links: canonical key (memo)"),
    ("scrapy_aopic.frontier.linkfilters", "LinkFilterChain", "refusal", "links: link filters (all)"),
    ("scrapy_aopic.frontier.offsite", "OffsiteLinkFilter", "__call__", "links: filter offsite"),
    ("scrapy_aopic.middlewares.traps", "TrapGuardMiddleware", "link_filter", "links: filter traps"),
    ("scrapy_aopic.hygiene.url_patterns", "DuplicatePatterns", "link_filter", "links: filter dup patterns"),
    ("scrapy_aopic.store.memory", "MemoryStore", "knows", "links: store knows"),
    ("scrapy_aopic.frontier", "Frontier", "_request_data", "links: encode new request"),
    ("scrapy_aopic.frontier", "Frontier", "_link_host", "links: link host"),
    ("scrapy_aopic.frontier.ledger", "Ledger", "visit", "links: ledger visit (credit)"),
    ("scrapy_aopic.frontier", "Frontier", "_count_refusal", "links: count refusal"),
    ("scrapy.signalmanager", "SignalManager", "send_catch_log", "signals sent (all, any caller)"),
]


class CrawlParts:
    def __init__(self, path: str, census: bool = False, links: bool = False):
        self.path = Path(path)
        # With E2E_PARTS_CENSUS, every full pass first counts what it is
        # about to traverse (outside its timing, not outside the crawl's CPU):
        # the heap at close has lost the pending requests and responses in
        # flight, which the passes during the crawl visit.
        self.census = census
        self.full_passes: list[int] = []
        self.largest: collections.Counter = collections.Counter()
        self.spent: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self._gc_start = 0.0
        self.active: list[str] = []  # the timed parts running, innermost last
        self.collected: collections.Counter = collections.Counter()
        import parsel.selector  # noqa: F401  (the spider's first response imports it anyway)

        for module_name, owner_name, name, part in PARTS + (LINK_PARTS if links else []):
            # Only what the crawl imported itself (the add-on's middlewares
            # are imported as it sets the crawl up, before extensions): with
            # near-duplicates off, numpy must stay unimported.
            module = sys.modules.get(module_name)
            if module is None:
                continue
            owner = getattr(module, owner_name) if owner_name else module
            if hasattr(owner, name):
                original = owner.__dict__.get(name) if isinstance(owner, type) else None
                if isinstance(original, (staticmethod, classmethod)):
                    wrapped = type(original)(self._timed(original.__func__, part))
                else:
                    wrapped = self._timed(getattr(owner, name), part)
                setattr(owner, name, wrapped)
        gc.callbacks.append(self._gc)
        self.started = time.process_time()

    def _timed(self, function, part):
        spent, calls, clock, active = self.spent, self.calls, time.thread_time, self.active

        def timed(*args, **kwargs):
            active.append(part)
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                used = clock() - start
                active.pop()
                spent[part] += used
                calls[part] += 1
                if active and active[-1] != part:
                    # Also counted inside the part that called it: "the
                    # rest" of a part is its time minus these.
                    inside = f"{part} [inside: {active[-1]}]"
                    spent[inside] += used
                    calls[inside] += 1

        return timed

    def _gc(self, phase, info):
        if phase == "start":
            if self.census and info["generation"] == 2:
                self._census_pass()
            self._gc_start = time.thread_time()
        else:
            part = f"gc generation {info['generation']}"
            used = time.thread_time() - self._gc_start
            self.spent[part] += used
            self.calls[part] += 1
            if self.active:  # a collection inside a timed part counts in its time
                inside = f"gc [inside: {self.active[-1]}]"
                self.spent[inside] += used
                self.calls[inside] += 1
            self.collected[part] += info["collected"]

    @classmethod
    def from_crawler(cls, crawler):
        path = crawler.settings.get("E2E_PARTS_FILE")
        if not path:
            raise NotConfigured("E2E_PARTS_FILE is not set")
        extension = cls(path, crawler.settings.getbool("E2E_PARTS_CENSUS"), crawler.settings.getbool("E2E_PARTS_LINKS"))
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        if crawler.settings.getbool("E2E_PARTS_GC_FREEZE"):
            # A measurement, not a product change: what every setup (plain
            # Scrapy too) would save if the objects alive at start-up were
            # left out of the collector's passes.
            crawler.signals.connect(lambda spider: gc.freeze(), signal=signals.spider_opened, weak=False)
        return extension

    def spider_closed(self, spider):
        gc.callbacks.remove(self._gc)
        parts = {part: [self.spent[part] * 1000, self.calls[part]] for part in self.spent}
        parts["process CPU from the crawler's start"] = [(time.process_time() - self.started) * 1000, 1]
        parts["gc census"] = self._census()
        self.path.write_text(json.dumps(parts))

    def _census_pass(self) -> None:
        objects = gc.get_objects()
        self.full_passes.append(len(objects))
        if len(objects) >= max(self.full_passes):
            self.largest = _types(objects)
        del objects

    def _census(self) -> dict:
        """What the collector traverses at close: a full pass visits every
        tracked object, so the types with most instances are what makes it
        dear. Taken after a full collection, so that garbage waiting for the
        next pass is not counted."""
        gc.collect()
        objects = gc.get_objects()
        census = {
            "tracked": len(objects),
            "oldest generation": len(gc.get_objects(2)),
            "collected": dict(self.collected),
            "types": dict(_types(objects).most_common(60)),
            "full passes": self.full_passes,
            "types at the largest full pass": dict(self.largest.most_common(60)),
        }
        del objects
        return census


def _types(objects) -> collections.Counter:
    return collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
