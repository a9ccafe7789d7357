"""Requests as data: what the frontier stores for a URL it will fetch later.

A plain link (GET, default callback, nothing in meta but Scrapy's own
bookkeeping) is stored as ``None`` (fetch the account's URL) or as the URL
string when the site spelled it differently from its canonical form. A plain
link with a ``Referer`` header (what Scrapy's RefererMiddleware adds to every
followed link) is stored as the header's value and that URL: a
:class:`Referred` tuple, or a two-key dict in portable stores. Anything else
becomes a JSON-able dict built on Scrapy's ``Request.to_dict``, callbacks by
name. Nothing is pickled, so a store another process can write to (Redis,
a journal file) cannot make the crawler run code.

A request is never changed on the way: one that cannot be written as data
(a callback that is not a spider method, meta values that are not JSON)
raises :class:`UnserializableRequest` (the frontier then keeps it in memory),
and stored data that cannot be read back raises :class:`UndecodableRequest`
(the frontier then settles its cash to lambda) instead of turning into a
plain GET.
"""

from __future__ import annotations

import base64
from typing import Any, NamedTuple

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

from ..store.base import REFERER_KEY


#: meta keys the frontier itself sets or that Scrapy recomputes per fetch.
TRANSIENT_META = frozenset(
    {
        "aopic_lease",
        "aopic_key",
        "aopic_cash",
        "aopic_registered",
        "aopic_duplicate_of",
        "depth",
        "download_slot",
        "download_latency",
        "download_timeout",
        "is_start_request",
        "_aopic_seed",
    }
)


class UnserializableRequest(ValueError):
    """The request cannot be stored as data without changing it."""


class UndecodableRequest(ValueError):
    """Stored request data that cannot be turned back into the request."""


class Referred(NamedTuple):
    """A plain link whose only header is ``Referer`` (in-memory form)."""

    url: str | None  #: as the site spelled it; ``None``: the account's URL
    referer: bytes




def _referer_only(request: Request) -> bytes | None:
    """The ``Referer`` value if it is the request's only header, else ``None``."""
    headers = request.headers
    if len(headers) == 1:
        values = headers.getlist(b"Referer")
        if len(values) == 1:
            return values[0]
    return None


def _is_plain(request: Request, spider: Spider | None, *, headers: bool = False) -> bool:
    """Whether ``request`` is a GET of its URL and nothing more (its
    headers aside when ``headers`` is true)."""
    if type(request) is not Request or request.method != "GET" or request.body:
        return False
    if (request.headers and not headers) or request.cookies or request.cb_kwargs or request.flags:
        return False
    if request.errback is not None or request.priority != 0 or request.dont_filter:
        return False
    if request.encoding != "utf-8":
        return False
    callback = request.callback
    if callback is not None:
        default = getattr(spider, "parse", None) if spider is not None else None
        if callback != default:
            return False
    return all(key in TRANSIENT_META for key in request.meta)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__b64__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, bytes) else k.decode("latin-1"): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def _from_jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__b64__"}:
            return base64.b64decode(value["__b64__"])
        return {k: _from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_jsonable(v) for v in value]
    return value


def encode_request(
    request: Request, canonical: str, spider: Spider | None, *, portable: bool = True
) -> Any:
    """``None``, the URL, or what stands for a request that is not plain:
    a JSON-able dict when ``portable`` (another process or a later run will
    read it), else the request object itself (nothing lost, nothing encoded).

    Raises :class:`UnserializableRequest` when ``portable`` and the request
    cannot be written as JSON unchanged.
    """
    if _is_plain(request, spider, headers=True):
        url = None if request.url == canonical else request.url
        if not request.headers:
            return url
        referer = _referer_only(request)
        if referer is not None:
            if not portable:
                return Referred(url, referer)
            referred = {REFERER_KEY: referer.decode("latin-1")}
            if url is not None:
                referred["url"] = url
            return referred
    if not portable:
        return request
    try:
        data = request.to_dict(spider=spider)
    except ValueError as exc:  # a callback that is not a method of the spider
        raise UnserializableRequest(str(exc)) from None
    meta = {k: v for k, v in (data.get("meta") or {}).items() if k not in TRANSIENT_META}
    out = {}
    try:
        meta = {key: _jsonable(value) for key, value in meta.items()}
        for key, value in data.items():
            if key != "meta":
                out[key] = _jsonable(value)
    except TypeError as exc:
        raise UnserializableRequest(f"{exc} (in the request's {key!r})") from None
    if meta:
        out["meta"] = meta
    return out


def decode_request(url: str, data: Any, spider: Spider | None) -> Request:
    """A fresh :class:`~scrapy.Request` for account ``url`` from stored ``data``.

    Raises :class:`UndecodableRequest` for data that is not a request.
    """
    if data is None:
        return Request(url)
    if isinstance(data, str):
        return Request(data)
    if isinstance(data, Referred):
        return Request(data.url or url, headers={b"Referer": data.referer})
    if isinstance(data, Request):
        return data.copy()
    if isinstance(data, dict):
        if REFERER_KEY in data:
            referer = data[REFERER_KEY]
            return Request(data.get("url") or url, headers={b"Referer": referer.encode("latin-1")})
        try:
            return request_from_dict(_from_jsonable(data), spider=spider)
        except Exception as exc:  # a stored callback that no longer exists, bad fields
            raise UndecodableRequest(f"stored request for {url} unusable: {exc}") from None
    raise UndecodableRequest(f"stored request for {url} has unknown type {type(data).__name__}")
