"""The add-on's work on each HTML page, part by part, in-process (issue 18, item 4).

    python benchmarks/bench_page_work.py [--root DIR ...] [--pages 400] [--rounds 3] [--base CHECKOUT]

For every page of a documentation tree (default: the PostgreSQL 15 and
Python 3.11 manuals under /usr/share/doc, as ``bench_e2e.py`` crawls them;
at most ``--pages``, evenly spread), it builds the ``HtmlResponse`` Scrapy
would and times, in CPU milliseconds per page, what the add-on does to it:

* ``parse``: Scrapy's own parse (``response.selector``), for scale: the
  spider pays it with or without the add-on;
* ``soft404``: the soft-404 detector's work on the page as
  ``Soft404Middleware`` does it (after the parse above): its page facts
  and shape, and the detector's verdict, shown the pages in turn; a page
  the detector passes unread (``passes_unread``: its directory is settled
  as real pages) costs nothing here (the pages read and refused are
  printed);
* ``visible``: the visible text for SimHash (``tree_text`` of that tree);
* ``signature``: SimHash fingerprint and word-pair sketch of that text.

With ``--base CHECKOUT`` (e.g. ``git worktree add --detach /tmp/base main``)
the same is measured with that checkout's code, each round running both in
turn (separate processes, alternating order), and it says whether both
computed exactly the same facts, shapes, texts and fingerprints on every
page (computed for the digest outside the timed parts, also for the pages
not read): a speed-up must not change a result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITES = ["/usr/share/doc/postgresql-doc-15/html", "/usr/share/doc/python3.11/html"]
PARTS = ("parse", "soft404", "visible", "signature")


def pages_of(root: str, limit: int) -> list[Path]:
    files = sorted(Path(root).rglob("*.html"))
    step = max(1, len(files) // limit)
    return files[::step][:limit]


def measure(root: str, limit: int) -> dict:
    """Run in a child process whose ``sys.path`` starts with the checkout
    measured: CPU ms per page of each part, and a digest of the results."""
    from scrapy.http import HtmlResponse

    from scrapy_aopic.hygiene.simhash import Fingerprinter
    from scrapy_aopic.hygiene.soft404 import Soft404Detector, page_facts, page_shape
    from scrapy_aopic.hygiene.visibletext import tree_text
    from scrapy_aopic.middlewares import traps

    def facts(response):
        reader = getattr(traps.Soft404Middleware, "_facts", None)  # the shared tree, where there is one
        if reader is not None:
            return reader(response)
        return page_facts(response.url, response.text[: traps.SHAPE_CHARS])

    fingerprinter = Fingerprinter()
    files = pages_of(root, limit)
    responses = [HtmlResponse(f"http://127.0.0.1/{path.relative_to(root)}", body=path.read_bytes(),
                              encoding="utf-8") for path in files]  # fmt: skip
    for response in responses:
        response.text  # decoded once, as Scrapy does before any middleware
    digest = hashlib.blake2b(digest_size=16)
    clock = time.process_time
    spent = dict.fromkeys(PARTS, 0.0)
    detector = Soft404Detector()
    # (main before issue 18's fourth pass reads every page)
    passes_unread = getattr(detector, "passes_unread", lambda url: False)
    verdicts = []
    for response in responses:
        start = clock()
        root_node = response.selector.root
        parsed = clock()
        if passes_unread(response.url):
            verdicts.append(None)
        else:
            verdicts.append(detector.observe(response.url, *facts(response)))
        judged = clock()
        text = tree_text(root_node, max_chars=200_000)
        read = clock()
        signature = fingerprinter.signature(text, sketch=True)
        signed = clock()
        spent["parse"] += parsed - start
        spent["soft404"] += judged - parsed
        spent["visible"] += read - judged
        spent["signature"] += signed - read
        page = facts(response)  # (untimed: every page's facts and shape go into the digest)
        shape = page_shape(response.url, page[0])
        digest.update(repr((page[0], sorted(page[1]), shape, text, signature.fingerprint,
                            signature.sketch.tolist(), signature.chars)).encode("utf-8", "surrogatepass"))  # fmt: skip
    return {"ms": {part: spent[part] / len(responses) * 1000 for part in PARTS},
            "pages": len(responses), "digest": digest.hexdigest(),
            "read": sum(verdict is not None for verdict in verdicts),
            "soft404": sum(verdict is True for verdict in verdicts)}  # fmt: skip


def run(tree: Path, root: str, limit: int) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", root, "--pages", str(limit)]
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}).stdout  # fmt: skip
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", help="documentation tree; repeat for several")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout, measured in the same rounds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.pages)))
        return
    trees = {"this": ROOT}
    if args.base is not None:
        trees["base"] = args.base.resolve()
    roots = args.root or [site for site in SITES if Path(site).is_dir()]
    if not roots:
        sys.exit("no documentation tree: apt-get install postgresql-doc-15 python3.11-doc, or pass --root DIR")
    for root in roots:
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for round_number in range(args.rounds):
            for name in (list(trees) if round_number % 2 == 0 else list(reversed(trees))):
                results[name].append(run(trees[name], root, args.pages))
        pages = results["this"][0]["pages"]
        print(f"{root}: {pages} pages, CPU ms per page, median of {args.rounds} rounds")
        print(f"  {'':6}" + "".join(f"{part:>11}" for part in PARTS) + f"{'add-on':>11}")
        for name, runs in results.items():
            ms = {part: statistics.median(r["ms"][part] for r in runs) for part in PARTS}
            print(f"  {name:6}" + "".join(f"{ms[part]:11.3f}" for part in PARTS)
                  + f"{ms['soft404'] + ms['visible'] + ms['signature']:11.3f}"
                  + f"   soft-404: {runs[0]['read']} pages read, {runs[0]['soft404']} refused")  # fmt: skip
        if "base" in results:
            same = {r["digest"] for runs in results.values() for r in runs}
            print(f"  same facts, shapes, texts and fingerprints as base on every page: {'yes' if len(same) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
