"""Change detection on revisit: validators, checksums, SimHash distance.

Three tests, cheapest first:

1. **Conditional requests.** A revisit sends the ``ETag`` and
   ``Last-Modified`` the page was last served with (``If-None-Match``,
   ``If-Modified-Since``); a ``304 Not Modified`` answer means unchanged and
   costs the server almost nothing (:func:`conditional_headers`,
   :func:`validators_from_headers`, :func:`is_not_modified`).
2. **Exact checksum** of the body (:func:`content_checksum`): equal means
   unchanged.
3. **SimHash distance** of the visible text (:func:`text_fingerprint`,
   :func:`hamming`): pages whose only difference is a clock, a counter or a
   rotating ad stay within a few bits and count as unchanged; see
   :func:`detect_change`.

Pure Python, except :func:`text_fingerprint`, which uses numpy (installed
with the ``simhash`` dependency).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping
from email.utils import formatdate, parsedate_to_datetime
from typing import Any, NamedTuple

_TAGS = re.compile(r"(?is)<(script|style|noscript)\b.*?</\1>|<!--.*?-->|<[^>]+>")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


class Validators(NamedTuple):
    """What a server said about a version of a page, to ask "changed since?"."""

    etag: str | None
    last_modified: str | None


class PageVersion(NamedTuple):
    """What is kept of the last version of a page to compare the next one."""

    checksum: str | None
    fingerprint: int | None  #: 64-bit SimHash of the visible text
    validators: Validators


def _header(headers: Any, name: str) -> str | None:
    """``headers[name]`` as text, from a dict or Scrapy ``Headers``
    (bytes, lists), case-insensitively."""
    if headers is None:
        return None
    value = None
    getter = getattr(headers, "get", None)
    if getter is not None:
        value = getter(name)
        if value is None and isinstance(headers, Mapping):
            lower = name.lower()
            for key, item in headers.items():
                key_text = key.decode("latin-1") if isinstance(key, bytes) else str(key)
                if key_text.lower() == lower:
                    value = item
                    break
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if value is None:
        return None
    value = value.strip()
    return value or None


def validators_from_headers(
    headers: Any, max_bytes: int | None = None, oversized: list[tuple[str, int]] | None = None
) -> Validators:
    """The ``ETag`` and ``Last-Modified`` of a response (either may be None).

    A weak ETag (``W/"..."``) is kept as is: ``If-None-Match`` uses weak
    comparison, so it still validates. A value longer than ``max_bytes``
    is not kept (a server chooses its size, and it is stored per page and
    sent back on every revisit): it is ``None``, and ``(name, size)`` is
    appended to ``oversized``.
    """

    def bounded(name: str) -> str | None:
        value = _header(headers, name)
        if value is not None and max_bytes is not None and len(value) > max_bytes:
            if oversized is not None:
                oversized.append((name, len(value)))  # latin-1: one byte per character
            return None
        return value

    last_modified = bounded("Last-Modified")
    if last_modified is not None:
        try:
            parsedate_to_datetime(last_modified)
        except (TypeError, ValueError, IndexError):
            last_modified = None  # unparseable: do not echo garbage back
    return Validators(bounded("ETag"), last_modified)


def conditional_headers(validators: Validators | None) -> dict[str, str]:
    """Request headers that make a revisit conditional: ``If-None-Match``
    from the ETag, ``If-Modified-Since`` from Last-Modified (empty when the
    server gave neither)."""
    headers: dict[str, str] = {}
    if validators is None:
        return headers
    if validators.etag:
        headers["If-None-Match"] = validators.etag
    if validators.last_modified:
        headers["If-Modified-Since"] = validators.last_modified
    return headers


def is_not_modified(status: int) -> bool:
    """Whether a response status says the page did not change (304)."""
    return status == 304


def http_date(timestamp: float) -> str:
    """``timestamp`` as an HTTP date (for servers and tests)."""
    return formatdate(timestamp, usegmt=True)


def content_checksum(body: bytes | str) -> str:
    """A short, stable checksum of a body (BLAKE2b, 128 bits, hex)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def visible_text(html: str) -> str:
    """Text of an HTML page without scripts, styles, comments and tags
    (crude but dependency-free; enough to fingerprint a version)."""
    return _SPACE.sub(" ", _TAGS.sub(" ", html)).strip()


def text_fingerprint(text: str) -> int:
    """64-bit SimHash (Charikar 2002) of ``text``: word bigrams as features,
    weighted by their counts, BLAKE2b hashes.

    Written here rather than taken from the ``simhash`` package: its
    ``Simhash(text)`` overflows (numpy uint8) on any text where a feature
    occurs more than 255 times, which long pages do.
    """
    import numpy as np  # a dependency of the simhash package, so always there

    words = _WORD.findall(text.lower())
    features = Counter(zip(words, words[1:])) if len(words) > 1 else Counter(words)
    if not features:
        return 0
    hashes = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(repr(f).encode("utf-8"), digest_size=8).digest(), "big")
            for f in features
        ),
        dtype=np.uint64,
        count=len(features),
    )
    weights = np.fromiter(features.values(), dtype=np.int64, count=len(features))
    bits = (hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    votes = ((bits.astype(np.int64) * 2 - 1) * weights[:, None]).sum(axis=0)
    return sum(1 << i for i in range(64) if votes[i] > 0)


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints."""
    return (a ^ b).bit_count()


def page_version(
    body: bytes | str | None,
    headers: Any = None,
    *,
    text: str | None = None,
    fingerprint: int | None = None,
) -> PageVersion:
    """What to keep of a fetched version of a page.

    :param body: the raw body (checksummed).
    :param headers: response headers (validators).
    :param text: its visible text, if the caller has it (else derived from
        ``body`` when it decodes as UTF-8).
    :param fingerprint: a SimHash the caller already computed (e.g. the
        near-duplicate filter's); else one is computed from the text.
    """
    checksum = content_checksum(body) if body is not None else None
    if fingerprint is None:
        if text is None and body is not None:
            raw = body if isinstance(body, str) else body.decode("utf-8", "replace")
            text = visible_text(raw)
        if text:
            fingerprint = text_fingerprint(text)
    return PageVersion(checksum, fingerprint, validators_from_headers(headers))


def detect_change(
    previous: PageVersion | None, current: PageVersion, max_distance: int = 3
) -> bool | None:
    """Whether ``current`` differs from ``previous``.

    ``None`` when there is nothing to compare (first visit). Equal
    checksums: unchanged. Otherwise, with fingerprints on both sides, changed
    only when they are more than ``max_distance`` bits apart (a clock or a
    counter on the page is not a change). Otherwise: changed.
    """
    if previous is None:
        return None
    if previous.checksum is not None and previous.checksum == current.checksum:
        return False
    if previous.fingerprint is not None and current.fingerprint is not None:
        return hamming(previous.fingerprint, current.fingerprint) > max_distance
    if previous.checksum is None or current.checksum is None:
        return None
    return True
