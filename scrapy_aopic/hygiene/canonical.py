"""Canonical URLs: one page, one account (``docs/hygiene.rst``).

:class:`Canonicalizer` turns a URL into its account key, everywhere a URL
becomes a key (accounts, dedup, cash shares, redirects, exports). It returns
``None`` for URLs that can never be fetched (non-http(s) schemes, no host,
bad port, unparsable or absurdly long input) and never raises.

What it folds, in order:

1. WHATWG clean-up: leading/trailing spaces and control characters removed,
   tabs and newlines removed anywhere;
2. session ids: ``;jsessionid=...`` (and ``;phpsessid=``, ``;sid=``,
   ``;sessionid=``) path parameters, ASP.NET cookieless ``/(S(...))/``
   segments, and query parameters named like session ids (``jsessionid``,
   ``phpsessid``, ``sid``, ``sessionid``, ``aspsessionid...``, ``cfid``,
   ``cftoken``...);
3. tracking parameters (``utm_*``, ``gclid``, ``fbclid``...: the
   ``AOPIC_CANONICAL_DROP_PARAMS`` setting);
4. duplicate slashes in the path;
5. :func:`w3lib.url.canonicalize_url`: lower-case scheme and host, IDNA
   host, percent-escapes normalized, dot segments resolved, query arguments
   sorted, empty ``?`` and stray ``&`` removed, fragment removed;
6. the default port (80 for http, 443 for https) and a trailing dot of the
   host removed; optionally ``www.`` folded (``AOPIC_CANONICAL_FOLD_WWW``).

Path case and query values are kept: ``/A`` and ``/a``, ``?p=1`` and
``?p=2`` stay distinct pages. The key is only a key: the URL actually
fetched stays as the site wrote it (the frontier stores that spelling).

Every link of every page goes through here, so results are memoized in a
bounded LRU cache (navigation links repeat on every page of a site).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from w3lib.url import canonicalize_url as _w3lib_canonicalize

from .. import settings as aopic_settings
from ..settings import DEFAULT_DROP_PARAMS

#: Query parameters that carry a session id (matched case-insensitively).
SESSION_PARAMS = frozenset(
    {
        "jsessionid",
        "phpsessid",
        "sid",
        "sessionid",
        "session_id",
        "sessid",
        "cfid",
        "cftoken",
        "zenid",
        "oscsid",
    }
)
#: Prefixes of session-id parameter names (``ASPSESSIONIDQQGGQGPG``...).
SESSION_PARAM_PREFIXES = ("aspsessionid",)


#: Longer input is not a URL anyone can fetch; refusing it early bounds the
#: work a hostile page can cause (the trap guard's length limit is lower).
MAX_URL_CHARS = 65536

#: Memoized URLs per canonicalizer (about 300 bytes each).
CACHE_SIZE = 1 << 15

_DEFAULT_PORTS = {"http": ":80", "https": ":443"}
# WHATWG URL parsing strips C0 controls and space at both ends and removes
# tab and newlines anywhere; browsers fetch what is left.
_STRIP_CHARS = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_SESSION_PATH_PARAM = re.compile(r";(?:jsessionid|phpsessid|sessionid|sid)=[^/?#;]*", re.IGNORECASE)
_ASPNET_COOKIELESS = re.compile(r"/\([A-Za-z]\([A-Za-z0-9]{16,}\)\)(?=/|$)")
_SLASHES = re.compile(r"//+")
_HOST_OK = re.compile(r"(?:[a-z0-9_-]+\.)*[a-z0-9_-]+|\[[0-9a-f:.]+\]")


class Canonicalizer:
    """A configured canonicalization function: ``canon(url) -> key | None``.

    :param drop_params: query parameter names to drop (case-insensitive; an
        entry ending in ``*`` is a prefix). Default
        :data:`DEFAULT_DROP_PARAMS`.
    :param strip_session_ids: drop session-id path parameters, ASP.NET
        cookieless segments and query parameters.
    :param fold_www: fold ``www.example.com`` into ``example.com``.
    :param cache_size: memoized URLs (0: no cache).
    """

    def __init__(
        self,
        drop_params: Iterable[str] | None = DEFAULT_DROP_PARAMS,
        *,
        strip_session_ids: bool = True,
        fold_www: bool = False,
        cache_size: int = CACHE_SIZE,
    ):
        names: set[str] = set()
        prefixes: list[str] = []
        for entry in drop_params or ():
            entry = entry.strip().lower()
            if not entry:
                continue
            if entry.endswith("*"):
                prefixes.append(entry[:-1])
            else:
                names.add(entry)
        if strip_session_ids:
            names |= SESSION_PARAMS
            prefixes.extend(SESSION_PARAM_PREFIXES)
        self.drop_names = frozenset(names)
        self.drop_prefixes = tuple(prefixes)
        self.strip_session_ids = strip_session_ids
        self.fold_www = fold_www
        self._call = lru_cache(maxsize=cache_size)(self._canonicalize) if cache_size else self._canonicalize

    @classmethod
    def from_settings(cls, settings: Any) -> Canonicalizer:
        """The canonicalizer configured by ``AOPIC_CANONICAL_*`` settings."""
        drop = aopic_settings.get(settings, "AOPIC_CANONICAL_DROP_PARAMS")
        if isinstance(drop, str):  # from the command line: "utm_*,gclid"
            drop = [p for p in drop.split(",") if p.strip()]
        return cls(
            drop,
            strip_session_ids=aopic_settings.get_bool(settings, "AOPIC_CANONICAL_STRIP_SESSION_IDS"),
            fold_www=aopic_settings.get_bool(settings, "AOPIC_CANONICAL_FOLD_WWW"),
        )

    def __call__(self, url: Any) -> str | None:
        """The account key of ``url``, or ``None`` if it is not a fetchable
        http(s) URL. Never raises."""
        if not isinstance(url, str):
            if not isinstance(url, (bytes, bytearray)):
                return None
            try:
                url = bytes(url).decode("utf-8")
            except UnicodeDecodeError:
                return None
        if len(url) > MAX_URL_CHARS:
            return None
        # The key never has a fragment: cut it before the memo, where links
        # to a page's sections would each be a miss.
        fragment = url.find("#")
        if fragment >= 0:
            url = url[:fragment]
        try:
            return self._call(url)
        except Exception:  # noqa: BLE001 - hostile input must never stop a crawl
            return None

    def cache_info(self):
        """Hits and misses of the memo cache (``functools`` style)."""
        return self._call.cache_info() if hasattr(self._call, "cache_info") else None

    # -- the work -------------------------------------------------------------

    def _drop_param(self, piece: str) -> bool:
        name = piece.split("=", 1)[0]
        if "%" in name or "+" in name:
            name = unquote_plus(name)
        name = name.lower()
        if name in self.drop_names:
            return True
        return bool(self.drop_prefixes) and name.startswith(self.drop_prefixes)

    def _canonicalize(self, url: str) -> str | None:
        key = self._fixed_point(url)
        # Most URLs are canonical already: hand back the caller's string, so
        # that the memo holds one string for them, not two equal ones (about
        # 100 bytes each: 3 MB of a full memo).
        return url if key == url else key

    def _fixed_point(self, url: str) -> str | None:
        key = self._once(url)
        # Unquoting can form a new escape ("%%30a" -> "%0a"), and w3lib's
        # clean-up can expose a session segment ("/(A(...))\x08" -> "/(A(...))"),
        # which a second pass would change again: iterate to a fixed point
        # (rare, bounded).
        for _ in range(3):
            if key is None or ("%" not in key and "(" not in key and ";" not in key):
                return key
            again = self._once(key)
            if again == key:
                return key
            key = again
        return key

    def _once(self, url: str) -> str | None:
        url = url.strip(_STRIP_CHARS)
        if "\t" in url or "\n" in url or "\r" in url:
            url = _TAB_NEWLINE.sub("", url)
        colon = url.find(":")
        if colon <= 0 or url[:colon].lower() not in _DEFAULT_PORTS:
            return None
        parts = urlsplit(url)  # ValueError (bad IPv6 literal) -> None
        if not parts.netloc:
            return None
        # Host and port are validated on w3lib's output, in _finish.
        path, query = parts.path, parts.query
        if self.strip_session_ids and (";" in path or "(" in path):
            path = _SESSION_PATH_PARAM.sub("", path)
            path = _ASPNET_COOKIELESS.sub("", path)
        if "//" in path:
            path = _SLASHES.sub("/", path)
        if query:
            pieces = query.split("&")
            kept = [p for p in pieces if p and not self._drop_param(p)]
            if len(kept) != len(pieces):
                query = "&".join(kept)
        rebuilt = f"{parts.scheme}://{parts.netloc}{path or '/'}"
        if query:
            rebuilt += "?" + query
        return self._finish(_w3lib_canonicalize(rebuilt, keep_fragments=False))

    def _finish(self, canonical: str) -> str | None:
        """Host and port fix-ups w3lib leaves: default port, trailing dot,
        ``www.``; the host must look like a host name or an IP literal."""
        scheme, sep, rest = canonical.partition("://")
        if not sep or scheme not in _DEFAULT_PORTS:
            return None
        cut = len(rest)
        for mark in "/?#":
            i = rest.find(mark)
            if 0 <= i < cut:
                cut = i
        netloc, tail = rest[:cut], rest[cut:] or "/"
        if "//" in tail:
            path, qmark, query = tail.partition("?")
            tail = _SLASHES.sub("/", path) + qmark + query
        userinfo, at, hostport = netloc.rpartition("@")
        host, port = hostport, ""
        if hostport.startswith("["):
            end = hostport.find("]")
            if end < 0:
                return None
            host, port = hostport[: end + 1], hostport[end + 1 :]
        else:
            i = hostport.rfind(":")
            if i >= 0:
                host, port = hostport[:i], hostport[i:]
        if port:
            digits = port[1:]
            if not digits:
                port = ""
            elif not digits.isdigit() or not 0 < int(digits) < 65536:
                return None
            else:
                port = ":" + str(int(digits))
                if port == _DEFAULT_PORTS[scheme]:
                    port = ""
        host = host.lower().rstrip(".")
        if not host or _HOST_OK.fullmatch(host) is None:
            return None
        if self.fold_www and host.startswith("www.") and "." in host[4:]:
            host = host[4:]
        return f"{scheme}://{userinfo}{at}{host}{port}{tail}"


#: The canonicalizer with default settings. Components of a crawl use
#: ``Frontier.from_crawler(crawler).canonicalize`` (configured by settings).
canonical_url = Canonicalizer()


def build_canonicalizer(settings: Any) -> Canonicalizer:
    """The canonicalizer for Scrapy ``settings`` (``AOPIC_CANONICAL_*``)."""
    return Canonicalizer.from_settings(settings)
