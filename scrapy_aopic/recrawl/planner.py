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

Every planned interval is clamped to ``[min_interval, max_interval]``.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterator
from operator import mul
from typing import Any, NamedTuple

from .estimators import ChangeHistory, poisson_tail
from .profile import BINS, DAY, HOUR, RateProfile, WeeklyRates, iter_segments, profile_key

MODELS = ("estimator", "forest", "aopic")
RULES = ("yield", "delay")

_FLAT = WeeklyRates.flat(1.0)


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
        "history",
        "due",
        "deadline",
        "interval",
        "failures",
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
        self.history: ChangeHistory | None = None
        self.due: float | None = None  #: when to release it into the frontier
        self.deadline: float | None = None  #: when it must be fetched
        self.interval: float | None = None  #: the last planned interval
        self.failures = 0

    @property
    def counted(self) -> bool:
        """Whether the page's link counts have been observed at least once."""
        return self.exposure > 0


class Estimate(NamedTuple):
    """The planner's current view of one page (for stats and tools)."""

    url: str
    links_per_hour: float  #: mean over the week of the page's link rate
    changes_per_hour: float  #: Cho irregular-interval estimate
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
        (0: only new links count for pages with link counts).
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
        change_weight: float = 0.0,
        burst_boost: bool = True,
        burst_p: float = 0.01,
        burst_decay: float = 0.5,
        history_capacity: int = 32,
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
        self.history_capacity = history_capacity
        self.profile_options = dict(profile_options or {})
        self.pages: dict[str, PageRecord] = {}
        self.profiles: dict[str, RateProfile] = {}
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
    ) -> float:
        """Record a visit of ``url`` at ``now`` and plan the next one.

        :param host: the page's politeness key (download slot).
        :param changed: whether the content changed since the previous visit
            (``None``: unknown).
        :param new_links: links on the page not seen before (``None``:
            not counted).
        :param not_modified: the server answered ``304 Not Modified``
            (implies unchanged, no new links).
        :returns: the time the page is due again.
        """
        record = self.pages.get(url)
        if record is None:
            key, site = profile_key(url)
            record = self.pages[url] = PageRecord(host, key, site, depth)
        else:
            record.host = host
        record.failures = 0
        previous = record.last_visit
        if not_modified:
            changed = False
            new_links = 0
        if changed is None and new_links is not None:
            changed = new_links > 0
        if previous is not None and now > previous:
            self._learn(url, record, previous, now, changed, new_links, not_modified)
        record.last_visit = now if previous is None else max(now, previous)
        record.visits += 1
        return self._schedule(url, record, now)

    def _learn(
        self,
        url: str,
        record: PageRecord,
        previous: float,
        now: float,
        changed: bool | None,
        new_links: int | None,
        not_modified: bool,
    ) -> None:
        span = now - previous
        self.revisits += 1
        if not_modified:
            record.not_modified += 1
            self.not_modified += 1
        if changed is not None:
            if record.history is None:
                record.history = ChangeHistory(self.history_capacity)
            record.history.add(span, changed)
            if changed:
                record.changes += 1
                self.changed += 1
            else:
                self.unchanged += 1
        if new_links is None:
            return
        record.new_links += new_links
        self.new_links_on_revisits += new_links
        fade = math.exp(-span / self.scale_forget) if self.scale_forget is not None else 1.0
        if self.model == "aopic":
            # Cash decides revisits; keep only the page's flat link rate
            # (for stats), not the profiles.
            record.events = record.events * fade + new_links
            record.exposure = record.exposure * fade + span
            return
        _, shape = self.shape_of(record)
        if self.burst_boost and record.counted and record.new_links > new_links:
            expected = self._scale(record, shape) * record.boost * shape.integral(previous, now)
            if new_links >= 3 and poisson_tail(new_links, expected) < self.burst_p:
                record.boost = min(new_links / max(expected, 1e-9), 10.0)
                self.bursts += 1
            else:
                record.boost = 1.0 + self.burst_decay * (record.boost - 1.0)
        record.events = record.events * fade + new_links
        if record.bins is None and record.new_links > 0:
            # A hub from now on: keep its watched seconds per hour of the week,
            # so its scale is measured against the profile's current shape
            # (the shape is still being learnt). What was watched before is
            # spread evenly.
            record.bins = array("d", [record.exposure / BINS] * BINS)
            record.bins_scale = 1.0
        record.exposure = record.exposure * fade + span
        if record.bins is not None:
            # Forget by scaling one factor, not 168 bins: actual seconds are
            # stored * bins_scale.
            record.bins_scale *= fade
            if record.bins_scale < 1e-100:
                record.bins = array("d", (x * record.bins_scale for x in record.bins))
                record.bins_scale = 1.0
            bins, unit = record.bins, record.bins_scale
            for b, seconds in iter_segments(previous, now):
                bins[b] += seconds / unit
        self._profile(record.key).observe(previous, now, new_links)
        if record.site != record.key:
            self._profile(record.site).observe(previous, now, new_links)
        if self.forest is not None:
            self.forest.observe(record.key, record.site, previous, now, new_links)
            if self.forest.due_for_training(now):
                self.forest.train(now)

    def on_failure(self, url: str, host: str, now: float) -> float:
        """A revisit failed (network error, 5xx): try again later, backing
        off from ``min_interval`` up to ``max_interval``."""
        record = self.pages.get(url)
        if record is None:
            key, site = profile_key(url)
            record = self.pages[url] = PageRecord(host, key, site)
        record.failures += 1
        interval = min(self.max_interval, self.min_interval * 2.0 ** record.failures)
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

    def plan_interval(self, url: str, now: float) -> float:
        """The interval the planner would pick for ``url`` after a visit at
        ``now`` (clamped to ``[min_interval, max_interval]``)."""
        record = self.pages[url]
        return self._interval(record, now)

    def _interval(self, record: PageRecord, now: float) -> float:
        if self.model == "aopic":
            return self.min_interval
        interval = None
        if record.counted and record.new_links > 0:
            _, shape = self.shape_of(record)
            scale = self._scale(record, shape) * record.boost
            if scale <= 0:
                interval = self.max_interval
            else:
                # rate(t) = scale * shape(t): integrate the shape with the
                # target divided by the scale (no per-page profile needed).
                if self.rule == "yield":
                    t = shape.time_to_yield(now, self.target_yield / scale, self.max_interval)
                else:
                    t = shape.time_to_delay(now, self.fetch_cost / scale, self.max_interval)
                interval = t - now
            if self.change_weight > 0 and record.history is not None:
                rate = self.change_weight * record.history.rate()
                if rate > 0:
                    interval = min(interval, self._flat_interval(rate))
        elif record.history is not None and len(record.history):
            # No new link yet: plan from the change rate if changes count
            # (or are all we know), else back off while nothing happens.
            rate = record.history.rate()
            if rate > 0 and (not record.counted or self.change_weight > 0):
                weight = self.change_weight if record.counted else 1.0
                interval = self._flat_interval(weight * rate)
            else:
                interval = 2.0 * (record.interval or self.initial_interval)
        else:
            interval = self.initial_interval
        return min(max(interval, self.min_interval), self.max_interval)

    def _flat_interval(self, rate: float) -> float:
        """The rule's interval for a constant ``rate`` (changes per second)."""
        if self.rule == "yield":
            return self.target_yield / rate
        return math.sqrt(2.0 * self.fetch_cost / rate)

    def _schedule(self, url: str, record: PageRecord, now: float) -> float:
        interval = self._interval(record, now)
        record.interval = interval
        if self.model == "aopic":
            return self._set_due(url, record, now + self.min_interval, now + self.max_interval)
        return self._set_due(url, record, now + interval, now + interval)

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
        released = []
        heap = self._heap
        while True:
            self._clean()
            if not heap or heap[0][0] > now:
                return released
            _, url = heapq.heappop(heap)
            record = self.pages[url]
            released.append(url)
            watchdog = now + self.max_interval
            # Keep the deadline of a due page: it decides who goes first.
            deadline = record.deadline if record.deadline is not None else now
            self._set_due(url, record, watchdog, deadline)

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
            changes = record.history.rate() * HOUR
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
                r.due, r.deadline, r.interval, r.failures,
                [x * r.bins_scale for x in r.bins] if r.bins is not None else None,
            ]  # fmt: skip
        return {
            "version": 2,
            "pages": pages,
            "profiles": {name: p.to_state() for name, p in self.profiles.items()},
            "counters": [
                self.revisits, self.changed, self.unchanged, self.not_modified,
                self.new_links_on_revisits, self.bursts,
            ],  # fmt: skip
        }

    def load_state(self, state: dict) -> None:
        """Restore what :meth:`to_state` saved (settings stay this object's)."""
        if state.get("version") != 2:
            raise ValueError(f"unknown recrawl state version {state.get('version')!r}")
        self.pages.clear()
        self._heap.clear()
        for url, f in state["pages"].items():
            key, site = profile_key(url)
            r = PageRecord(f[0], key, site, f[1])
            (r.last_visit, r.visits, r.changes, r.not_modified, r.new_links,
             r.events, r.exposure, r.boost) = f[2:10]  # fmt: skip
            if f[10] is not None:
                r.history = ChangeHistory.from_state(f[10], self.history_capacity)
            r.due, r.deadline, r.interval, r.failures = f[11:15]
            if f[15] is not None:
                r.bins = array("d", f[15])
            self.pages[url] = r
            if r.due is not None:
                heapq.heappush(self._heap, (r.due, url))
        self.profiles = {
            name: RateProfile.from_state(p, forget=self.forget, **self.profile_options)
            for name, p in state["profiles"].items()
        }
        (self.revisits, self.changed, self.unchanged, self.not_modified,
         self.new_links_on_revisits, self.bursts) = state["counters"]  # fmt: skip


class OverdueQueue:
    """Released pages that are past their deadline, most overdue first.

    A page released by :meth:`RecrawlPlanner.due` goes back to the frontier
    and normally waits its turn in cash order. Once its deadline has passed
    it should go first, but only when its host can be fetched now: politeness
    is never bypassed. :meth:`pop` returns the most overdue such URL.
    """

    def __init__(self, scan: int = 64):
        self.scan = scan  #: entries examined per pop (busy hosts are skipped)
        self._heap: list[tuple[float, int, str, str]] = []
        self._live: dict[str, float] = {}
        self._seq = 0

    def push(self, url: str, host: str, deadline: float) -> None:
        """Track ``url`` (released, due by ``deadline``)."""
        self._live[url] = deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, url, host))

    def discard(self, url: str) -> None:
        """Stop tracking ``url`` (it was fetched through the normal order)."""
        self._live.pop(url, None)

    def __len__(self) -> int:
        return len(self._live)

    def pop(self, now: float, ready=lambda host: True) -> str | None:
        """The most overdue tracked URL (deadline <= ``now``) whose host is
        ``ready``; ``None`` if there is none among the first ``scan``."""
        heap = self._heap
        skipped = []
        found = None
        try:
            while heap and len(skipped) < self.scan:
                deadline, seq, url, host = heap[0]
                if self._live.get(url) != deadline:
                    heapq.heappop(heap)  # stale: re-released or discarded
                    continue
                if deadline > now:
                    break
                entry = heapq.heappop(heap)
                if ready(host):
                    del self._live[url]
                    found = url
                    break
                skipped.append(entry)
        finally:
            for entry in skipped:
                heapq.heappush(heap, entry)
        return found
