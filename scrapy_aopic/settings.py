"""Every ``AOPIC_*`` setting, its default and its meaning, in one place.

Components read settings once, in ``from_crawler``, through :func:`get`,
which falls back to the default declared here; the docs' settings reference
is generated from :data:`SETTINGS`, so code and docs cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One documented setting: ``name``, ``default``, ``group`` and ``doc``."""

    name: str
    default: Any
    group: str
    doc: str


SETTINGS: dict[str, Setting] = {}


def define(name: str, default: Any, group: str, doc: str) -> Setting:
    """Declare a setting; a second declaration of the same name is a bug."""
    if name in SETTINGS:
        raise ValueError(f"setting {name} is declared twice")
    setting = Setting(name, default, group, " ".join(doc.split()))
    SETTINGS[name] = setting
    return setting


def get(settings: Any, name: str) -> Any:
    """Value of ``name`` in Scrapy ``settings``, or its declared default."""
    value = settings.get(name)
    return SETTINGS[name].default if value is None else value


def get_bool(settings: Any, name: str) -> bool:
    return settings.getbool(name, SETTINGS[name].default)


def get_int(settings: Any, name: str) -> int:
    return settings.getint(name, SETTINGS[name].default)


def get_float(settings: Any, name: str) -> float:
    return settings.getfloat(name, SETTINGS[name].default)


def get_optional_float(settings: Any, name: str) -> float | None:
    """A float setting where ``None`` / empty string means "off"."""
    value = settings.get(name, SETTINGS[name].default)
    if value is None or value == "":
        return None
    return float(value)


# --- core: the AOPIC engine and scheduler ----------------------------------

define("AOPIC_SEED_CASH", 1.0, "core", """
    Cash each new seed (start request) brings into the system. A seed whose
    URL is already known (a resumed crawl, a duplicate seed) brings none.""")
define("AOPIC_LAMBDA_TAX", None, "core", """
    Share of a visited page's cash paid to the lambda (virtual) page. ``None``
    (default, as in the OPIC paper): lambda is one more out-link, so a page
    with ``m`` links gives ``c/(m+1)`` to lambda and to each link. A float
    ``t`` in [0, 1]: lambda gets ``t*c`` and each link ``(1-t)*c/m``. A page
    with no links always gives everything to lambda.""")
define("AOPIC_LAMBDA_TARGETS", "pending", "core", """
    Pages lambda pays its cash to when it is visited: ``"pending"`` (every
    page waiting to be fetched; favours discovering new pages) or ``"all"``
    (every known page; favours learning importance). Paid in O(1) through a
    lazily settled per-target dividend.""")
define("AOPIC_HISTORY_WINDOW", None, "core", """
    Length ``T`` in seconds of the AOPIC history window. ``None`` (default)
    keeps the whole history (plain OPIC). With a window, a page's history
    forgets cash older than ``T``.""")
define("AOPIC_BACKEND", "memory", "core", """
    Frontier storage: ``"memory"`` (one process; persisted to ``JOBDIR``
    when that is set) or ``"redis"`` (shared by many processes; see the
    distributed guide).""")
define("AOPIC_LOG_INTERVAL", None, "core", """
    Seconds between AOPIC progress log lines; ``None`` uses
    ``LOGSTATS_INTERVAL``; ``0`` switches the line off.""")
define("AOPIC_EXPORT_IMPORTANCE", None, "core", """
    Path of a JSON Lines file written when the spider closes: one object per
    known page (``url``, ``importance``, ``cash``, ``history``, ``visits``,
    ``depth``, ``state``), most important first. ``None``: no export.""")
define("AOPIC_JOURNAL_SYNC", False, "core", """
    With ``JOBDIR``, ``fsync`` the write-ahead journal after every batch.
    Off by default: the journal is written (not buffered) after every change,
    which survives a killed process; ``fsync`` also survives a power cut, at a
    cost per request.""")

# --- hygiene: canonical URLs, near-duplicates, traps, robots ----------------

define("AOPIC_DUPLICATE_FOLLOW_LINKS", False, "hygiene", """
    Follow the links of a page flagged as a near-duplicate
    (``response.meta["aopic_duplicate_of"]``). Off by default: its links are
    the original's.""")
# (settings of the hygiene components are declared below this line)

# --- redis backend ----------------------------------------------------------
# (settings of the Redis backend are declared below this line)

# --- re-crawl ----------------------------------------------------------------
# (settings of continuous crawls are declared below this line)

# --- users' side: report, command, graph export ----------------------------
# (settings of the report and export features are declared below this line)

DEFAULTS: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}
