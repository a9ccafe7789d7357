"""Continuous crawls: re-crawl and adaptive revisit scheduling (``docs/recrawl.rst``).

Pure Python, importable without Scrapy:

* :mod:`~scrapy_aopic.recrawl.estimators` — change-rate estimators (naive,
  Cho & Garcia-Molina's regular and irregular-interval estimators, Poisson
  counts);
* :mod:`~scrapy_aopic.recrawl.profile` — hour-of-day x day-of-week rate
  profiles keyed by ``host/first-path-segment``;
* :mod:`~scrapy_aopic.recrawl.forest` — the optional random-forest model
  (scikit-learn);
* :mod:`~scrapy_aopic.recrawl.timetable` — weekly timetables: when in
  the week to spend a page's budgeted revisits;
* :mod:`~scrapy_aopic.recrawl.planner` — :class:`RecrawlPlanner`, which
  decides when each page is fetched again;
* :mod:`~scrapy_aopic.recrawl.change` — conditional requests, checksums and
  SimHash distance;
* :mod:`~scrapy_aopic.recrawl.simulate` — simulated hub pages for tests and
  the benchmark.

Scrapy glue: :mod:`~scrapy_aopic.recrawl.hook` (:class:`RecrawlHook`),
imported on first use; the downloader middleware is
:class:`scrapy_aopic.middlewares.recrawl.RecrawlMiddleware`.
"""

from .estimators import (
    ChangeHistory,
    cho_irregular_rate,
    cho_regular_rate,
    naive_rate,
    poisson_rate,
)
from .planner import OverdueQueue, RecrawlPlanner
from .profile import RateProfile, WeeklyRates, profile_key

_GLUE = {"RecrawlHook", "planner_from_settings"}


def __getattr__(name: str):
    # The Scrapy glue imports Scrapy: only when asked for.
    if name in _GLUE:
        from . import hook

        return getattr(hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ChangeHistory",
    "OverdueQueue",
    "RateProfile",
    "RecrawlHook",
    "RecrawlPlanner",
    "WeeklyRates",
    "cho_irregular_rate",
    "cho_regular_rate",
    "naive_rate",
    "planner_from_settings",
    "poisson_rate",
    "profile_key",
]
