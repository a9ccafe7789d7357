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
import inspect
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from scrapy import FormRequest, Request, Spider
from scrapy.http import JsonRequest, XmlRpcRequest

from ..meta import DOWNLOAD_SLOT
from ..store.base import REFERER_KEY, Referred, UnreadableData


#: meta keys the frontier itself sets or that Scrapy recomputes per fetch.
#: (Not ``download_slot``: one the spider set is kept, and one Scrapy's
#: downloader wrote is removed by the frontier before a request is stored,
#: see ``Frontier.enqueue``.)
TRANSIENT_META = frozenset(
    {
        "aopic_lease",
        "aopic_key",
        "aopic_cash",
        "aopic_registered",
        "aopic_duplicate_of",
        "aopic_duplicate_distance",
        "depth",
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
        # ``parse`` is what a request without a callback runs only where the
        # spider's ``_parse`` is Spider's own: a CrawlSpider's runs its rules.
        if callback != default or getattr(type(spider), "_parse", None) is not getattr(Spider, "_parse", None):
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
    slot = request.meta.get(DOWNLOAD_SLOT)
    if slot is not None and not isinstance(slot, str):
        # Read back it would be refused (see _request_from_data): keep it in memory.
        raise UnserializableRequest(f"meta[{DOWNLOAD_SLOT!r}] is a {type(slot).__name__}, not a string")
    try:
        data = request.to_dict(spider=spider)
    except ValueError as exc:  # a callback that is not a method of the spider
        raise UnserializableRequest(str(exc)) from None
    meta = {k: v for k, v in (data.get("meta") or {}).items() if k not in TRANSIENT_META}
    out = {}
    where = "meta"
    try:
        for key, value in meta.items():
            where = f"meta[{key!r}]"
            meta[key] = _jsonable(value)
        for key, value in data.items():
            if key != "meta":
                where = repr(key)
                out[key] = _jsonable(value)
    except TypeError as exc:
        raise UnserializableRequest(f"{exc} (in the request's {where})") from None
    if meta:
        out["meta"] = meta
    return out


#: Request classes a stored request may name (``_class``): Scrapy's own,
#: what the add-on writes for a spider's requests. Others need
#: ``AOPIC_STORED_REQUEST_CLASSES``: a writable store must not make the
#: crawler import a module of its choosing.
REQUEST_CLASSES = {
    "scrapy.http.request.Request": Request,
    "scrapy.http.request.form.FormRequest": FormRequest,
    "scrapy.http.request.json_request.JsonRequest": JsonRequest,
    "scrapy.http.request.rpc.XmlRpcRequest": XmlRpcRequest,
}
#: Meta keys a stored request may not carry (they change where or how the
#: request is sent, or hand data to plugins that act on it): a planted
#: entry must not route the crawl through an attacker's proxy.
#: ``AOPIC_STORED_META_REFUSED`` replaces the list. ``download_slot`` is not
#: in it: it only groups requests for concurrency and delays (the frontier
#: already takes an account's host from the store), and a spider's own slot
#: must come back with its request; it must be a string.
REFUSED_META = (
    "proxy", "_auth_proxy", "bindaddress", "download_timeout", "download_maxsize",
    "download_warnsize", "download_fail_on_dataloss", "cookiejar", "dont_merge_cookies",
    "ftp_user", "ftp_password", "ftp_local_filename", "dont_obey_robotstxt", "allow_offsite",
    "referrer_policy", "impersonate", "playwright*", "splash*", "selenium*", "zyte_api*", "crawlera*",
)
#: Bounds on stored request data: nesting depth and JSON size.
MAX_DEPTH = 32
MAX_BYTES = 1 << 20


class StoredRequestPolicy(NamedTuple):
    """What a request read back from a store may be (see :func:`decode_request`)."""

    classes: dict[str, type[Request]]
    refused_meta: tuple[str, ...]

    @classmethod
    def from_settings(cls, settings: Any) -> StoredRequestPolicy:
        from scrapy.utils.misc import load_object

        from .. import settings as aopic_settings

        classes = dict(REQUEST_CLASSES)
        for name in aopic_settings.get_list(settings, "AOPIC_STORED_REQUEST_CLASSES"):
            classes[name] = load_object(name)  # the project's own choice, not the store's
        refused = aopic_settings.get(settings, "AOPIC_STORED_META_REFUSED")
        refused = REFUSED_META if refused is None else tuple(aopic_settings.get_list(settings, "AOPIC_STORED_META_REFUSED"))
        return cls(classes, refused)

    def meta_refused(self, key: str) -> bool:
        for pattern in self.refused_meta:
            if key == pattern or (pattern.endswith("*") and key.startswith(pattern[:-1])):
                return True
        return key.startswith("_")


DEFAULT_POLICY = StoredRequestPolicy(REQUEST_CLASSES, REFUSED_META)


def _check_depth(value: Any) -> None:
    """Raise when ``value`` nests deeper than :data:`MAX_DEPTH` (iteratively:
    a hostile value must not exhaust the stack here either)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UndecodableRequest(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def spider_method(spider: Spider | None, name: Any) -> Any:
    """The bound method ``name`` of ``spider`` if it may be a stored
    callback: a public method the spider's own class (or a base class
    other than :class:`scrapy.Spider`) defines. Raises otherwise."""
    if spider is None:
        raise UndecodableRequest("no spider to resolve callbacks on")
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise UndecodableRequest(f"callback {name!r} is not a public method name")
    for klass in type(spider).__mro__:
        if name in vars(klass):
            if klass in (Spider, object):
                break
            attribute = vars(klass)[name]
            if inspect.isfunction(attribute):
                return getattr(spider, name)
            break
    raise UndecodableRequest(f"callback {name!r} is not a method defined by the spider's class")


def _request_from_data(data: dict, spider: Spider | None, policy: StoredRequestPolicy, any_scheme: bool) -> Request:
    """A request from its stored fields, checked field by field (never
    Scrapy's ``request_from_dict``, which imports and resolves whatever the
    data names)."""
    class_name = data.get("_class", "scrapy.http.request.Request")
    request_cls = policy.classes.get(class_name) if isinstance(class_name, str) else None
    if request_cls is None:
        raise UndecodableRequest(f"request class {class_name!r} is not allowed")
    url = data.get("url")
    if not isinstance(url, str) or not (any_scheme or urlsplit(url).scheme.lower() in ("http", "https")):
        raise UndecodableRequest(f"not an http(s) URL: {str(url)[:80]!r}")
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise UndecodableRequest("meta is not an object")
    for key in meta:
        if policy.meta_refused(key):
            raise UndecodableRequest(f"meta key {key!r} is refused from stored data (AOPIC_STORED_META_REFUSED)")
    slot = meta.get(DOWNLOAD_SLOT)
    if slot is not None and not isinstance(slot, str):
        raise UndecodableRequest(f"meta[{DOWNLOAD_SLOT!r}] is not a string")
    kwargs = {key: value for key, value in data.items() if key in request_cls.attributes and key not in ("callback", "errback")}
    for name in ("callback", "errback"):
        if data.get(name):
            kwargs[name] = spider_method(spider, data[name])
    return request_cls(**kwargs)


def decode_request(
    url: str, data: Any, spider: Spider | None, policy: StoredRequestPolicy = DEFAULT_POLICY, *,
    any_scheme: bool = False,
) -> Request:
    """A fresh :class:`~scrapy.Request` for account ``url`` from stored ``data``.

    Raises :class:`UndecodableRequest` for data that is not a request the
    add-on writes: a class, callback, URL scheme or meta key it does not
    allow, or data nested or sized beyond the bounds. URLs must be http(s)
    (a ``file:`` URL planted in a shared store would read local files)
    unless ``any_scheme``: data this crawl wrote to its own ``JOBDIR`` for
    a request the spider itself made (the direct lane).
    """
    if data is None:
        return Request(url)
    if isinstance(data, UnreadableData):
        raise UndecodableRequest(f"stored request for {url} is unreadable: {data.reason}")
    if isinstance(data, str):
        if not any_scheme and urlsplit(data).scheme.lower() not in ("http", "https"):
            raise UndecodableRequest(f"stored URL for {url} is not http(s): {data[:80]!r}")
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
            _check_depth(data)
            return _request_from_data(_from_jsonable(data), spider, policy, any_scheme)
        except UndecodableRequest as exc:
            raise UndecodableRequest(f"stored request for {url} refused: {exc}") from None
        except Exception as exc:  # bad field values
            raise UndecodableRequest(f"stored request for {url} unusable: {exc}") from None
    raise UndecodableRequest(f"stored request for {url} has unknown type {type(data).__name__}")
