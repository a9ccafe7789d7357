"""The bundled demo web site: generated, served on 127.0.0.x, with ground truth.

Typical use::

    from demosite import generate, serve

    site = generate(pages=300, hosts=8, seed=42)
    with serve(site, slow_seconds=10) as served:
        print(served.seeds)              # home pages to start from
        ...                              # crawl served.seeds
        print(served.page_fetch_counts())  # what the crawler fetched
        print(served.captured_pagerank())  # share of true PageRank fetched

``python -m demosite --serve`` serves it from the command line.
"""

from .generator import (
    DUPLICATE_KINDS,
    REAL_KINDS,
    HostInfo,
    Loc,
    Ref,
    Reply,
    Resource,
    Site,
    TrapPattern,
    generate,
    normalize_target,
)
from .reference import ORDERS, ReferenceResult, reference_crawl
from .server import Fetch, ServedSite, serve

__all__ = [
    "DUPLICATE_KINDS",
    "ORDERS",
    "REAL_KINDS",
    "Fetch",
    "HostInfo",
    "Loc",
    "Ref",
    "ReferenceResult",
    "Reply",
    "Resource",
    "ServedSite",
    "Site",
    "TrapPattern",
    "generate",
    "normalize_target",
    "reference_crawl",
    "serve",
]
