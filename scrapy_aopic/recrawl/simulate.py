"""Simulated hub pages and revisit policies on a virtual clock.

The seed paper's evaluation: hub pages (news lists) publish new links as
non-homogeneous Poisson processes with daily and weekly cycles (busy
working hours, quiet nights and weekends, occasional bursts); a policy
decides when to fetch each hub; each fetch discovers the links published
since the previous one. Judged on

* **cost**: fetches;
* **hit rate**: share of fetches that found at least one new link;
* **delay**: mean time from a link appearing to its discovery.

Pure Python (no numpy): the tests use it on small cases, the benchmark
(``benchmarks/bench_recrawl.py``) on 30 simulated days.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .profile import DAY, HOUR, WEEK, week_start

#: Monday 2024-01-01 00:00 UTC: simulations start on a Monday.
EPOCH_MONDAY = 1704067200.0

#: Relative publishing activity per local hour of a working day (a news
#: desk: near silence at night, a morning peak, a lunch dip, an afternoon).
NEWSROOM_HOURS = (
    0.06, 0.04, 0.03, 0.03, 0.04, 0.10, 0.30, 0.70, 1.20, 1.70, 1.80, 1.60,
    1.10, 1.30, 1.60, 1.70, 1.50, 1.20, 0.90, 0.70, 0.55, 0.40, 0.25, 0.12,
)  # fmt: skip


@dataclass
class HubSpec:
    """One simulated hub page and how it publishes."""

    url: str
    links_per_day: float  #: mean new links per day over a week
    utc_offset_hours: float = 0.0  #: the publisher's time zone
    weekend_factor: float = 0.25  #: Saturday/Sunday activity vs weekdays
    night_floor: float = 0.0  #: added to every hour's activity (24/7 desks)
    bursts_per_week: float = 1.0  #: unannounced bursts (breaking news)
    burst_multiplier: float = 4.0
    burst_hours: tuple[float, float] = (1.0, 3.0)  #: min/max burst length
    daily_noise: float = 0.2  #: lognormal sigma of each day's volume

    @property
    def host(self) -> str:
        return self.url.split("/")[2]


@dataclass
class Intensity:
    """The true rate of one hub: smooth daily/weekly cycle, day-to-day
    noise, bursts. Piecewise constant on ``step``-second pieces."""

    spec: HubSpec
    start: float
    rates: list[float] = field(default_factory=list)
    step: float = 600.0

    def rate_at(self, t: float) -> float:
        i = int((t - self.start) // self.step)
        if 0 <= i < len(self.rates):
            return self.rates[i]
        return 0.0

    def time_to_delay(self, t0: float, target: float, horizon: float) -> float:
        """Like :meth:`~scrapy_aopic.recrawl.profile.WeeklyRates.time_to_delay`
        on the true rate: what an oracle planner would pick."""
        end = t0 + horizon
        owed = count = 0.0
        t = t0
        while t < end:
            i = int((t - self.start) // self.step)
            step_end = min(self.start + (i + 1) * self.step, end)
            if step_end <= t:
                step_end = math.nextafter(t, math.inf)
            d = step_end - t
            r = self.rates[i] if 0 <= i < len(self.rates) else 0.0
            gained = count * d + 0.5 * r * d * d
            if owed + gained >= target:
                need = target - owed
                x = (-count + math.sqrt(count * count + 2 * r * need)) / r if r > 0 else need / count
                return min(t + x, end)
            owed += gained
            count += r * d
            t = step_end
        return end


def oracle_fetches(
    intensity: Intensity,
    start: float,
    stop: float,
    *,
    fetch_cost: float,
    min_interval: float,
    max_interval: float,
) -> list[float]:
    """Fetch times of the delay rule applied to the *true* rate (bursts and
    day-to-day noise included): a bound no learning planner can beat with
    the same rule."""
    times = []
    t = start
    while t < stop:
        nxt = intensity.time_to_delay(t, fetch_cost, max_interval)
        t = min(max(nxt, t + min_interval), t + max_interval)
        times.append(t)
    return times


def _activity(spec: HubSpec, t: float) -> float:
    """Relative activity at ``t`` (before normalisation): the hourly curve,
    interpolated linearly between hour centres, times the weekend factor."""
    local = t + spec.utc_offset_hours * HOUR
    days = math.floor((local - EPOCH_MONDAY) / DAY)
    weekday = days % 7
    hour_float = (local - EPOCH_MONDAY - days * DAY) / HOUR - 0.5
    h0 = math.floor(hour_float)
    frac = hour_float - h0
    a = NEWSROOM_HOURS[h0 % 24]
    b = NEWSROOM_HOURS[(h0 + 1) % 24]
    level = a + (b - a) * frac + spec.night_floor
    return level * (spec.weekend_factor if weekday >= 5 else 1.0)


def make_intensity(
    spec: HubSpec, start: float, duration: float, rng: random.Random, step: float = 600.0
) -> Intensity:
    """The true rate of ``spec`` over ``[start, start + duration]``."""
    pieces = int(math.ceil(duration / step))
    # Normalise so that a week averages links_per_day per day.
    week_pieces = int(WEEK // step)
    base = week_start(start)
    mean_activity = sum(_activity(spec, base + (i + 0.5) * step) for i in range(week_pieces))
    mean_activity /= week_pieces
    scale = spec.links_per_day / DAY / mean_activity
    day_factor: dict[int, float] = {}
    rates = []
    for i in range(pieces):
        t = start + (i + 0.5) * step
        day = int((t - start) // DAY)
        if day not in day_factor:
            sigma = spec.daily_noise
            day_factor[day] = math.exp(rng.gauss(-0.5 * sigma * sigma, sigma))
        rates.append(scale * _activity(spec, t) * day_factor[day])
    # Bursts: Poisson in time, each multiplying the rate for a while.
    t = start
    while spec.bursts_per_week > 0:
        t += rng.expovariate(spec.bursts_per_week / WEEK)
        if t >= start + duration:
            break
        length = rng.uniform(*spec.burst_hours) * HOUR
        first = int((t - start) // step)
        last = int((t + length - start) // step)
        for i in range(first, min(last + 1, pieces)):
            rates[i] *= spec.burst_multiplier
    return Intensity(spec, start, rates, step)


def arrivals_of(intensity: Intensity, rng: random.Random) -> list[float]:
    """Times new links appear: an exact draw of the piecewise-constant
    non-homogeneous Poisson process (a Poisson count per piece, placed
    uniformly inside it)."""
    times = []
    step = intensity.step
    for i, rate in enumerate(intensity.rates):
        expected = rate * step
        if expected <= 0:
            continue
        n = _poisson(rng, expected)
        t0 = intensity.start + i * step
        times.extend(t0 + rng.random() * step for _ in range(n))
    times.sort()
    return times


def _poisson(rng: random.Random, mean: float) -> int:
    if mean < 30:
        # Knuth's product method: fine for small means.
        limit = math.exp(-mean)
        k, p = 0, rng.random()
        while p > limit:
            k += 1
            p *= rng.random()
        return k
    return max(0, int(round(rng.gauss(mean, math.sqrt(mean)))))


def default_hubs(
    rng: random.Random, count: int = 24, *, median_links: float = 60.0, volume_sigma: float = 0.8
) -> list[HubSpec]:
    """A mixed set of hubs on a few hosts: several sections per host (so
    keys share data), several hubs per section, a spread of volumes
    (lognormal: ``median_links`` links/day, log-sd ``volume_sigma``, at most
    400 a day), time zones UTC-5, UTC+1 and UTC+8,
    a few 24/7 desks with busier nights, weekend lulls of varying depth."""
    hosts = [
        ("news.example", 1.0),
        ("daily.example", 8.0),
        ("wire.example", -5.0),
        ("blog.example", 1.0),
    ]
    sections = ["world", "business", "tech", "sport", "culture"]
    hubs = []
    for i in range(count):
        host, offset = hosts[i % len(hosts)]
        section = sections[(i // len(hosts)) % len(sections)]
        page = (i // (len(hosts) * len(sections))) + 1
        url = f"http://{host}/{section}/" if page == 1 else f"http://{host}/{section}/page{page}"
        hubs.append(
            HubSpec(
                url=url,
                links_per_day=min(400.0, math.exp(rng.gauss(math.log(median_links), volume_sigma))),
                utc_offset_hours=offset,
                weekend_factor=rng.uniform(0.15, 0.5),
                night_floor=0.3 if host == "wire.example" else 0.0,
                bursts_per_week=rng.uniform(0.5, 2.0),
            )
        )
    return hubs


@dataclass
class Result:
    """Figures of one policy on one simulated set of hubs."""

    name: str = ""
    fetches: int = 0  #: cost: fetches in the measured period
    hits: int = 0  #: fetches that found at least one new link
    links: int = 0  #: links that appeared in the measured period
    delay_sum: float = 0.0  #: sum of their discovery delays, seconds
    missed: int = 0  #: links never discovered (end of the run)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.fetches if self.fetches else 0.0

    @property
    def mean_delay(self) -> float:
        found = self.links - self.missed
        return self.delay_sum / found if found else math.inf

    def add(self, other: Result) -> None:
        self.fetches += other.fetches
        self.hits += other.hits
        self.links += other.links
        self.delay_sum += other.delay_sum
        self.missed += other.missed


def score_fetches(
    arrivals: Sequence[float], fetches: Sequence[float], start: float, end: float, name: str = ""
) -> Result:
    """Cost, hits and delays of fetching at ``fetches`` (sorted) a hub
    whose links appear at ``arrivals`` (sorted).

    Fetches in ``[start, end)`` are counted; every link appearing in
    ``[start, end)`` is delayed until the first fetch at or after it (later
    fetches may be needed to find the last ones; links never found are
    ``missed``). A fetch hits when it finds a link that appeared since the
    previous fetch.
    """
    result = Result(name)
    i = bisect.bisect_left(arrivals, start)
    for t in fetches:
        if t < start:
            continue
        j = bisect.bisect_right(arrivals, t)
        found = 0
        k = i
        while k < j:
            a = arrivals[k]
            if a >= end:
                break
            result.delay_sum += t - a
            found += 1
            k += 1
        if t < end:
            result.fetches += 1
            if j > i:
                result.hits += 1
        result.links += found
        i = j
        if i >= len(arrivals) and t >= end:
            break
    # Links in the period that no fetch found.
    tail = bisect.bisect_left(arrivals, end)
    if i < tail:
        result.links += tail - i
        result.missed += tail - i
    return result


def fixed_interval_fetches(interval: float, start: float, stop: float) -> list[float]:
    """Fetch times ``start + k * interval`` (k >= 1) up to ``stop``."""
    count = int((stop - start) // interval)
    return [start + k * interval for k in range(1, count + 1)]


def score_fixed(
    arrivals: Sequence[float], interval: float, start: float, end: float, name: str = ""
) -> Result:
    """:func:`score_fetches` for a fixed interval, in O(links) instead of
    O(fetches) (a 10-second interval over 30 days is 259,200 fetches per hub)."""
    result = Result(name)
    result.fetches = int((end - start - 1e-9) // interval)  # fetches at k*I < end, k >= 1
    hit_slots: set[int] = set()
    for a in arrivals:
        if a < start:
            continue
        k = math.floor((a - start) / interval) + 1
        if start + k * interval < end:
            hit_slots.add(k)
        if a >= end:
            break
        result.links += 1
        result.delay_sum += start + k * interval - a
    result.hits = len(hit_slots)
    return result


def visit_due(planner, visit: Callable[[str, float], None], stop: float) -> None:
    """Drive ``planner`` on a virtual clock until ``stop``: at each wake-up
    (:meth:`~scrapy_aopic.recrawl.planner.RecrawlPlanner.next_wakeup`),
    ``visit(url, now)`` every URL it releases as due, as the frontier would
    fetch them."""
    while True:
        wake = planner.next_wakeup()
        if wake is None or wake >= stop:
            break
        for url in planner.due(wake):
            visit(url, wake)


def run_planner(
    planner,
    hubs: Sequence[HubSpec],
    arrivals: dict[str, list[float]],
    start: float,
    end: float,
    *,
    tail: float | None = None,
    on_fetch: Callable[[str, float, int], None] | None = None,
    measure_from: float | None = None,
) -> tuple[Result, dict[str, list[float]]]:
    """Drive a :class:`~scrapy_aopic.recrawl.planner.RecrawlPlanner` over the
    hubs on a virtual clock, through its public API (``on_visit``, ``due``,
    ``next_wakeup``), as the Scrapy glue does.

    Every hub is visited at ``start`` (the first crawl, not counted), then
    whenever the planner says it is due. The run goes on for ``tail``
    seconds after ``end`` (default: the planner's ``max_interval``) so the
    last links get found. With ``measure_from``, only ``[measure_from, end)``
    is scored: what comes before is history the planner learns from (the
    seed paper's protocol). Returns the summed :class:`Result` and each
    hub's fetch times.
    """
    if tail is None:
        tail = planner.max_interval
    stop = end + tail
    fetches: dict[str, list[float]] = {h.url: [] for h in hubs}
    last: dict[str, float] = {}
    hosts = {h.url: h.host for h in hubs}

    def visit(url: str, now: float) -> None:
        times = arrivals[url]
        previous = last.get(url)
        new = 0
        if previous is not None:
            new = bisect.bisect_right(times, now) - bisect.bisect_right(times, previous)
        last[url] = now
        fetches[url].append(now)
        if on_fetch is not None:
            on_fetch(url, now, new)
        planner.on_visit(url, hosts[url], now, new_links=new if previous is not None else None)

    for h in hubs:
        visit(h.url, start)
    fetches = {url: [] for url in fetches}  # the first crawl is not counted
    visit_due(planner, visit, stop)
    total = Result(getattr(planner, "model", "planner"))
    scored_from = start if measure_from is None else measure_from
    for h in hubs:
        total.add(score_fetches(arrivals[h.url], fetches[h.url], scored_from, end))
    return total, fetches


def visit_process(
    rate: float,
    intervals: Sequence[float],
    rng: random.Random,
) -> list[bool]:
    """Whether a page changing as a Poisson process of ``rate`` changed in
    each of the given visit ``intervals`` (for estimator tests)."""
    return [rng.random() < -math.expm1(-rate * t) for t in intervals]


def run_aopic(
    hubs: Sequence[HubSpec],
    arrivals: dict[str, list[float]],
    start: float,
    end: float,
    *,
    fetch_period: float,
    min_interval: float,
    max_interval: float,
    listed: int = 50,
    history_window: float | None = 7 * DAY,
    planner=None,
    measure_from: float | None = None,
) -> tuple[Result, dict[str, int]]:
    """AOPIC's own revisit rule on the real engine: a crawler that fetches
    one page every ``fetch_period`` seconds, always the richest pending one
    (or a page past ``max_interval``), on a site graph built from the hubs.

    Each host has a home page linking to its hubs; a hub lists its newest
    ``listed`` articles and the home page; an article links to its hub and
    the home page. Crawled pages come back into the frontier once
    ``min_interval`` has passed (:class:`~scrapy_aopic.recrawl.planner.
    RecrawlPlanner` with ``model="aopic"``) and are fetched again when their
    cash makes them the richest. Hub fetches are scored like any policy's;
    the second value counts fetches by page kind.

    With a ``planner`` (e.g. ``model="estimator"``) the same crawler runs
    the Scrapy integration's loop instead: pages are released when the
    planner says, and a released page past its deadline goes first when its
    host is ready; everything else is fetched in cash order.
    """
    from ..engine import AopicEngine
    from ..store.base import Link
    from ..store.memory import MemoryStore
    from .planner import OverdueQueue, RecrawlPlanner

    clock = [start]
    store = MemoryStore("pending")
    engine = AopicEngine(store, history_window=history_window, clock=lambda: clock[0])
    if planner is None:
        planner = RecrawlPlanner(
            model="aopic", min_interval=min_interval, max_interval=max_interval
        )
    overdue = OverdueQueue()
    by_host: dict[str, list[HubSpec]] = {}
    for h in hubs:
        by_host.setdefault(h.host, []).append(h)
    homes = {f"http://{host}/": host for host in by_host}
    hub_of = {h.url: h for h in hubs}
    article_hub: dict[str, str] = {}

    article_links: dict[str, list[Link]] = {h.url: [] for h in hubs}
    home_links = {
        url: [Link(h.url, host, 1) for h in by_host[host]] for url, host in homes.items()
    }

    def links_of(url: str, now: float) -> list[Link]:
        if url in homes:
            return home_links[url]
        if url in hub_of:
            hub = hub_of[url]
            made = article_links[url]
            n = bisect.bisect_right(arrivals[url], now)
            for i in range(len(made), n):
                article = f"{url}a{i}"
                article_hub[article] = url
                made.append(Link(article, hub.host, 2))
            return made[max(0, n - listed) : n] + [Link(f"http://{hub.host}/", hub.host, 0)]
        hub = hub_of[article_hub[url]]
        return [Link(hub.url, hub.host, 1), Link(f"http://{hub.host}/", hub.host, 0)]

    known = set(homes) | set(hub_of)  # URLs the frontier has seen
    for url, host in homes.items():
        engine.add_seed(Link(url, host, 0))
    for h in hubs:
        engine.add_seed(Link(h.url, h.host, 1))
    hub_fetches: dict[str, list[float]] = {h.url: [] for h in hubs}
    kinds = {"hub": 0, "article": 0, "home": 0, "idle": 0}
    host_of = {**homes, **{h.url: h.host for h in hubs}}
    t = start
    stop = end + max_interval
    while t < stop:
        clock[0] = t
        for url in planner.due(t):
            host = planner.host_of(url)
            if store.repend(Link(url, host, 0)):
                overdue.push(url, host, planner.deadline_of(url))
        lease = None
        url = overdue.pop(t)
        if url is not None:
            lease = store.take(url)
        if lease is None:
            lease = engine.next()
        if lease is None:
            kinds["idle"] += 1
            t += fetch_period
            continue
        overdue.discard(lease.url)
        links = links_of(lease.url, t)
        new = 0
        for link in links:
            if link.url not in known:
                known.add(link.url)
                new += 1
        engine.visit(lease, links, now=t)
        host = host_of.get(lease.url) or hub_of[article_hub[lease.url]].host
        planner.on_visit(lease.url, host, t, new_links=new)
        if lease.url in hub_fetches:
            hub_fetches[lease.url].append(t)
            kinds["hub"] += 1
        elif lease.url in homes:
            kinds["home"] += 1
        else:
            kinds["article"] += 1
        t += fetch_period
    total = Result(f"engine+{planner.model}")
    scored_from = start if measure_from is None else measure_from
    for h in hubs:
        # The seed visit at ``start`` is the first crawl, not a revisit.
        fetches = [f for f in hub_fetches[h.url] if f > start]
        total.add(score_fetches(arrivals[h.url], fetches, scored_from, end))
    assert engine.conservation_error() <= 1e-6 * max(1.0, engine.totals().injected)
    return total, kinds
