"""Soft-404 detector (issue 16, item 3): shapes, error shapes, directories,
on the trap site's soft-404 spaces and its real pages; and in a crawl."""

from __future__ import annotations

import random

import pytest

from scrapy_aopic.hygiene.canonical import canonical_url
from scrapy_aopic.hygiene.soft404 import FirstAnswerGate, Soft404Detector, page_facts, page_shape, parent_of, shape_text, space_of
from scrapy_aopic.hygiene.traps import TrapGuard, TrapLimits
from tests.support.trapsite import SOFT404_VARIANTS, TrapSite

BASE = "http://127.0.0.1:8000"
NOT_FOUND = "Not found, sorry: the page you asked for is not here any more"


def _observe(detector, site, path):
    reply = site.respond("127.0.0.1", path, 8000)
    url = BASE + path
    return detector.observe(canonical_url(url), *page_facts(url, reply.body.decode()))


def test_space_of():
    assert space_of("http://h/find/ab12?page=2&q=x") == "http://h/find/?page=&q="
    assert space_of("http://h/find/?page=2") is None  # its parent_of already
    assert space_of("http://h/find/ab12") is None
    assert space_of("http://h/items/ab12?tab=2") == "http://h/items/?tab="
    assert space_of("http://h/view.php?id=3") is None  # a script: not merged with the directory's others


def test_parent_of():
    assert parent_of("http://h/a/b.html") == "http://h/a/"
    assert parent_of("http://h/a/b/") == "http://h/a/"
    assert parent_of("http://h/find?q=x&p=2") == "http://h/find?p=&q="
    assert parent_of("http://h/") == "http://h/"


def test_shape_ignores_echoed_tokens_ids_and_sibling_link_labels():
    page = ("<html><body><h1>No results for {t}</h1><p>Request {rid} at 10:{m}. Check the spelling.</p>"
            "<a href='/search/{a}/'>{a}</a><a href='/about.html'>About</a></body></html>")
    shapes = set()
    for t, rid, m, a in (("qwerty", "ab12", "01", "zxcv"), ("asdf", "9f9f", "59", "lkjh")):
        url = f"http://h/search/{t}/"
        shapes.add(page_shape(url, shape_text(url, page.format(t=t, rid=rid, m=m, a=a))))
    assert len(shapes) == 1
    # A link outside the directory keeps its label: real pages differ there.
    other = ("<html><body><h1>No results for</h1><p>Request at. Check the spelling.</p>"
             "<a href='/docs/x.html'>Something else</a></body></html>")
    assert page_shape("http://h/search/q/", shape_text("http://h/search/q/", other)) not in shapes


@pytest.mark.parametrize("variant", SOFT404_VARIANTS)
def test_each_variant_is_caught_after_three_pages_and_its_directory_closed(variant):
    site = TrapSite(articles=100, soft404=(variant,))
    detector = Soft404Detector(3)
    rng = random.Random(variant)
    paths = [site._soft404_url(variant, rng) for _ in range(8)]
    shapes = []
    for path in paths:
        url = BASE + path
        shapes.append(page_shape(canonical_url(url), page_facts(url, site.respond("127.0.0.1", path, 8000).body.decode())[0]))
    common = max(set(shapes), key=shapes.count)
    # A page whose random words also occur in the template's own text loses
    # them with its URL's words: a shape of its own, and it passes (the
    # words and template variants: about one page in eight).
    collisions = [n for n, shape in enumerate(shapes) if shape != common]
    assert len(collisions) <= 2
    expected = [shape == common and shapes[: n + 1].count(common) >= 3 for n, shape in enumerate(shapes)]
    assert [_observe(detector, site, p) for p in paths] == expected
    if not any(n < 4 for n in collisions):  # a child of another shape keeps a directory open
        assert detector.directory_refuses(canonical_url(BASE + site._soft404_url(variant, rng)))
        assert len(detector.closed) == 1
    if variant == "pathquery":  # every URL is a parent_of of its own: the space is /find/?page=
        assert list(detector.closed) == [BASE + "/find/?page="]


def test_real_pages_never_soft404_and_broken_links_do_not_close_a_section():
    site = TrapSite(articles=300, soft404=SOFT404_VARIANTS)
    detector = Soft404Detector(3)
    real = sorted(site.real_pages())
    # Broken links of a section first (soft 404s with one shape), then its articles.
    broken = [f"/s/1/old-{i}.html" for i in range(1, 300, 10)]
    # The "not found" shape is learned; its pages are spared: the section
    # mints no URLs of its own (they link to no fresh sibling).
    assert not any([_observe(detector, site, p) for p in broken]) and detector.error_shapes
    assert detector.counts["spared"] == len(broken) - 2
    assert not any(_observe(detector, site, p) for p in real)
    assert not any(detector.directory_refuses(canonical_url(BASE + p)) for p in real) or pytest.fail(
        f"closed: {list(detector.closed)}")


def test_one_real_child_keeps_a_directory_open():
    detector = Soft404Detector(3)
    assert not detector.observe("http://h/d/real.html", "A real page about ponies and their care, feeding and grooming")
    for n in range(4):
        detector.observe(f"http://h/d/x{n}.html", NOT_FOUND, frozenset({f"http://h/d/y{n}.html"}))
    assert not detector.directory_refuses("http://h/d/other.html")
    assert detector.observe("http://h/d/x9.html", NOT_FOUND)  # still a soft 404 itself


@pytest.mark.parametrize("variant", SOFT404_VARIANTS)
def test_a_space_is_closed_by_its_second_child_of_one_shape(variant):
    """Two children answering one shape, each linking fresh siblings: the
    directory closes before the shape is an error shape (three URLs)."""
    site = TrapSite(articles=100, soft404=(variant,))
    rng = random.Random(f"{variant}-2")
    for _ in range(20):  # two pages of the common shape (see the test above: rarely another)
        detector = Soft404Detector(3)
        paths = [site._soft404_url(variant, rng) for _ in range(2)]
        results = [_observe(detector, site, p) for p in paths]
        if detector.counts["dir_one_shape"]:
            break
    assert results == [False, False]  # neither is called a soft 404: the shape is not known yet
    assert not detector.error_shapes
    assert detector.counts["dir_one_shape"] == 1 and len(detector.closed) == 1
    assert detector.directory_refuses(canonical_url(BASE + site._soft404_url(variant, rng)))
    # dir_pages=0: the three-page rule alone
    detector = Soft404Detector(3, dir_pages=0)
    for path in paths:
        _observe(detector, site, path)
    assert not detector.closed


def test_pages_of_a_manual_linking_each_other_do_not_close_their_directory():
    """Pages of one shape (a moved book's stubs) whose table of contents
    links every page of the directory, the fetched ones too: what a child
    links that was fetched before is not fresh, so they mint nothing (on
    main, rust-doc's book/first-edition was closed this way)."""
    names = [f"http://h/book/ch{n}.html" for n in range(12)]
    detector = Soft404Detector(3)
    for name in names[:6]:
        toc = frozenset(n for n in names if n != name)
        detector.observe(name, "This book has moved: read the new edition of the book online instead, please", toc)
    assert not detector.closed


def test_first_answer_gate_holds_a_directory_until_it_is_decided():
    detector = Soft404Detector(3)
    gate = FirstAnswerGate(detector, answers=3)
    keys = gate.keys("http://h/wiki/Abc")
    assert keys == ("http://h/wiki/",)
    assert gate.enter(keys)
    assert not gate.enter(gate.keys("http://h/wiki/Def"))  # a sibling is in flight
    woken = []
    gate.wait(keys, lambda: woken.append(1))
    assert gate.enter(gate.keys("http://h/other/x"))  # another directory goes
    detector.observe("http://h/wiki/Abc", NOT_FOUND, frozenset({"http://h/wiki/Xyz"}))
    gate.leave(keys)
    assert woken == [1]
    keys = gate.keys("http://h/wiki/Def")
    assert gate.enter(keys)
    detector.observe("http://h/wiki/Def", NOT_FOUND, frozenset({"http://h/wiki/Uvw"}))
    gate.leave(keys)
    # two answers of one shape, each minting: closed, so no longer gated (refused)
    assert detector.directory_refuses("http://h/wiki/Ghi") and gate.keys("http://h/wiki/Ghi") == ()
    # a directory of real pages is decided by two distinct shapes
    for n, text in enumerate(("A real page about ponies and their care", "Another page on goats, milk and cheese")):
        keys = gate.keys(f"http://h/s/{n}.html")
        assert keys == ("http://h/s/",) and gate.enter(keys)
        detector.observe(f"http://h/s/{n}.html", text + " and more words to make a shape")
        gate.leave(keys)
    assert gate.keys("http://h/s/9.html") == ()
    # off
    assert FirstAnswerGate(detector, answers=0).keys("http://h/new/x") == ()


def test_a_directory_that_mints_no_siblings_stays_open():
    detector = Soft404Detector(3)
    for n in range(5):  # broken links into a section: "not found" linking home
        detector.observe(f"http://h/s/old-{n}.html", NOT_FOUND, frozenset({"http://h/s/index.html"}))
    assert detector.error_shapes and not detector.closed


def test_off_and_guard_rule():
    assert not Soft404Detector(0).observe("http://h/a", NOT_FOUND)
    guard = TrapGuard(TrapLimits(soft404_pages=2))
    for n in range(2):
        guard.page_fetched(f"http://h/w/t{n}", NOT_FOUND, frozenset({f"http://h/w/u{n}"}))
    assert guard.rule("http://h/w/new", "http://h/w/new", 1) == "soft404_dir"
    assert guard.rule("http://h/other", "http://h/other", 1) is None
    assert guard.counts["soft404"] == 1 and guard.counts["soft404_dir"] == 1


def test_a_page_of_numbers_and_sibling_links_has_no_shape():
    detector = Soft404Detector(3)
    for n in range(6):  # a synthetic site: <h1>/pN</h1> and links to /pM
        url = f"http://h/p{n}"
        html = f"<html><body><h1>/p{n}</h1><a href='/p{n + 1}'>/p{n + 1}</a></body></html>"
        assert page_shape(url, shape_text(url, html)) is None
        assert not detector.observe(url, *page_facts(url, html))
    assert not detector.error_shapes


def _reference_shape(canonical: str, text: str) -> str | None:
    """page_shape as first written: every token lower-cased and tested in
    Python."""
    import hashlib
    import re

    from scrapy_aopic.hygiene.soft404 import MIN_SHAPE_WORDS, url_tokens

    drop = url_tokens(canonical)
    words = [w for w in (t.lower() for t in re.findall(r"[^\W_]+", text)) if w not in drop and not re.search(r"\d", w)]
    words = [w for n, w in enumerate(words) if w not in words[:n]]  # each word once, where it first occurs
    if len(words) < MIN_SHAPE_WORDS:
        return None
    return hashlib.blake2b(" ".join(words).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def test_page_shape_is_the_per_word_shape_on_ascii_and_unicode_words():
    """page_shape reads pages whose word characters are all ASCII on bytes
    (any punctuation, arrows, no-break spaces around them) and others word
    by word: both give the shape of the plain per-word rule, whatever the
    digits, underscores, URL words, final sigmas, dotted capital I, other
    scripts' digits or lone surrogates."""
    from scrapy_aopic.hygiene.soft404 import _ascii_shape_words, url_tokens

    rng = random.Random(11)
    pieces = ["abc", "Sel", "HTML", "b2", "q", "xyz", "_", " ", "-", "\xa0", "→", "¶", "’", "\u200b", "\x00",
              "é", "ΑΣ", "Σ.", "İ", "²", "٣", "Ⅷ", "\ud800", "ǅ", "ß"]
    ascii_words = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) if rng.random() < 0.4 else rng.choice(pieces[:6]) for _ in range(rng.randint(0, 80)))
        url = rng.choice(["http://h/a/abc.html", "http://h/x/sel?q=xyz", "http://h/", "http://h/é/html"])
        assert page_shape(url, text) == _reference_shape(url, text), (url, text)
        ascii_words += _ascii_shape_words(text, url_tokens(url)) is not None
    assert 1_000 < ascii_words < 19_000  # both ways were taken


def _reference_facts(url: str, html: str) -> tuple[str, frozenset[str]]:
    """page_facts as first written: a plain recursive walk, urljoin per link."""
    from urllib.parse import urljoin

    from lxml import html as lxml_html

    root = lxml_html.fromstring(html)
    base_parent = parent_of(url.partition("#")[0])
    parts: list[str] = []
    siblings: set[str] = set()

    def walk(element) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in ("script", "style", "noscript", "template") or not tag:
            return
        sibling = False
        if tag == "a" and element.get("href"):
            target = urljoin(url, element.get("href").strip()).partition("#")[0]
            sibling = target != url and parent_of(target) == base_parent
            if sibling:
                siblings.add(target)
        if not sibling:
            if element.text:
                parts.append(element.text)
            for child in element:
                walk(child)
                if child.tail:
                    parts.append(child.tail)

    walk(root)
    return " ".join(parts), frozenset(siblings)


@pytest.mark.parametrize("url", ["http://h/a/b.html", "http://h/a/b.html#top", "http://h/a/?", "http://h/a?x=1"])
def test_page_facts_match_a_plain_walk(url):
    """The iterative walk with memoized links reads the same text and
    sibling links as a recursive walk joining every link."""
    hrefs = ["c.html", "c.html#x", " c.html ", "#x", "#", " ", "?", "?x=2", "../d/", "c.html?y#z",
             "http://h/a/e", "//h/a/f", "../a/c.html#q", "mailto:m@h", "/a/", ""]
    rng = random.Random(7)
    pieces = []
    for i in range(60):
        href = rng.choice(hrefs)
        tail = rng.choice(["", " tail", " <!-- c --> after", "<script>s()</script>x", " <b>bold<a href='c.html'>in</a></b>"])
        pieces.append(f"<li><a href='{href}'>label {i}<i>it</i></a>{tail}</li>")
    page = f"<html><head><title>T</title><style>p{{}}</style></head><body>lead<ul>{''.join(pieces)}</ul>" \
           "<noscript><a href='c2.html'>n</a></noscript><template><p>t</p></template><?pi x?>end</body></html>"
    for html in (page, "<a href='c.html'>one</a> tail", "<p>text <a href='#x'>x</a></p><p>two</p>", "just text"):
        assert page_facts(url, html) == _reference_facts(url, html)


def test_an_href_urljoin_refuses_is_no_sibling():
    """``urljoin`` raises on an unclosed IPv6 literal or a bad port; a page
    with such a link (a real crawl met one) still has its facts, and the
    link is simply no sibling."""
    html = ("<p>A page of plain text that is long enough to be read.</p>"
            "<a href='http://[::1/'>v6</a><a href='http://h:99999x/'>port</a><a href='c.html'>c</a>")
    assert page_facts("http://h/a/b.html", html) == (
        page_facts("http://h/a/b.html", "<p>A page of plain text that is long enough to be read.</p>"
                   "<a href='c.html'>c</a>")[0] + " v6 port", frozenset({"http://h/a/c.html"}))


def test_xhtml_with_an_xml_declaration_has_facts():
    """DocBook's XHTML pages (the PostgreSQL manual) start with an XML
    declaration, which lxml refuses in a decoded string: they must still
    get their text and sibling links, not silently none."""
    body = (
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Rules</title></head><body>'
        "<p>The rule system of this server rewrites queries before planning them here.</p>"
        '<a href="sibling.html">Next section</a></body></html>'
    )
    url = "http://docs.example/manual/rules.html"
    declared = page_facts(url, '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + body)
    assert declared == page_facts(url, body)
    assert "rewrites queries" in declared[0]
    assert declared[1] == frozenset({"http://docs.example/manual/sibling.html"})


def _html_response(url: str, html: str):
    from scrapy.http import HtmlResponse

    return HtmlResponse(url, body=html.encode("utf-8"), encoding="utf-8")


def _shared_cases() -> list[tuple[str, str]]:
    from pathlib import Path

    cases = [(f"http://docs.example/gen/{path.name}", path.read_text(encoding="utf-8"))
             for path in sorted((Path(__file__).parents[1] / "data" / "docgen").glob("*.html"))]
    assert len(cases) >= 10
    body = ("<body><script>s()</script><p>Intro text of a page</p><a href='x.html'>Sibling</a> tail"
            "<a href='/y/z.html'>Elsewhere</a><noscript><a href='n.html'>n</a></noscript><!-- c -->after</body>")
    cases += [
        ("http://h/a/b.html", f"<!DOCTYPE html><html><head><title>T</title></head>{body}</html>"),
        ("http://h/a/b.html", f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html><html>{body}</html>'),
        ("http://h/a/b.html", f"<html>{body}</html>"),
        ("http://h/a/b.html", body),  # a fragment: lxml.html returns its body's child, not the document
        ("http://h/a/b.html", "<p>one</p><p>two <a href='c.html'>c</a></p>"),
        ("http://h/a/b.html", f"<html>{body}" + "<div>deep " * 300 + "bottom</html>"),  # past libxml2's depth limit
        ("http://h/a/b.html", f"<html>{body}" + "<p>long text here</p>" * 12_000 + "</html>"),  # past max_chars
        ("http://h/a/b.html", f"<html>{body}<p>nul\x00here</p></html>"),
        ("http://h/a/b.html", "<!DOCTYPE html>"),
        ("http://h/a/b.html", '  <?xml version="1.0"?><html><p>declared after white space</p></html>'),
    ]
    return cases


def test_shared_tree_facts_are_page_facts_and_leave_the_tree_unchanged():
    """The soft-404 middleware reads the tree Scrapy's selector parsed
    (shared with the near-duplicate check and the spider) instead of
    parsing again: the facts are exactly those of its own parse, on the
    documentation generators' pages and on pages where the two parses
    differ (fragments, deep nesting, long pages, NULs, declarations), and
    the shared tree is the same afterwards."""
    from lxml import etree

    from scrapy_aopic.hygiene.soft404 import shared_tree_facts
    from scrapy_aopic.middlewares.traps import SHAPE_CHARS, Soft404Middleware

    with_siblings = 0
    for url, html in _shared_cases():
        response = _html_response(url, html)
        root = response.selector.root
        before = etree.tostring(root)
        expected = page_facts(url, response.text[:SHAPE_CHARS])
        assert shared_tree_facts(url, response.text, root, SHAPE_CHARS) == expected, url
        assert Soft404Middleware._facts(response) == expected
        assert etree.tostring(response.selector.root) == before
        with_siblings += bool(expected[1])
    assert with_siblings >= 8


def test_a_plain_name_resolves_as_urljoin_does_on_odd_bases():
    """page_facts resolves a plain link (``sql-select.html``) as the base's
    directory plus the name, found by one urljoin a page: the same URL as
    urljoin gives, whatever the base (dot segments, double slashes,
    parameters, queries, fragments, no path, other schemes)."""
    from urllib.parse import urljoin

    from scrapy_aopic.hygiene.soft404 import _PLAIN_NAME

    bases = ["http://h", "http://h/", "http://h/a/b.html", "http://h/a/b/", "http://h/a/./b/../c.html",
             "http://h/a//b.html", "http://h/a/b;p=1", "http://h/a;x/b.html?q=1#f", "https://u:p@h:81/a/..",
             "http://h/a/b/.", "ftp://h/x/y", "mailto:a@h", "data:text/html,x", "", "rel/path.html", "http://h?q"]
    rng = random.Random(3)
    names = ["a.html", "b", "x-y_z~", "a..b", "a.", "-x", "0"] + [
        "".join(rng.choice("abc.-_~09") for _ in range(rng.randint(1, 6))) for _ in range(200)]
    names = [n for n in names if _PLAIN_NAME.fullmatch(n)]
    assert len(names) > 150
    for base in bases:
        prefix = urljoin(base, "x")[:-1]
        for name in names:
            assert prefix + name == urljoin(base, name).partition("#")[0], (base, name)
            assert prefix + name == urljoin(base, name + "#frag").partition("#")[0], (base, name)


def _api_page(name: str, doc: str) -> str:
    """A rustdoc-like page of function ``name``: a template whose only
    differences between sibling functions are the name (the URL's words) and,
    for most functions, their documentation."""
    return (f"<html><body><nav><a href='index.html'>Module aarch64</a><a href='../index.html'>arch</a></nav>"
            f"<h1>Function core::arch::aarch64::{name}</h1><pre>pub unsafe fn {name}(a: int16x4_t) -> int16x4_t</pre>"
            f"<p>Available on AArch64 and target feature neon only.</p><p>{doc}</p></body></html>")


@pytest.mark.parametrize("spare", [True, False])
def test_pages_of_one_template_in_a_directory_of_real_pages_pass(spare):
    """API pages that differ only in their URL's words (rustdoc's
    ``fn.vcopy_lane_s8`` .. ``_u16``, Javadoc's "no usage of <class>") share a
    shape; in a directory of real pages they are not soft 404s. Without the
    rule (``spare_real_dirs=False``) they are refused, as on main."""
    detector = Soft404Detector(3, spare_real_dirs=spare)
    base = "http://h/core/arch/aarch64/"
    docs = ["Add returns the sum of the lanes", "Multiply lanes and round toward zero now",
            "Compare each lane for equality, setting all bits", "Shift left every lane by a constant amount"]
    for n, doc in enumerate(docs):  # distinct pages: the directory holds real pages
        name = f"vop{'abcd'[n]}_s8"
        assert not detector.observe(*_facts(base + f"fn.{name}.html", _api_page(name, doc)))
    same = "Insert vector element from another vector element"
    results = [detector.observe(*_facts(base + f"fn.vcopy_lane_{t}.html", _api_page(f"vcopy_lane_{t}", same)))
               for t in ("s8", "s16", "s32", "u8", "u16")]
    if spare:
        assert results == [False] * 5 and detector.counts["spared"] == 3
    else:
        assert results == [False, False, True, True, True]
    assert not detector.closed


def test_a_page_linked_by_a_soft404_is_never_spared():
    """A soft-404 space inside a directory of real pages: its entry (linked
    by a real page) is spared, a page it links to is refused."""
    detector = Soft404Detector(3)
    base = "http://h/library/"
    docs = ["Add returns the sum of the lanes", "Multiply lanes and round toward zero now",
            "Compare each lane for equality, setting all bits", "Shift left every lane by a constant amount"]
    for n, doc in enumerate(docs):
        detector.observe(*_facts(base + f"fn.op{n}.html", _api_page(f"op{'abcd'[n]}", doc)))
    for n in range(3):  # the host's "not found" shape, learned elsewhere (in a space)
        detector.observe(f"http://h/old/x{n}.html", NOT_FOUND, frozenset({f"http://h/old/y{n}.html"}))
    assert not detector.observe(base + "qwertyuiop.html", NOT_FOUND)  # a broken link of a real page: spared
    assert detector.observe(base + "asdfghjkl.html", NOT_FOUND, linked_by_soft404=True)
    assert detector.counts["spared"] == 1


JAVADOC_NAV = "Skip navigation links Overview Package Class Use Tree Deprecated Index Help All Classes"


@pytest.mark.parametrize("tree", ["javadoc-class-use", "doxygen-hashed-dirs"])
def test_pages_of_one_template_in_directories_that_mint_nothing_are_spared(tree):
    """Javadoc's ``class-use/`` pages of a small package ("No usage of
    <class>", fewer than four used classes: not a directory of real pages)
    and Doxygen's pages in hashed directories (``d0/dc9/``, one page each:
    SDL's empty "README-cmake.md File Reference") answer one shape, but
    none links to a fresh sibling: they are not a space minting URLs, and
    pass. A space's pages link to fresh siblings and are still refused."""
    detector = Soft404Detector(3)
    results = []
    for n, name in enumerate(["Before", "After", "AfterClass", "BeforeClass", "Rule"]):
        if tree == "javadoc-class-use":
            url = f"http://h/org/junit/class-use/{name}.html"
            html = (f"<html><body>{JAVADOC_NAV}<h1>Uses of Class org.junit.{name}</h1>"
                    f"<p>No usage of org.junit.{name}</p><a href='../{name}.html'>{name}</a>"
                    f"<a href='../../../index.html'>Overview</a> Copyright 2002-2022 JUnit. All rights reserved."
                    "</body></html>")
        else:
            url = f"http://h/d{n}/d{n}c{n}/_r_e_a_d_m_e-{name.lower()}_8md.html"
            html = (f"<html><body><div>SDL 2.0</div><a href='../../index.html'>Main Page</a>"
                    f"<h1>README-{name.lower()}.md File Reference</h1><p>Generated by doxygen 1.9.4, the"
                    f" documentation system of the project</p></body></html>")
        results.append(detector.observe(*_facts(url, html)))
    assert detector.error_shapes, "the pages share one shape"
    assert results == [False] * 5 and detector.counts["spared"] == 3
    # A space in the same site: its pages link to fresh siblings.
    space = [detector.observe(f"http://h/org/junit/class-use/Q{n}.html", NOT_FOUND,
                              frozenset({f"http://h/org/junit/class-use/R{n}.html"})) for n in range(4)]
    assert space[-1], space


def test_not_found_pages_linking_fresh_urls_in_other_directories_are_cut():
    """The trap site's "not found" page links five fresh URLs, each in a
    directory of its own: no directory mints, so each page would be spared
    and its links followed, hop after hop. The page that linked one (its
    ``Referer``) tells: one hop after a spared page, the next is refused;
    with no ``Referer`` at all (``None``), only a directory of real pages spares."""
    for linked in (True, None):
        detector = Soft404Detector(3)
        results = [detector.observe(f"http://h/w{n}/{n}.html", NOT_FOUND, linked_by_soft404=linked if n else False)
                   for n in range(5)]
        assert results == [False, False, True, True, True], (linked, results)
        assert detector.counts["spared"] == 0


def test_a_soft404_in_a_directory_not_yet_known_real_is_still_refused():
    """Sparing needs a directory of real pages: a space's own directory, or
    a section whose real pages have not been fetched yet, still refuses."""
    site = TrapSite(articles=100, soft404=("words",))
    detector = Soft404Detector(3)
    rng = random.Random(5)
    paths = [site._soft404_url("words", rng) for _ in range(4)]
    assert [_observe(detector, site, p) for p in paths] == [False, False, True, True]
    assert detector.counts["spared"] == 0


def _facts(url: str, html: str) -> tuple[str, str, frozenset[str]]:
    return (canonical_url(url), *page_facts(url, html))


def test_a_revisited_hub_is_one_child_not_two():
    """A re-crawl of a hub answering one shape with new links each time is
    the same child again: it never closes its directory (the site root of
    a continuous crawl was closed this way by the second-child rule)."""
    detector = Soft404Detector(3)
    text = "Latest news from the newsroom of the test site, read all about it today"
    for n in range(4):
        detector.observe("http://h/news/", text, frozenset(f"http://h/a{i}" for i in range(n + 2)))
    assert not detector.closed and not detector.error_shapes


# -- pages that pass whatever their shape are not read (issue 18, item 4) ------


def _real_doc_pages(directory: str, n: int) -> list[tuple[str, str]]:
    return [(f"{directory}page{i}.html",
             f"Chapter {i}: " + " ".join(f"topic{chr(97 + (i * 7 + k) % 26)}word{chr(97 + (i + k) % 26)}"
                                          for k in range(12)))
            for i in range(n)]


def test_a_page_of_a_settled_directory_passes_unread_until_its_host_has_an_error_shape():
    detector = Soft404Detector(3)
    pages = _real_doc_pages("http://h/docs/", 6)
    for url, text in pages[:3]:
        assert not detector.passes_unread(url)  # three shapes: not settled
        assert not detector.observe(url, text)
    assert not detector.passes_unread(pages[3][0])
    detector.observe(*pages[3])  # the fourth distinct shape settles /docs/
    assert detector.passes_unread(pages[4][0]) and detector.passes_unread(pages[4][0], linked_by_soft404=None)
    assert not detector.passes_unread(pages[4][0], linked_by_soft404=True)
    assert not detector.passes_unread("http://h/other/page.html")  # another directory: read
    assert not detector.passes_unread("http://h/docs/search?q=x")  # its own directory (q=): read
    assert not Soft404Detector(3, spare_real_dirs=False).passes_unread(pages[4][0])
    # The host learns an error shape elsewhere (a space): its pages are read again.
    for n in range(3):
        detector.observe(f"http://h/old/x{n}.html", NOT_FOUND, frozenset({f"http://h/old/y{n}.html"}))
    assert detector.error_shapes
    assert not detector.passes_unread(pages[5][0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_page_passed_unread_is_one_observe_would_pass(seed):
    """The rule's claim, on the trap site's pages in random orders (real
    articles, broken links answering "not found", every soft-404 space,
    referers known or not): whenever a page would be passed unread, the
    detector in that same state would have passed it after reading it."""
    import copy

    site = TrapSite(articles=200, soft404=SOFT404_VARIANTS)
    rng = random.Random(seed)
    real = sorted(site.real_pages())
    paths = real + sorted(site.broken_link_paths())[:40]
    paths += [site._soft404_url(variant, rng) for variant in SOFT404_VARIANTS for _ in range(6)]
    rng.shuffle(paths)
    # Some real pages first, so that directories settle before the host
    # learns an error shape (after that nothing passes unread) in every order.
    first = rng.sample(real, 60)
    chosen = set(first)
    paths = first + [path for path in paths if path not in chosen]
    detector = Soft404Detector(3)
    unread = read = 0
    for path in paths:
        url = BASE + path
        key = canonical_url(url)
        linked = rng.choice([False, None, True])
        facts = page_facts(url, site.respond("127.0.0.1", path, 8000).body.decode())
        if detector.passes_unread(key, linked_by_soft404=linked):
            unread += 1
            assert not copy.deepcopy(detector).observe(key, *facts, linked_by_soft404=linked), path
        else:
            read += 1
            detector.observe(key, *facts, linked_by_soft404=linked)
    assert unread and read, (unread, read)


STUB = ("The Rust Programming Language. The first edition of the book is no longer distributed with Rust. "
        "Please read the current edition instead.")


def test_a_table_of_contents_longer_than_the_memo_does_not_close_its_directory():
    """mdBook's moved pages (rust-doc's ``book/2018-edition``): one shape,
    each page's table of contents listing the whole book (100 siblings,
    more than the directory's memo of sibling links). The second page links
    the first, which the memo no longer held: it looked fresh, and the
    second-child rule closed the directory (103 real pages refused)."""
    detector = Soft404Detector(3)
    base = "http://h/book/2018-edition/"
    toc = frozenset(f"{base}ch{n:02d}.html" for n in range(100))
    results = [detector.observe(f"{base}ch{n:02d}.html", STUB, toc - {f"{base}ch{n:02d}.html"})
               for n in (41, 7, 63, 12, 88)]
    assert not detector.closed
    assert detector.error_shapes and results == [False] * 5 and detector.counts["spared"] == 3


@pytest.mark.parametrize("first_links", [2, 57])
def test_one_page_linking_new_siblings_does_not_make_a_directory_mint(first_links):
    """The first page of a directory fetched links siblings nobody linked
    before (rustdoc's ``constant._PREFETCH_LOCALITY0`` its neighbour; a
    moved book page its whole table of contents); the next pages of its
    template link the same. One minting page is not a space: its pages of
    an error shape pass. A space's pages each link fresh siblings: refused
    from the third."""
    detector = Soft404Detector(3)
    base = "http://h/core/arch/aarch64/"
    names = [f"constant.PREFETCH_{w}" for w in ("LOCALITYZERO", "LOCALITYONE", "LOCALITYTWO", "READ", "WRITE")]
    text = "Constant: the value of the locality hint given to the prefetch intrinsic of this target feature"
    extra = frozenset(f"{base}other{n}.html" for n in range(first_links - 1))
    results = []
    for n, name in enumerate(names):
        # each links the index and its previous neighbour (the first: its next)
        siblings = {f"{base}index.html", f"{base}{names[n - 1 if n else 1]}.html"}
        if n == 0:
            siblings |= extra
        results.append(detector.observe(f"{base}{name}.html", text, frozenset(siblings)))
    assert detector.error_shapes and results == [False] * 5 and detector.counts["spared"] == 3
    space = [detector.observe(f"{base}q{n}.html", NOT_FOUND, frozenset({f"{base}r{n}.html", f"{base}s{n}.html"}))
             for n in range(4)]
    assert space == [False, False, True, True]


def test_trap_site_event_days_are_real_pages_and_farm_share_thins_the_farm():
    """The trap site's variants of the older traps (bench_traps.py
    --event-days, --farm-share): event days are real pages of their own
    text in the calendar, not trap URLs; a lower farm share links the farm
    from fewer articles, the rest of the site unchanged."""
    site = TrapSite(articles=600, event_days=0.3)
    events = site.event_pages()
    assert 20 <= len(events) <= 60 and events <= site.real_pages()
    day = sorted(events)[0]
    reply = site.respond("127.0.0.1", day, 8000)
    assert reply.kind == "real" and reply.page == day and not site.is_trap_url(BASE + day)
    assert site.respond("127.0.0.1", "/events/2025/06/", 8000).kind == "trap:calendar"
    sparse = TrapSite(articles=600, farm_share=0.002)
    assert len(sparse.farm_links) < len(site.farm_links) and sparse.broken_links == site.broken_links


def test_template_pages_are_spared_whatever_order_their_answers_arrive_in():
    """The crawl test of the API reference (test_soft404_variants_crawl)
    failed under load on main before 104a390: template pages
    (``fn.vcopy_lane_*``) refused when their answers came back before the
    distinct ones settled ``/api/`` (the sparing rule counted the index's
    fresh links as minting). The detector's outcome must not depend on that
    order: here the index answers first (the only way in, as in the crawl,
    where every function's Referer is the index: linked_by_soft404 False),
    then the functions in 300 random orders, with a soft-404 space of the
    same host learned at random points; none is ever refused."""
    site = TrapSite(articles=30, soft404=("dates",), api=(8, 24))

    def facts(path):
        url = canonical_url(BASE + path)
        return url, page_facts(url, site.respond("127.0.0.1", path, 8000).body.decode())

    index = facts("/api/index.html")
    functions = [facts(p) for p in sorted(site.real_pages()) if p.startswith("/api/fn.")]
    errors = [facts(f"/archive/?day=2020-01-0{d}") for d in (1, 2, 3)]
    for seed in range(300):
        rng = random.Random(seed)
        order = [("api", f) for f in rng.sample(functions, len(functions))]
        for page in errors:
            order.insert(rng.randrange(len(order) + 1), ("space", page))
        first = min(i for i, (kind, _) in enumerate(order) if kind == "api")
        order.insert(rng.randrange(first + 1), ("api", index))
        detector = Soft404Detector(pages=3)
        refused = []
        for kind, (url, (text, siblings)) in order:
            # as Soft404Middleware: a settled directory on a host with no error shape passes unread
            if kind == "api" and detector.passes_unread(url, linked_by_soft404=False):
                continue
            if detector.observe(url, text, siblings, linked_by_soft404=False) and kind == "api":
                refused.append(url)
        assert refused == [], (seed, [kind for kind, _ in order], refused)
        # (the space is still caught: its shape is an error shape of the host)
        assert ("127.0.0.1:8000", page_shape(errors[0][0], errors[0][1][0])) in detector.error_shapes
