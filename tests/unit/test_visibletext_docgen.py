"""Visible text of documentation pages, one small handwritten page per
generator family (``tests/data/docgen``), shaped like the markup of the
real generators (Sphinx themes, Javadoc, Doxygen, rustdoc, mdBook, DocBook,
Texinfo, AsciiDoc). ``benchmarks/bench_visibletext_corpus.py`` measures
the same on the trees Debian ships; these pages pin the markup that once
lost the main content.

The main content is marked in each page with a ``data-main`` attribute,
which the extraction never looks at: its words must be kept (>= 90 %,
as a multiset) and the page must not be "too short" to fingerprint.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from lxml import etree
from scrapy.http import HtmlResponse

from scrapy_aopic.hygiene.simhash import Fingerprinter
from scrapy_aopic.hygiene.visibletext import _walk_text, tree_text
from scrapy_aopic.settings import DEFAULTS

PAGES = sorted((Path(__file__).resolve().parent.parent / "data" / "docgen").glob("*.html"))
WORD = re.compile(r"\w+")
#: HTML's block-level elements: they separate words when rendered.
BLOCK = set("""address article aside blockquote details dd div dl dt figcaption figure footer form h1 h2 h3
    h4 h5 h6 header hr li main nav ol p pre section table ul tr td th summary br""".split())


def main_words(root) -> Counter:
    """Words of the elements marked ``data-main``, as a browser lays them out."""
    pieces: list[str] = []
    for element in root.xpath("//*[@data-main]"):
        for event, node in etree.iterwalk(element, events=("start", "end")):
            if node.tag in ("script", "style"):
                continue
            if event == "start":
                pieces.append("\n" if node.tag in BLOCK else "")
                pieces.append(node.text or "")
            else:
                pieces.append("\n" if node.tag in BLOCK else "")
                if node is not element:
                    pieces.append(node.tail or "")
    return Counter(WORD.findall("".join(pieces).lower()))


def test_every_family_has_a_page():
    families = {page.name.split("-")[0] for page in PAGES}
    assert families >= {"sphinx", "pydoctheme", "javadoc", "doxygen", "rustdoc", "mdbook", "docbook", "texinfo", "plain"}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_main_content_is_kept_and_long_enough(page):
    root = HtmlResponse(url=f"http://docs.test/{page.name}", body=page.read_bytes()).selector.root
    expected = main_words(root)
    assert sum(expected.values()) >= 20  # the page has real content to lose
    text = tree_text(root)
    kept = sum((expected & Counter(WORD.findall(text.lower()))).values()) / sum(expected.values())
    assert kept >= 0.9, (kept, sorted((expected - Counter(WORD.findall(text.lower()))).elements()))
    assert Fingerprinter().signature(text, sketch=False).chars >= DEFAULTS["AOPIC_SIMHASH_MIN_CHARS"]
    assert _walk_text(root, True) == text  # both paths agree


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_template_is_still_removed(page):
    """The fix keeps content, not the template: at least half the words
    outside the main content are gone (menus, sidebars, footers)."""
    root = HtmlResponse(url=f"http://docs.test/{page.name}", body=page.read_bytes()).selector.root
    main = main_words(root)
    template = Counter(WORD.findall(tree_text(root, boilerplate=False).lower())) - main
    left = template & (Counter(WORD.findall(tree_text(root).lower())) - main)
    assert sum(left.values()) * 2 <= sum(template.values()), sorted(left.elements())


def test_a_header_holding_the_page_title_is_content_a_site_banner_is_not():
    """A region marked only *header* by its class or id keeps a page title
    it holds (Doxygen's ``div.header``, AsciiDoc's ``div#header``); a site's
    banner, whose name links home, and its menu stay out."""
    body = b"""<html><body>
    <div class="site-header"><h1 class="site-title"><a href="/">Garden Weekly</a></h1>
      <ul><li><a href="/a">Archive</a></li><li><a href="/b">About us</a></li></ul></div>
    <div id="header"><h1>git-add(1) Manual Page</h1></div>
    <div class="masthead header"><div class="title">Quarterly pruning almanac</div></div>
    <p>Add file contents to the index before the next commit is recorded.</p>
    </body></html>"""
    root = HtmlResponse(url="http://docs.test/page.html", body=body).selector.root
    for text in (tree_text(root), _walk_text(root, True)):
        words = set(WORD.findall(text.lower()))
        assert {"git", "add", "manual", "page", "index"} <= words
        # the banner: a linked site name and a menu; a header that is also a masthead
        assert not words & {"garden", "weekly", "archive", "about", "quarterly", "almanac"}, words
