"""Crawler-trap rules (``docs/hygiene.rst``): pure Python, no Scrapy.

A crawler trap is an endless URL space: a calendar with a "next month" link
forever, relative links that loop (``/a/b/a/b/...``), a counter in the query,
a link farm on ever new subdomains. AOPIC drains traps through lambda (they
get little cash from outside), but a fixed budget still pays for every page
fetched inside one; these limits are the hard stop, applied before a link
gets a share (it then never enters the frontier) and again before a fetch.

Each rule has its own limit (0 = off) and its own name, used in the
refusal reason ``trap/<rule>`` (stats ``aopic/refused/trap/<rule>`` for links,
``aopic/failed/trap/<rule>`` for requests refused at fetch time):

=====================  ==========================================  =======
rule                   refuses a URL when                          default
=====================  ==========================================  =======
``scheme``             its scheme is not http(s)                   always
``depth``              it is more than N hops from a seed          20
``path_segments``      its path has more than N segments           20
``repeated_segment``   one path segment occurs more than N times   2
``url_length``         the URL as written is longer than N         2083
``query_params``       it has more than N query parameters         20
``calendar``           its URL template (the URL with its date     30
                       replaced) already had N distinct dates
``host_pages``         its host already had N fetches              0 (off)
``subdomains``         its host is new and its registered domain   10
                       already has N hosts
``soft404``            (a fetched page) N distinct URLs of its     3
                       host answered the same page shape
``soft404_dir``        its directory had N children fetched, all   3
                       soft 404s (same setting as ``soft404``),
                       or its first M answered one same shape,     (M) 2
                       each linking fresh siblings
=====================  ==========================================  =======

The first five are stateless (:func:`url_rule`); the next three count
what the crawl has admitted so far (:class:`TrapGuard`), per process; the
soft-404 rules learn from pages fetched (:mod:`.soft404`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from .. import settings as aopic_settings
from .domains import registered_domain
from .soft404 import FirstAnswerGate, Soft404Detector

RULES = (
    "scheme",
    "depth",
    "path_segments",
    "repeated_segment",
    "url_length",
    "query_params",
    "calendar",
    "host_pages",
    "subdomains",
    "soft404",
    "soft404_dir",
)

#: ``TrapLimits`` field -> its setting.
SETTING_OF = {
    "max_hops": "AOPIC_TRAP_MAX_HOPS",
    "max_path_segments": "AOPIC_TRAP_MAX_PATH_SEGMENTS",
    "max_segment_repeats": "AOPIC_TRAP_MAX_SEGMENT_REPEATS",
    "max_url_length": "AOPIC_TRAP_MAX_URL_LENGTH",
    "max_query_params": "AOPIC_TRAP_MAX_QUERY_PARAMS",
    "calendar_dates": "AOPIC_TRAP_CALENDAR_DATES",
    "host_pages": "AOPIC_TRAP_HOST_PAGES",
    "max_subdomains": "AOPIC_TRAP_MAX_SUBDOMAINS",
    "soft404_pages": "AOPIC_TRAP_SOFT404_PAGES",
    "soft404_spare_real_dirs": "AOPIC_TRAP_SOFT404_SPARE_REAL_DIRS",
    "soft404_dir_pages": "AOPIC_TRAP_SOFT404_DIR_PAGES",
    "soft404_gate": "AOPIC_TRAP_SOFT404_GATE",
}


@dataclass(frozen=True)
class TrapLimits:
    """The limit of every rule; 0 switches a rule off."""

    max_hops: int = 20  #: Heritrix's max-hops
    max_path_segments: int = 20  #: Heritrix's max-path-depth
    max_segment_repeats: int = 2  #: Heritrix's pathological-path repetitions
    max_url_length: int = 2083  #: the old Internet Explorer limit
    max_query_params: int = 20
    calendar_dates: int = 30
    host_pages: int = 0
    max_subdomains: int = 10  #: Frontera's default
    soft404_pages: int = 3
    soft404_spare_real_dirs: bool = True
    soft404_dir_pages: int = 2
    soft404_gate: bool = True

    @classmethod
    def from_settings(cls, settings: Any) -> TrapLimits:
        """Limits from Scrapy ``settings`` (``AOPIC_TRAP_*``)."""
        values = {}
        for f in fields(cls):
            if f.type in (bool, "bool"):
                values[f.name] = aopic_settings.get_bool(settings, SETTING_OF[f.name])
                continue
            value = aopic_settings.get_int(settings, SETTING_OF[f.name])
            if value < 0:
                raise ValueError(f"{SETTING_OF[f.name]} must be >= 0 (0 = off), got {value}")
            values[f.name] = value
        return cls(**values)


def _split(canonical: str) -> tuple[str, str, str]:
    """``(netloc, path, query)`` of a canonical URL (no fragment)."""
    rest = canonical.partition("://")[2]
    slash = rest.find("/")
    qmark = rest.find("?")
    if slash < 0 or 0 <= qmark < slash:
        slash = qmark if qmark >= 0 else len(rest)
    netloc, tail = rest[:slash], rest[slash:]
    path, _, query = tail.partition("?")
    return netloc, path, query


def url_rule(url: str, canonical: str, depth: int, limits: TrapLimits) -> str | None:
    """The first stateless rule that refuses a URL, or ``None``.

    ``url`` is the URL as written (what would be fetched), ``canonical`` its
    key (dot segments resolved, session and tracking parameters removed),
    ``depth`` its hops from a seed.
    """
    return _link_rule(url, _http_scheme(canonical), depth, limits) or _shape_rule(canonical, limits)


def _link_rule(url: str, http: bool, depth: int, limits: TrapLimits) -> str | None:
    """The rules checked first: scheme, depth and the length as written."""
    if not http:
        return "scheme"
    if limits.max_hops and depth > limits.max_hops:
        return "depth"
    if limits.max_url_length and len(url) > limits.max_url_length:
        return "url_length"
    return None


def _http_scheme(canonical: str) -> bool:
    scheme = canonical[:5].lower()
    return scheme == "http:" or canonical[:6].lower() == "https:"


def _shape_rule(canonical: str, limits: TrapLimits) -> str | None:
    """The rules that depend on the canonical URL alone (path and query)."""
    _, path, query = _split(canonical)
    if limits.max_path_segments or limits.max_segment_repeats:
        segments = [s for s in path.split("/") if s]
        if limits.max_path_segments and len(segments) > limits.max_path_segments:
            return "path_segments"
        repeats = limits.max_segment_repeats
        if repeats and len(segments) > repeats and len(set(segments)) < len(segments):
            # Any segment, consecutive or not: /a/b/a/b/a/b has "a" 3 times,
            # and so does /a/b/b/a/a/b, which Heritrix's consecutive test
            # lets through (cube-free paths are endless).
            if Counter(segments).most_common(1)[0][1] > repeats:
                return "repeated_segment"
    if limits.max_query_params and query and query.count("&") >= limits.max_query_params:
        return "query_params"
    return None


# A date in a path or a query value: 2024/05, 2024-05-03, 2024_05_03,
# 20240503 (a whole token). Years 1900-2199.
_DATE = re.compile(
    r"(?<![0-9])(?:(?:19|20|21)\d\d)(?:([/_.-])(?:0?[1-9]|1[0-2])(?:\1(?:0?[1-9]|[12]\d|3[01]))?"
    r"|(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01]))(?![0-9])"
)
_ANY_DIGIT = re.compile(r"\d")
# Query parameters that are parts of a date when their value is a number.
_DATE_PARAMS = frozenset({"year", "month", "day", "date", "week", "yr", "mon", "y", "m", "d", "yyyy", "mm", "dd"})


def calendar_key(canonical: str) -> tuple[str, str] | None:
    """``(template, date)`` of a URL that carries a date, else ``None``.

    The template is the URL with every date replaced by ``{d}``: a calendar
    is one template with ever new dates, while dated articles
    (``/2024/05/03/some-title``) each have their own template.
    """
    netloc, path, query = _split(canonical)
    dates: list[str] = []

    def swap(match: re.Match) -> str:
        dates.append(match.group(0))
        return "{d}"

    # _DATE needs a \d digit: without one the path cannot hold a date.
    template_path = _DATE.sub(swap, path) if _ANY_DIGIT.search(path) else path
    template_query = query
    if query and any(map(str.isdigit, query)):
        pieces = []
        for piece in query.split("&"):
            name, eq, value = piece.partition("=")
            if eq and value.isdigit() and name.lower() in _DATE_PARAMS:
                dates.append(f"{name}={value}")
                pieces.append(f"{name}={{d}}")
            elif eq and _DATE.search(value):
                pieces.append(f"{name}={_DATE.sub(swap, value)}")
            else:
                pieces.append(piece)
        template_query = "&".join(pieces)
    if not dates:
        return None
    return f"{netloc}{template_path}?{template_query}", "|".join(dates)


class TrapGuard:
    """All trap rules, with the state the counting rules need.

    :meth:`check` answers for a URL about to enter the frontier (or be
    fetched) and, when it passes, records what the counting rules count: its
    host under its registered domain and its date under its template. The
    same URL asked again gets the same answer. :meth:`fetched` counts a
    fetch for the ``host_pages`` budget.

    State is per process and bounded: at most ``max_subdomains`` hosts per
    registered domain and ``calendar_dates`` dates per template are kept.
    """

    def __init__(
        self,
        limits: TrapLimits | None = None,
        domain_of: Callable[[str], str] = registered_domain,
    ):
        self.limits = limits or TrapLimits()
        self.domain_of = domain_of
        self.counts: Counter[str] = Counter()  #: refusals per rule
        self._hosts: dict[str, set[str]] = {}  # registered domain -> hosts admitted
        self._dates: dict[str, set[str]] = {}  # calendar template -> dates admitted
        self._fetches: Counter[str] = Counter()  # host -> fetches
        self.soft404 = Soft404Detector(self.limits.soft404_pages, self.limits.soft404_spare_real_dirs,
                                       self.limits.soft404_dir_pages)
        #: one fetch at a time into an undecided directory (the middleware waits)
        self.gate = FirstAnswerGate(self.soft404, self.limits.soft404_pages if self.limits.soft404_gate else 0)
        # canonical URL -> (http(s)?, path/query rule, host name, calendar
        # key): what the rules read from a canonical URL, computed once per
        # URL (a site's navigation links repeat on every page).
        self._facts: dict[str, tuple[bool, str | None, str, tuple[str, str] | None]] = {}

    def rule(self, url: str, canonical: str, depth: int, *, fetching: bool = False) -> str | None:
        """The rule that refuses ``url`` (key ``canonical``), or ``None``;
        a refusal is counted in :attr:`counts`. ``fetching``: the URL is
        about to be downloaded (the host budget is charged when it passes)."""
        limits = self.limits
        facts = self._facts.get(canonical)
        if facts is None:
            facts = self._facts_of(canonical)
        http, shape_rule, hostname, calendar = facts
        rule = _link_rule(url, http, depth, limits) or shape_rule  # as url_rule, memoized
        if rule is None:
            if limits.host_pages and self._fetches[hostname] >= limits.host_pages:
                rule = "host_pages"
            elif limits.max_subdomains and not self._admit_host(hostname):
                rule = "subdomains"
            elif limits.calendar_dates and calendar is not None and not self._admit_calendar(*calendar):
                rule = "calendar"
            elif limits.soft404_pages and self.soft404.directory_refuses(canonical):
                rule = "soft404_dir"
            elif fetching and limits.host_pages:
                self._fetches[hostname] += 1
        if rule is not None:
            self.counts[rule] += 1
        return rule

    #: Canonical URLs whose facts are memoized (about 400 bytes each); the
    #: memo is emptied when full.
    FACTS_CACHE_SIZE = 1 << 14

    def _facts_of(self, canonical: str) -> tuple[bool, str | None, str, tuple[str, str] | None]:
        http = _http_scheme(canonical)
        shape_rule = _shape_rule(canonical, self.limits) if http else None
        host = _split(canonical)[0].rpartition("@")[2]
        hostname = host[: host.find("]") + 1] if host.startswith("[") else host.split(":", 1)[0]
        calendar = calendar_key(canonical) if self.limits.calendar_dates else None
        facts = (http, shape_rule, hostname, calendar)
        if len(self._facts) >= self.FACTS_CACHE_SIZE:
            self._facts.clear()
        self._facts[canonical] = facts
        return facts

    def _admit_host(self, hostname: str) -> bool:
        domain = self.domain_of(hostname)
        hosts = self._hosts.get(domain)
        if hosts is None:
            self._hosts[domain] = {hostname}
            return True
        if hostname in hosts:
            return True
        if len(hosts) >= self.limits.max_subdomains:
            return False
        hosts.add(hostname)
        return True

    def _admit_date(self, canonical: str) -> bool:
        key = calendar_key(canonical)
        return True if key is None else self._admit_calendar(*key)

    def _admit_calendar(self, template: str, date: str) -> bool:
        dates = self._dates.get(template)
        if dates is None:
            self._dates[template] = {date}
            return True
        if date in dates:
            return True
        if len(dates) >= self.limits.calendar_dates:
            return False
        dates.add(date)
        return True

    def page_fetched(self, canonical: str, text: str, siblings: frozenset[str] | tuple = (), *,
                     linked_by_soft404: bool | None = False) -> str | None:
        """A page fetched with status 200 (key ``canonical``, ``text`` from
        :func:`.soft404.page_facts`, with its sibling links; whether the page
        that linked it was of an error shape, ``None`` when unknown: see
        :meth:`.soft404.Soft404Detector.observe`): ``"soft404"`` when it is a
        soft 404 (counted), else ``None``."""
        if self.limits.soft404_pages and self.soft404.observe(canonical, text, siblings,
                                                              linked_by_soft404=linked_by_soft404):
            self.counts["soft404"] += 1
            return "soft404"
        return None

    def fetches(self, hostname: str) -> int:
        """Fetches charged to ``hostname`` so far."""
        return self._fetches[hostname]
