"""Records of the Redis frontier: the packed binary layouts the Lua script
reads and writes, and the checked codec of stored request data.

Nothing read back from Redis is trusted: a record of the wrong size or
shape, request JSON that is not ours (a pickle, deep nesting, a ``file:``
URL) is refused by name, never executed, imported or fetched in place of
something else.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any
from urllib.parse import urlsplit

from ..base import REFERER_KEY, UnreadableData

#: Account record: state, flags (bit 0: has last visit), cash, mark, history,
#: last visit, seq, visits, depth; the host follows (``REC`` in frontier.lua).
RECORD = struct.Struct("<BBdddddii")
#: Header of a pop / take reply: has lease, lease id, cash, history, has last
#: visit, last visit, visits, depth, lambda payout, pending, leases reclaimed.
LEASE_HEAD = struct.Struct("<BdddBdddddd")
#: Lease record: lease id, cash, deadline, and the account's cash, mark, the
#: dividend and the total in flight before the lease (to undo it exactly).
LEASE = struct.Struct("<ddddddd")


def text(value: bytes | str | None) -> str | None:
    """Redis bytes as text (undecodable bytes replaced, never raised)."""
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def encode_request_data(request: Any) -> str:
    """The ``P:req`` text of a store request: ``""`` for ``None``, else JSON.

    Raises :class:`TypeError` for data that is not JSON (the Redis store
    keeps data only, never objects).
    """
    if request is None:
        return ""
    if not isinstance(request, (str, dict)):
        raise TypeError(
            f"RedisStore keeps requests as JSON data (None, str or dict), got {type(request).__name__}"
        )
    try:
        return json.dumps(request, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"request data is not JSON-serializable: {exc}") from None


def is_http_url(value: Any) -> bool:
    """Whether ``value`` is a URL Scrapy would fetch over http(s).

    A scheme-less string passes (Scrapy cannot fetch it anyway); ``file:``,
    ``s3:``, ``ftp:``, ``data:`` do not: a writable Redis must not make the
    crawler read local files or other services.
    """
    if not isinstance(value, str):
        return False
    try:
        scheme = urlsplit(value).scheme.lower()
    except ValueError:
        return False
    return scheme in ("", "http", "https")


def is_referred(data: dict) -> bool:
    """Whether ``data`` is the portable form of a Referer-only link (see
    :mod:`scrapy_aopic.frontier.requestcodec`): its Referer, and its URL only when
    spelt differently from the account's."""
    return (
        isinstance(data.get(REFERER_KEY), str)
        and data.keys() <= {REFERER_KEY, "url"}
        and ("url" not in data or is_http_url(data["url"]))
    )


#: Stored request JSON larger than this is refused unread.
MAX_REQUEST_BYTES = 1 << 20


def decode_request_data(url: str, raw: bytes | None) -> Any:
    """Request data of account ``url`` from its stored JSON, or ``None``
    (a plain GET of ``url``, as written for plain links).

    Anything else in Redis — bytes that are not UTF-8 JSON (a pickle, say),
    JSON nested beyond the interpreter's limits or larger than
    :data:`MAX_REQUEST_BYTES`, JSON of the wrong shape, a string or dict
    pointing at a non-http(s) URL — becomes :class:`UnreadableData`: the
    frontier then sends that URL's cash to lambda and says why, and never
    fetches something else in its place. Nothing is ever unpickled or
    evaluated.
    """
    if raw is None:
        return None
    if len(raw) > MAX_REQUEST_BYTES:
        return UnreadableData(f"{len(raw)} bytes, more than {MAX_REQUEST_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return UnreadableData(f"not JSON ({type(exc).__name__}; {len(raw)} bytes starting {raw[:16]!r})")
    if isinstance(data, str) and is_http_url(data):
        return data
    if isinstance(data, dict) and (is_referred(data) or is_http_url(data.get("url"))):
        return data
    shape = type(data).__name__ if not isinstance(data, (str, dict)) else "non-http(s) URL"
    return UnreadableData(f"an unusable shape ({shape})")


def fmt(value: float) -> str:
    """A float as the shortest decimal that reads back to the same double."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"cash and history must be finite numbers, got {value!r}")
    return repr(value)


