"""Soft-404 rules on real documentation trees: pages wrongly refused (issue 16, item 3).

A documentation tree has no soft 404s, so every page the soft-404 detector
calls a soft 404, and every real page in a directory it closes, is a false
refusal. This replays the trees of ``bench_visibletext_corpus.py`` (Debian
documentation packages of many generators, unpacked in its cache; run that
benchmark once first) through :class:`~scrapy_aopic.hygiene.soft404.Soft404Detector`,
with no network: each tree is read as a site ``http://<package>/``, its
pages (not its meta-refresh redirect stubs, nor byte-identical copies of a page
already shown: duplicates, which the near-duplicate detector folds) shown to the detector in crawl order (breadth-first from its index
pages, following its links) and in two random orders, up to ``--pages`` a
tree. Columns: ``AOPIC_TRAP_SOFT404_PAGES`` and whether pages of an error
shape pass in a directory of real pages (``AOPIC_TRAP_SOFT404_SPARE_REAL_DIRS``);
the total row sums every tree and order.
The linux-doc, openjdk and cppreference trees are held out (not in the cache).

    .venv/bin/python benchmarks/bench_soft404_corpus.py [--pages 3000] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
from collections import deque
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_visibletext_corpus import DEFAULT_CACHE, GENERATORS, REDIRECT  # noqa: E402
from scrapy_aopic.hygiene.canonical import canonical_url  # noqa: E402
from scrapy_aopic.hygiene.soft404 import Soft404Detector, page_facts, parent_of  # noqa: E402

#: (column, AOPIC_TRAP_SOFT404_PAGES, spare pages in directories of real pages)
SETTINGS = [("pages 3, no spare", 3, False), ("pages 3, spare", 3, True), ("pages 2, spare", 2, True)]


def trees(cache: Path) -> list[tuple[str, Path]]:
    seen, out = set(), []
    for gen in GENERATORS:
        for package, sub, _skip in gen.trees:
            root = cache / "x" / package / sub
            if (package, sub) not in seen and root.is_dir():
                seen.add((package, sub))
                out.append((f"{package}/{sub.rsplit('/', 1)[-1]}", root))
    return out


def crawl_order(root: Path, host: str, limit: int) -> list[tuple[str, Path]]:
    """Pages breadth-first from the tree's index pages, following links (as
    a crawl would reach them), then the rest of the files in path order."""
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*.html") if p.is_file()}
    starts = [r for r in sorted(files, key=lambda r: (r.count("/"), r)) if r.endswith("index.html")][:1] or sorted(files)[:1]
    order, seen, queue = [], set(starts), deque(starts)
    while queue and len(order) < limit:
        rel = queue.popleft()
        path = files[rel]
        order.append((f"http://{host}/{rel}", path))
        try:
            html = path.read_bytes()[:200_000].decode("utf-8", "replace")
        except OSError:
            continue
        from lxml import html as lxml_html

        try:
            doc = lxml_html.fromstring(html)
        except Exception:  # noqa: BLE001 - an unparsable page links nowhere
            continue
        for href in doc.xpath("//a/@href"):
            target = urlsplit(urljoin(f"http://{host}/{rel}", href))
            if target.netloc != host:
                continue
            nrel = unquote(target.path.lstrip("/"))
            if nrel in files and nrel not in seen:
                seen.add(nrel)
                queue.append(nrel)
    for rel in sorted(files):
        if len(order) >= limit:
            break
        if rel not in seen:
            seen.add(rel)
            order.append((f"http://{host}/{rel}", files[rel]))
    return order


def replay(pages: list[tuple[str, str, frozenset]], setting: tuple[str, int, bool]) -> tuple[int, int, int]:
    """``(pages called soft 404, real pages in closed directories, directories closed)``."""
    detector = Soft404Detector(setting[1], spare_real_dirs=setting[2])
    # As Soft404Middleware: a page that passes whatever its shape is not read.
    refused = sum(not detector.passes_unread(key) and detector.observe(key, text, siblings)
                  for key, text, siblings in pages)
    closed = set(detector.closed)
    in_closed = sum(1 for key, _, _ in pages if parent_of(key) in closed)
    return refused, in_closed, len(closed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=3000, help="pages per tree")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    found = trees(args.cache)
    if not found:
        sys.exit(f"no trees under {args.cache}/x: run benchmarks/bench_visibletext_corpus.py first")
    totals = {s: [0, 0, 0] for s in SETTINGS}
    shown = 0
    print(f"{'tree':<44}{'pages':>7}" + "".join(f"{name:>19}" for name, _, _ in SETTINGS))
    for name, root in found:
        host = name.split("/")[0].replace("_", "-") + ".docs"
        order = crawl_order(root, host, args.pages)
        facts = []
        stubs = copies = 0
        seen: set[bytes] = set()
        for url, path in order:
            raw = path.read_bytes()[:200_000]
            if REDIRECT.search(raw[:4000]):
                stubs += 1  # a meta-refresh stub: a redirect, not a page (a crawler follows it elsewhere)
                continue
            digest = hashlib.blake2b(raw, digest_size=16).digest()
            if digest in seen:
                copies += 1  # a byte-identical copy (untranslated pages of apache2-doc): a duplicate, folded as one
                continue
            seen.add(digest)
            html = raw.decode("utf-8", "replace")
            text, siblings = page_facts(url, html)
            facts.append((canonical_url(url), text, siblings))
        shown += len(facts) * 3
        cells = []
        for setting in SETTINGS:
            worst = [0, 0, 0]
            for run, seq in enumerate((facts, *(random.Random(seed).sample(facts, len(facts)) for seed in (1, 2)))):
                got = replay(seq, setting)
                for i in range(3):
                    totals[setting][i] += got[i]
                    worst[i] = max(worst[i], got[i])
            cells.append(f"{worst[0]:>6}/{worst[1]:>4}/{worst[2]:>3}")
        print(f"{name:<44}{len(facts):>7}" + "".join(f"{c:>19}" for c in cells) + (f"  ({stubs} redirect stubs, {copies} copies left out)" if stubs or copies else ""))
    print(f"{'total (3 orders each)':<44}{shown:>7}" + "".join(
        f"{f'{t[0]}/{t[1]}/{t[2]}':>19}" for t in totals.values()))
    print("\ncolumns: AOPIC_TRAP_SOFT404_PAGES, and whether a page of an error shape in a directory of real pages"
          " passes (AOPIC_TRAP_SOFT404_SPARE_REAL_DIRS); cells: pages taken for soft 404s /"
          " real pages in directories closed / directories closed (worst of the crawl order and two random"
          " orders; total: summed over them). Every one is a false refusal: these trees have no soft 404s.")


if __name__ == "__main__":
    main()
