"""Visible text on the HTML documentation that Debian packages ship (issue 16, item 1).

Downloads (``apt-get download``, no root needed) and unpacks a set of Debian
documentation packages, one or more per generator (Sphinx with several
themes, Javadoc, Doxygen, rustdoc, mdBook, DocBook, gtk-doc, Texinfo, plain
HTML), samples up to ``--pages`` pages per generator and measures on each:

* the words of the page's *main content*, found by a selector written for
  that generator's markup (Sphinx ``div[role=main]``, Javadoc ``main``,
  Doxygen ``div.contents``, ...), independent of the heuristics of
  :mod:`scrapy_aopic.hygiene.visibletext`;
* the share of those words (as a multiset) kept in ``visible_text()``;
* whether the middleware would call the page "too short" to compare (fewer
  than ``AOPIC_SIMHASH_MIN_CHARS`` word characters in the visible text,
  read as :class:`~scrapy_aopic.middlewares.simhash.SimhashDedupMiddleware`
  reads it from Scrapy's parsed tree).

One row per generator; the targets (exit status 1 when one is missed): the
words of the main content kept >= 90 % on at least 95 % of the pages (the
5th percentile), and "too short" < 5 % of the pages whose main content
is itself long enough to be compared. Redirect stubs and the generators'
search pages are not sampled. The linux-doc, openjdk and cppreference trees
are held out for checks and are deliberately not here.

    .venv/bin/python benchmarks/bench_visibletext_corpus.py [--pages 150] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree, html as lxml_html

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy.http import HtmlResponse  # noqa: E402

from scrapy_aopic.hygiene.simhash import Fingerprinter  # noqa: E402
from scrapy_aopic.hygiene.visibletext import tree_text  # noqa: E402
from scrapy_aopic.middlewares.simhash import MAX_TEXT_CHARS  # noqa: E402
from scrapy_aopic.settings import DEFAULTS  # noqa: E402

MIN_CHARS = DEFAULTS["AOPIC_SIMHASH_MIN_CHARS"]
KEEP_TARGET = 0.90  #: share of the main content's words kept ...
KEEP_PERCENTILE = 5  #: ... by all pages but this percent
TOO_SHORT_TARGET = 0.05  #: share of comparable pages called too short

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scrapy-aopic-corpus"


@dataclass
class Generator:
    """One documentation generator: its trees and where its main content is."""

    name: str
    #: (Debian package, directory in the package, regex of relative paths to skip)
    trees: list[tuple[str, str, str]]
    #: XPath of the main content's elements
    main: str
    #: XPath, relative to each main element, of parts of it that are not content
    drop: str = ""
    #: a file matching none of these is not sampled (default: all)
    only: str = ""


GENERATORS = [
    Generator("sphinx-pydoctheme", [("python3.11-doc", "usr/share/doc/python3.11/html", "")],
              "//div[@role='main']"),
    Generator("sphinx-alabaster", [("python-requests-doc", "usr/share/doc/python-requests-doc/html", ""),
                                   ("python-flask-doc", "usr/share/doc/python-flask-doc/html", "")],
              "//div[@role='main']"),
    Generator("sphinx-rtd", [("python-scrapy-doc", "usr/share/doc/python-scrapy-doc/html", ""),
                             ("python-cryptography-doc", "usr/share/doc/python-cryptography-doc/html", ""),
                             ("python-attr-doc", "usr/share/doc/python-attr-doc/html", "")],
              "//div[@itemprop='articleBody']"),
    Generator("sphinx13 (sphinx-doc)", [("sphinx-doc", "usr/share/doc/sphinx-doc/html", "")],
              "//div[@role='main']"),
    Generator("sphinx-djangodocs", [("python-django-doc", "usr/share/doc/python-django-doc/html", "")],
              "//div[@id='yui-main']"),
    Generator("javadoc", [("junit4-doc", "usr/share/doc/junit4/api", ""),
                          ("libcommons-lang3-java-doc", "usr/share/doc/libcommons-lang3-java/api", "")],
              "//main", drop=".//div[contains(@class, 'sub-nav') or contains(@class, 'subNav')]"),
    Generator("doxygen", [("libeigen3-doc", "usr/share/doc/libeigen3-dev/html", r"(^|/)search/"),
                         ("libsdl2-doc", "usr/share/doc/libsdl2-doc/html", r"(^|/)search/")],
              "//div[@id='doc-content'] | //body[not(.//div[@id='doc-content'])]/div[@class='header' or @class='contents']",
              # (``div.ttc``: the tooltips of source listings, hidden until hovered)
              drop=".//div[@id='MSearchResultsWindow' or @id='nav-path'] | .//div[@class='navpath' or @class='ttc']"),
    Generator("rustdoc", [("rust-doc", "usr/share/doc/rust-doc/html", "")],
              "//section[@id='main-content']", only=r"^(std|core|alloc|proc_macro|test)/"),
    Generator("mdbook", [("rust-doc", "usr/share/doc/rust-doc/html", "")],
              "//main",
              only=r"^(book|reference|nomicon|rust-by-example|edition-guide|embedded-book|rustc|rustdoc|unstable-book)/"),
    Generator("docbook (postgresql)", [("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html", "")],
              "//body", drop="./div[@class='navheader' or @class='navfooter']"),
    Generator("gtk-doc (glib)", [("libglib2.0-doc", "usr/share/gtk-doc/html", "")],
              "//body", drop="./table[@class='navigation'] | ./div[@class='footer']"),
    Generator("texinfo", [("octave-doc", "usr/share/doc/octave", ""),
                          ("gettext-doc", "usr/share/doc/gettext", r"(^|/)(javadoc2|csharpdoc|examples)/|\.[0-9]\.html$"),
                          ("bash-doc", "usr/share/doc/bash", r"examples/"),
                          ("r-doc-html", "usr/share/R/doc/manual", ""),
                          ("gnutls-doc", "usr/share/doc/gnutls-doc/html", "")],
              "//body",
              # (the node navigation, at any depth: single-page manuals nest
              # it in every chapter and section)
              drop=(".//div[@class='header' or @class='nav-panel']"
                    " | ./table[@cellpadding='1' and @border='0'] | ./p[font[@size='-1']]")),
    Generator("plain html", [("apache2-doc", "usr/share/doc/apache2-doc/manual", r"^(?!en/)"),
                             ("git-doc", "usr/share/doc/git-doc", ""),
                             ("gettext-doc", "usr/share/doc/gettext", r"^gettext_|(^|/)(javadoc2|csharpdoc|examples)/")],
              "//div[@id='page-content'] | //body[not(.//div[@id='page-content'])]",
              drop=("./div[@id='footer'] | ./div[@id='footnotes'][not(node())] | .//div[@class='toplang' or @class='bottomlang']"
                    " | .//div[@id='quickview'] | ./a[starts-with(@href, '#')] | .//div[@class='top']")),
]

#: Elements whose text a reader never sees.
INVISIBLE = {"head", "script", "style", "noscript", "template", "svg", "math", "button", "select", "textarea"}
#: HTML's block-level elements (and line breaks): they separate words.
BLOCK = set("""address article aside blockquote details dialog dd div dl dt fieldset figcaption figure
    footer form h1 h2 h3 h4 h5 h6 header hgroup hr li main nav ol p pre section table ul tr td th caption
    thead tbody tfoot summary legend br title body html""".split())
WORD = re.compile(r"\w+")
REDIRECT = re.compile(rb"<meta[^>]+http-equiv=[\"']?refresh", re.I)


def download(package: str, cache: Path) -> Path | None:
    """The unpacked tree of ``package`` in ``cache`` (downloaded once)."""
    tree = cache / "x" / package
    if tree.is_dir():
        return tree
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = list(debs.glob(f"{package}_*.deb"))
    if not found:
        run = subprocess.run(["apt-get", "download", package], cwd=debs, capture_output=True, text=True)
        found = list(debs.glob(f"{package}_*.deb"))
        if not found:
            print(f"  {package}: cannot be downloaded ({run.stderr.strip().splitlines()[-1:] or run.returncode}), skipped")
            return None
    subprocess.run(["dpkg-deb", "-x", str(found[0]), str(tree)], check=True)
    return tree


def pages_of(generator: Generator, cache: Path) -> list[tuple[str, Path]]:
    """Every candidate page of the generator's trees: (package, file)."""
    pages = []
    only = re.compile(generator.only) if generator.only else None
    for package, directory, skip in generator.trees:
        tree = download(package, cache)
        if tree is None:
            continue
        root = tree / directory
        skip_re = re.compile(skip) if skip else None
        for path in sorted(root.rglob("*.htm*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or (skip_re and skip_re.search(rel)) or (only and not only.search(rel)):
                continue
            if rel.endswith(("search.html", "genindex.html")) or "/_static/" in rel or rel.startswith("_static/"):
                continue  # the generators' search pages and static assets
            with open(path, "rb") as f:
                if REDIRECT.search(f.read(2048)):
                    continue  # a redirect stub, not a page
            pages.append((package, path))
    return pages


def element_words(elements, drop: list) -> tuple[Counter, int]:
    """Words of the text of ``elements``, without invisible elements nor
    ``drop``, and how many words link texts (``<a>``) hold among them."""
    dropped = set(drop)
    pieces: list[str] = []
    link_words = 0
    for element in elements:
        walker = etree.iterwalk(element, events=("start", "end"))
        skipped = None
        for event, node in walker:
            if not isinstance(node.tag, str):
                if event == "end" and node.tail:
                    pieces.append(node.tail)
                continue
            if event == "start":
                if node in dropped or node.tag in INVISIBLE:
                    walker.skip_subtree()  # the next event is its end
                    pieces.append(" ")
                    skipped = node
                    continue
                if node.tag == "a":
                    link_words += len(WORD.findall("".join(node.itertext())))
                if node.tag in BLOCK:
                    pieces.append("\n")
                if node.text:
                    pieces.append(node.text)
            else:
                if node.tag in BLOCK and node is not skipped:
                    pieces.append("\n")
                if node.tail and node is not element:
                    pieces.append(node.tail)
    return Counter(WORD.findall("".join(pieces).lower())), link_words


@dataclass
class Result:
    """Figures of one generator."""

    pages: int = 0
    no_main: int = 0
    kept: list[float] = field(default_factory=list)
    words: int = 0  #: words of the text pages' main content
    words_kept: int = 0  #: ... kept in their visible text
    comparable: int = 0  #: text pages whose main content is long enough to compare
    too_short: int = 0  #: ... of those, called too short
    too_short_any: int = 0  #: pages called too short, all
    link_pages: int = 0  #: pages whose main content is mostly link text (contents, indexes)
    link_too_short: int = 0  #: ... of those, called too short
    link_kept: list[float] = field(default_factory=list)
    worst: list[tuple[float, str]] = field(default_factory=list)


def measure(generator: Generator, sample: list[tuple[str, Path]], fingerprinter: Fingerprinter) -> Result:
    result = Result()
    main_path = etree.XPath(generator.main)
    drop_path = etree.XPath(generator.drop) if generator.drop else None
    for _package, path in sample:
        body = path.read_bytes()
        response = HtmlResponse(url=f"http://corpus.test/{path.name}", body=body)
        root = response.selector.root  # the tree the middleware reads
        text = tree_text(root, boilerplate=True)
        result.pages += 1
        too_short = fingerprinter.signature(text[:MAX_TEXT_CHARS], sketch=False).chars < MIN_CHARS
        result.too_short_any += too_short
        truth = lxml_html.fromstring(body)  # a tree of our own for the selectors
        mains = main_path(truth)
        if not mains:
            result.no_main += 1
            continue
        drop = [node for main in mains for node in drop_path(main)] if drop_path is not None else []
        main_words, link_words = element_words(mains, drop)
        if sum(len(w) * n for w, n in main_words.items()) < MIN_CHARS:
            continue  # too little content to compare, whatever the visible text
        total = sum(main_words.values())
        kept = sum((main_words & Counter(WORD.findall(text.lower()))).values()) / total
        if link_words * 2 > total:
            # A table of contents or an index: lone-link removal drops its
            # links by design (menus, tag clouds and such lists look alike).
            result.link_pages += 1
            result.link_too_short += too_short
            result.link_kept.append(kept)
            continue
        result.comparable += 1
        result.too_short += too_short
        result.kept.append(kept)
        result.words += total
        result.words_kept += round(kept * total)
        result.worst.append((kept, str(path)))
    result.worst.sort()
    return result


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=150, help="pages sampled per generator (default 150)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"download cache (default {DEFAULT_CACHE})")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--only", help="regex: generators to run")
    parser.add_argument("--worst", type=int, default=0, help="list the N pages keeping the least, per generator")
    args = parser.parse_args(argv)
    fingerprinter = Fingerprinter()
    print(f"visible text vs main content, {args.pages} pages per generator at most, "
          f"too short = < {MIN_CHARS} word characters (AOPIC_SIMHASH_MIN_CHARS)")
    header = (f"{'generator':<22} {'pages':>5} {'text':>5} {'median':>7} {'p5':>6} {'words':>6} {'<90%':>5} "
              f"{'short':>6} | {'links':>5} {'median':>7} {'short':>6} | {'all short':>9}  packages (pages)")
    rows, missed = [], []
    for generator in GENERATORS:
        if args.only and not re.search(args.only, generator.name):
            continue
        candidates = pages_of(generator, args.cache)
        if not candidates:
            print(f"  {generator.name}: no page (packages missing), skipped")
            continue
        rng = random.Random(f"{args.seed}:{generator.name}")
        # Sampled evenly across the generator's packages, so a big tree does not hide a small one.
        by_package: dict[str, list] = {}
        for page in candidates:
            by_package.setdefault(page[0], []).append(page)
        sample: list = []
        share = max(1, args.pages // len(by_package))
        for pages in by_package.values():
            sample += rng.sample(pages, min(share, len(pages)))
        result = measure(generator, sample, fingerprinter)
        kept = result.kept or [0.0]
        low = sum(k < KEEP_TARGET for k in result.kept)
        too_short_share = result.too_short / result.comparable if result.comparable else 0.0
        packages = ", ".join(f"{p} {len(v)}" for p, v in by_package.items())
        link_short = result.link_too_short / result.link_pages if result.link_pages else 0.0
        rows.append(
            f"{generator.name:<22} {result.pages:>5} {result.comparable:>5} {statistics.median(kept):>7.1%} "
            f"{percentile(kept, KEEP_PERCENTILE):>6.1%} {result.words_kept / max(result.words, 1):>6.1%} {low:>5} "
            f"{too_short_share:>6.1%} | "
            f"{result.link_pages:>5} {statistics.median(result.link_kept or [0.0]):>7.1%} {link_short:>6.1%} | "
            f"{result.too_short_any / result.pages:>9.1%}  {packages}"
        )
        if result.no_main:
            rows[-1] += f"  ({result.no_main} pages without main content)"
        if percentile(kept, KEEP_PERCENTILE) < KEEP_TARGET or too_short_share >= TOO_SHORT_TARGET:
            missed.append(generator.name)
        for share_kept, path in result.worst[: args.worst]:
            rows.append(f"    {share_kept:6.1%} {path}")
    print(header)
    print("\n".join(rows))
    print(f"pages: sampled; text: pages whose main content has >= {MIN_CHARS} word characters, mostly not link text; "
          "median, p5: share of their main content's words kept in the visible text; words: all their words together; <90%: text pages keeping less; "
          "short: share called too short to compare; links: pages whose main content is mostly link text "
          "(contents, indexes), median kept and share too short; all short: share of all sampled pages too short")
    if missed:
        print(f"MISSED: {', '.join(missed)} (targets: p{KEEP_PERCENTILE} >= {KEEP_TARGET:.0%} kept, "
              f"too short < {TOO_SHORT_TARGET:.0%} of comparable pages)")
        return 1
    print(f"all targets met: p{KEEP_PERCENTILE} >= {KEEP_TARGET:.0%} kept, too short < {TOO_SHORT_TARGET:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
