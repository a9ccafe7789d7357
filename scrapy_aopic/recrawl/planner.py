"""The revisit planner: when should each crawled page be fetched again?

Pure Python (no Scrapy): the Scrapy glue (:mod:`scrapy_aopic.recrawl.hook`),
the benchmark's simulator and the tests all drive this one class.

Every visit reports what it found (:meth:`RecrawlPlanner.on_visit`): whether
the page changed, how many new links it had, whether the server answered
``304 Not Modified``. The planner keeps a small record per page and one
rate profile per key, then picks the page's next visit:

``model="estimator"`` (default)
    A page with link counts (a hub) gets a rate ``k * shape(t)``: ``shape``
    is the hour-of-week profile of its key (``host/first-path-segment``,
    falling back to the host, then flat, when data is thin) and ``k`` the
    page's own scale, new links over the shape-weighted time watched. The
    next visit is when the expected yield of the non-homogeneous process
    since the last visit justifies a fetch:

    * ``rule="delay"`` (default): when the links that appeared since the
      last visit have waited, in expectation, ``fetch_cost`` link-seconds
      in total (``integral of (t - s) rate(s) ds``). With a constant rate
      this is ``interval = sqrt(2 * fetch_cost / rate)``, the interval that
      minimises discovery delay plus ``fetch_cost`` per fetch; busy hours get
      short intervals, quiet nights long ones, in proportion to
      ``1 / sqrt(rate)``.
    * ``rule="yield"``: when the expected number of new links since the
      last visit reaches ``target_yield`` (``interval`` proportional to
      ``1 / rate``: the highest hit rate, longer delays).

    A page without link counts is planned the same way from its change rate
    (Cho & Garcia-Molina's irregular-interval estimator,
    :mod:`~scrapy_aopic.recrawl.estimators`), doubling its interval while it
    never changes. A count far above what the model expected (a burst)
    boosts the rate for the next few visits.
``model="forest"``
    The same, with the shape predicted by a random-forest regression on
    hour and weekday (:mod:`~scrapy_aopic.recrawl.forest`, needs
    scikit-learn); keys without a model yet use the estimator's profile.
``model="aopic"``
    AOPIC's own rule: a crawled page is released back into the frontier
    once ``min_interval`` has passed and comes up again as its cash grows;
    only ``max_interval`` forces it.

Change events are the first-class signal (issue 17): a content change
(checksum or SimHash), a ``304``, a ``Last-Modified`` inside the interval
(it bounds when the change happened) and new links all feed a per-page
change-rate estimate kept in *time* (:class:`~scrapy_aopic.recrawl.
estimators.TimedChangeHistory`, shrunk towards the rate pooled over its
``host/first-path-segment``, its host, then everything) and the hour-of-week
profiles that time the revisits. ``change_weight`` (default 1) is what a
change is worth next to a new link.

With a budget (``budget`` revisits a day, or ``budget_share`` of all
fetches) each page's mean revisit frequency is its share of the budget by
Cho & Garcia-Molina's freshness-optimal rule, importance-weighted
(:mod:`~scrapy_aopic.recrawl.budget`), with at most one fetch per
``host_gap`` seconds per host; the weekly timetable of the page's section
(:mod:`~scrapy_aopic.recrawl.timetable`) then says when: the fetch times
that minimise the expected delay of changes on the section's hour-of-day
profile (a :class:`~scrapy_aopic.recrawl.profile.DayProfile`, fitted by
maximum likelihood on every revisit interval), just after its busy hours;
``explore`` moves a share of those revisits to other hours. Without a
profile yet (or with
``timetable=False``) the profile places each revisit where its expected
waiting cost equals that of a periodic revisit at that frequency.

With ``cochange`` a revisit that finds a page changed also brings forward
the revisits of the pages that usually change with it
(:mod:`~scrapy_aopic.recrawl.cochange`), out of the same budget. With
``activity`` a host's pages are revisited more often while it is at work
(a change found on it in the last day) and less while it is quiet
(:mod:`~scrapy_aopic.recrawl.activity`), the same budget in the long run.
With ``new_pages`` a page first visited after a page of its host was
revisited (found late: most likely new) is planned *young* for a window, at
its section's rate times a multiplier learnt from such pages
(:mod:`~scrapy_aopic.recrawl.young`).

Every planned interval is clamped to ``[min_interval, max_interval]``.
"""

from __future__ import annotations

import heapq
import math
import zlib
from bisect import bisect_right
from array import array
from collections.abc import Iterator
from operator import mul
from typing import Any, NamedTuple

from . import checks
from .activity import HostActivity
from .budget import FreshnessAllocator, SpendCheck
from .burst import BurstModel
from .cochange import CoChangeModel
from .estimators import TimedChangeHistory, poisson_tail
from .profile import BINS, DAY, HOUR, WEEK, DayProfile, RateProfile, WeeklyRates, growing_weight, iter_segments, profile_key
from .timetable import LEVELS, Timetable, place
from .young import YoungPages

MODELS = ("estimator", "forest", "aopic")
RULES = ("yield", "delay")

_FLAT = WeeklyRates.flat(1.0)


#: time constant of the rate co-change hints spend at (a week: hints come
#: in bursts after commits, and budget solves follow them)
HINT_WINDOW = WEEK


class PageRecord:
    """What the planner remembers of one page."""

    __slots__ = (
        "host",
        "key",
        "site",
        "depth",
        "last_visit",
        "visits",
        "changes",
        "not_modified",
        "new_links",
        "events",
        "exposure",
        "bins",
        "bins_scale",
        "boost",
        "weight",
        "rate",
        "history",
        "due",
        "deadline",
        "interval",
        "failures",
        "base_rate",
        "hot_until",
        "burst",
        "hinted",
        "young_until",
    )

    def __init__(self, host: str, key: str, site: str, depth: int = 0):
        self.host = host  #: politeness key (download slot)
        self.key = key  #: profile key, ``host/first-path-segment``
        self.site = site  #: profile fallback key, the URL's host
        self.depth = depth
        self.last_visit: float | None = None
        self.visits = 0
        self.changes = 0  #: revisits that found the page changed
        self.not_modified = 0  #: revisits answered 304
        self.new_links = 0  #: new links found on revisits
        # Page scale of the link rate: new links over seconds watched (per
        # hour of the week once it is a hub, to weigh them by the profile),
        # all forgotten with the planner's ``scale_forget``.
        self.events = 0.0
        self.exposure = 0.0
        self.bins: array | None = None
        self.bins_scale = 1.0
        self.boost = 1.0  #: burst multiplier, decays back to 1
        self.weight = 1.0  #: importance (AOPIC's), for the budget's split
        self.rate = -1.0  #: events per second last planned with (-1: none yet)
        self.history: TimedChangeHistory | None = None
        self.due: float | None = None  #: when to release it into the frontier
        self.deadline: float | None = None  #: when it must be fetched
        self.interval: float | None = None  #: the last planned interval
        self.failures = 0
        #: with bursts: the quiet rate last planned with, when the page stops
        #: being hot, and its change history while hot (:mod:`.burst`)
        self.base_rate = 0.0
        self.hot_until: float | None = None
        self.burst: TimedChangeHistory | None = None
        #: brought forward by a partner's change (:mod:`.cochange`), not
        #: visited since (not saved: it only feeds a counter)
        self.hinted = False
        #: found late (likely new): young, planned by :mod:`.young`, until then
        self.young_until: float | None = None

    @property
    def counted(self) -> bool:
        """Whether the page's link counts have been observed at least once."""
        return self.exposure > 0


class Estimate(NamedTuple):
    """The planner's current view of one page (for stats and tools)."""

    url: str
    links_per_hour: float  #: mean over the week of the page's link rate
    changes_per_hour: float  #: time-weighted interval-censored MLE, shrunk to the pool
    naive_changes_per_hour: float  #: the biased-low X/T, for comparison
    profile: str  #: which profile shapes it: a key, a host, or "flat"
    visits: int
    interval: float | None  #: last planned interval, seconds
    due: float | None


class RecrawlPlanner:
    """Plans revisits from visit history (see the module docstring).

    :param min_interval: no page is planned sooner than this after a visit
        (seconds; politeness).
    :param max_interval: every page is revisited at least this often.
    :param initial_interval: the first revisit of a page with no history
        (default: the geometric mean of the bounds).
    :param rule: ``"delay"`` or ``"yield"`` (see the module docstring).
    :param fetch_cost: what one fetch is worth in link-seconds of discovery
        delay (``rule="delay"``): larger means fewer fetches.
    :param target_yield: expected new links (or changes) a revisit should
        find (``rule="yield"``).
    :param model: ``"estimator"``, ``"forest"`` or ``"aopic"``.
    :param forget: time constant (seconds) of the profiles' exponential
        forgetting.
    :param scale_forget: the same for each page's own scale (its share of
        the profile): shorter, since it needs fewer events and must follow
        the profile as the profile's shape is learnt.
    :param key_min_events: links a key (``host/first-path-segment``) must have
        produced before its own profile is used; below that its host's is,
        and below that again a flat one (the seed paper's fallback).
    :param change_weight: value of a content change relative to a new link
        (0: only new links count for pages with link counts; 1, the default:
        a changed body is an event like a new link).
    :param change_window: time constant (seconds) of the per-page change
        history (:class:`~scrapy_aopic.recrawl.estimators.TimedChangeHistory`).
    :param budget: revisits a day to spend (``None``: no budget, each page
        planned on its own by ``rule``).
    :param budget_share: instead, this share of all fetches the planner
        sees (new pages and revisits) goes to revisits.
    :param host_gap: with a budget, seconds between two revisits of one
        host the split must allow for (``None``: no cap).
    :param rebalance: least seconds between two solves of the budget's
        split (one also waits for as many plans as there are pages).
    :param timetable: with a budget, place each page's revisits by its
        section's weekly timetable (:mod:`~scrapy_aopic.recrawl.timetable`);
        the profiles then forget with at least ``change_window``.
    :param timetable_refresh: least seconds between two checks whether a
        section's timetables need rebuilding (its profile moved).
    :param explore: with timetables, the share of revisits moved off the
        timetable by up to half its shortest gap either way (see
        :meth:`_explore`); 0 = none.
    :param likely_first: with a budget, order a host's overdue revisits
        by how likely each page has changed, not only by when it was due
        (:meth:`queue_key`).
    :param burst: with a budget, learn bursts of changes
        (:mod:`~scrapy_aopic.recrawl.burst`): for ``burst_window`` seconds
        after a revisit found a change the page is planned with its hot
        rate (learnt, shrunk to its section's), not its quiet one.
    :param burst_window: how long a page stays hot (seconds).
    :param cochange: learn which pages change together
        (:mod:`~scrapy_aopic.recrawl.cochange`) and bring a page's revisit
        forward to now when a revisit finds one of its partners changed;
        with a budget, these revisits come out of it (at most half).
    :param cochange_share: the share of a page's changes a partner must
        have shared.
    :param cochange_chance: measure that share above the partner's chance
        level (what it would share changing independently at its own rate).
    :param activity: with a budget, learn when each host is at work
        (:mod:`~scrapy_aopic.recrawl.activity`): a change found makes the
        host active for a day; its pages are revisited more often while it
        is active and less while it is quiet, by how much more its pages
        change while active (the same budget, a weekly spend check keeping
        it), and turning active brings their revisits forward.
    :param burst_boost: react to counts far above the expected (bursts):
        a count whose Poisson tail probability is below ``burst_p`` multiplies
        the page's rate by observed / expected (at most 10), a factor that
        then decays by ``burst_decay`` per visit.
    """

    def __init__(
        self,
        *,
        min_interval: float = 60.0,
        max_interval: float = DAY,
        initial_interval: float | None = None,
        rule: str = "delay",
        fetch_cost: float = 30.0,
        target_yield: float = 1.0,
        model: str = "estimator",
        forget: float | None = 28 * DAY,
        scale_forget: float | None = 7 * DAY,
        key_min_events: float = 100.0,
        change_weight: float = 1.0,
        change_window: float = 180 * DAY,
        budget: float | None = None,
        budget_share: float | None = None,
        host_gap: float | None = None,
        rebalance: float = HOUR,
        timetable: bool = False,
        timetable_refresh: float = DAY,
        explore: float = 0.0,
        likely_first: bool = False,
        burst: bool = False,
        burst_window: float = 3 * DAY,
        cochange: bool = False,
        cochange_share: float = 0.25,
        cochange_chance: bool = False,
        activity: bool = False,
        new_pages: bool = False,
        new_page_window: float = 7 * DAY,
        burst_boost: bool = True,
        burst_p: float = 0.01,
        burst_decay: float = 0.5,
        forest_retrain: float = DAY,
        forest_options: dict[str, Any] | None = None,
        profile_options: dict[str, Any] | None = None,
    ):
        if not 0 < min_interval <= max_interval:
            raise ValueError(
                f"need 0 < min_interval <= max_interval, got {min_interval!r}, {max_interval!r}"
            )
        if model not in MODELS:
            raise ValueError(f"AOPIC_RECRAWL_MODEL must be one of {MODELS}, got {model!r}")
        if rule not in RULES:
            raise ValueError(f"AOPIC_RECRAWL_RULE must be one of {RULES}, got {rule!r}")
        if not target_yield > 0:
            raise ValueError(f"AOPIC_RECRAWL_TARGET_YIELD must be > 0, got {target_yield!r}")
        if not fetch_cost > 0:
            raise ValueError(f"AOPIC_RECRAWL_FETCH_COST must be > 0, got {fetch_cost!r}")
        if budget is not None and budget_share is not None:
            raise ValueError("set AOPIC_RECRAWL_BUDGET or AOPIC_RECRAWL_BUDGET_SHARE, not both")
        if budget is not None and not budget > 0:
            raise ValueError(f"AOPIC_RECRAWL_BUDGET must be > 0, got {budget!r}")
        if (burst or activity) and budget is None and budget_share is None:
            # Bursts change how the budget is split: without one there is
            # nothing to split, and ignoring the setting would be silent.
            raise ValueError(
                f"AOPIC_RECRAWL_{'BURST' if burst else 'ACTIVITY'} needs AOPIC_RECRAWL_BUDGET or AOPIC_RECRAWL_BUDGET_SHARE"
            )
        if budget_share is not None and not 0 < budget_share < 1:
            raise ValueError(f"AOPIC_RECRAWL_BUDGET_SHARE must be in (0, 1), got {budget_share!r}")
        self.min_interval = float(min_interval)
        self.max_interval = float(max_interval)
        if initial_interval is None:
            initial_interval = math.sqrt(self.min_interval * self.max_interval)
        self.initial_interval = min(max(float(initial_interval), self.min_interval), self.max_interval)
        self.target_yield = float(target_yield)
        self.rule = rule
        self.fetch_cost = float(fetch_cost)
        self.model = model
        self.forget = forget
        self.scale_forget = scale_forget
        self.key_min_events = key_min_events
        self.change_weight = change_weight
        self.burst_boost = burst_boost
        self.burst_p = burst_p
        self.burst_decay = burst_decay
        self.change_window = float(change_window)
        self.budget = budget
        self.budget_share = budget_share
        if (budget is not None or budget_share is not None) and timetable and forget is not None:
            # Timetables are learnt from content changes, far rarer than
            # links: a section of a docs site sees a few a week, too few for
            # a profile that forgets in four weeks to ever be used.
            forget = self.forget = max(forget, self.change_window)
        self.host_gap = host_gap
        self.rebalance = rebalance
        self.timetable = timetable
        self.timetable_refresh = float(timetable_refresh)
        if not 0.0 <= explore < 1.0:
            raise ValueError(f"AOPIC_RECRAWL_EXPLORE must be in [0, 1), got {explore!r}")
        self.explore = float(explore)
        self.explored = 0  #: revisits placed off the timetable to keep learning the hour
        self.likely_first = likely_first
        #: (profile name, revisits a week) -> (shape, checked at, Timetable, day profile)
        self._timetables: dict[tuple[str, int], tuple] = {}
        self.allocator = (
            FreshnessAllocator(1.0 / self.max_interval, 1.0 / self.min_interval)
            if budget is not None or budget_share is not None
            else None
        )
        #: the burst model (with a budget and ``burst``), else ``None``
        self.burst_model = (
            BurstModel(burst_window, self.change_window) if burst else None
        )
        #: with ``cochange``, the pages that change together, else ``None``
        if not 0.0 < cochange_share <= 1.0:
            raise ValueError(f"AOPIC_RECRAWL_COCHANGE_SHARE must be in (0, 1], got {cochange_share!r}")
        self.cochange_share = float(cochange_share)
        self.cochange_chance = bool(cochange_chance)
        self.cochange = CoChangeModel(threshold=self.cochange_share) if cochange else None
        #: revisits' worth spent by co-change hints, each weighted
        #: ``exp(-age / HINT_WINDOW)``, and when that was (for the budget)
        self._hint_clock: list[float] = [0.0, 0.0]
        #: with ``activity``, the hosts' active and quiet spells, else ``None``
        self.activity = HostActivity() if activity else None
        #: with ``new_pages``, the young multipliers of pages found late, else ``None``
        self.young = YoungPages(new_page_window, self.change_window) if new_pages else None
        #: hosts with a page revisited: a page first visited on one was found late
        self._revisited_sites: set[str] = set()
        #: with ``activity``, the factor on every frequency that keeps the
        #: revisits at the budget
        self.spend_check = SpendCheck()
        self._solved_at: float | None = None
        self._solved_pages = 0
        self._plans_since_solve = 0
        #: pooled change counts: name -> [changes, seconds], weighted like
        #: TimedChangeHistory (exp((t - _pool_base) / change_window))
        self._pools: dict[str, list[float]] = {}
        self._pool_base: float | None = None
        #: all visits seen (new pages and revisits), for ``budget_share``
        self._fetch_clock: list[float] = [0.0, 0.0, 0.0]  # weighted count, weighted seconds, last
        self.profile_options = dict(profile_options or {})
        self.pages: dict[str, PageRecord] = {}
        self.profiles: dict[str, RateProfile] = {}
        #: with timetables: the hour-of-day profiles they are placed on
        #: (key and host, like ``profiles``), and their last fit per name
        self.day_profiles: dict[str, DayProfile] = {}
        self._day_fits: dict[str, tuple[float, list[float]]] = {}
        self._heap: list[tuple[float, str]] = []
        self.forest = None
        if model == "forest":
            from .forest import ForestModel

            options = {"min_events": key_min_events, "retrain_every": forest_retrain}
            if forget is not None:
                options["window"] = forget
            options.update(forest_options or {})
            self.forest = ForestModel(**options)
        # Running counters (the Scrapy glue turns them into stats).
        self.revisits = 0
        self.changed = 0
        self.unchanged = 0
        self.not_modified = 0
        self.new_links_on_revisits = 0
        self.bursts = 0
        self.hints = 0  #: revisits brought forward by a partner's change
        self.hints_changed = 0  #: of those, the ones that found a change
        self.hints_skipped = 0  #: not brought forward: hints at half the budget
        self.activity_replanned = 0  #: revisits brought forward by a host turning active

    # -- profiles ---------------------------------------------------------------

    def _profile(self, name: str) -> RateProfile:
        profile = self.profiles.get(name)
        if profile is None:
            profile = self.profiles[name] = RateProfile(forget=self.forget, **self.profile_options)
        return profile

    def shape_of(self, record: PageRecord) -> tuple[str, WeeklyRates]:
        """``(source, shape)`` for a page: the forest's model if there is
        one, else the key's profile, else the host's, else flat."""
        if self.forest is not None:
            found = self.forest.shape(record.key, record.site)
            if found is not None:
                return found
        for name in (record.key, record.site):
            profile = self.profiles.get(name)
            if profile is not None and profile.events >= self.key_min_events:
                return name, profile.shape()
        return "flat", _FLAT

    # -- visits in ----------------------------------------------------------------

    def on_visit(
        self,
        url: str,
        host: str,
        now: float,
        *,
        changed: bool | None = None,
        new_links: int | None = None,
        not_modified: bool = False,
        depth: int = 0,
        last_modified: float | None = None,
        importance: float | None = None,
    ) -> float:
        """Record a visit of ``url`` at ``now`` and plan the next one.

        :param host: the page's politeness key (download slot).
        :param changed: whether the content changed since the previous visit
            (``None``: unknown).
        :param new_links: links on the page not seen before (``None``:
            not counted).
        :param not_modified: the server answered ``304 Not Modified``
            (implies unchanged, no new links).
        :param last_modified: the response's ``Last-Modified`` (Unix time),
            if any: when it falls after the previous visit it dates the
            change.
        :param importance: the page's importance (its share of the budget
            grows with it); ``None`` keeps the last one (1 at first).
        :returns: the time the page is due again.
        """
        record = self.pages.get(url)
        if record is None:
            key, site = profile_key(url)
            record = self.pages[url] = PageRecord(host, key, site, depth)
            if self.activity is not None:
                self.activity.add_page(site, url)
        else:
            record.host = host
        record.failures = 0
        if importance is not None and importance > 0:
            record.weight = importance
        if self.budget_share is not None:
            self._count_fetch(now)
        if record.hinted:
            record.hinted = False
            self.hints_changed += changed is True
        previous = record.last_visit
        if previous is None:
            if self.young is not None and record.site in self._revisited_sites:
                record.young_until = now + self.young.window
                self.young.young_pages += 1
        else:
            self._revisited_sites.add(record.site)
        if not_modified:
            changed = False
            new_links = 0
        if changed is None and new_links is not None:
            changed = new_links > 0
        if previous is not None and now > previous:
            self._learn(url, record, previous, now, changed, new_links, not_modified, last_modified)
        if record.young_until is not None and now >= record.young_until:
            # Grown up: its young changes say little of how it changes now.
            record.young_until = None
            record.history = None
        turned_active = False
        if self.activity is not None:
            if previous is not None:
                self.spend_check.count(now, self.budget_per_second())
            turned_active = self.activity.observe(record.site, previous, now, changed)
        record.last_visit = now if previous is None else max(now, previous)
        record.visits += 1
        due = self._schedule(url, record, now)
        if changed and self.cochange is not None and previous is not None and now > previous:
            self._hint_partners(url, record, previous, now)
        if turned_active:
            self._replan_host(url, record.site, now)
        return due

    def _replan_host(self, url: str, site: str, now: float) -> None:
        """``site`` turned active: bring forward each of its pages' revisits
        to its last visit plus its period at the active frequency, when that
        is earlier than planned (the others keep theirs: a page planned at a
        quiet frequency is otherwise revisited at its old time)."""
        pages, frequency = self.pages, self.allocator.frequency
        factor = self._activity_factor(site, now)  # the same for every page of the host
        for other in self.activity.pages_of(site):
            record = pages.get(other)
            if (
                other == url
                or record is None
                or record.last_visit is None
                or record.deadline is None
                or record.deadline <= now
                or record.rate <= 0
            ):
                continue
            t = max(now, record.last_visit + 1.0 / (frequency(record.rate, record.weight) * factor))
            if t < record.deadline:
                record.interval = t - record.last_visit
                self.activity_replanned += 1
                self._set_due(other, record, t, t)

    def _frequency(self, record: PageRecord, now: float) -> float:
        """Revisits per second of ``record`` by the budget's split, times
        its host's activity multiplier and the spend check's factor."""
        frequency = self.allocator.frequency(record.rate, record.weight)
        if self.activity is not None:
            frequency *= self._activity_factor(record.site, now)
        return frequency

    def _activity_factor(self, site: str, now: float) -> float:
        """Activity's factor on the frequencies of ``site``'s pages: its
        multiplier now times the spend check's factor."""
        return self.activity.multiplier(site, now) * self.spend_check.factor

    #: the most of the budget co-change hints may spend
    HINT_SHARE = 0.5

    def _hint_partners(self, url: str, record: PageRecord, previous: float, now: float) -> None:
        """``url`` changed in ``(previous, now]``: bring forward the revisit
        of each partner whose last visit came before the middle of that
        window (so it more likely than not missed the change)."""
        chance = None
        if self.cochange_chance:
            pages, span = self.pages, now - previous

            def chance(other: str) -> float:
                # An independent partner changing at its rate overlaps this
                # window when it changed within it or within its own
                # interval before it.
                partner = pages.get(other)
                if partner is None or partner.rate <= 0:
                    return 0.0
                return 1.0 - math.exp(-partner.rate * (span + (partner.interval or 0.0)))

        partners = self.cochange.observe(url, record.site, previous, now, chance)
        if not partners:
            return
        budget = self.budget_per_second()
        cut = now - 0.5 * (now - previous)
        pages = self.pages
        for other in partners:
            partner = pages.get(other)
            if (
                partner is None
                or partner.last_visit is None
                or partner.deadline is None
                or partner.deadline <= now  # due already (released, or overdue)
                or partner.last_visit >= cut
                or now - partner.last_visit < self.min_interval
                # expected to change again before its planned revisit: the
                # hint would only spend budget the split withheld
                or (partner.interval and partner.rate * partner.interval > 1.0)
            ):
                continue
            self._hint(other, partner, now, budget)

    def _hint(self, url: str, record: PageRecord, now: float, budget: float | None) -> None:
        """Bring ``url``'s revisit forward to ``now`` (a co-change hint),
        unless hints already spend their share of ``budget``."""
        if budget is not None and self.hint_rate(now) >= self.HINT_SHARE * budget:
            self.hints_skipped += 1
            return
        record.hinted = True
        self.hints += 1
        # What the hint spends: the share of the page's planned interval it
        # cuts off (a revisit moved, not one added).
        cut_off = min(1.0, (record.deadline - now) / record.interval) if record.interval else 1.0
        self._hint_clock = [self._hint_weight(now) + cut_off, now]
        self._set_due(url, record, now, now)

    def _learn(
        self,
        url: str,
        record: PageRecord,
        previous: float,
        now: float,
        changed: bool | None,
        new_links: int | None,
        not_modified: bool,
        last_modified: float | None = None,
    ) -> None:
        span = now - previous
        self.revisits += 1
        if not_modified:
            record.not_modified += 1
            self.not_modified += 1
        # A Last-Modified after the previous visit dates the change (before
        # it, or in the future, it says nothing the checksum did not).
        dated = last_modified if changed and last_modified is not None and previous < last_modified <= now else None
        if changed is not None:
            bursts = self.burst_model
            young = record.young_until is not None and self.young is not None
            if not young and bursts is not None and record.hot_until is not None and previous < record.hot_until:
                # Revisited while hot: the hot rate learns, the quiet one not
                # (it stays the rate between bursts).
                bursts.observe(record, now, span, changed)
            else:
                if record.history is None:
                    record.history = TimedChangeHistory(self.change_window)
                record.history.add(now, span, changed, dated)
                if young:
                    # The section's pooled rate is left to settled pages.
                    self.young.observe(record, now, span, changed, self.prior_rate(record, now))
                else:
                    self._pool_add(record, now, span, changed)
            if bursts is not None and changed:
                record.hot_until = now + bursts.window
            if changed:
                record.changes += 1
                self.changed += 1
            else:
                self.unchanged += 1
        if new_links is None and changed is None:
            return
        links = new_links or 0
        record.new_links += links
        self.new_links_on_revisits += links
        fade = (
            math.exp(-span / self.scale_forget)
            if self.scale_forget is not None and new_links is not None
            else 1.0
        )
        if self.model == "aopic":
            # Cash decides revisits; keep only the page's flat link rate
            # (for stats), not the profiles.
            if new_links is not None:
                record.events = record.events * fade + links
                record.exposure = record.exposure * fade + span
            return
        # Called even without link counts: profiles refit lazily when asked
        # for their shape, and this call is part of when they refit.
        _, shape = self.shape_of(record)
        if new_links is not None:
            if self.burst_boost and record.counted and record.new_links > links:
                expected = self._scale(record, shape) * record.boost * shape.integral(previous, now)
                if links >= 3 and poisson_tail(links, expected) < self.burst_p:
                    record.boost = min(links / max(expected, 1e-9), 10.0)
                    self.bursts += 1
                else:
                    record.boost = 1.0 + self.burst_decay * (record.boost - 1.0)
            record.events = record.events * fade + links
            if record.bins is None and record.new_links > 0:
                # A hub from now on: keep its watched seconds per hour of the
                # week, so its scale is measured against the profile's current
                # shape (still being learnt). What was watched before is
                # spread evenly. Hubs are revisited often: few pieces each.
                record.bins = array("d", [record.exposure / BINS] * BINS)
                record.bins_scale = 1.0
            record.exposure = record.exposure * fade + span
            if record.bins is not None:
                # Forget by scaling one factor, not 168 bins: actual seconds
                # are stored * bins_scale.
                record.bins_scale *= fade
                if record.bins_scale < 1e-100:
                    record.bins = array("d", (x * record.bins_scale for x in record.bins))
                    record.bins_scale = 1.0
                bins, unit = record.bins, record.bins_scale
                for b, seconds in iter_segments(previous, now):
                    bins[b] += seconds / unit
        # The profiles learn from every event: new links and, weighted,
        # content changes (most pages change without new links).
        events = links + (self.change_weight if changed else 0.0)
        self._profile(record.key).observe(previous, now, events, at=dated)
        if record.site != record.key:
            self._profile(record.site).observe(previous, now, events, at=dated)
        if self.timetable and self.allocator is not None:
            for name in (record.key, record.site) if record.site != record.key else (record.key,):
                day = self.day_profiles.get(name)
                if day is None:
                    day = self.day_profiles[name] = DayProfile(self.forget)
                day.observe(previous, now, events, at=dated)
        if self.forest is not None:
            self.forest.observe(record.key, record.site, previous, now, events)
            if self.forest.due_for_training(now):
                self.forest.train(now)

    # -- pooled change rates (the prior of pages with little history) ----------------

    def _pool_weight(self, now: float) -> float:
        weight, self._pool_base = growing_weight(self._pool_base, now, self.change_window, self._rescale_pools)
        return weight

    def _rescale_pools(self, factor: float) -> None:
        for pool in self._pools.values():
            pool[0] *= factor
            pool[1] *= factor

    def _pool_add(self, record: PageRecord, now: float, span: float, changed: bool) -> None:
        w = self._pool_weight(now)
        pools = self._pools
        added = w if changed else 0.0
        for name in (record.key, record.site, "*"):
            pool = pools.get(name)
            if pool is None:
                pool = pools[name] = [0.0, 0.0]
            pool[0] += added
            pool[1] += w * span
            if name == record.site == record.key:
                break

    #: changes a pool must have seen before its rate is used as a prior
    POOL_MIN_CHANGES = 3.0

    def prior_rate(self, record: PageRecord, now: float) -> float:
        """Changes per second pooled over the page's key, else its host,
        else every page (changes over seconds watched: biased low when
        visits are rare, but only a prior)."""
        if self._pool_base is None:
            return 0.0
        # Stored weights grow with time: the effective count is stored / w(now).
        unit = math.exp(max(0.0, now - self._pool_base) / self.change_window)
        for name in (record.key, record.site):
            pool = self._pools.get(name)
            if pool is not None and pool[0] >= self.POOL_MIN_CHANGES * unit and pool[1] > 0:
                return pool[0] / pool[1]
        pool = self._pools.get("*")
        return pool[0] / pool[1] if pool is not None and pool[0] > 0 and pool[1] > 0 else 0.0

    def _page_prior(self, record: PageRecord, now: float) -> float:
        """The rate a page's own history is shrunk to: its section's pooled
        rate, times the young multiplier while it is young."""
        prior = self.prior_rate(record, now)
        if record.young_until is not None and self.young is not None:
            prior *= self.young.multiplier(record, now)
        return prior

    def _count_fetch(self, now: float) -> None:
        clock = self._fetch_clock
        if clock[2]:
            fade = math.exp(-max(0.0, now - clock[2]) / DAY)
            clock[1] = clock[1] * fade + (now - clock[2])
            clock[0] *= fade
        clock[0] += 1.0
        clock[2] = now

    def hint_rate(self, now: float) -> float:
        """Revisits per second co-change hints spend, over about the last
        week (each hint the share of an interval it cut off, weighted
        ``exp(-age / HINT_WINDOW)``)."""
        return self._hint_weight(now) / HINT_WINDOW

    def _hint_weight(self, now: float) -> float:
        weight, at = self._hint_clock
        return weight * math.exp(-max(0.0, now - at) / HINT_WINDOW)

    def on_failure(self, url: str, host: str, now: float) -> float:
        """A revisit failed (network error, 5xx): try again later, backing
        off from ``min_interval`` up to ``max_interval``."""
        record = self.pages.get(url)
        if record is None:
            key, site = profile_key(url)
            record = self.pages[url] = PageRecord(host, key, site)
        record.failures += 1
        # (2.0 ** 1024 overflows: past 64 doublings max_interval has long won)
        interval = min(self.max_interval, self.min_interval * 2.0 ** min(record.failures, 64))
        return self._set_due(url, record, now + interval, now + interval)

    def adopt(self, url: str, host: str, last_visit: float | None, now: float) -> float:
        """Plan a page crawled before the planner knew it (a resumed crawl
        whose planner state was lost): its first revisit comes
        ``initial_interval`` after its last visit, and not before ``now``."""
        record = self.pages.get(url)
        if record is not None:
            return record.due if record.due is not None else now
        key, site = profile_key(url)
        record = self.pages[url] = PageRecord(host, key, site)
        record.last_visit = last_visit
        if self.activity is not None:
            self.activity.add_page(site, url)
        base = last_visit if last_visit is not None else now
        if self.model == "aopic":
            due = max(now, base + self.min_interval)
            return self._set_due(url, record, due, max(due, base + self.max_interval))
        due = max(now, base + self.initial_interval)
        return self._set_due(url, record, due, due)

    def forget_page(self, url: str) -> None:
        """Stop planning ``url`` (refused, an alias, gone for good)."""
        record = self.pages.pop(url, None)
        if record is not None:
            record.due = None
            if self.activity is not None:
                self.activity.forget_page(record.site, url)
        if self.cochange is not None:
            self.cochange.forget_page(url)

    # -- planning -------------------------------------------------------------------

    @staticmethod
    def _scale(record: PageRecord, shape: WeeklyRates | None = None) -> float:
        """The page's links per second per unit of ``shape`` (mean 1)."""
        if record.exposure <= 0:
            return 0.0
        if record.bins is not None and shape is not None:
            watched = record.bins_scale * sum(map(mul, record.bins, shape.rates))
        else:
            watched = record.exposure
        # Half a pseudo-event keeps a page that has shown nothing yet from
        # being written off at once: its interval grows as it stays quiet.
        return (record.events + 0.5) / watched if watched > 0 else 0.0

    def page_rate(self, record: PageRecord, now: float) -> float | None:
        """Events per second (mean over the week) the page is planned with:
        its new links, plus ``change_weight`` times its change rate (the
        change rate alone for a page without link counts). ``None``:
        nothing known yet."""
        counted = record.exposure > 0  # record.counted, without the property call
        hub = counted and record.new_links > 0
        rate = self._scale(record, self.shape_of(record)[1]) * record.boost if hub else 0.0
        weight = self.change_weight if counted else 1.0
        if weight > 0 and record.history is not None and len(record.history):
            rate += weight * record.history.rate(now, self._page_prior(record, now))
        elif not hub:
            if self.allocator is None or record.history is not None:
                return None if record.history is None else 0.0
            prior = self._page_prior(record, now)  # a new page: its section's rate
            return prior if prior > 0 else None
        return rate

    def plan_interval(self, url: str, now: float) -> float:
        """The interval the planner would pick for ``url`` after a visit at
        ``now`` (clamped to ``[min_interval, max_interval]``)."""
        record = self.pages[url]
        return self._interval(url, record, now)

    def _interval(self, url: str, record: PageRecord, now: float) -> float:
        if self.model == "aopic":
            return self.min_interval
        rate = self.page_rate(record, now)
        if rate is not None and rate > 0 and self.burst_model is not None:
            record.base_rate = rate
            if record.hot_until is not None and now < record.hot_until:
                # Hot: planned, and counted by the budget's solve, as a page
                # of the hot rate.
                rate = self.burst_model.hot_rate(record, now)
        if rate is None:
            interval = self.initial_interval
        elif rate <= 0:
            # Nothing ever happened here: back off while nothing happens.
            interval = 2.0 * (record.interval or self.initial_interval)
        else:
            record.rate = rate
            source, shape = self.shape_of(record)
            if self.allocator is not None:
                self._maybe_rebalance(now)
                period = 1.0 / self._frequency(record, now)
                table = (
                    self._timetable_for(source, shape, period, now)
                    if self.timetable
                    else None
                )
                if table is not None:
                    # The budget says how often, the section's timetable when.
                    # A page its host made late counts from the fetch time it
                    # was planned for, not from when it was fetched: else
                    # the next fetch time comes early and the budget is
                    # overspent (Debian: 9.7 hours of fetching a day).
                    planned = record.deadline
                    anchor = planned if planned is not None and now - period < planned < now else now
                    # Timetables are placed on the hour-of-day profile, so
                    # turning one by whole days costs nothing: each page
                    # gets its own turn, and a section's pages with fewer
                    # than a revisit a day do not all come on the same days.
                    turn = (zlib.crc32(url.encode()) % 7) * DAY
                    t = table.next_after(anchor - turn + max(0.0, period - WEEK)) + turn
                    if t - now < self.min_interval:  # fetched later than the next time
                        t = table.next_after(now - turn) + turn
                    if t - now > self.max_interval:
                        t = table.next_after(now - turn, self.min_interval) + turn
                    if self.explore:
                        t = self._explore(url, record, table, t)
                    interval = t - now
                elif period >= self.max_interval:
                    interval = self.max_interval
                else:
                    # The mean frequency is the budget's; the profile says
                    # when: the same expected waiting as a periodic visit
                    # (period^2 / 2 event-seconds per unit rate), so visits
                    # bunch after busy hours and thin out at night.
                    t = shape.time_to_delay(now, 0.5 * period * period, self.max_interval)
                    interval = t - now
            elif self.rule == "yield":
                interval = shape.time_to_yield(now, self.target_yield / rate, self.max_interval) - now
            else:
                # rate(t) = rate * shape(t): integrate the shape with the
                # target divided by the rate (no per-page profile needed).
                interval = shape.time_to_delay(now, self.fetch_cost / rate, self.max_interval) - now
        return min(max(interval, self.min_interval), self.max_interval)

    def _explore(self, url: str, record: PageRecord, table: Timetable, t: float) -> float:
        """Now and then move the fetch at ``t`` to another hour.

        A change found by a revisit is only known to lie since the previous
        one; once every revisit of a section comes at the same hour of the
        day, every change is "somewhere in the last 24 hours" and the
        profile, hence the timetable, stops learning the hour: a wrong hour
        stays wrong. A share ``explore`` of the revisits is moved by up to
        the timetable's guard (half its shortest gap: +-12 h on a daily
        one) either way, so the intervals before and after it start or end
        at a varied hour and whether they saw a change says when in the day
        changes come. The next revisit returns to the timetable's following
        fetch time (the guard makes it skip none and add none), and the
        move is symmetric, so the budget is kept. The draws are a
        low-discrepancy sequence from a per-URL phase (deterministic).
        """
        u = (zlib.crc32(url.encode(), 1) / 4294967296.0 + 0.7548776662466927 * record.visits) % 1.0
        if u >= self.explore:
            return t
        self.explored += 1
        return t + (2.0 * u / self.explore - 1.0) * 0.999 * table.guard

    #: how far (L1, the day's profile summing to 1) a section's hour-of-day
    #: profile must move before its timetables are rebuilt
    TIMETABLE_MOVE = 0.05

    def _timetable_for(self, source: str, shape: WeeklyRates, period: float, now: float) -> Timetable | None:
        """The weekly timetable of a page of the section of profile
        ``source`` (``shape``) for its budgeted ``period`` (``None``: no
        profile yet, or more revisits a week than timetables are built
        for)."""
        if source == "flat":
            return None  # no rhythm known: nothing to place the revisits by
        k = WEEK / period
        if k > LEVELS[-1]:
            return None
        # The one level nearest k (in ratio: the page's loss from a
        # frequency f instead of the budget's f*, its delay plus the
        # budget's price of its fetches, goes as f*/f + f/f*, the same for
        # f = 2 f* as for f* / 2), kept visit after visit. Not a dither
        # between the two levels around k: consecutive fetches from two
        # timetables of unrelated slots make irregular gaps, which cost
        # delay to first order (a page with gaps g waits sum g^2 / 2 sum g,
        # not mean g / 2; on a flat day the dither also missed WEEK / k by
        # up to 8 %), while a frequency off the allocator's optimum costs
        # only to second order (docs/recrawl.rst, "Why the timetables lose
        # on pip").
        j = bisect_right(LEVELS, k) - 1
        if j < 0:
            level = LEVELS[0]
        elif j + 1 == len(LEVELS):
            level = LEVELS[-1]
        else:
            low, high = LEVELS[j], LEVELS[j + 1]
            level = high if k * k > low * high else low
        entry = self._timetables.get((source, level))
        if entry is None or (entry[0] is not shape and now - entry[1] >= self.timetable_refresh):
            # Placed on the hour-of-day profile (the week's days pooled):
            # placing on all 168 hours overfits the few changes a section
            # has (Rust book trace: 11.2 h mean delay against 9.3 h). It is
            # the section's DayProfile (the likelihood of every interval,
            # refitted), not the weekly profile's hours: that one spreads
            # a change once, by its own estimate, and learns its shape back.
            day = self._day_profile(source, now)
            if entry is not None and sum(abs(a - b) for a, b in zip(day, entry[3])) < self.TIMETABLE_MOVE:
                entry = (shape, now, entry[2], entry[3])  # the day moved too little
            else:
                entry = (shape, now, Timetable(place(day * 7, level)), day)
            self._timetables[(source, level)] = entry
        return entry[2]

    def _day_profile(self, name: str, now: float) -> list[float]:
        """The fitted hour-of-day profile of ``name`` (refitted at most
        every ``timetable_refresh``: a fit is a few milliseconds)."""
        fit = self._day_fits.get(name)
        if fit is None or now - fit[0] >= self.timetable_refresh:
            profile = self.day_profiles.get(name)
            day = profile.fit() if profile is not None else [1.0 / 24] * 24
            fit = self._day_fits[name] = (now, day)
        return fit[1]

    # -- the budget --------------------------------------------------------------------

    def budget_per_second(self) -> float | None:
        """Revisits per second to spend (``None``: no budget)."""
        if self.budget is not None:
            return self.budget / DAY
        if self.budget_share is not None:
            count, seconds, _ = self._fetch_clock
            if seconds <= 0:
                return None
            return self.budget_share * count / seconds
        return None

    def _planned_budget(self) -> float | None:
        """What the budget's split spends: the budget less what co-change
        hints spend (they take at most half of it)."""
        budget = self.budget_per_second()
        if budget is None or self.cochange is None:
            return budget
        return budget - min(self.hint_rate(self._solved_at), self.HINT_SHARE * budget)

    def _maybe_rebalance(self, now: float) -> None:
        allocator = self.allocator
        n = len(self.pages)
        # A solve is O(pages): done at most once per ``pages`` plans (O(1)
        # per visit amortised) and not more often than ``rebalance``, except
        # while the set of pages grows by a tenth.
        self._plans_since_solve += 1
        if (
            allocator.mu is not None
            and self._solved_at is not None
            and (now - self._solved_at < self.rebalance or self._plans_since_solve < n)
            and n <= 1.1 * self._solved_pages
        ):
            return
        self.rebalance_now(now)

    def rebalance_now(self, now: float) -> None:
        """Solve the budget's split over every page planned (O(pages))."""
        self._solved_at = now
        budget = self._planned_budget()
        self._solved_pages = len(self.pages)
        self._plans_since_solve = 0
        if budget is None:
            return
        rates, weights, hosts, index = [], [], [], {}
        for record in self.pages.values():
            rate = record.rate
            if rate < 0:
                rate = self.prior_rate(record, now)  # not planned yet
            rates.append(rate)
            weights.append(record.weight)
            hosts.append(index.setdefault(record.host, len(index)))
        cap = 1.0 / self.host_gap if self.host_gap else None
        self.allocator.solve(rates, weights, budget, hosts, cap)

    def _schedule(self, url: str, record: PageRecord, now: float) -> float:
        interval = self._interval(url, record, now)
        record.interval = interval
        if self.model == "aopic":
            return self._set_due(url, record, now + self.min_interval, now + self.max_interval)
        return self._set_due(url, record, now + interval, now + interval)

    #: expected changes below which a page counts as unchanged in the host
    #: queue's order (a page changing once in 27 years, revisited daily)
    QUEUE_MIN_CHANGES = 1e-4

    def queue_key(self, record: PageRecord, now: float) -> float:
        """Where a released page goes in its host's queue of overdue
        revisits (:class:`OverdueQueue`: smallest first): its deadline, and
        with ``likely_first`` and a budget that deadline less a head start
        of ``ln(x / QUEUE_MIN_CHANGES)`` days, ``x`` the changes the page
        was expected to have had by its planned time since its last visit
        (its rate times its planned interval; none below the minimum).

        A host fetches one page per ``host_gap``, and a timetable makes a
        section's pages due at the same slot: the last of them come hours
        late (docs-cn, one host: 2.8 h on average, up to 9). Each second a
        page waits adds a second of delay to each change it holds, and to
        its stale time if it changed: the queue should serve first the page
        with the most changes pending (for both, as the chance of a change
        grows with them). At ``L`` seconds late a page revisited daily
        holds ``x (1 + L / DAY)``, about ``x exp(L / DAY)``: serving the
        largest ``ln x + L / DAY`` is serving the smallest key (a page of a
        longer period, whose pending changes grow more slowly, is served a
        little sooner than that, which starves nobody). The order does not
        change how long the host stays busy, only who waits; each page
        keeps its planned revisits."""
        deadline = record.deadline or now
        if not self.likely_first or self.allocator is None or record.rate <= 0 or not record.interval:
            return deadline
        expected = max(record.rate * record.interval, self.QUEUE_MIN_CHANGES)
        return deadline - DAY * math.log(expected / self.QUEUE_MIN_CHANGES)

    def _set_due(self, url: str, record: PageRecord, due: float, deadline: float) -> float:
        record.due = due
        record.deadline = deadline
        heapq.heappush(self._heap, (due, url))
        return due

    # -- due pages out ------------------------------------------------------------------

    def _clean(self) -> None:
        heap = self._heap
        while heap:
            due, url = heap[0]
            record = self.pages.get(url)
            if record is not None and record.due == due:
                return
            heapq.heappop(heap)

    def due(self, now: float) -> list[str]:
        """URLs due at ``now``, to put back in the frontier.

        Each is released once; unless a visit is reported in between, it is
        released again after ``max_interval`` (a request lost on the way, a
        failure nobody reported), so no page drops out of the schedule.
        """
        heap = self._heap
        if not heap or heap[0][0] > now:
            return []  # the hot path: nothing due (stale entries wait)
        released = []
        pages = self.pages
        heappop = heapq.heappop
        while heap:
            due, url = heap[0]
            if due > now:
                break
            heappop(heap)
            record = pages.get(url)
            if record is None or record.due != due:
                continue  # stale (_clean's test)
            released.append(url)
            watchdog = now + self.max_interval
            # Keep the deadline of a due page: it decides who goes first.
            deadline = record.deadline or now
            self._set_due(url, record, watchdog, deadline)
        return released

    def next_wakeup(self) -> float | None:
        """When the next page falls due (``None``: nothing planned)."""
        self._clean()
        return self._heap[0][0] if self._heap else None

    def deadline_of(self, url: str) -> float | None:
        """When ``url`` must be fetched by (its due time, or for
        ``model="aopic"`` ``max_interval`` after its last visit)."""
        record = self.pages.get(url)
        return None if record is None else record.deadline

    def host_of(self, url: str) -> str | None:
        record = self.pages.get(url)
        return None if record is None else record.host

    def __len__(self) -> int:
        return len(self.pages)

    # -- reading ---------------------------------------------------------------------------

    def estimate(self, url: str) -> Estimate | None:
        """The planner's current estimates for ``url``."""
        record = self.pages.get(url)
        if record is None:
            return None
        source, shape = self.shape_of(record)
        links = self._scale(record, shape) * HOUR if record.counted else 0.0
        changes = naive = 0.0
        if record.history is not None and len(record.history):
            now = record.last_visit or 0.0
            changes = record.history.rate(now, self.prior_rate(record, now)) * HOUR
            naive = record.history.naive() * HOUR
        return Estimate(
            url, links, changes, naive, source, record.visits, record.interval, record.due
        )

    def top_hubs(self, n: int = 10) -> list[Estimate]:
        """The ``n`` pages with the highest estimated link rate.

        Candidates are picked by their flat rate (cheap), then ranked by the
        profile-weighted one: O(pages) but no profile lookups for most."""
        candidates = heapq.nlargest(
            4 * n,
            (
                (r.events / r.exposure, u)
                for u, r in self.pages.items()
                if r.new_links > 0 and r.exposure > 0
            ),
        )
        ranked = sorted(
            (u for _, u in candidates),
            key=lambda u: -self._scale(self.pages[u], self.shape_of(self.pages[u])[1]),
        )
        return [self.estimate(u) for u in ranked[:n]]

    def iter_records(self) -> Iterator[tuple[str, PageRecord]]:
        return iter(self.pages.items())

    # -- persistence ---------------------------------------------------------------------

    def to_state(self) -> dict:
        """JSON-able state (pages, profiles, counters); the forest refits."""
        pages = {}
        for url, r in self.pages.items():
            pages[url] = [
                r.host, r.depth, r.last_visit, r.visits, r.changes, r.not_modified,
                r.new_links, r.events, r.exposure, r.boost,
                r.history.to_state() if r.history is not None else None,
                r.due, r.deadline, r.interval, r.failures, r.weight, r.rate,
                [x * r.bins_scale for x in r.bins] if r.bins is not None else None,
                r.base_rate, r.hot_until, r.burst.to_state() if r.burst is not None else None,
                r.young_until,
            ]  # fmt: skip
        return {
            "version": 7,
            "pools": self._pools,
            "pool_base": self._pool_base,
            "mu": self.allocator.mu if self.allocator is not None else None,
            "pages": pages,
            "profiles": {name: p.to_state() for name, p in self.profiles.items()},
            "day_profiles": {name: p.to_state() for name, p in self.day_profiles.items()},
            "burst": self.burst_model.to_state() if self.burst_model is not None else None,
            "cochange": self.cochange.to_state() if self.cochange is not None else None,
            "hint_clock": self._hint_clock,
            "activity": self.activity.to_state() if self.activity is not None else None,
            "young": self.young.to_state() if self.young is not None else None,
            "spend": self.spend_check.to_state(),
            "counters": [
                self.revisits, self.changed, self.unchanged, self.not_modified,
                self.new_links_on_revisits, self.bursts,
                self.hints, self.hints_changed, self.hints_skipped,
                self.activity_replanned,
            ],  # fmt: skip
        }

    def load_state(self, state: dict) -> None:
        """Restore what :meth:`to_state` saved (settings stay this object's).

        All or nothing: every value is checked (:mod:`.checks`) and the
        whole state built aside first, so a bad one raises
        :class:`ValueError` naming it and leaves this planner as it was
        (the re-crawl hook then starts afresh, as it says)."""
        state = checks.mapping(state, "state")
        version = state.get("version")
        if version not in (3, 4, 5, 6, 7):  # 3: before bursts, 4: co-changes, 5: activity, 6: new pages (each: before)
            raise ValueError(f"unknown recrawl state version {version!r}")
        pages: dict[str, PageRecord] = {}
        heap: list[tuple[float, str]] = []
        for url, f in checks.mapping(state.get("pages"), "pages").items():
            r = self._page_from_state(url, f, version)
            pages[url] = r
            if r.due is not None:
                heap.append((r.due, url))
        heapq.heapify(heap)
        profiles = {
            name: RateProfile.from_state(p, forget=self.forget, **self.profile_options)
            for name, p in checks.mapping(state.get("profiles"), "profiles").items()
        }
        day_profiles = {
            name: DayProfile.from_state(p, forget=self.forget)
            for name, p in checks.mapping(state.get("day_profiles", {}), "day profiles").items()
        }
        pools = checks.pairs(state.get("pools"), "pool")
        pool_base = checks.time(state.get("pool_base"), "pool base")
        burst_model = self.burst_model
        if burst_model is not None:
            # saved without bursts: start learning them afresh
            burst_model = BurstModel(burst_model.window, self.change_window)
            if state.get("burst") is not None:
                burst_model.load_state(state["burst"])
        cochange = self.cochange
        hint_clock = [0.0, 0.0]
        if cochange is not None:
            # saved without co-changes: start learning them afresh
            cochange = CoChangeModel(threshold=self.cochange_share)
            if state.get("cochange") is not None:
                cochange.load_state(state["cochange"])
                clock = state.get("hint_clock")
                if not isinstance(clock, list) or len(clock) != 2:
                    raise ValueError(f"recrawl state: hint clock {clock!r} is not [weight, time]"[:200])
                hint_clock = [
                    checks.number(clock[0], "hint weight"),
                    checks.number(clock[1], "hint time", -checks.TIME, checks.TIME),
                ]
        activity = self.activity
        spend_check = SpendCheck()
        if activity is not None:
            # saved without activity: start learning it afresh
            activity = HostActivity()
            if state.get("activity") is not None:
                activity.load_state(state["activity"])
                spend_check.load_state(state.get("spend"))
            for url, r in pages.items():
                activity.add_page(r.site, url)
        young = self.young
        if young is not None:
            # saved without new pages: start learning them afresh
            young = YoungPages(young.window, self.change_window)
            if state.get("young") is not None:
                young.load_state(state["young"])
        mu = checks.optional(state.get("mu"), "budget multiplier mu")
        counters = state.get("counters")
        size = {7: 10, 6: 10, 5: 9}.get(version, 6)
        if not isinstance(counters, list) or len(counters) != size:
            raise ValueError(f"recrawl state: counters {counters!r} are not {size} counts"[:200])
        counters = [checks.count(c, "counter") for c in counters] + [0] * (10 - size)
        # -- everything read: installed at once
        self.pages, self._heap = pages, heap
        self.profiles, self.day_profiles = profiles, day_profiles
        self._day_fits.clear()
        self._pools, self._pool_base = pools, pool_base
        self.burst_model = burst_model
        self.cochange, self._hint_clock = cochange, hint_clock
        self.activity, self.spend_check = activity, spend_check
        self.young = young
        self._revisited_sites = {r.site for r in pages.values() if r.visits > 1}
        if self.allocator is not None:
            self.allocator.mu = mu
        (self.revisits, self.changed, self.unchanged, self.not_modified,
         self.new_links_on_revisits, self.bursts,
         self.hints, self.hints_changed, self.hints_skipped,
         self.activity_replanned) = counters  # fmt: skip

    def _page_from_state(self, url: str, f: Any, version: int) -> PageRecord:
        """One page of :meth:`to_state`, each field checked."""
        if not isinstance(f, list) or len(f) < (22 if version >= 7 else 21 if version >= 4 else 18):
            raise ValueError(f"recrawl state: page {url} is not a page record")
        if not isinstance(f[0], str):
            raise ValueError(f"recrawl state: page {url}: host {f[0]!r} is not a string"[:200])
        key, site = profile_key(url)
        r = PageRecord(f[0], key, site, checks.count(f[1], f"page {url}: depth"))
        r.last_visit = checks.time(f[2], f"page {url}: last visit")
        r.visits, r.changes, r.not_modified, r.new_links = (
            checks.count(x, f"page {url}: {what}")
            for x, what in zip(f[3:7], ("visits", "changes", "not modified", "new links")))
        r.events = checks.number(f[7], f"page {url}: events")
        r.exposure = checks.number(f[8], f"page {url}: exposure")
        r.boost = checks.number(f[9], f"page {url}: boost")
        if f[10] is not None:
            r.history = TimedChangeHistory.from_state(f[10], self.change_window)
        r.due = checks.time(f[11], f"page {url}: due")
        r.deadline = checks.time(f[12], f"page {url}: deadline")
        r.interval = checks.optional(f[13], f"page {url}: interval")
        r.failures = checks.count(f[14], f"page {url}: failures")
        r.weight = checks.number(f[15], f"page {url}: weight")
        r.rate = checks.number(f[16], f"page {url}: rate", -1.0)
        if f[17] is not None:
            r.bins = array("d", checks.numbers(f[17], f"page {url}: bins", BINS))
        if version >= 4:
            r.base_rate = checks.number(f[18], f"page {url}: quiet rate")
            r.hot_until = checks.time(f[19], f"page {url}: hot until")
            if f[20] is not None:
                r.burst = TimedChangeHistory.from_state(f[20], self.change_window)
        if version >= 7:
            young_until = checks.time(f[21], f"page {url}: young until")
            # saved with new pages, loaded without: every page is settled
            r.young_until = young_until if self.young is not None else None
        return r


class OverdueQueue:
    """Released pages that are past their deadline, most overdue first
    (by the key :meth:`RecrawlPlanner.queue_key` gives them).

    A page released by :meth:`RecrawlPlanner.due` goes back to the frontier
    and normally waits its turn in cash order. Once its deadline has passed
    it should go first, but only when its host can be fetched now: politeness
    is never bypassed. :meth:`pop` returns the most overdue such URL.

    Entries are kept per host, and hosts in the order of their most overdue
    entry: a timetable makes many pages of one host due at the same time,
    and a host that is busy is then skipped once, not once per page.
    """

    def __init__(self, scan: int = 64):
        self.scan = scan  #: hosts examined per pop (busy hosts are skipped)
        self._hosts: dict[str, list[tuple[float, int, str]]] = {}
        # (deadline, seq, host) of each host's first entry; entries whose
        # host's first entry has changed since are stale and skipped.
        self._order: list[tuple[float, int, str]] = []
        self._live: dict[str, float] = {}
        self._seq = 0

    def push(self, url: str, host: str, deadline: float) -> None:
        """Track ``url`` (released, due by ``deadline``)."""
        self._live[url] = deadline
        self._seq += 1
        heap = self._hosts.get(host)
        if heap is None:
            heap = self._hosts[host] = []
        heapq.heappush(heap, (deadline, self._seq, url))
        if heap[0][1] == self._seq:  # the host's new first entry
            heapq.heappush(self._order, (deadline, self._seq, host))

    def discard(self, url: str) -> None:
        """Stop tracking ``url`` (it was fetched through the normal order)."""
        self._live.pop(url, None)

    def __len__(self) -> int:
        return len(self._live)

    def maybe_due(self, now: float) -> bool:
        """Whether :meth:`pop` may find something at ``now`` (``False``:
        it would return ``None``; stale entries may make it ``True``)."""
        order = self._order
        return bool(order) and order[0][0] <= now

    def _first(self, host: str) -> tuple[float, int, str] | None:
        """The host's first live entry (stale ones dropped)."""
        heap = self._hosts.get(host)
        live = self._live
        while heap:
            deadline, _, url = heap[0]
            if live.get(url) == deadline:
                return heap[0]
            heapq.heappop(heap)  # stale: re-released or discarded
        if heap is not None:
            del self._hosts[host]
        return None

    def pop(self, now: float, ready=lambda host: True) -> str | None:
        """The most overdue tracked URL (deadline <= ``now``) whose host is
        ``ready``; ``None`` if there is none among the first ``scan`` hosts."""
        order = self._order
        if not order or order[0][0] > now:
            return None  # the hot path: nothing overdue (stale entries wait)
        skipped = []
        busy = set()
        found = None
        try:
            while order and len(skipped) < self.scan:
                deadline, seq, host = order[0]
                first = self._first(host)
                if first is None or first[1] != seq:
                    heapq.heappop(order)  # stale: the host's first entry changed
                    if first is not None:
                        # Order the host by its first entry now (a duplicate
                        # of an entry still queued is harmless: it is stale
                        # once that one is served).
                        heapq.heappush(order, (first[0], first[1], host))
                    continue
                if deadline > now:
                    break
                entry = heapq.heappop(order)
                if host in busy:
                    continue  # a duplicate of a host already skipped: dropped
                if ready(host):
                    heap = self._hosts[host]
                    _, _, found = heapq.heappop(heap)
                    del self._live[found]
                    following = self._first(host)
                    if following is not None:
                        heapq.heappush(order, (following[0], following[1], host))
                    break
                skipped.append(entry)
                busy.add(host)
        finally:
            for entry in skipped:
                heapq.heappush(order, entry)
        return found
