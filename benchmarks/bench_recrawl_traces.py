"""Re-crawl on real change traces, at equal cost (issue 17).

Each trace (``benchmarks/recrawl_traces.py``: Debian changelogs, the PEPs,
the Rust book, and the held-out CPython developer's guide) is a set of
pages with the times their content changed. A policy fetches pages; a
fetch sees whether the page changed since the previous fetch. The planner
is driven exactly as a crawl drives it:
:func:`~scrapy_aopic.recrawl.hook.planner_from_settings` with the default
settings plus ``AOPIC_RECRAWL_BUDGET`` (one revisit per page per day), and a
:class:`~scrapy_aopic.recrawl.hook.RecrawlHook` whose ``next_lease`` the
loop calls as the frontier does (a per-host gap of 60 s is the download
slot); it is told only changed / unchanged at each visit (and, in the
``+Last-Modified`` row, the server's ``Last-Modified``). The first half
year is history (learnt online, not scored); the rest is scored.

A page of a fixture with births (``recrawl_creations.py`` writes them,
option ``--births-out``) that is created inside the trace is found at its
birth (the crawl would follow a link to it) and never fetched before it;
its creation is not a change, and it is scored only while it exists. The
other policies fetch it at its birth too, then on their grid, and spend
their cost over the page-seconds alive (the births' fetches apart).
Without births every page exists from the start, as before (the same
figures to the byte).

Every other policy gets the planner's measured cost (fetches in the scored
period) and revisits each page periodically:

* ``fixed``: every page every ``I``, all at the same time of day (the best of
  24 hourly phases, chosen in hindsight: the best fixed interval);
* ``fixed, one host gap apart``: the same, but a host's pages are fetched
  one host gap (60 s) apart from the best hour on, as the planner must;
* ``uniform``: every page every ``I``, phases spread (Cho's uniform);
* ``proportional``: frequency proportional to the page's true mean rate;
* ``oracle``: Cho & Garcia-Molina's freshness-optimal frequencies from each
  page's *true* mean rate (a bound for any policy that knows only rates).

Figures: fetches, hit rate (fetches that found a change), mean delay (change
-> detected, hours), freshness (time-averaged share of fresh pages), age
(time-averaged hours since the first undetected change), and the planner's
cost per visit: CPU time of this thread (``time.thread_time``) spent in
``RecrawlHook.record_visit`` and ``RecrawlHook.next_lease`` (the planner, the
amortised budget solve, the hook, and the simulated store's ``take`` and
``repend`` they call), over the whole trace, divided by the visits: the same
region and timer as ``bench_recrawl_cost.py``, which compares two checkouts
side by side (this figure is one run, on the whole trace rather than a
prefix). Before, this was wall time (``time.perf_counter``), which on a
shared machine counts the time the process waits for a core: 270-360 µs
where the CPU time was about 45.

    .venv/bin/python benchmarks/bench_recrawl_traces.py        # ~10 minutes
    .venv/bin/python benchmarks/bench_recrawl_traces.py --burst  # the burst model on
    .venv/bin/python benchmarks/bench_recrawl_traces.py --no-timetable  # the waiting rule (the default before)

A run of every trace of the default fixture writes its table to
``docs/_static/bench/recrawl-traces*.txt``; a run of some (``--trace``) or
of another fixture prints it only, unless ``--out DIR`` is given.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# The planner imports numpy lazily, at its first budget solve: imported here,
# that one-off (~0.1-0.2 s a process, 5 % of a short trace's total) stays out
# of the per-visit figure.
import numpy  # noqa: E402, F401
from arglists import setting, settings_of  # noqa: E402
from scrapy.settings import Settings  # noqa: E402

from recrawl_traces import YEAR, Trace, load  # noqa: E402
from scrapy_aopic.recrawl.budget import FreshnessAllocator  # noqa: E402
from scrapy_aopic.recrawl.hook import RecrawlHook, planner_from_settings  # noqa: E402
from scrapy_aopic.store.base import Lease  # noqa: E402

HOUR = 3600.0
DAY = 86400.0
HOST_GAP = 60.0
WARMUP = 0.5 * YEAR
OUT = ROOT / "docs" / "_static" / "bench"


class Score(NamedTuple):
    fetches: int
    hits: int
    changes: int
    delay: float  #: mean, seconds
    freshness: float
    age: float  #: mean, seconds

    @property
    def hit_rate(self) -> float:
        return self.hits / self.fetches if self.fetches else 0.0


def score(trace: Trace, fetches: dict[str, list[float]], a: float, b: float) -> Score:
    """Score fetch times (sorted per page; the first crawl at the trace's
    start included) on ``[a, b)``."""
    n_fetch = hits = n_change = 0
    delay = stale = age = 0.0
    # A page born inside the trace is scored from its birth (its creation
    # is not a change: a crawler finds it through links).
    lives = lifetimes(trace, a, b)
    for page, life in zip(trace.pages, lives):
        if life <= 0:
            continue
        times = fetches[page.url]
        changes = page.changes
        for c in changes:
            if a <= c < b:
                i = bisect.bisect_left(times, c)
                delay += (times[i] if i < len(times) else b + 7 * DAY) - c
                n_change += 1
        for k, f in enumerate(times):
            previous = times[k - 1] if k else -math.inf
            j = bisect.bisect_right(changes, previous)
            changed = j < len(changes) and changes[j] <= f
            if a <= f < b:
                n_fetch += 1
                hits += changed
            if changed:
                # Stale from the first change after the previous fetch until f.
                lo, hi = max(changes[j], a), min(f, b)
                if hi > lo:
                    stale += hi - lo
                    age += 0.5 * ((hi - changes[j]) ** 2 - (lo - changes[j]) ** 2)
        last = times[-1] if times else -math.inf
        j = bisect.bisect_right(changes, last)
        if j < len(changes) and changes[j] < b:  # stale at the end
            lo = max(changes[j], a)
            stale += b - lo
            age += 0.5 * ((b - changes[j]) ** 2 - (lo - changes[j]) ** 2)
    span = max(sum(lives), 1.0)
    return Score(n_fetch, hits, n_change, delay / max(n_change, 1), 1 - stale / span, age / span)


# -- the planner, driven as the frontier drives it ------------------------------------


class TraceStore:
    """The least of a frontier store the hook uses: every page can be
    re-pended and taken (the simulated crawl has nothing else to fetch)."""

    def __init__(self, hosts: dict[str, str]):
        self.hosts = hosts
        self.pending: set[str] = set()

    def repend(self, link) -> bool:
        self.pending.add(link.url)
        return True

    def take(self, url: str):
        if url not in self.pending:
            return None
        self.pending.discard(url)
        return Lease(url, 0, 1.0, self.hosts[url], 0, None, 0.0, None, 1)

    def get(self, url):
        return None

    def iter_accounts(self):
        return iter(())


def run_planner(
    trace: Trace,
    settings: dict,
    last_modified: bool,
    timer=time.thread_time,
    keep: list | None = None,
    instrument=None,
) -> tuple[dict, float, int]:
    """Fetch times per page, µs per visit in hook + planner (measured with
    ``timer``: by default the CPU time of this thread), visits. ``keep``:
    the planner and hook are appended to it (alive after the run, for
    ``bench_recrawl_cost.py --memory``). ``instrument``: called with the
    planner before the run, to wrap the methods a diagnostic records."""
    planner = planner_from_settings(Settings({"AOPIC_RECRAWL": True, **settings}))
    if instrument is not None:
        instrument(planner)
    clock = [trace.start]
    # Stats and state saving run once a simulated day (not the planner's cost).
    hook = RecrawlHook(None, planner, clock=lambda: clock[0], state_interval=DAY)
    if keep is not None:
        keep.append((planner, hook))
    hosts = {p.url: p.host for p in trace.pages}
    store = TraceStore(hosts)
    hook.open(store)
    changes = {p.url: p.changes for p in trace.pages}
    fetches = {p.url: [] for p in trace.pages}
    host_free: dict[str, float] = {}
    spent = 0.0
    visits = 0

    def visit(url: str, now: float) -> None:
        nonlocal spent, visits
        times = fetches[url]
        changed = None
        lm = None
        if times:
            page = changes[url]
            j = bisect.bisect_right(page, now)
            changed = j > bisect.bisect_right(page, times[-1])
            if last_modified and changed:
                lm = page[j - 1]
        times.append(now)
        t0 = timer()
        hook.record_visit(url, hosts[url], changed=changed, now=now, last_modified=lm)
        spent += timer() - t0
        visits += 1

    # The first crawl: every page that exists once, one host gap apart;
    # a page born later is found (through links) and fetched at its birth.
    births = sorted((p.born, p.url) for p in trace.pages if p.born is not None and p.born > trace.start)
    born_later = {url for _, url in births}
    for i, page in enumerate(p for p in trace.pages if p.url not in born_later):
        clock[0] = trace.start + i * HOST_GAP / 10
        visit(page.url, clock[0])
    next_birth = 0

    def ready(host: str) -> bool:
        return host_free.get(host, -math.inf) <= clock[0]

    end = trace.end + 7 * DAY
    while clock[0] < end:
        while next_birth < len(births) and births[next_birth][0] <= clock[0]:
            visit(births[next_birth][1], clock[0])
            next_birth += 1
        while True:
            t0 = timer()
            lease = hook.next_lease(store, ready)
            spent += timer() - t0
            if lease is None:
                break
            host_free[lease.host] = clock[0] + HOST_GAP
            visit(lease.url, clock[0])
        wake = planner.next_wakeup() or end
        if next_birth < len(births):
            wake = min(wake, births[next_birth][0])
        if len(hook.overdue):
            wake = min(wake, max(clock[0] + 1.0, min(host_free.values())))
        clock[0] = max(wake, clock[0] + 1e-3)
    return fetches, 1e6 * spent / max(visits, 1), visits


# -- periodic baselines ------------------------------------------------------------------


def periodic(trace: Trace, intervals: list[float], phases: list[float]) -> dict[str, list[float]]:
    out = {}
    end = trace.end + 7 * DAY
    for page, interval, phase in zip(trace.pages, intervals, phases):
        times = [trace.start]
        t = trace.start + phase
        if page.born is not None and page.born > trace.start:
            # found at its birth, then on the same grid as if it had existed
            times = [page.born]
            t += math.ceil((page.born - t) / interval) * interval
            if t <= page.born:
                t += interval
        while t < end:
            times.append(t)
            t += interval
        out[page.url] = times
    return out


def true_rates(trace: Trace) -> list[float]:
    lives = lifetimes(trace, trace.start, trace.end)
    return [len(p.changes) / max(life, DAY) for p, life in zip(trace.pages, lives)]


def lifetimes(trace: Trace, a: float, b: float) -> list[float]:
    """Seconds each page of ``trace`` exists in ``[a, b)``."""
    return [max(0.0, b - (a if p.born is None else max(a, p.born))) for p in trace.pages]


def alive(trace: Trace, a: float, b: float) -> tuple[float, int]:
    """Page-seconds alive in ``[a, b)``, and the pages born inside it (each
    costs a fetch at its birth)."""
    births = sum(p.born is not None and a <= p.born < b for p in trace.pages)
    return sum(lifetimes(trace, a, b)), births


def baselines(trace: Trace, cost: int, a: float, b: float, max_interval: float, min_interval: float):
    n = len(trace.pages)
    out = {}
    page_seconds, births = alive(trace, a, b)
    revisits = max(1, cost - births)  # births cost a fetch each, whatever the policy
    interval = page_seconds / revisits
    best = None
    for h in range(24):
        phase = (h * HOUR - trace.start) % DAY
        s = score(trace, periodic(trace, [interval] * n, [phase % interval] * n), a, b)
        if best is None or s.delay < best.delay:
            best = s
    out["fixed (best phase)"] = best
    # The same with an interval of exactly one day (about the same cost):
    # "every interval I" with I = span * pages / cost is a few seconds off a
    # day, so its phase drifts through the day over the years and its best
    # phase moves with the cost's last digits (PEPs: 9.6 h or 11.4 h for
    # costs 0.1 % apart). A fetch a day at the best hour does not drift.
    if abs(interval - DAY) < 0.05 * DAY:
        daily = None
        for h in range(24):
            phase = (h * HOUR - trace.start) % DAY
            s = score(trace, periodic(trace, [DAY] * n, [phase] * n), a, b)
            if daily is None or s.delay < daily.delay:
                daily = s
        out["fixed daily (best hour)"] = daily
    # The same, fetching a host's pages one HOST_GAP apart as the planner
    # must (all at the same instant is impolite: 581 pages of one host take
    # 9.7 hours at one a minute).
    rank: dict[str, int] = {}
    offsets = []
    for page in trace.pages:
        offsets.append(rank.get(page.host, 0) * HOST_GAP)
        rank[page.host] = rank.get(page.host, 0) + 1
    polite = None
    for h in range(24):
        phase = (h * HOUR - trace.start) % DAY
        s = score(trace, periodic(trace, [interval] * n, [(phase + o) % interval for o in offsets]), a, b)
        if polite is None or s.delay < polite.delay:
            polite = s
    out["fixed, one host gap apart"] = polite
    spread = [interval * (i + 0.5) / n for i in range(n)]
    out["uniform"] = score(trace, periodic(trace, [interval] * n, spread), a, b)
    rates = true_rates(trace)
    budget = cost / (b - a)
    f_min, f_max = 1 / max_interval, 1 / min_interval
    # Pages born inside the window: frequencies spend the revisits over the
    # seconds each page is alive (without births, sum(f) = budget as before).
    lives = lifetimes(trace, a, b)

    def short(freq) -> bool:
        """Whether ``freq`` spends less than the revisits."""
        if births:
            return sum(f * life for f, life in zip(freq, lives)) < revisits
        return sum(freq) < budget

    def prop(c):
        return [min(max(c * r, f_min), f_max) for r in rates]

    lo, hi = 1e-6, 1e9
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if short(prop(mid)) else (lo, mid)
    freq = prop(lo)
    out["proportional"] = score(
        trace, periodic(trace, [1 / f for f in freq], [(i * 0.618 % 1) / f for i, f in enumerate(freq)]), a, b
    )
    allocator = FreshnessAllocator(f_min, f_max)
    allocator.solve(rates, [1.0] * n, budget)
    if births:  # the budget whose frequencies spend the revisits over the pages' lives
        lo, hi = budget / 100, budget * 100
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            allocator.solve(rates, [1.0] * n, mid)
            lo, hi = (mid, hi) if short([allocator.frequency(r) for r in rates]) else (lo, mid)
        allocator.solve(rates, [1.0] * n, lo)
    freq = [allocator.frequency(r) for r in rates]
    out["oracle (true rates)"] = score(
        trace, periodic(trace, [1 / f for f in freq], [(i * 0.618 % 1) / f for i, f in enumerate(freq)]), a, b
    )
    return out


def phase_drift() -> str:
    """Where the budget's placement rule ends up on a working-day profile
    (rate 1 from 09:00 to 17:00 UTC, 0.05 otherwise), a revisit a day:
    the mean delay of a change under it against a fixed daily fetch at the
    best hour. Why the planner does not beat the best fixed
    interval on rarely changing pages (see docs/recrawl.rst)."""
    from scrapy_aopic.recrawl.profile import WeeklyRates, week_start

    shape = WeeklyRates([1.0 if 9 <= b % 24 < 17 else 0.05 for b in range(168)]).shape()

    def waiting(t0: float, t1: float) -> float:
        base = week_start(t0)
        events0, integral0 = shape._waiting(t0 - base)
        _, integral = shape._waiting(t1 - base)
        return integral - integral0 - events0 * (t1 - t0)

    t = start = 1.7e9
    total, ends = 0.0, set()
    for k in range(400):  # the planner's rule, applied revisit after revisit
        nxt = shape.time_to_delay(t, 0.5 * DAY * DAY, 7 * DAY)
        total += waiting(t, nxt)
        t = nxt
        if k >= 390:
            ends.add(round((t % DAY) / HOUR))
    rule = total / (t - start) / HOUR
    best = min(
        (sum(waiting(start + h * HOUR + k * DAY, start + h * HOUR + (k + 1) * DAY) for k in range(70))
         / (70 * DAY) / HOUR, h)
        for h in range(24)
    )  # fmt: skip
    from scrapy_aopic.recrawl.timetable import place, waiting as table_waiting

    slots = place(shape.rates, 7)
    table = table_waiting(shape.rates, slots) / sum(shape.rates)
    # Waiting over time watched, with a mean rate of 1, is the mean delay.
    return (f"placement on a 09-17 h UTC working day, one revisit a day: the waiting rule settles at "
            f"{sorted(ends)} h UTC, mean delay {rule:.1f} h; the timetable (AOPIC_RECRAWL_TIMETABLE) "
            f"fetches at {sorted({b % 24 for b in slots})} h UTC, {table:.1f} h; the best fixed fetch, at "
            f"{((start + best[1] * HOUR) % DAY) / HOUR:.1f} h UTC: {best[0]:.1f} h")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace names (default: all)")
    parser.add_argument("--per-page-per-day", type=float, default=1.0,
                        help="budget: revisits a day per page")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None,
                        help="where the table goes (default: docs/_static/bench for a run of every trace "
                             "of the default fixture; a run of some traces, or of another fixture, writes "
                             "nothing unless given this)")  # fmt: skip
    # Explicit both ways: without either, the checkout's own default (on
    # since issue 17's judgement; off before), so "main" means main's default.
    parser.add_argument("--timetable", action=argparse.BooleanOptionalAction, default=None,
                        help="AOPIC_RECRAWL_TIMETABLE = True / False (weekly timetables; "
                             "neither: the setting's default, on)")  # fmt: skip
    parser.add_argument("--burst", action="store_true",
                        help="AOPIC_RECRAWL_BURST = True (the burst model; off by default)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=setting("AOPIC_RECRAWL_"),
                        help="one more setting (VALUE read as JSON if it parses; NAME without AOPIC_ "
                             "is read as AOPIC_RECRAWL_NAME)")
    parser.add_argument("--no-last-modified", action="store_true",
                        help="leave out the +Last-Modified row (half the time)")
    parser.add_argument("--fixture", type=Path, default=None,
                        help="the traces file (default: benchmarks/data/recrawl_traces.json.gz; "
                             "recrawl_traces_extra.json.gz holds the traces judged apart)")  # fmt: skip
    parser.add_argument("--json", action="store_true",
                        help="also write every row's figures, unrounded, to recrawl-traces*.json in --out "
                             "(what bench_recrawl_budgets.py reads)")  # fmt: skip
    args = parser.parse_args(argv)
    lines = []
    figures: dict[str, dict] = {}

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    for trace in load(*([args.fixture] if args.fixture else []), names=args.trace):
        a, b = trace.start + WARMUP, trace.end
        budget = args.per_page_per_day * len(trace.pages)
        s = trace.summary()
        say(
            f"== {trace.name}: {s['pages']} pages, {s['changes']} changes in "
            f"{(trace.end - trace.start) / YEAR:.1f} years (busiest 8 h {100 * s['busiest_8h_share']:.0f} %, "
            f"weekends {100 * s['weekend_share']:.0f} %); budget {budget:g} revisits/day; "
            f"scored after {WARMUP / YEAR:g} year of history")
        rows = {}
        costs = {}
        settings = {"AOPIC_RECRAWL_BUDGET": budget, "AOPIC_RECRAWL_BURST": args.burst}
        if args.timetable is not None:
            settings["AOPIC_RECRAWL_TIMETABLE"] = args.timetable
        # (CHANGE_WINDOW=... for AOPIC_RECRAWL_CHANGE_WINDOW=...)
        settings.update(settings_of(args.set, "AOPIC_RECRAWL_"))
        runs = (("planner", False),) + ((() if args.no_last_modified else (("planner +Last-Modified", True),)))
        for name, lm in runs:
            fetches, us, visits = run_planner(trace, settings, lm)
            rows[name] = score(trace, fetches, a, b)
            costs[name] = (us, visits)
        max_interval = planner_from_settings(Settings({"AOPIC_RECRAWL": True})).max_interval
        min_interval = planner_from_settings(Settings({"AOPIC_RECRAWL": True})).min_interval
        base = baselines(trace, rows["planner"].fetches, a, b, max_interval, min_interval)
        fixed, oracle = base["fixed (best phase)"], base["oracle (true rates)"]
        say(f"{'policy':<27}{'fetches':>9}{'hit rate':>9}{'delay h':>9}{'x fixed':>8}"
            f"{'fresh':>8}{'age h':>8}")  # fmt: skip
        for name, r in {**base, **rows}.items():
            say(f"{name:<27}{r.fetches:>9}{r.hit_rate:>9.3f}{r.delay / HOUR:>9.1f}"
                f"{r.delay / fixed.delay:>8.2f}{r.freshness:>8.4f}{r.age / HOUR:>8.2f}")  # fmt: skip
        figures[trace.name] = {name: {**r._asdict(), "hit_rate": r.hit_rate} for name, r in {**base, **rows}.items()}
        for name, (us, visits) in costs.items():
            r = rows[name]
            say(f"  {name}: {us:.1f} µs CPU per visit (hook + planner, {visits} visits); delay "
                f"{r.delay / fixed.delay:.2f}x best fixed (target <= 0.75; "
                f"{r.delay / base['fixed, one host gap apart'].delay:.2f}x when it is polite too, "
                + (f"{r.delay / base['fixed daily (best hour)'].delay:.2f}x a fetch a day at the best hour, "
                   if "fixed daily (best hour)" in base else "") +
                f"oracle {oracle.delay / fixed.delay:.2f}x), freshness "
                f"{r.freshness - oracle.freshness:+.5f} vs oracle (target >= 0); "
                f"fetches {r.fetches / fixed.fetches:.2f}x")  # fmt: skip
        say()
    say(phase_drift())
    out = args.out
    if out is None:
        if args.trace or args.fixture:
            # The files under docs/ hold every trace of the default fixture:
            # a subset written there would replace the committed table.
            print(f"(some traces: the table is not written to {OUT}; --out DIR writes it)")
            return 0
        out = OUT
    out.mkdir(parents=True, exist_ok=True)
    suffix = {None: "", True: "-timetable", False: "-no-timetable"}[args.timetable]
    suffix += "-burst" if args.burst else ""
    suffix += "".join(f"-{item.removeprefix('AOPIC_RECRAWL_').lower()}" for item in args.set)
    (out / f"recrawl-traces{suffix}.txt").write_text("\n".join(lines) + "\n")
    if args.json:
        (out / f"recrawl-traces{suffix}.json").write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
