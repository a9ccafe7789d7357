"""Soft 404s and the endless spaces they open (``docs/hygiene.rst``): pure
Python, no Scrapy.

A soft 404 is a "not found" (or "no results") page served with status 200.
When it links to fresh URLs that are soft 404s again (random words, random
tokens, a random query value), a crawl that follows its links spends its
budget there forever, and no stateless URL rule sees it: every URL is short,
shallow and unique.

The detector learns from responses already fetched, no probe request:

* **The shape of a page** is its visible text with every token that also
  occurs in its URL removed and digit runs folded (a "no results for
  *xyz*" page echoes its token), each word once, hashed. Distinct pages
  have distinct text; a soft 404 answers the same whatever the URL.
* **An error shape** is a shape that ``pages`` distinct URLs of one host
  answered. A response of an error shape is a soft 404 (rule
  ``soft404``): refused like a 404, its links not followed, its cash to
  lambda. The first ``pages - 1`` of them pass (their links are followed,
  and lead to more of the shape).
* **A soft-404 directory** is a URL's parent (the path up to its last
  ``/``; for a URL with a query, the path and the parameter names) with
  ``pages`` children answered by error shapes and none by any other shape,
  ``pages`` of which linked to fresh siblings (URLs of the same directory
  no child had linked to before): a space that mints its own URLs, not a
  section with broken links from elsewhere.
  Links into it are refused before they get cash (rule ``soft404_dir``).
  One real page among its children (a shape of its own) keeps the
  directory open, so a site's own section with a few broken links is
  never closed. A URL with a query whose path ends in a name also counts
  under its wider directory (:func:`space_of`).
* **A directory of real pages** (``REAL_SHAPES`` shapes of its own), or
  one where the page's shape does not mint (fewer than two, or at most
  half, of its children of that shape linked to a fresh sibling),
  spares pages of an error shape (``spare_real_dirs``): pages of one template
  that differ only in their URL's words are real; unless the page that
  linked one was of an error shape itself. Such a directory's pages are
  not even read while their host has no error shape
  (:meth:`Soft404Detector.passes_unread`): they would pass whatever their
  shape.

Exact duplicates of a real page under other URLs are folded by the URL
canonicalizer and the duplicate detector before they get here; a shape is
an error shape only when ``pages`` *distinct* canonical URLs answer it.
State is per process and bounded (:attr:`Soft404Detector.MAX_KEYS`).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_DIGIT = re.compile(r"\d")


def parent_of(canonical: str) -> str:
    """The "directory" of a canonical URL: its path up to the last ``/``
    (``/a/`` for ``/a/b`` and ``/a/b/``), or, with a query, the path and the sorted parameter names
    (``http://h/find?q=`` for ``http://h/find?q=xyz``)."""
    base, qmark, query = canonical.partition("?")
    if qmark and query:
        names = sorted({piece.partition("=")[0] for piece in query.split("&")})
        return f"{base}?{'&'.join(n + '=' for n in names)}"
    scheme, sep, rest = base.partition("://")
    slash = rest.rfind("/", 0, len(rest) - 1)  # /a/b/ is a child of /a/
    if slash < 0:
        return f"{scheme}{sep}{rest.partition('/')[0]}/"
    return f"{scheme}{sep}{rest[: slash + 1]}"


def space_of(canonical: str) -> str | None:
    """The wider "directory" of a URL with a query whose path ends in a name
    (``/find/<token>?page=2``): the path's directory and the sorted
    parameter names (``http://h/find/?page=``), where a space that puts its
    random token in the path *and* a query mints its URLs (each is a
    :func:`parent_of` of its own); ``None`` for other URLs and for a name
    with a dot (a script: ``/view.php?id=3``)."""
    base, qmark, query = canonical.partition("?")
    if not (qmark and query) or base.endswith("/"):
        return None
    scheme, sep, rest = base.partition("://")
    slash = rest.rfind("/")
    if slash < 0 or "." in rest[slash + 1:]:
        # A name with a dot is a script or a file (view.php, list.html):
        # its own page with its own parameters, never merged with the
        # directory's other scripts.
        return None
    names = sorted({piece.partition("=")[0] for piece in query.split("&")})
    return f"{scheme}{sep}{rest[: slash + 1]}?{'&'.join(n + '=' for n in names)}"


def url_tokens(canonical: str) -> set[str]:
    """Lower-case words of a URL's path and query (what a page may echo)."""
    rest = canonical.partition("://")[2]
    slash = rest.find("/")
    tail = rest[slash:] if slash >= 0 else ""
    return {t.lower() for t in _TOKEN.findall(tail)}


#: Words a page's shape needs: a page with fewer left (numbers, its
#: URL's words and links to its siblings) has no shape and is never taken
#: for a soft 404.
MIN_SHAPE_WORDS = 8


def page_shape(canonical: str, text: str) -> str | None:
    """The shape of a page: its ``text`` (:func:`shape_text`) without the
    URL's own tokens and without tokens holding a digit (ids, times,
    counters), each word once (where it first occurs), hashed (16 hex
    digits); ``None`` when fewer than :data:`MIN_SHAPE_WORDS` distinct words
    are left.

    Each word once: a soft 404 may echo its token a varying number of times
    ("Nothing matches <token>." once per word of the query), which leaves
    its sentence repeated as often, and every URL a shape of its own."""
    drop = url_tokens(canonical)
    joined = _ascii_shape_words(text, drop)
    if joined is None:
        words = list(dict.fromkeys(w for w in (t.lower() for t in _TOKEN.findall(text))
                                   if w not in drop and not _DIGIT.search(w)))
        if len(words) < MIN_SHAPE_WORDS:
            return None
        joined = " ".join(words).encode("utf-8", "surrogatepass")
    elif not joined:
        return None
    return hashlib.blake2b(joined, digest_size=8).hexdigest()


#: UTF-8 bytes to a page's shape words: ASCII letters and digits
#: lower-cased, every other byte a space.
_ASCII_WORD_BYTES = bytes(
    byte + 32 if 65 <= byte <= 90 else byte if (48 <= byte <= 57 or 97 <= byte <= 122) else 32
    for byte in range(256))
_ASCII_BYTES = bytes(range(128))
#: non-ASCII character -> whether it is a word character of _TOKEN
_WORD_CHAR: dict[str, bool] = {}


def _ascii_shape_words(text: str, drop: set[str]) -> bytes | None:
    """:func:`page_shape`'s words joined by spaces (UTF-8), or ``b""`` when
    fewer than :data:`MIN_SHAPE_WORDS`, computed on bytes in C when every
    word character of ``text`` is ASCII (punctuation, arrows and no-break
    spaces may be anything): the words are then ASCII letters and digits,
    and lower-casing is ASCII's. ``None`` when some word character is not
    ASCII (then str.lower's full rules apply, word by word)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    others = data.translate(None, _ASCII_BYTES)  # the non-ASCII characters' bytes
    if others:
        for char in set(others.decode("utf-8")):
            word = _WORD_CHAR.get(char)
            if word is None:
                if len(_WORD_CHAR) >= 1 << 16:
                    _WORD_CHAR.clear()
                word = _WORD_CHAR[char] = _TOKEN.match(char) is not None
            if word:
                return None
    # each word once, in the order of first occurrence (a dict keeps it), no digit
    words = dict.fromkeys(filter(bytes.isalpha, data.translate(_ASCII_WORD_BYTES).split()))
    for word in drop:
        if word.isascii():
            words.pop(word.encode("ascii"), None)
    return b" ".join(words) if len(words) >= MIN_SHAPE_WORDS else b""


_SKIP_TAGS = frozenset({"script", "style", "noscript", "template"})
#: A link to a file of the page's own directory, written plainly
#: (``sql-select.html``): no scheme, slash, query, parameters, fragment or
#: dot segment.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9_.~-]*")


def shape_text(url: str, html: str | bytes) -> str:
    """The text a page's shape is taken from: its visible text, without the
    labels of links to its siblings (URLs of the same :func:`parent_of`):
    a soft-404 space labels its links with their fresh random tokens, a
    real page's own text is what tells it from its siblings."""
    return page_facts(url, html)[0]


def page_facts(url: str, html: str | bytes) -> tuple[str, frozenset[str]]:
    """``(shape text, sibling links)``: :func:`shape_text`, and the URLs
    (absolute, as written) of the page's links to its siblings."""
    from lxml import etree, html as lxml_html

    from .visibletext import without_xml_declaration

    if isinstance(html, str):
        html = without_xml_declaration(html)
    try:
        # lxml.html's parsing rules (fragments, documents) with plain
        # elements: its element classes cost a Python call per element read.
        root = lxml_html.fromstring(html, parser=_plain_parser()) if html else None
    except (etree.LxmlError, ValueError):
        return "", frozenset()
    if root is None:
        return "", frozenset()
    return _tree_facts(url, root)


#: What makes ``lxml.html.fromstring`` parse a whole document (and return
#: its root) rather than a fragment: its own test.
_FULL_HTML = re.compile(r"^\s*<(?:html|!doctype)", re.I)
#: Element nesting past which lxml's parser, without ``huge_tree`` (as
#: :func:`page_facts` parses), drops the deeper elements; Scrapy's selector
#: parses with ``huge_tree`` and keeps them.
_MAX_DEPTH = 255


def shared_tree_facts(url: str, html: str, root, max_chars: int) -> tuple[str, frozenset[str]]:
    """:func:`page_facts` of ``html[:max_chars]``, read from ``root``, the
    tree Scrapy's selector parsed from the whole of ``html``
    (``response.selector.root``), when that is the tree :func:`page_facts`
    would parse: the page is no longer than ``max_chars``, a whole document
    (not a fragment), holds no NUL and is no deeper than lxml parses without
    ``huge_tree``. Otherwise (or with no ``root``) the page is parsed again.

    The shared tree is never changed (the spider reads it next): the facts
    are taken from a copy, which costs about half a parse."""
    import copy

    from .visibletext import without_xml_declaration

    if root is None or len(html) > max_chars or "\x00" in html or not isinstance(root.tag, str):
        return page_facts(url, html[:max_chars])
    if not _FULL_HTML.match(without_xml_declaration(html)):  # as page_facts reads it
        return page_facts(url, html)
    if _xpaths()["too_deep"](root):
        return page_facts(url, html)
    return _tree_facts(url, copy.deepcopy(root))


_PLAIN_PARSER = None
_XPATHS: dict = {}


def _xpaths() -> dict:
    """Compiled XPaths (built on first use, as the parser: lxml is
    imported with pages): ``text``, every text node under an element;
    ``too_deep``, whether elements are nested :data:`_MAX_DEPTH` deep below
    it (a path of that many steps, evaluated in C level by level)."""
    if not _XPATHS:
        from lxml import etree

        _XPATHS["text"] = etree.XPath("descendant::text()", smart_strings=False)
        _XPATHS["too_deep"] = etree.XPath("boolean(" + "/".join(["*"] * _MAX_DEPTH) + ")")
    return _XPATHS


def _plain_parser():
    """lxml's HTML parser with lxml.html's default options and plain
    element classes (built on first use: lxml is imported with pages)."""
    global _PLAIN_PARSER
    if _PLAIN_PARSER is None:
        from lxml import etree

        _PLAIN_PARSER = etree.HTMLParser()
    return _PLAIN_PARSER


def _tree_facts(url: str, root) -> tuple[str, frozenset[str]]:
    """:func:`page_facts` of a tree it parsed: every text and tail in
    document order (not the root's tail), but none inside scripts, styles,
    comments or links to siblings; and the sibling links (not those inside
    another). The tree is emptied of those parts on the way, so that lxml
    reads the text in C; only links are looked at in Python."""
    from urllib.parse import urljoin

    tag = root.tag
    if not isinstance(tag, str) or not tag or tag in _SKIP_TAGS:
        return "", frozenset()
    for element in list(root.iter(*_SKIP_TAGS)):
        element.clear(keep_tail=True)  # links inside are gone with it
    base_parent = parent_of(url.partition("#")[0])
    base_space = space_of(url.partition("#")[0])

    def sibling(href: str) -> str | None:
        """``urljoin(url, href)`` before its fragment when that is a
        sibling of the page (same :func:`parent_of`, or same
        :func:`space_of`), else ``None`` (also for an href that is no URL
        at all, ``http://[::1/``: urljoin raises on it, and one such link
        must not cost the page its answer)."""
        try:
            target = urljoin(url, href).partition("#")[0]
        except ValueError:
            return None
        if target == url:
            return None
        if parent_of(target) == base_parent or (base_space is not None and space_of(target) == base_space):
            return target
        return None

    # href before its fragment, which alone decides it (pages repeat links
    # and hold many "#section" ones) -> sibling(href)
    judged: dict[str, str | None] = {}
    prefix = None  # urljoin(url, name) is prefix + name for a plain name
    siblings: set[str] = set()
    sibling_links: dict = {}  # (an ordered set)
    for link in root.iter("a"):
        href = link.get("href")
        if not href:
            continue
        href = href.strip()
        if not href:
            target = sibling(href)  # the page itself, fragment and all: not memoized
        else:
            key = href.partition("#")[0]  # "" for every "#section": they resolve alike
            if key in judged:
                target = judged[key]
            elif _PLAIN_NAME.fullmatch(key):
                # urljoin replaces the base's last path segment by the name
                # (a unit test checks it on odd bases): one urljoin a page
                # for the links of a flat manual, not one a distinct link.
                if prefix is None:
                    prefix = urljoin(url, "x")[:-1]
                target = judged[key] = prefix + key
                if target == url or parent_of(target) != base_parent:
                    target = judged[key] = None
            else:
                target = judged[key] = sibling(href if key else "#")
        if target is None:
            continue
        # A link inside a sibling link is never read (document order: the
        # outer one was judged first).
        if sibling_links and any(outer in sibling_links for outer in link.iterancestors("a")):
            continue
        siblings.add(target)
        sibling_links[link] = None
    for link in sibling_links:
        link.clear(keep_tail=True)
    # Every text node under the root, as root.itertext() reads them (it
    # skips comments and processing instructions, not their tails), but
    # without an element proxy made for every element on the way (0.3 ms
    # of the 1.4 this function took on a page of the Python manual).
    return " ".join(filter(None, _xpaths()["text"](root))), frozenset(siblings)


def host_of(canonical: str) -> str:
    rest = canonical.partition("://")[2]
    end = len(rest)
    for sep in "/?":
        i = rest.find(sep)
        if 0 <= i < end:
            end = i
    return rest[:end]


class Soft404Detector:
    """Learns error shapes and soft-404 directories from fetched pages.

    :meth:`observe` is told every page fetched with status 200 and answers
    whether it is a soft 404; :meth:`directory_refuses` answers for a link.
    ``pages``: distinct URLs of one shape that make it an error shape, and
    error children that close a directory (0 = off).
    """

    #: Shapes and directories remembered (each about 200 bytes); the memo
    #: of each starts over when full.
    MAX_KEYS = 1 << 17
    #: URLs remembered per shape (enough to count to ``pages``).
    URLS_PER_SHAPE = 8
    #: Sibling links remembered per directory (beyond, a link the memo does
    #: not hold counts as fresh, unless it is one of the first children
    #: answered).
    MAX_MINTED = 64

    def __init__(self, pages: int = 3, spare_real_dirs: bool = True, dir_pages: int = 2):
        self.pages = pages
        #: children answering one shape, each minting fresh siblings, that
        #: close a directory before the shape is an error shape (0 = off)
        self.dir_pages = min(dir_pages, pages)
        #: a page of an error shape in a directory of real pages passes
        self.spare_real_dirs = spare_real_dirs
        self._shape_urls: dict[tuple[str, str], set[str]] = {}  # (host, shape) -> URLs (up to URLS_PER_SHAPE)
        self.error_shapes: set[tuple[str, str]] = set()  #: (host, shape) of soft 404s
        self._error_hosts: set[str] = set()  # hosts of error_shapes
        # parent -> shapes of its children fetched (a count per shape); a
        # parent with many real children is kept as None (open for good).
        self._dirs: dict[str, Counter[tuple[str, str]] | None] = {}
        self._minted: dict[str, set[str]] = {}  # parent -> sibling links its children made
        # parent -> shape -> its children of that shape that linked fresh siblings
        self._shape_mints: dict[str, Counter[tuple[str, str]]] = {}
        self._children: dict[str, set[str]] = {}  # parent -> its first children answered
        self.closed: dict[str, None] = {}  #: soft-404 directories, in the order closed
        self._passed: list[str] = []
        #: "soft404" pages, "soft404_dir" links refused, "spared" pages of an
        #: error shape passed in a directory of real pages
        self.counts: Counter[str] = Counter()

    def observe(self, canonical: str, text: str, siblings: frozenset[str] | tuple = (), *,
                linked_by_soft404: bool | None = False) -> bool:
        """A page fetched with status 200 (``text`` and ``siblings`` from
        :func:`page_facts`): ``True`` when it is a soft 404.
        ``linked_by_soft404``: the page that linked it answered an error shape
        itself (then it is never spared: a space inside a directory of real
        pages stops one hop after its entry); ``None``: not known (no
        ``Referer``), then it is spared only in a directory of real pages."""
        if not self.pages:
            return False
        shape = page_shape(canonical, text)
        if shape is None:
            return False
        key = (host_of(canonical), shape)
        error = key in self.error_shapes
        if not error:
            urls = self._shape_urls.get(key)
            if urls is None:
                if len(self._shape_urls) >= self.MAX_KEYS:
                    self._shape_urls.clear()
                urls = self._shape_urls[key] = set()
            if len(urls) < self.URLS_PER_SHAPE:
                urls.add(canonical)
            if len(urls) >= self.pages:
                self.error_shapes.add(key)
                self._error_hosts.add(key[0])
                error = True
                #: URLs that passed before their shape was known to be an
                #: error shape (their links were followed); the middleware
                #: takes them (:meth:`take_passed`)
                self._passed.extend(url for url in urls if url != canonical)
                # The pages that passed before the shape was known: their
                # directories learn it now.
                for url in urls:
                    parent = parent_of(url)
                    shapes = self._dirs.get(parent)
                    if shapes:
                        self._check_dir(parent, shapes)
        self._learn_dir(parent_of(canonical), key, canonical, siblings)
        space = space_of(canonical)
        if space is not None:
            self._learn_dir(space, key, canonical, siblings)
        if (error and self.spare_real_dirs and not linked_by_soft404
                and (self._dirs.get(parent_of(canonical), False) is None
                     or (linked_by_soft404 is not None and not self._mints(canonical, key)))):
            # Its directory holds REAL_SHAPES pages of distinct shapes, or
            # its pages of this shape do not mint (_mints): pages of one
            # template that differ only in their URL's words (API pages of
            # sibling functions, "no usage of <class>" pages, a generator's
            # pages in hashed directories of one or two pages each), not a
            # space minting random URLs. It passes; counted. Its links pass
            # too, but a page of the shape it links to is not spared. Where
            # that is unknown (``linked_by_soft404`` None: no Referer), only
            # a directory of real pages spares: "not found" pages that each
            # link fresh URLs in other directories (none mints siblings)
            # would otherwise be followed from one to the next for ever.
            self.counts["spared"] += 1
            return False
        if error:
            self.counts["soft404"] += 1
        return error

    def passes_unread(self, canonical: str, *, linked_by_soft404: bool | None = False) -> bool:
        """Whether a page fetched with status 200 passes whatever its shape,
        so that its page facts need not be read (:meth:`observe` is then not
        called): its directory (and its wider one, :func:`space_of`) holds
        :attr:`REAL_SHAPES` pages of distinct shapes, no error shape of its
        host is known yet, and the page that linked it was not of an error
        shape. :meth:`observe` would pass it too (a page of a shape that
        becomes an error shape there is spared); what is not learned is its
        shape's count: a soft-404 space inside a directory of real pages is
        found only once its shape is learned elsewhere on the host (after
        which every page of the host is read again)."""
        if not self.pages or linked_by_soft404 or not self.spare_real_dirs:
            return False
        if self._dirs.get(parent_of(canonical), False) is not None:
            return False
        space = space_of(canonical)
        if space is not None and self._dirs.get(space, False) is not None:
            return False
        return host_of(canonical) not in self._error_hosts

    def _mints(self, canonical: str, key: tuple[str, str]) -> bool:
        """Whether the pages of shape ``key`` in the directory of
        ``canonical`` (or in its wider directory, :func:`space_of`), this
        page included, mint URLs: two or more of them, and most, linked to
        siblings no other child had linked to, as every page of a soft-404
        space does. A closed directory has minted.

        Two and most, not one: a real directory's first page fetched (an
        index, a page whose table of contents or sidebar lists its
        siblings) links siblings nobody linked before, and the next ones
        link the same (rust-doc's "no longer distributed" book pages, whose
        table of contents lists the whole book; rustdoc's constants of one
        template; junit's ``package-use.html``)."""
        for parent in (parent_of(canonical), space_of(canonical)):
            if parent is None:
                continue
            if parent in self.closed:
                return True
            shapes = self._dirs.get(parent)
            if shapes:
                minting = self._shape_mints.get(parent, {}).get(key, 0)
                if minting >= 2 and minting * 2 > shapes[key]:
                    return True
        return False

    def _learn_dir(self, parent: str, key: tuple[str, str], canonical: str, siblings=()) -> None:
        """Count a child ``canonical`` of ``parent`` (a :func:`parent_of` or a
        :func:`space_of`) answering shape ``key``."""
        if parent in self.closed:
            return
        shapes = self._dirs.get(parent, False)
        if shapes is None:
            return  # real children: open for good
        if shapes is False:
            if len(self._dirs) >= self.MAX_KEYS:
                self._dirs.clear()
                self._minted.clear()
                self._shape_mints.clear()
                self._children.clear()
            shapes = self._dirs[parent] = Counter()
        children = self._children.setdefault(parent, set())
        if canonical in children:
            return  # a revisit (a re-crawl of a hub): the same child, not another
        if len(children) < 16:
            children.add(canonical)
        shapes[key] += 1
        # A child that links to siblings no other child linked to, and
        # that were not fetched already: the directory mints its own URLs
        # (counted under the key None). A manual's table of contents on
        # every page links the pages fetched before it: not fresh.
        minted = self._minted.setdefault(parent, set())
        if siblings:
            # (the children answered count as linked: past the memo's cap, a
            # table of contents that filled it still links the first child)
            fresh = siblings - minted - children
            if fresh:
                shapes[None] += 1
                self._shape_mints.setdefault(parent, Counter())[key] += 1
                if len(minted) < self.MAX_MINTED:
                    minted.update(fresh)
        if len(minted) < self.MAX_MINTED:
            minted.add(canonical)
        self._check_dir(parent, shapes)

    #: Children of distinct shapes (none an error) that keep a directory
    #: open for good.
    REAL_SHAPES = 4

    def _check_dir(self, parent: str, shapes: Counter) -> None:
        """Close ``parent`` when ``pages`` children were fetched, every one
        answered an error shape, and ``pages`` of them linked to siblings
        no other child had linked to (the directory mints its own URLs: a
        site's broken links are linked from elsewhere); a child of any other
        shape keeps it open (for good once there are :attr:`REAL_SHAPES`)."""
        real = sum(1 for k in shapes if k is not None and k not in self.error_shapes)
        if real >= self.REAL_SHAPES:
            self._dirs[parent] = None
            self._minted.pop(parent, None)
            self._shape_mints.pop(parent, None)
            self._children.pop(parent, None)
            return
        answered = sum(n for k, n in shapes.items() if k is not None)
        if not real and answered >= self.pages and shapes[None] >= self.pages:
            self._close(parent)
        elif (self.dir_pages and answered >= self.dir_pages and shapes[None] >= self.dir_pages
              and len(shapes) == 2):  # (one shape and the key None)
            # Every child so far answered the same page whatever its name,
            # and each linked to siblings no child had linked to: a space
            # that mints its own URLs (real pages of one directory differ
            # in their text; pages of one template that differ only in
            # their names are not closed: they link to known siblings or
            # share their directory with an index of another shape).
            self.counts["dir_one_shape"] += 1
            self._close(parent)

    def _close(self, parent: str) -> None:
        self.closed[parent] = None
        del self._dirs[parent]
        self._minted.pop(parent, None)
        self._shape_mints.pop(parent, None)
        self._children.pop(parent, None)

    def directory_refuses(self, canonical: str) -> bool:
        """Whether a link to ``canonical`` goes into a soft-404 directory."""
        if not self.pages or not self.closed:
            return False
        if parent_of(canonical) in self.closed or space_of(canonical) in self.closed:
            self.counts["soft404_dir"] += 1
            return True
        return False

    def take_passed(self) -> list[str]:
        """The URLs of error shapes learned since the last call that passed
        before (soft 404s whose links were followed)."""
        passed, self._passed = self._passed, []
        return passed

    def unanswered(self, canonical: str) -> bool:
        """Whether no child of ``canonical``'s directory (nor of its wider
        one) has answered a page shape yet: nothing there is known real."""
        if parent_of(canonical) in self._dirs:
            return False
        space = space_of(canonical)
        return space is None or space not in self._dirs

    def shapes_seen(self, parent: str) -> int:
        """Distinct shapes ``parent``'s children answered (``REAL_SHAPES``
        once it is open for good, 0 when closed or unknown)."""
        shapes = self._dirs.get(parent, False)
        if shapes is None:
            return self.REAL_SHAPES
        if not shapes:
            return 0
        return len(shapes) - (None in shapes)


class FirstAnswerGate:
    """One fetch at a time into a directory until its first answers decide it.

    A crawl leases URLs by the dozen before any comes back: a soft-404 space
    linked from every page gets its second and third URLs in flight while
    its first is still on its way, and the detector, which learns from
    answers, closes it only after they were paid for. The gate holds a
    request for a directory (its :func:`parent_of`, and :func:`space_of`)
    while another of its children is in flight and the directory is
    undecided: not closed, fewer than ``answers`` children answered, fewer
    than two shapes seen among them. Real directories are decided by their
    first two pages of distinct shapes; a space is closed by its
    ``dir_pages`` answers and what waited for it is refused unfetched.
    Pure bookkeeping: the middleware does the waiting.
    """

    #: Directories whose answers are counted; the memo starts over when full.
    MAX_KEYS = 1 << 16

    def __init__(self, detector: Soft404Detector, answers: int = 3):
        self.detector = detector
        self.answers = answers
        self._busy: set[str] = set()  # directories with a child in flight
        self._answered: Counter[str] = Counter()  # directory -> children answered while gated
        self._waiting: dict[str, list] = {}  # directory -> callbacks of requests held for it

    def keys(self, canonical: str) -> tuple[str, ...]:
        """The undecided directories of ``canonical``."""
        if not self.answers:
            return ()
        detector = self.detector
        keys = []
        for key in (parent_of(canonical), space_of(canonical)):
            if (key is not None and key not in detector.closed and self._answered[key] < self.answers
                    and detector.shapes_seen(key) < 2):
                keys.append(key)
        return tuple(keys)

    def enter(self, keys: tuple[str, ...]) -> bool:
        """Take ``keys`` (from :meth:`keys`) for one request: ``False`` when
        one of them has a child in flight (wait for :meth:`leave`)."""
        if not self._busy.isdisjoint(keys):
            return False
        self._busy.update(keys)
        return True

    def wait(self, keys: tuple[str, ...], wake) -> None:
        """Call ``wake()`` when a request holding one of ``keys`` leaves."""
        for key in keys:
            if key in self._busy:
                self._waiting.setdefault(key, []).append(wake)

    def leave(self, keys: tuple[str, ...], *, answered: bool = True) -> None:
        """The request holding ``keys`` came back (``answered``), or is
        given up on (it never came back): its directories are free again
        and what waited for them is woken (each callback once)."""
        if len(self._answered) >= self.MAX_KEYS:
            self._answered.clear()
        woken: dict = {}
        for key in keys:
            self._busy.discard(key)
            if answered:
                self._answered[key] += 1
            for wake in self._waiting.pop(key, ()):
                woken[wake] = None
        for wake in woken:
            wake()
