"""Near-duplicates across two releases of real documentation (issue 16, item 2).

The same page in two releases of a manual is the commonest near-duplicate a
broad crawl meets (``/docs/15/x.html`` and ``/docs/16/x.html``), and the one
where a false merge hurts: a page that changed much between releases must not
be folded into its old version, nor into another page.

Downloads (``apt-get download``, cached with the visible-text corpus in
``~/.cache/scrapy-aopic-corpus``) consecutive releases of Debian's LLVM and
Clang manuals (Sphinx), streams every page of the old release and then every
page of the new one through :class:`NearDuplicateIndex` with the add-on's
default settings, as a crawl of both trees would, and scores the new
release's pages against a ground truth independent of the add-on:

* the **main content** of each page (Sphinx ``div[role=main]``, found by
  that selector, not by the visible-text rules), and
* how **alike** two pages' main contents are: ``difflib``'s ratio of their
  word sequences (2 x matching words / all words; the measure issue 16
  quotes, "29-46 % alike"), exact, not a sketch.

A flag is *right* when the page and the original it is merged with are at
least ``--alike`` (0.8) alike, else a *false merge*;
*recall* at a threshold t is the share of the new release's pages whose old
version is at least t alike (t = 0.9, 0.95, 0.99) that are flagged.

    .venv/bin/python benchmarks/bench_version_pairs.py [--quick] [--cache DIR]
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from lxml import html as lxml_html

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_visibletext_corpus import DEFAULT_CACHE, download  # noqa: E402
from scrapy_aopic.hygiene.simhash import Fingerprinter  # noqa: E402
from scrapy_aopic.hygiene.simhash_index import NearDuplicateIndex  # noqa: E402
from scrapy_aopic.hygiene.visibletext import visible_text  # noqa: E402
from scrapy_aopic.settings import DEFAULTS  # noqa: E402

#: (old package, new package, HTML root inside each package: {v} is the package name)
PAIRS = (
    ("llvm-14-doc", "llvm-15-doc", "usr/share/doc/{v}/html"),
    ("llvm-15-doc", "llvm-16-doc", "usr/share/doc/{v}/html"),
    ("clang-15-doc", "clang-16-doc", "usr/share/doc/{v}/html"),  # {v}: clang-15
)
WORD = re.compile(r"\w+")
RECALL_AT = (0.9, 0.95, 0.99)


def main_words(page: bytes) -> list[str]:
    tree = lxml_html.fromstring(page)
    main = tree.xpath("//div[@role='main']") or tree.xpath("//body") or [tree]
    return WORD.findall(main[0].text_content().lower())


class Alike:
    """difflib's ratio of two pages' main-content word sequences, cached by
    page; 0 when its cheap upper bounds are already below ``at_least``."""

    def __init__(self, words_of: dict[tuple[str, str], list[str]]):
        self.words_of = words_of
        self.known: dict[tuple, float] = {}

    def __call__(self, a: tuple[str, str], b: tuple[str, str], at_least: float = 0.0) -> float:
        if (a, b) not in self.known:
            words_a, words_b = self.words_of[a], self.words_of[b]
            if not words_a and not words_b:
                return 1.0
            matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
            if matcher.real_quick_ratio() < at_least or matcher.quick_ratio() < at_least:
                return 0.0
            self.known[a, b] = matcher.ratio()
        return self.known[a, b]


def index_from_defaults() -> NearDuplicateIndex:
    return NearDuplicateIndex(
        k=DEFAULTS["AOPIC_SIMHASH_DISTANCE"],
        min_similarity=DEFAULTS["AOPIC_SIMHASH_CONFIRM"],
        max_length_ratio=DEFAULTS["AOPIC_SIMHASH_MAX_LENGTH_RATIO"],
        far_k=DEFAULTS["AOPIC_SIMHASH_FAR_DISTANCE"],
        far_similarity=DEFAULTS["AOPIC_SIMHASH_FAR_CONFIRM"],
    )


def release(package: str, root: str, cache: Path) -> dict[str, bytes] | None:
    tree = download(package, cache)
    if tree is None:
        return None
    base = tree / root.format(v=package.removesuffix("-doc") if package.startswith("clang") else package)
    return {
        str(path.relative_to(base)): path.read_bytes()
        for path in sorted(base.rglob("*.html"))
        if not path.name.startswith(("search", "genindex"))
    }


def score(old: dict[str, bytes], new: dict[str, bytes], alike: Alike, min_alike: float, options: dict) -> dict:
    fingerprinter = Fingerprinter()
    min_chars = DEFAULTS["AOPIC_SIMHASH_MIN_CHARS"]
    index = NearDuplicateIndex(**options) if options else index_from_defaults()
    original_of: list[tuple[str, str]] = []  # index id -> (release, path)
    flags: list[tuple[str, tuple[str, str]]] = []
    compared = set()
    for name, pages in (("old", old), ("new", new)):
        for path, page in pages.items():
            signature = fingerprinter.signature(visible_text(page))
            if signature.chars < min_chars:
                continue  # the middleware does not compare these either
            if name == "new":
                compared.add(path)
            match = index.find(signature.fingerprint, signature.sketch, signature.chars)
            if match is None:
                index.add(signature.fingerprint, signature.sketch, signature.chars)
                original_of.append((name, path))
            elif name == "new":
                flags.append((path, original_of[match[0]]))
    false = []
    for path, orig in flags:
        similarity = alike(("new", path), orig)
        if similarity < min_alike:
            false.append((path, orig, similarity))
    flagged = {path for path, _ in flags}
    recall = {}
    for t in RECALL_AT:
        pairs = [p for p in compared if p in old and alike(("new", p), ("old", p), t) >= t]
        recall[t] = (sum(p in flagged for p in pairs), len(pairs))
    return {"pages": (len(old), len(new), len(compared)), "flags": len(flags), "false": false, "recall": recall}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--quick", action="store_true", help="the Clang manuals only (seconds)")
    parser.add_argument("--alike", type=float, default=0.8, help="how alike (difflib ratio of words) a flag must be to be right")
    args = parser.parse_args(argv)
    configs = {
        "defaults (3 / 0.55, far 4 / 0.8)": {},
        "distance 3 only": {"k": 3, "min_similarity": 0.55, "max_length_ratio": 1.4},
    }
    print(f"{'pair':28s} {'settings':34s} {'pages old/new':>14s} {'flags':>6s} {'precision':>10s} "
          + " ".join(f"{'recall@' + str(t):>16s}" for t in RECALL_AT))  # fmt: skip
    for old_package, new_package, root in PAIRS[-1:] if args.quick else PAIRS:
        old, new = release(old_package, root, args.cache), release(new_package, root, args.cache)
        if not old or not new:
            print(f"{old_package} -> {new_package}: not available, skipped")
            continue
        words_of = {(name, path): main_words(page) for name, pages in (("old", old), ("new", new))
                    for path, page in pages.items()}  # fmt: skip
        alike = Alike(words_of)
        for label, options in configs.items():
            result = score(old, new, alike, args.alike, options)
            flags, false = result["flags"], result["false"]
            precision = 1 - len(false) / flags if flags else 1.0
            recall = " ".join(f"{h / n if n else 1:8.3f} ({h}/{n})".rjust(16) for h, n in result["recall"].values())
            print(f"{old_package + ' -> ' + new_package:28s} {label:34s} "
                  f"{result['pages'][0]:>6d}/{result['pages'][1]:<6d} {flags:6d} {precision:10.4f} {recall}")  # fmt: skip
            for path, (_, orig), similarity in false[:5]:
                print(f"      false merge: {path} -> {orig} ({similarity:.2f} alike)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
