"""Memory the re-crawl hook keeps for a server's ETag / Last-Modified
values, without a bound (``AOPIC_RECRAWL_VALIDATOR_MAX_BYTES = 0``, as
before it existed) and with the default (256 bytes), side by side.

    .venv/bin/python benchmarks/bench_validators.py [--pages 200]

Every page of a hostile site sends an ETag of the given size: 12 KB (under
the ~16 KB a header line that Scrapy's HTTP/1.1 client passes) and 1 MB
(what another download handler or a middleware may hand over). Figures:
memory still held after the pages (tracemalloc) and the size of the state
saved in ``JOBDIR/aopic-recrawl.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import tracemalloc

from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_aopic.recrawl.hook import RecrawlHook


def measure(pages: int, etag_bytes: int, bound: int) -> tuple[float, int, int]:
    """``(MB held, bytes of saved state, values dropped)``."""
    crawler = get_crawler(settings_dict={"AOPIC_RECRAWL": True, "AOPIC_RECRAWL_VALIDATOR_MAX_BYTES": bound})
    hook = RecrawlHook.from_crawler(crawler)
    etag = '"' + "e" * (etag_bytes - 2) + '"'
    tracemalloc.start()
    for i in range(pages):
        url = f"http://hostile.example/{i}"
        hook.observe_response(url, HtmlResponse(url, body=f"<p>page {i}</p>".encode(), headers={"ETag": etag}))
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = len(json.dumps(hook.to_state()))
    return held / 1e6, state, crawler.stats.get_value("aopic/recrawl/validators_dropped", 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("scrapy_aopic").setLevel(logging.ERROR)  # the one warning per run
    print(f"{args.pages} pages; memory held and state saved, no bound -> default bound (256 bytes)")
    for size in (12 * 1024, 1 << 20):
        before = measure(args.pages, size, 0)
        after = measure(args.pages, size, 256)
        print(f"ETag {size:>8,} bytes: held {before[0]:8.2f} MB -> {after[0]:6.2f} MB; "
              f"state {before[1]:>11,} -> {after[1]:>7,} bytes; dropped {before[2]} -> {after[2]}")


if __name__ == "__main__":
    main()
