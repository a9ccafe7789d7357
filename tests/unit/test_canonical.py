"""Canonical URLs (SPEC 4): one page, one key; hostile input never raises."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy.settings import Settings

from scrapy_aopic.hygiene.canonical import MAX_URL_CHARS, Canonicalizer, build_canonicalizer, canonical_url
from scrapy_aopic.hygiene.domains import host_of, registered_domain

# Spellings that must share one key with the first of their group.
SAME = [
    [
        "http://example.com/a/b?x=1&y=2",
        "HTTP://EXAMPLE.COM/a/b?y=2&x=1",
        "http://example.com:80/a/b?x=1&y=2",
        "http://example.com./a/b?x=1&y=2",
        "http://example.com/a//b?x=1&y=2",
        "http://example.com/a/./c/../b?x=1&y=2#section",
        "http://example.com/a/b?x=1&&y=2&",
        "http://example.com/a/b?x=1&y=2&utm_source=news&utm_medium=mail",
        "http://example.com/a/b?gclid=abc&x=1&fbclid=zz&y=2",
        "http://example.com/a/b;jsessionid=0A1B2C3D?x=1&y=2",
        "http://example.com/a/b?x=1&PHPSESSID=deadbeef&y=2",
        "http://example.com/a/b?sid=42&x=1&y=2",
        "http://example.com/a/b?x=1&y=2&ASPSESSIONIDQQGGQGPG=KLMNOP",
        "http://example.com/a/b?CFID=12&CFTOKEN=34&x=1&y=2",
        "  http://example.com/a/b?x=1&y=2\n",
        "http://exa\tmple.com/a/b?x=1&y=2",
        "http://example.com/a/%62?x=1&y=2",
    ],
    ["https://example.com/", "https://example.com:443/", "https://example.com", "https://example.com/?", "https://example.com/#top"],
    ["http://bücher.de/straße", "http://xn--bcher-kva.de/stra%C3%9Fe", "http://BÜCHER.de/straße"],
    ["http://[::1]:8080/x", "http://[0:0::1]:8080/x"],
    ["http://example.com/p%2fq", "http://example.com/p%2Fq"],
    ["http://example.com/(S(lit3py55t21z5v55vlm25s55))/page.aspx", "http://example.com/page.aspx"],
    ["http://example.com/a?q=hello+world", "http://example.com/a?q=hello%20world"],
]

# Pairs that must stay distinct.
DIFFERENT = [
    ("http://example.com/Page", "http://example.com/page"),
    ("http://example.com/a?p=1", "http://example.com/a?p=2"),
    ("http://example.com/a?p=1", "http://example.com/a?P=1"),
    ("http://example.com/a", "https://example.com/a"),
    ("http://example.com/a", "http://example.com:8080/a"),
    ("http://example.com/a", "http://www.example.com/a"),  # www folding is off by default
    ("http://example.com/a/", "http://example.com/a"),
    ("http://example.com/a?id=1", "http://example.com/a"),
    ("http://example.com/p%2Fq", "http://example.com/p/q"),
    ("http://a.example.com/", "http://b.example.com/"),
]

UNFETCHABLE = [
    "javascript:void(0)",
    "JavaScript:alert(1)",
    "mailto:someone@example.com",
    "data:text/html,<h1>x</h1>",
    "file:///etc/passwd",
    "ftp://example.com/file",
    "tel:+123",
    "/relative/path",
    "http://",
    "http:///path",
    "http://exa mple.com/",
    "http://example.com:0/",
    "http://example.com:65536/",
    "http://example.com:12ab/",
    "http://[::1/",
    "",
    None,
    42,
    b"\xff\xfe",
]


@pytest.mark.parametrize("group", SAME, ids=lambda g: g[0])
def test_spellings_share_one_key(group):
    keys = {u: canonical_url(u) for u in group}
    assert keys[group[0]] is not None
    assert set(keys.values()) == {keys[group[0]]}, keys


@pytest.mark.parametrize("a,b", DIFFERENT)
def test_different_pages_stay_distinct(a, b):
    assert canonical_url(a) is not None and canonical_url(b) is not None
    assert canonical_url(a) != canonical_url(b)


@pytest.mark.parametrize("url", UNFETCHABLE)
def test_unfetchable_input_is_none(url):
    assert canonical_url(url) is None


def test_exact_forms():
    assert canonical_url("HTTP://User@Example.COM:8080/A/?b=1&a=2#f") == "http://User@example.com:8080/A/?a=2&b=1"
    assert canonical_url("http://example.com") == "http://example.com/"
    assert canonical_url("http://example.com/a;jsessionid=1?x=1") == "http://example.com/a?x=1"


def test_huge_url_is_refused_not_processed():
    assert canonical_url("http://example.com/" + "a" * MAX_URL_CHARS) is None
    assert canonical_url("http://example.com/" + "a" * 10_000) is not None


def test_www_folding_and_custom_params_are_settings():
    canon = build_canonicalizer(
        Settings({"AOPIC_CANONICAL_FOLD_WWW": True, "AOPIC_CANONICAL_DROP_PARAMS": "ref,track*"})
    )
    assert canon("http://www.example.com/a?ref=x&tracking=1&q=2") == "http://example.com/a?q=2"
    # www. alone before a public suffix is not folded into a bare suffix.
    assert canon("http://www.com/") == "http://www.com/"
    # Only the listed parameters are dropped now; utm_* is kept.
    assert canon("http://example.com/?utm_source=a") == "http://example.com/?utm_source=a"
    keep_sessions = Canonicalizer(strip_session_ids=False)
    assert keep_sessions("http://example.com/?sid=1") == "http://example.com/?sid=1"


def test_default_settings_match_module_default():
    canon = build_canonicalizer(Settings())
    for group in SAME:
        for url in group:
            assert canon(url) == canonical_url(url)


def test_registered_domains_offline_with_private_suffixes():
    assert registered_domain("a.b.example.co.uk") == "example.co.uk"
    assert registered_domain("WWW.Example.COM") == "example.com"
    # Private suffixes: each blog is its own site.
    assert registered_domain("alice.blogspot.com") == "alice.blogspot.com"
    assert registered_domain("alice.blogspot.com") != registered_domain("bob.blogspot.com")
    assert registered_domain("127.0.0.1") == "127.0.0.1"
    assert registered_domain("[::1]") == "[::1]"
    assert registered_domain("localhost") == "localhost"
    assert host_of("http://u@Example.com:8080/a?b") == "Example.com"
    assert host_of("http://[::1]:80/") == "[::1]"


def test_no_network_at_import_or_use():
    """A fresh interpreter with sockets blocked imports and uses the
    canonicalizer and tldextract: nothing tries to connect."""
    code = textwrap.dedent(
        """
        import socket
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(args)
            raise OSError("network blocked by test")
        class NoSocket(socket.socket):
            def connect(self, *a, **k):
                refuse(*a)
            def connect_ex(self, *a, **k):
                refuse(*a)
        socket.socket = NoSocket
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from scrapy_aopic.hygiene.canonical import canonical_url
        from scrapy_aopic.hygiene.domains import registered_domain
        from scrapy_aopic.hygiene.traps import TrapGuard
        assert registered_domain("x.y.alice.blogspot.com") == "alice.blogspot.com"
        assert registered_domain("a.example.co.uk") == "example.co.uk"
        assert canonical_url("http://Bücher.example.co.uk/?utm_source=x") == "http://xn--bcher-kva.example.co.uk/"
        guard = TrapGuard()
        assert guard.rule("http://a.example.com/", "http://a.example.com/", 1) is None
        assert not attempts, attempts
        print("OK")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TLDEXTRACT_CACHE": "/nonexistent"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


# -- fuzzing -------------------------------------------------------------------

_escape = st.builds(lambda a, b: f"%{a}{b}", st.sampled_from("0123456789abcdefgzAF%"), st.sampled_from("0123456789abcdefzXF"))
_segment = st.lists(
    st.one_of(st.text(min_size=0, max_size=6), _escape, st.sampled_from([".", "..", ";jsessionid=AB", "(S(abcdefghijklmnop12))", "%00", "\x00", "\x7f", " "])),
    max_size=4,
).map("".join)
_host = st.one_of(
    st.sampled_from(["example.com", "EXAMPLE.com.", "bücher.de", "xn--bcher-kva.de", "127.0.0.1", "[::1]", "[2001:db8::1]", "[::ffff:1.2.3.4]", "a..b", "-x-.com", "[zz]", "ex%41mple.com", "localhost", "www.example.com", "xn--", "日本.jp"]),
    st.text(min_size=0, max_size=12),
)
_port = st.one_of(st.just(""), st.integers(-5, 70000).map(lambda p: f":{p}"), st.sampled_from([":", ":80", ":443", ":0080", ":x"]))
_query = st.lists(
    st.tuples(st.sampled_from(["a", "b", "utm_source", "sid", "PHPSESSID", "gclid", "q", "x%zz", "", "&"]), st.text(max_size=5)),
    max_size=4,
).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs))
_scheme = st.sampled_from(["http", "https", "HTTP", "hTtPs", "javascript", "mailto", "data", "file", "ftp", "", "http:", "ht tp"])
_structured = st.builds(
    lambda s, h, p, segs, q, f: f"{s}://{h}{p}/{'/'.join(segs)}" + (f"?{q}" if q else "") + (f"#{f}" if f else ""),
    _scheme, _host, _port, st.lists(_segment, max_size=5), _query, st.text(max_size=4),
)
_mostly_valid = st.builds(
    lambda s, h, p, segs, q, f: f"{s}://{h}{p}/{'/'.join(segs)}" + (f"?{q}" if q else "") + (f"#{f}" if f else ""),
    st.sampled_from(["http", "https", "HTTP", "hTtPs"]),
    st.sampled_from(["example.com", "EXAMPLE.com.", "bücher.de", "127.0.0.1", "[::1]", "[2001:db8::1]", "www.example.com", "日本.jp"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":0080"]),
    st.lists(_segment, max_size=5), _query, st.text(max_size=4),
)
hostile_urls = st.one_of(_structured, _mostly_valid, st.text(max_size=60), st.sampled_from(UNFETCHABLE[:-3]))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_urls)
def test_fuzz_never_raises_and_is_idempotent(url):
    canon = Canonicalizer(cache_size=0)
    key = canon(url)
    if key is None:
        return
    assert key.startswith(("http://", "https://"))
    assert "#" not in key
    assert canon(key) == key, (url, key, canon(key))
    assert canonical_url(url) == key


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["javascript", "mailto", "data", "file", "ftp", "about", "tel"]), st.text(max_size=30))
def test_fuzz_non_http_schemes_refused(scheme, rest):
    assert canonical_url(f"{scheme}:{rest}") is None


# -- end to end: redirects and aliases on a local site ---------------------------


@pytest.fixture(scope="module")
def alias_crawl():
    from tests.support.trapsite import SiteServer, TrapSite, run_crawl

    site = TrapSite(articles=30, sections=3, per_listing=10, traps=False)
    with SiteServer(site) as server:
        report = run_crawl([server.base + "/"], {"ADDONS": {"scrapy_aopic.Addon": 0}, "CLOSESPIDER_PAGECOUNT": 300})
        log = server.take_log()
    return site, server, report, log


def test_every_page_fetched_once_whatever_the_spelling(alias_crawl):
    from collections import Counter

    site, _, _, log = alias_crawl
    served = Counter(page for _, _, kind, page in log if kind == "real")
    assert set(served) == site.real_pages()
    assert max(served.values()) == 1, [p for p, n in served.items() if n > 1]
    # The spellings were there to fold: tracking parameters and upper-case hosts.
    assert site.tracking and any(j % 13 == 0 for links in site.related for j in links)


def test_redirects_and_meta_refresh_become_aliases(alias_crawl):
    _, server, report, log = alias_crawl
    accounts, stats = report["accounts"], report["stats"]
    base = server.base
    assert accounts[f"{base}/go/0"]["state"] == "alias"
    assert accounts[f"{base}/go/0"]["target"] == f"{base}/s/0/0.html"
    assert accounts[f"{base}/refresh/1"]["state"] == "alias"
    assert accounts[f"{base}/refresh/1"]["target"] == f"{base}/s/1/1.html"
    # Both targets were already known: their cash moved, no second fetch.
    assert stats["aopic/redirects_to_known"] >= 2
    assert [t for _, t, _, _ in log].count("/s/0/0.html") == 1
    assert [t for _, t, _, _ in log].count("/s/1/1.html") == 1


def test_unfetchable_links_counted_and_books_balance(alias_crawl):
    stats = alias_crawl[2]["stats"]
    assert stats["aopic/refused/unfetchable_url"] > 0  # ftp:// links in every footer
    assert stats["aopic/conservation_error"] <= 1e-9 * stats["aopic/cash_injected_total"]
