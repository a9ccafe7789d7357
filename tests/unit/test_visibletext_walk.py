"""The visible-text walk's speed-ups (issue 18, item 4) write the same text.

* On a tree Scrapy's selector parsed (``lxml.html.HTMLParser``), the walk
  makes no Python call to choose each element's class (lxml.html's
  ``HtmlElementClassLookup``), and the tree's elements are lxml.html's
  again afterwards.
* The page's main landmarks are not searched for in the whole page first:
  the walk asks each element it opens, and an element judged boilerplate
  whether it holds one. The text is the one of the earlier walk, which
  searched first (kept here as :func:`eager_walk`, the reference).
"""

from __future__ import annotations

import random

import lxml.html
import pytest
from lxml import etree
from scrapy.http import HtmlResponse

from scrapy_aopic.hygiene import visibletext
from scrapy_aopic.hygiene.visibletext import (
    _BLOCK_TAGS,
    _INVISIBLE_TAGS,
    _NEVER_BOILERPLATE,
    _STRING_LENGTH,
    _judged_boilerplate,
    _lone_link,
    _section_part,
    _titles_the_page,
    _walk_text,
    tree_text,
)

MARKED_PAGE = (
    b"<html><body><div class='navheader'><a href='a.html'>Prev</a> <a href='b.html'>Next</a></div>"
    b"<div class='sect1'><h2>Title</h2><p>Some text with <a href='c.html'>a link</a> in it.</p>"
    b"<ul><li><a href='d.html'>menu</a></li></ul></div><div class='navfooter'>Home</div></body></html>"
)


def _response(body: bytes = MARKED_PAGE) -> HtmlResponse:
    return HtmlResponse(url="http://example.com/page.html", body=body, encoding="utf-8")


def test_walk_makes_no_python_class_lookup_and_restores_lxml_html_classes(monkeypatch):
    calls = []
    lookup = lxml.html.HtmlElementClassLookup.lookup

    def counting(self, *args):
        calls.append(args)
        return lookup(self, *args)

    monkeypatch.setattr(lxml.html.HtmlElementClassLookup, "lookup", counting)
    response = _response()
    root = response.selector.root
    assert isinstance(root, lxml.html.HtmlElement)
    assert visibletext.may_be_marked(root)  # the page takes the walk
    calls.clear()
    text = tree_text(root)
    assert text.split() == ["Title", "Some", "text", "with", "a", "link", "in", "it."]
    assert calls == []  # main: one call per element the walk visits
    # Afterwards the spider's selectors get lxml.html's elements again.
    paragraph = response.css("p")[0].root
    assert isinstance(paragraph, lxml.html.HtmlElement) and calls
    assert paragraph.text_content() == "Some text with a link in it."
    assert isinstance(root.getroottree().parser, lxml.html.HTMLParser)


def test_the_lookup_is_put_back_when_the_walk_fails(monkeypatch):
    response = _response()
    root = response.selector.root

    def failing(*args):
        raise RuntimeError("walk failed")

    monkeypatch.setattr(visibletext, "_walk_text", failing)
    with pytest.raises(RuntimeError):
        tree_text(root)
    assert isinstance(response.css("div")[1].root, lxml.html.HtmlElement)


def test_other_parsers_trees_are_walked_as_they_are():
    root = etree.fromstring(MARKED_PAGE, etree.HTMLParser())
    parser = root.getroottree().parser
    assert tree_text(root) == _walk_text(root, True)
    assert root.getroottree().parser is parser
    assert type(root.xpath("//p")[0]) is etree._Element


def eager_walk(root, boilerplate: bool) -> str:
    """The walk before this change: main landmarks found first, by one
    search of the whole page, and their holders with them."""
    total = int(_STRING_LENGTH(root.getroottree())) if boilerplate else 0
    mains = set(etree.XPath("//main | //*[@role='main']")(root)) if boilerplate else set()
    holders = {ancestor for main in mains for ancestor in main.iterancestors()}

    def skipped(element, lone_containers, in_main):
        tag = element.tag
        if tag in _INVISIBLE_TAGS:
            return True
        if not boilerplate or tag in _NEVER_BOILERPLATE:
            return False
        if tag == "a":
            return not in_main and _lone_link(element, lone_containers)
        if not _judged_boilerplate(element, tag):
            return False
        if element in holders or _section_part(element, tag) or _titles_the_page(element, tag):
            return False
        return _STRING_LENGTH(element) * 2 <= total

    pieces: list[str] = []
    walker = etree.iterwalk(root, events=("start", "end", "comment", "pi"))
    just_skipped = False
    lone_containers: dict = {}
    in_main = 0
    blocks: list[bool] = []
    for event, element in walker:
        if event == "start":
            if skipped(element, lone_containers, in_main):
                walker.skip_subtree()
                just_skipped = True
                continue
            if element in mains:
                in_main += 1
            blocks.append(element.tag in _BLOCK_TAGS)
            if blocks[-1]:
                pieces.append("\n")
            if element.text:
                pieces.append(element.text)
            continue
        if event == "end":
            if just_skipped:
                just_skipped = False
            else:
                if blocks.pop():
                    pieces.append("\n")
                if element in mains:
                    in_main -= 1
        if element.tail:
            pieces.append(element.tail)
    return "".join(pieces)


def _random_page(rng: random.Random) -> str:
    """Nested regions, landmarks, marked classes, menus and lone links."""
    opening = [
        "<div>", "<div class='nav'>", "<div class='navheader'>", "<div role='main'>", "<main>", "<nav>",
        "<ul><li>", "<li>", "<table><tr><td>", "<td>", "<p>", "<section>", "<header>", "<footer>",
        "<div class='header'>", "<div id='sidebar'>", "<div role='navigation'>", "<article>", "<span>",
        "<main class='menu'>", "<aside role='main'>", "<h2>", "<div class='title'>",
    ]
    leaves = [
        "<a href='/x'>link</a>", "<a href='/y'>Next</a> | <a href='/z'>Prev</a>", "some words here",
        "a longer sentence of text that is content", " | ", "<a href='/w'>word</a> in a sentence",
        "<h1>Heading</h1>", "<script>x()</script>", "<!-- c -->tail", "<br>", "<code>code</code>",
    ]
    out, stack = [], []
    for _ in range(rng.randint(5, 40)):
        choice = rng.random()
        if choice < 0.35:
            tag = rng.choice(opening)
            out.append(tag)
            stack.append([t.split()[0].strip("<>") for t in tag.split("><")])
        elif choice < 0.55 and stack:
            for name in reversed(stack.pop()):
                out.append(f"</{name.strip('<>')}>")
        else:
            out.append(rng.choice(leaves))
    while stack:
        for name in reversed(stack.pop()):
            out.append(f"</{name.strip('<>')}>")
    return "<html><body>" + "".join(out) + "</body></html>"


@pytest.mark.parametrize("seed", range(4))
def test_marked_true_writes_the_same_text_on_any_page(seed):
    """``tree_text(..., marked=True)`` walks without asking (the near-duplicate
    middleware's guess for a host whose pages are all marked): the text is
    the one asked-for ``tree_text`` writes, on marked and unmarked pages."""
    rng = random.Random(seed)
    kinds = set()
    for _ in range(300):
        page = _random_page(rng)
        root = _response(page.encode()).selector.root
        kinds.add(visibletext.may_be_marked(root))
        for boilerplate in (True, False):
            assert tree_text(root, boilerplate=boilerplate, marked=True) == tree_text(root, boilerplate=boilerplate)
    assert kinds == {True, False}  # both kinds of page were compared


@pytest.mark.parametrize("seed", range(4))
def test_walk_writes_the_eager_walks_text(seed):
    rng = random.Random(seed)
    for _ in range(300):
        page = _random_page(rng)
        for root in (
            etree.fromstring(page.encode(), etree.HTMLParser()),
            _response(page.encode()).selector.root,
        ):
            for boilerplate in (True, False):
                assert tree_text(root, boilerplate=boilerplate) == eager_walk(root, boilerplate) or (
                    # unmarked pages take the stylesheet: it agrees with the walk (test_simhash)
                    not visibletext.may_be_marked(root)
                ), page
                assert _walk_text(root, boilerplate) == eager_walk(root, boilerplate), page
        # A walk of a subtree stops at its root when it looks for landmarks.
        body = etree.fromstring(page.encode(), etree.HTMLParser()).find("body")
        for element in body.iter():
            if isinstance(element.tag, str):
                assert _walk_text(element, True) == eager_walk(element, True), page
