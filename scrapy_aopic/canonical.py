"""Canonical URLs: one page, one account (SPEC 4).

:func:`canonical_url` is the one function that turns a URL into an account
key, everywhere a URL becomes a key (accounts, dedup, cash shares, redirects,
exports). It returns ``None`` for URLs that can never be fetched (non-http(s)
schemes, unparsable input) instead of raising.
"""

from __future__ import annotations

from w3lib.url import canonicalize_url


def canonical_url(url: str) -> str | None:
    """The account key of ``url``, or ``None`` if it is not a fetchable
    http(s) URL."""
    try:
        canonical = canonicalize_url(url, keep_fragments=False)
    except (ValueError, UnicodeError):
        return None
    scheme = canonical.split(":", 1)[0].lower()
    if scheme not in ("http", "https"):
        return None
    return canonical
