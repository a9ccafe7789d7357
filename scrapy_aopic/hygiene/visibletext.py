"""The visible text of an HTML page: what :mod:`scrapy_aopic.hygiene.simhash` fingerprints.

Scripts, styles, comments and markup are removed, and, optionally,
boilerplate: navigation, headers, footers, side bars, ads, and *lone links*
(a link whose list item, table cell or block has no text of its own beside
it: menus, tag clouds, pagers). Templates add those to every page of a
site; left in, they make different pages alike and copies of one page under
different templates unlike.

A heuristic never removes the element that holds most of the page's text:
an element judged boilerplate (by its tag, class, id or role) that holds
more than half of the page's characters is kept. Themes name their main
column after the layout (Sphinx's Read-the-Docs theme: ``wy-nav-content``
inside ``wy-body-for-nav``), and ASP.NET wraps whole pages in a ``<form>``.

:func:`tree_text` reads the tree Scrapy's selector already parsed, so a page
is parsed once for the spider and the fingerprint, and never changes it.
It runs in C: a small XSLT stylesheet (libxslt) writes the text. The
stylesheet judges elements by their tags; a page whose class, id or role
values mark boilerplate is walked in Python instead (:func:`_walk_text`,
also the fallback for trees deeper than libxslt's recursion limit). The two
write exactly the same text.
"""

from __future__ import annotations

import contextlib
import re

from lxml import etree
from lxml.html import HtmlElementClassLookup, HTMLParser as _LxmlHtmlParser

__all__ = ["tree_text", "visible_text"]

#: Elements whose content is never visible text.
_INVISIBLE = (
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe",
    "object", "embed", "canvas", "select", "textarea", "button", "audio", "video",
)  # fmt: skip
#: Elements that hold a site's template rather than a page's content.
_BOILERPLATE_TAGS = ("nav", "header", "footer", "aside", "form", "menu", "dialog")
#: ARIA roles of template regions.
_BOILERPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog", "alert"}
)
#: Words that, as a whole token of a class or id, mark template regions and ads
#: (``navheader``, ``navfooter``: the DocBook stylesheets' page navigation).
_BOILERPLATE_WORDS = frozenset(
    """nav navbar navigation menu menubar topbar header masthead banner footer
    sidebar side-bar aside breadcrumb breadcrumbs crumbs ad ads advert adverts
    advertisement advertising sponsor sponsored promo promotion cookie cookies
    consent share sharing social related comments comment disqus newsletter
    subscribe popup modal toolbar skip pagination pager widget widgets
    copyright legal navheader navfooter""".split()
)
#: Containers of the whole page or of its main content, and headings (a
#: heading titles content: ``h3 class="code-header"`` is rustdoc's method
#: signature, ``h2 class="section-header"`` a section's title), whatever
#: their class, id or role.
#: Phrasing elements are not regions either: ``span class="comment"`` is a
#: code comment in Doxygen's and rustdoc's highlighted listings.
_NEVER_BOILERPLATE = frozenset(
    """html body main article h1 h2 h3 h4 h5 h6 span code em strong b i small sup sub mark
    kbd samp var tt font abbr cite q time""".split()
)
#: The header and footer of a piece of content, not of the site, inside
#: these (HTML-AAM maps ``header`` to the banner role only outside them):
#: Javadoc's ``<main><div class="header"><h1>Class Assert``.
_SECTIONING = ("main", "article", "section")
#: Whether an element holds a main landmark (the page's main content): an
#: element holding one is never boilerplate.
_HOLDS_MAIN = etree.XPath("boolean(descendant::*[self::main or @role='main'])")
_SECTION_PARTS = ("header", "footer")
#: Rows, sections and heading cells of a table: marked header or footer,
#: they head or close the table (see :func:`_section_part`).
_TABLE_PARTS = ("tr", "thead", "tfoot", "th")
_CLASS_TOKEN = re.compile(r"[\s_-]+")
#: Elements that start and end a line of text.
_BLOCKS = (
    "p", "div", "br", "li", "td", "th", "tr", "h1", "h2", "h3", "h4", "h5", "h6",
    "section", "article", "main", "blockquote", "pre", "table", "ul", "ol", "dl",
    "dt", "dd", "hr", "figure", "figcaption", "address", "center", "title",
)  # fmt: skip
#: Separators between links in menus and pagers: text made of these alone
#: does not make a link part of a sentence.
_LINK_PUNCTUATION = "|·•-–—/»«›‹,:;()[]"
_DELETE_LINK_PUNCTUATION = str.maketrans("", "", _LINK_PUNCTUATION)
#: Where menus, tag clouds and pagers put their links.
_LINK_CONTAINERS = frozenset("ul ol li dl dt dd table tr td th div p section".split())
#: Text longer than this is a sentence, not separators, without a closer look.
_SURELY_FREE = 12
#: XPath predicate: a text node that is text of its own, not link separators
#: (:func:`_free_text`). The length test first: translate() is slow in libxml2.
_FREE = (
    f"string-length(normalize-space(.)) > {_SURELY_FREE}"
    f" or normalize-space(translate(., '{_LINK_PUNCTUATION}', ''))"
)
#: Whether a table holds text outside its links: a table of records (a
#: member list: a name, a signature, the class it comes from), not a menu
#: laid out in cells. One link alone in a cell of such a table is a field
#: of a record (:func:`_lone_link`).
_HOLDS_RECORDS_SOURCE = f"(.//text()[not(ancestor::a)][{_FREE}])[1]"
_HOLDS_RECORDS = etree.XPath(f"boolean({_HOLDS_RECORDS_SOURCE})")
#: The sections of a table, between it and its rows.
_TABLE_SECTIONS = ("tbody", "thead", "tfoot")
#: What may stand between a table and its cells.
_ROW_PARTS = frozenset(("tr", *_TABLE_SECTIONS))
_CELLS = ("td", "th")
#: A heading: an ``h1``-``h6``, or an element classed ``title`` with text of
#: its own (Doxygen's ``div.title``, which holds the page's group path).
#: Links inside one are words of the heading, not a menu (the stylesheet's
#: test; :func:`_in_heading` is the walk's).
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_IN_HEADING_SOURCE = (
    f"ancestor-or-self::*[{' or '.join(f'self::{tag}' for tag in _HEADINGS)}"
    " or (contains(concat(' ', normalize-space(@class), ' '), ' title ') and text()[normalize-space()])]"
)
_XPATH_SPACES = re.compile("[ \t\r\n]+")
_HEADING_TAGS = frozenset(_HEADINGS)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.I)

_parser = etree.HTMLParser(
    recover=True, encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True
)


_boilerplate_marks: dict[str, bool] = {}


def _marks_boilerplate(value: str) -> bool:
    """:func:`_has_boilerplate_word`, memoized for class values: a site's
    templates repeat a few hundred of them on every page."""
    marked = _boilerplate_marks.get(value)
    if marked is None:
        marked = _has_boilerplate_word(value)
        if len(_boilerplate_marks) >= 1 << 12:
            _boilerplate_marks.clear()
        _boilerplate_marks[value] = marked
    return marked


def _has_boilerplate_word(value: str) -> bool:
    """Whether a class or id value holds a boilerplate word as a token."""
    return any(token in _BOILERPLATE_WORDS for token in _CLASS_TOKEN.split(value.lower()))


def without_xml_declaration(html: str) -> str:
    """``html`` without a leading ``<?xml ...?>``: lxml refuses a ``str``
    that declares its encoding (every XHTML page of DocBook's PostgreSQL
    manual), and the text is decoded already."""
    return _XML_DECLARATION.sub("", html, count=1)


def visible_text(html: str | bytes, *, boilerplate: bool = True, max_chars: int | None = None) -> str:
    """The text a reader sees in ``html`` (``str``, or UTF-8 ``bytes``).

    Scripts, styles, comments and markup are removed, and with
    ``boilerplate`` (default) also navigation, headers, footers, side bars,
    ads and lone links. Malformed HTML is repaired by lxml's parser;
    nothing here raises on bad input (an unparsable document has no text).
    ``max_chars``: see :func:`tree_text`.
    """
    if isinstance(html, str):
        html = without_xml_declaration(html)
        data = html.replace("\x00", "").encode("utf-8", "replace")
    else:
        data = html.replace(b"\x00", b"")
    if not data.strip():
        return ""
    try:
        root = etree.fromstring(data, _parser)
    except (etree.LxmlError, ValueError):
        return ""
    if root is None:
        return ""
    return tree_text(root, boilerplate=boilerplate, max_chars=max_chars)


_INVISIBLE_TAGS = frozenset(_INVISIBLE)
_BOILERPLATE_TAG_SET = frozenset(_BOILERPLATE_TAGS)
_BLOCK_TAGS = frozenset(_BLOCKS)


def tree_text(
    root, *, boilerplate: bool = True, max_chars: int | None = None, marked: bool | None = None
) -> str:
    """:func:`visible_text` of an already parsed lxml tree ``root``.

    The tree is only read, never changed, so it can be the one Scrapy's
    selector parsed (``response.selector.root``) and the spider then uses.
    Comments and processing instructions are skipped (their tails are
    text). ``max_chars``: keep about this many characters of text (a
    fingerprint needs no more than the start of a huge page; ``None``: all).
    ``marked``: :func:`may_be_marked` of ``root`` if the caller knows it
    (``None``: asked here). ``True`` may also be a guess: it walks the tree
    in Python, which writes the same text on any page, marked or not
    (unmarked pages cost the walk instead of the stylesheet); ``False``
    takes the stylesheet, right only for a tree that is not marked.
    """
    if not isinstance(root.tag, str):
        return ""
    if marked is None:
        marked = boilerplate and may_be_marked(root)
    if boilerplate and marked:
        # The stylesheet sees tags only; judging class, id and role values
        # element by element in XPath costs more than this walk.
        with _plain_elements(root):
            text = _walk_text(root, boilerplate)
    else:
        try:
            text = str(_STYLESHEETS[boilerplate](root))
        except etree.XSLTApplyError:  # nested deeper than libxslt's recursion limit
            with _plain_elements(root):
                text = _walk_text(root, boilerplate)
    return text if max_chars is None else text[:max_chars]


@contextlib.contextmanager
def _plain_elements(root):
    """For the time of a walk, the elements of a tree parsed by
    ``lxml.html.HTMLParser`` (Scrapy's selector: parsel makes one such
    parser per document) come as plain lxml elements.

    lxml.html chooses the class of every element proxy lxml creates in a
    Python method (``HtmlElementClassLookup.lookup``): one Python call per
    element the walk visits, about 15 % of the walk on DocBook pages. The
    walk reads tags, attributes, text and parents only, the same on either
    class. The lookup is the parser's (``set_element_class_lookup``); it is
    put back as that parser's ``__init__`` sets it, so proxies made after
    the walk (the spider's selectors) are lxml.html's again, and proxies
    alive before it keep their class. No proxy made here outlives the walk.
    Only for exactly ``lxml.html.HTMLParser`` (whose lookup is known); any
    other parser's tree is walked as it is."""
    parser = root.getroottree().parser
    if type(parser) is not _LxmlHtmlParser:
        yield
        return
    parser.set_element_class_lookup()
    try:
        yield
    finally:
        parser.set_element_class_lookup(HtmlElementClassLookup())


def _stylesheet(boilerplate: bool) -> etree.XSLT:
    """The XSLT that writes a tree's visible text: every text node is
    copied, a block element ends a line, invisible elements are skipped,
    and with ``boilerplate`` also template tags and lone links."""
    skipped = list(_INVISIBLE)
    blocks = "|".join(_BLOCKS)
    link_templates = ""
    if boilerplate:
        skipped += _BOILERPLATE_TAGS
        # A container judges its text once and tells its links (parameter
        # "lone"): a test per link would read all its siblings' text,
        # quadratic in a tag cloud or sitemap of thousands of links. The
        # template for "*" stops libxslt's built-in rule from passing "lone"
        # on to links deeper down. A table judges its text once too and
        # tells its cells through its sections and rows (parameter
        # "records"): a cell whose one link is a record's field keeps it.
        tables = ("table", "tr", *_CELLS)
        containers = "|".join(sorted(_LINK_CONTAINERS - set(tables)))
        blocks = "|".join(tag for tag in _BLOCKS if tag not in _LINK_CONTAINERS)
        # (a link's ancestors are its container and the container's)
        lone = f"a and not(text()[{_FREE}]) and not({_IN_HEADING_SOURCE})"
        cell_lone = f"a and not(text()[{_FREE}]) and not($records and count(.//a) = 1) and not({_IN_HEADING_SOURCE})"
        link_templates = f"""
      <xsl:template match="{containers}">
        <xsl:text>&#10;</xsl:text>
        <xsl:apply-templates><xsl:with-param name="lone" select="{lone}"/></xsl:apply-templates>
        <xsl:text>&#10;</xsl:text>
      </xsl:template>
      <xsl:template match="table">
        <xsl:text>&#10;</xsl:text>
        <xsl:apply-templates>
          <xsl:with-param name="lone" select="{lone}"/>
          <xsl:with-param name="records" select="boolean({_HOLDS_RECORDS_SOURCE})"/>
        </xsl:apply-templates>
        <xsl:text>&#10;</xsl:text>
      </xsl:template>
      <xsl:template match="{"|".join(_TABLE_SECTIONS)}">
        <xsl:param name="records" select="false()"/>
        <xsl:apply-templates><xsl:with-param name="records" select="$records"/></xsl:apply-templates>
      </xsl:template>
      <xsl:template match="tr">
        <xsl:param name="records" select="false()"/>
        <xsl:text>&#10;</xsl:text>
        <xsl:apply-templates>
          <xsl:with-param name="lone" select="{lone}"/>
          <xsl:with-param name="records" select="$records"/>
        </xsl:apply-templates>
        <xsl:text>&#10;</xsl:text>
      </xsl:template>
      <xsl:template match="{"|".join(_CELLS)}">
        <xsl:param name="records" select="false()"/>
        <xsl:text>&#10;</xsl:text>
        <xsl:apply-templates><xsl:with-param name="lone" select="{cell_lone}"/></xsl:apply-templates>
        <xsl:text>&#10;</xsl:text>
      </xsl:template>
      <xsl:template match="a">
        <xsl:param name="lone" select="false()"/>
        <xsl:if test="not($lone) or ancestor::main or ancestor::*[@role='main']"><xsl:apply-templates/></xsl:if>
      </xsl:template>
      <xsl:template match="*"><xsl:apply-templates/></xsl:template>"""
    # A template element holding more than half the page's characters
    # ($total) is the page, whatever its tag: it is kept.
    keep_main = ""
    if boilerplate:
        sectioned = " or ".join([f"ancestor::{tag}" for tag in _SECTIONING] + ["ancestor::*[@role='main']"])
        parts = "|".join(f"{tag}[{sectioned}]" for tag in _SECTION_PARTS)
        keep_main = f"""
      <xsl:template match="{"|".join(_BOILERPLATE_TAGS)}" priority="3">
        <xsl:if test="string-length(.) * 2 > $total or .//main or .//*[@role='main']"><xsl:apply-templates/></xsl:if>
      </xsl:template>
      <xsl:template match="{parts}" priority="4"><xsl:apply-templates/></xsl:template>"""
    source = f"""<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
      <xsl:output method="text" encoding="utf-8"/>
      <xsl:variable name="total" select="string-length(/)"/>
      <xsl:template match="{"|".join(skipped)}" priority="2"/>{keep_main}
      <xsl:template match="{blocks}"><xsl:text>&#10;</xsl:text><xsl:apply-templates/><xsl:text>&#10;</xsl:text></xsl:template>{link_templates}
    </xsl:stylesheet>"""
    return etree.XSLT(etree.XML(source), access_control=etree.XSLTAccessControl.DENY_ALL)


_STYLESHEETS = {boilerplate: _stylesheet(boilerplate) for boilerplate in (False, True)}
#: Characters of text under a node (XPath ``string-length(string())``, in C).
_STRING_LENGTH = etree.XPath("string-length(string())")
#: Every class, id and role value of a page (plain strings). Three paths,
#: not a union: libxml2 merges the node-sets of a union in quadratic time
#: (150 ms instead of 10 ms on a 1 MB page).
_MARKING_PATHS = tuple(etree.XPath(f"//@{name}", smart_strings=False) for name in ("class", "id", "role"))


def may_be_marked(root) -> bool:
    """Whether a class, id or role value of the tree ``root`` may mark
    boilerplate; the ids and roles are read only when no class does (each
    path reads the whole tree, and most marked pages are marked by a
    class)."""
    return any(any(map(_may_mark_boilerplate, set(path(root)))) for path in _MARKING_PATHS)


def _walk_text(root, boilerplate: bool) -> str:
    """The stylesheet's output, computed in Python, where class, id and role
    values are judged too. ``iterwalk`` keeps the walk iterative (any depth)
    and in C between the elements it returns."""
    # The page's characters: an element holding more than half is kept.
    total = int(_STRING_LENGTH(root.getroottree())) if boilerplate else 0
    pieces: list[str] = []
    append = pieces.append
    walker = etree.iterwalk(root, events=("start", "end", "comment", "pi"))
    just_skipped = False
    lone_containers: dict = {}  # container -> its links are lone (see _lone_link)
    # Main landmarks (main, role "main") around the element: each element
    # the walk opens is asked, not the whole page searched first (on a
    # Sphinx page that search costs a quarter of the walk).
    in_main = 0
    # Per open element: 1 if a block (its end writes a newline), 2 if a
    # main landmark, so that its end reads nothing: every lxml property
    # read is a C call.
    opened: list[int] = []
    for event, element in walker:
        if event == "start":
            tag = element.tag
            # The common verdicts first, inline (see _skipped).
            if tag in _INVISIBLE_TAGS or (
                boilerplate
                and tag not in _NEVER_BOILERPLATE
                and _skipped(element, boilerplate, lone_containers, total, in_main)
            ):
                walker.skip_subtree()  # the next event is this element's end
                just_skipped = True
                continue
            flags = 1 if tag in _BLOCK_TAGS else 0
            if boilerplate and (tag == "main" or element.get("role") == "main"):
                in_main += 1
                flags |= 2
            opened.append(flags)
            if flags & 1:
                append("\n")  # a block starts a line: "source<h3>impl" is two words
            text = element.text
            if text:
                append(text)
            continue
        if event == "end":
            if just_skipped:
                just_skipped = False
            else:
                flags = opened.pop()
                if flags & 1:
                    append("\n")
                if flags & 2:
                    in_main -= 1
        tail = element.tail  # also of comments and processing instructions
        if tail:
            append(tail)
    return "".join(pieces)


def _skipped(element, boilerplate: bool, lone_containers: dict, total: int, in_main: int = 0) -> bool:
    tag = element.tag
    if tag in _INVISIBLE_TAGS:
        return True
    if not boilerplate or tag in _NEVER_BOILERPLATE:
        return False
    if tag == "a":
        # The page's own main landmark holds content, its lists of links too
        # (a table of contents, a list of members): lone only outside it.
        return not in_main and _lone_link(element, lone_containers)
    if not _judged_boilerplate(element, tag):
        return False
    # Wrappers of the main landmark (a theme's "wy-nav-content") are kept.
    if _HOLDS_MAIN(element) or _section_part(element, tag) or _titles_the_page(element, tag):
        return False
    # Never the element that holds most of the page (see the module).
    return _STRING_LENGTH(element) * 2 <= total


def _judged_boilerplate(element, tag: str) -> bool:
    """Whether the tag, class, id or role of ``element`` marks a template region."""
    if tag in _BOILERPLATE_TAG_SET:
        return True
    value = element.get("class")
    if value and _marks_boilerplate(value):
        return True
    value = element.get("id")
    if value and _has_boilerplate_word(value):  # ids are unique per page: no memo
        return True
    value = element.get("role")
    return bool(value) and _boilerplate_role(value)


def _section_part(element, tag: str) -> bool:
    """Whether ``element`` is the header or footer of a piece of content
    (:data:`_SECTIONING`) or of a table (:data:`_TABLE_PARTS`: Doxygen's
    ``tr class="inherit_header"``, "Public Member Functions inherited from
    ..."), judged boilerplate only for that: it is kept. A site's header
    is a region of the page, not a row of a table."""
    if tag in _SECTION_PARTS:
        pass
    elif tag in _BOILERPLATE_TAG_SET or element.get("role"):
        return False
    else:
        words = set()
        for name in ("class", "id"):
            value = element.get(name)
            if value:
                words.update(token for token in _CLASS_TOKEN.split(value.lower()) if token in _BOILERPLATE_WORDS)
        if not words or not words <= set(_SECTION_PARTS):
            return False
        if tag in _TABLE_PARTS:
            return True
    return any(
        ancestor.tag in _SECTIONING or ancestor.get("role") == "main" for ancestor in element.iterancestors()
    )


#: The title of a page or a piece of content: an ``h1``, or a plain-text
#: element whose class is a title's (Doxygen's ``div.title``), not a link
#: (a site's name in its banner links to its home page).
_PAGE_TITLE = etree.XPath(
    ".//*[self::h1 or contains(concat(' ', normalize-space(@class), ' '), ' title ')"
    " or contains(concat(' ', normalize-space(@class), ' '), ' headertitle ')]"
    "[normalize-space(text())][not(ancestor-or-self::a)]"
)


def _titles_the_page(element, tag: str) -> bool:
    """Whether ``element``, marked only as a *header* by its class or id
    (not a ``header`` tag, not a role), holds a page title
    (:data:`_PAGE_TITLE`): the header of the content, not of the site.
    Doxygen puts every page's title in ``<div class="header"><div
    class="headertitle"><div class="title">``, outside any landmark; its
    links (the page's own section index) are still judged one by one."""
    if tag in _BOILERPLATE_TAG_SET or element.get("role"):
        return False
    words = set()
    for name in ("class", "id"):
        value = element.get(name)
        if value:
            words.update(token for token in _CLASS_TOKEN.split(value.lower()) if token in _BOILERPLATE_WORDS)
    return words == {"header"} and bool(_PAGE_TITLE(element))


def _lone_link(link, lone_containers: dict) -> bool:
    """Whether ``link`` sits in a list item, table cell or block
    (:data:`_LINK_CONTAINERS`) with no text of its own beside its elements
    (punctuation and white space aside): a menu entry, a tag in a cloud, a
    pager's number, a cell that is a link. Such links are left out; a link
    inside a sentence, a heading or inline markup is text, and so is the one
    link of a cell in a table of records (:data:`_HOLDS_RECORDS`: a member
    list's "defined in" column), where a menu laid out as a table has no
    text outside its links.

    ``lone_containers`` remembers the answer per container (and table) for
    the walk: the test reads every child, and a container may hold
    thousands of links."""
    parent = link.getparent()
    if parent is None:
        return True
    if parent.tag not in _LINK_CONTAINERS:
        return False
    lone = lone_containers.get(parent)
    if lone is None:
        lone = lone_containers[parent] = not (
            bool(parent.text and _free_text(parent.text))
            or any(child.tail and _free_text(child.tail) for child in parent)
            or (parent.tag in _CELLS and _record_field(parent, lone_containers))
            # (the link's ancestors are its container and the container's)
            or _in_heading(parent, lone_containers)
        )
    return lone


def _in_heading(element, memo: dict) -> bool:
    """Whether ``element`` is or sits in a heading (:data:`_HEADINGS`, or
    classed ``title`` with text of its own): the stylesheet's
    ``_IN_HEADING_SOURCE`` in Python (an XPath call per container costs
    more than this walk up). ``memo`` holds the answer per element, so the
    containers of a 600-entry table of contents walk up one step each."""
    path = []
    node = element
    while node is not None:
        known = memo.get(("heading", node))
        if known is not None:
            break
        if node.tag in _HEADING_TAGS or _titled(node):
            known = True
            break
        path.append(node)
        node = node.getparent()
    else:
        known = False
    for node in path:  # below the first heading or known answer: the same answer
        memo[("heading", node)] = known
    return known


def _titled(node) -> bool:
    """Whether ``node`` is classed ``title`` and holds text of its own."""
    value = node.get("class")
    # (the substring test first: most classes are not a title's)
    return bool(value) and "title" in value and "title" in _XPATH_SPACES.split(value) and bool(
        (node.text and node.text.strip(" \t\r\n"))
        or any(child.tail and child.tail.strip(" \t\r\n") for child in node)
    )


def _record_field(cell, lone_containers: dict) -> bool:
    """Whether ``cell`` holds one link and is a cell of a table of records
    (the stylesheet's parameter "records", which flows from the table
    through its sections and rows, any of them in any order, to the cell)."""
    table = cell.getparent()
    while table is not None and table.tag in _ROW_PARTS:
        table = table.getparent()
    if table is None or table.tag != "table":
        return False
    key = ("records", table)
    records = lone_containers.get(key)
    if records is None:
        records = lone_containers[key] = bool(_HOLDS_RECORDS(table))
    return records and sum(1 for _ in cell.iter("a")) == 1


def _free_text(text: str) -> bool:
    """Whether ``text`` is more than white space and link punctuation
    (or, whatever it holds, longer than :data:`_SURELY_FREE` characters
    once its white space is normalized, as XPath's ``normalize-space``)."""
    if len(_XPATH_SPACES.sub(" ", text).strip(" ")) > _SURELY_FREE:
        return True
    return bool(text.translate(_DELETE_LINK_PUNCTUATION).strip(" \t\r\n"))



def _boilerplate_role(value: str) -> bool:
    return value.strip().lower() in _BOILERPLATE_ROLES


def _may_mark_boilerplate(value: str) -> bool:
    """Whether ``value``, as a class, id or role, would mark boilerplate."""
    return _marks_boilerplate(value) or _boilerplate_role(value)
