"""Re-crawl: change-rate estimators, profiles, the revisit planner, change
detection and the Scrapy glue (issue 6)."""

from __future__ import annotations

import json
import math
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scrapy_aopic.recrawl import forest as forest_module
from scrapy_aopic.recrawl.change import (
    PageVersion,
    Validators,
    conditional_headers,
    content_checksum,
    detect_change,
    hamming,
    http_date,
    is_not_modified,
    page_version,
    text_fingerprint,
    validators_from_headers,
)
from scrapy_aopic.recrawl.estimators import (
    ChangeHistory,
    cho_irregular_rate,
    cho_regular_rate,
    naive_rate,
    poisson_rate,
    poisson_tail,
)
from scrapy_aopic.recrawl.planner import OverdueQueue, RecrawlPlanner
from scrapy_aopic.recrawl.profile import (
    BINS,
    DAY,
    HOUR,
    WEEK,
    RateProfile,
    WeeklyRates,
    hour_of_week,
    iter_segments,
    profile_key,
)
from scrapy_aopic.recrawl.simulate import (
    EPOCH_MONDAY,
    HubSpec,
    Result,
    arrivals_of,
    make_intensity,
    run_aopic,
    run_planner,
    score_fetches,
    score_fixed,
    visit_process,
)
from tests.support.localsite import SERVE

MONDAY = EPOCH_MONDAY  # 2024-01-01 00:00 UTC


def day_night_rate(t: float, day: float = 12.0, night: float = 0.5) -> float:
    """Links per hour: busy 08:00-20:00 UTC, quiet otherwise."""
    hour = hour_of_week(t) % 24
    return (day if 8 <= hour < 20 else night) / HOUR


def poisson_count(rng: random.Random, mean: float) -> int:
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def observe_day_night(profile: RateProfile, days: int, rng: random.Random) -> None:
    """Visits every 10-40 minutes; each counts the links since the last one."""
    t = MONDAY
    end = MONDAY + days * DAY
    while t < end:
        step = rng.uniform(600, 2400)
        # Expected links over [t, t + step] of the piecewise-constant rate.
        expected = sum(
            day_night_rate(t0) * seconds
            for t0, seconds in ((t + x, min(60.0, step - x)) for x in range(0, int(step), 60))
        )
        profile.observe(t, t + step, poisson_count(rng, expected))
        t += step


# -- estimators --------------------------------------------------------------------------


def test_cho_regular_estimator_is_the_published_formula():
    assert cho_regular_rate(100, 60, 2.0) == pytest.approx(-math.log(40.5 / 100.5) / 2.0)
    assert cho_regular_rate(10, 10, 1.0) == pytest.approx(math.log(10.5 / 0.5))  # finite
    assert cho_regular_rate(0, 0, 1.0) == 0.0
    with pytest.raises(ValueError):
        cho_regular_rate(5, 6, 1.0)


def test_irregular_estimator_reduces_to_regular_one_on_equal_intervals():
    for n, x in [(100, 60), (20, 3), (50, 50), (7, 1)]:
        regular = cho_regular_rate(n, x, 3.0)
        irregular = cho_irregular_rate([3.0] * x, [3.0] * (n - x))
        assert irregular == pytest.approx(regular, rel=1e-8)


def test_irregular_estimator_solves_the_likelihood_equation():
    changed, unchanged = [0.5, 1.0, 2.0, 3.0], [1.0, 1.0, 4.0]
    rate = cho_irregular_rate(changed, unchanged, correction=False)
    lhs = sum(t / math.expm1(rate * t) for t in changed)
    assert lhs == pytest.approx(sum(unchanged), rel=1e-8)
    # Every visit saw a change: the plain MLE diverges, the corrected one does not.
    assert cho_irregular_rate([1.0] * 5, [], correction=False) == math.inf
    assert math.isfinite(cho_irregular_rate([1.0] * 5, []))
    assert cho_irregular_rate([], [1.0, 2.0]) == 0.0


@pytest.mark.parametrize("design", ["regular", "irregular"])
def test_estimator_is_unbiased_where_the_naive_one_is_biased_low(design):
    rng = random.Random(7)
    true_rate, pages, visits = 1.5, 300, 60  # 1.5 changes per mean interval
    naive = improved = 0.0
    for _ in range(pages):
        intervals = [1.0] * visits if design == "regular" else [
            rng.uniform(0.2, 1.8) for _ in range(visits)
        ]
        changed = visit_process(true_rate, intervals, rng)
        naive += naive_rate(sum(changed), sum(intervals)) / true_rate
        improved += cho_irregular_rate(
            [t for t, c in zip(intervals, changed) if c],
            [t for t, c in zip(intervals, changed) if not c],
        ) / true_rate
    assert naive / pages < 0.6  # several changes per interval count once
    assert improved / pages == pytest.approx(1.0, abs=0.05)


def test_change_history_keeps_the_newest_intervals_and_round_trips():
    history = ChangeHistory(capacity=4)
    for i in range(6):
        history.add(float(i + 1), i % 2 == 0)
    assert history.intervals == [3.0, 4.0, 5.0, 6.0]
    assert history.changes == 2
    copy = ChangeHistory.from_state(json.loads(json.dumps(history.to_state())), capacity=4)
    assert copy.rate() == pytest.approx(history.rate())
    assert history.naive() < history.rate()


def test_counted_events_need_no_correction_and_bursts_are_improbable():
    assert poisson_rate(30, 10.0) == 3.0
    assert poisson_rate(0, 10.0, prior_events=1.0, prior_time=10.0) == 0.05
    assert poisson_tail(0, 2.0) == 1.0
    assert poisson_tail(1, 2.0) == pytest.approx(1 - math.exp(-2.0))
    assert poisson_tail(12, 2.0) < 1e-5


# -- profiles ----------------------------------------------------------------------------


def test_hour_of_week_is_monday_based_utc():
    assert hour_of_week(MONDAY) == 0
    assert hour_of_week(MONDAY + 5 * HOUR + 59) == 5
    assert hour_of_week(MONDAY + 6 * DAY + 23.5 * HOUR) == 167
    assert hour_of_week(MONDAY + WEEK) == 0
    assert hour_of_week(0.0) == 3 * 24  # 1970-01-01 was a Thursday


def test_segments_cover_the_interval_and_cut_at_hours():
    t0 = MONDAY + 1800
    pieces = list(iter_segments(t0, t0 + 3 * HOUR))
    assert [b for b, _ in pieces] == [0, 1, 2, 3]
    assert [s for _, s in pieces] == [1800, 3600, 3600, 1800]
    long = list(iter_segments(t0, t0 + 2 * WEEK + 600))
    assert sum(s for _, s in long) == pytest.approx(2 * WEEK + 600)
    assert len(long) <= 2 * BINS


def test_weekly_rates_integrals_and_inverses():
    rng = random.Random(3)
    rates = WeeklyRates([rng.random() * (b % 24 >= 6) / HOUR for b in range(BINS)])
    t0 = MONDAY + 12345.0
    assert rates.integral(t0, t0 + WEEK) == pytest.approx(rates.week_total)
    for target in (0.3, 2.0, 17.0):
        t = rates.time_to_yield(t0, target, 2 * WEEK)
        assert rates.integral(t0, t) == pytest.approx(target, rel=1e-6)
    assert rates.time_to_yield(t0, 1e9, DAY) == t0 + DAY  # capped by the horizon
    flat = WeeklyRates.flat(1 / 600)  # one event per 10 minutes
    # Delay rule with a constant rate: sqrt(2 c / r).
    assert flat.time_to_delay(t0, 30.0, DAY) - t0 == pytest.approx(math.sqrt(2 * 30 * 600))
    assert flat.shape().mean == pytest.approx(1.0)


def test_profile_learns_a_day_night_cycle():
    profile = RateProfile()
    observe_day_night(profile, 14, random.Random(11))
    weekly = profile.weekly()
    day = weekly.rate_at(MONDAY + 2 * DAY + 14 * HOUR) * HOUR
    night = weekly.rate_at(MONDAY + 2 * DAY + 3 * HOUR) * HOUR
    assert day == pytest.approx(12.0, rel=0.3)
    assert night < 2.0
    assert day > 5 * night
    # A flat profile knows none of that.
    assert RateProfile().weekly().rate_at(MONDAY) == 0.0


def test_profile_state_round_trips():
    profile = RateProfile()
    observe_day_night(profile, 3, random.Random(2))
    copy = RateProfile.from_state(json.loads(json.dumps(profile.to_state())))
    assert copy.weekly().rates == pytest.approx(profile.weekly().rates)


def test_profile_key_is_host_and_first_path_segment():
    assert profile_key("http://News.Example.com/world/europe/x.html") == (
        "news.example.com/world",
        "news.example.com",
    )
    assert profile_key("https://a.org:8443/") == ("a.org:8443/", "a.org:8443")
    assert profile_key("https://a.org/index.html") == ("a.org/", "a.org")


# -- the planner -------------------------------------------------------------------------------


def feed(planner, url, start, interval, count_fn, visits):
    """Visit ``url`` every ``interval`` s reporting ``count_fn(t)`` new links."""
    t = start
    planner.on_visit(url, "h", t)
    for _ in range(visits):
        t += interval
        planner.on_visit(url, "h", t, new_links=count_fn(t))
    return t


def test_planner_clamps_to_min_and_max_intervals():
    planner = RecrawlPlanner(min_interval=60, max_interval=3600, initial_interval=600)
    busy = "http://busy.example/news/"
    t = feed(planner, busy, MONDAY, 300, lambda t: 50, 40)
    assert planner.pages[busy].interval == 60  # would be seconds; clamped
    quiet = "http://quiet.example/about"
    t = feed(planner, quiet, MONDAY, 300, lambda t: 0, 3)
    intervals = []
    # Its rate is shrunk towards what other pages showed (0.5 pseudo-changes),
    # so it backs off as its unchanged time grows, not at once.
    for _ in range(60):
        due = planner.on_visit(quiet, "h", t, new_links=0)
        intervals.append(due - t)
        t = due
    assert intervals[-1] == 3600
    assert intervals == sorted(intervals)  # backs off, never beyond the max
    assert all(60 <= i <= 3600 for i in intervals)


def test_planner_revisits_busier_pages_more_often():
    rng = random.Random(5)
    hubs = [
        HubSpec("http://big.example/news/", 200.0, bursts_per_week=0, daily_noise=0),
        HubSpec("http://small.example/news/", 10.0, bursts_per_week=0, daily_noise=0),
    ]
    start, end = MONDAY, MONDAY + 7 * DAY  # a whole week: weekends included
    arrivals = {h.url: arrivals_of(make_intensity(h, start, 8 * DAY, rng), rng) for h in hubs}
    planner = RecrawlPlanner(min_interval=60, max_interval=7200, initial_interval=600)
    result, fetches = run_planner(planner, hubs, arrivals, start, end)
    big, small = (len(fetches[h.url]) for h in hubs)
    # The delay rule: interval ~ 1/sqrt(rate), so ~sqrt(20) ~ 4.5 times more.
    assert big > 2.5 * small
    assert result.missed == 0
    # Mean links per day over the week, as estimated.
    estimates = {h.url: planner.estimate(h.url).links_per_hour * 24 for h in hubs}
    assert estimates[hubs[0].url] == pytest.approx(200.0, rel=0.25)
    assert estimates[hubs[1].url] == pytest.approx(10.0, rel=0.5)


def test_planner_waits_longer_at_night_once_it_knows_the_cycle():
    planner = RecrawlPlanner(min_interval=60, max_interval=7200, initial_interval=600,
                             key_min_events=50)  # fmt: skip
    rng = random.Random(9)
    url = "http://daily.example/news/"

    def count(t):
        return poisson_count(rng, day_night_rate(t) * 600)

    t = feed(planner, url, MONDAY, 600, count, 6 * 144)  # six days, every 10 min
    assert planner.shape_of(planner.pages[url])[0] == "daily.example/news"
    base = t - (t - MONDAY) % DAY  # midnight
    assert planner.plan_interval(url, base + 3 * HOUR) > 3 * planner.plan_interval(
        url, base + 13 * HOUR
    )


def test_thin_keys_fall_back_to_the_host_then_flat():
    planner = RecrawlPlanner(key_min_events=30)
    rng = random.Random(4)
    busy = "http://site.example/news/"
    thin = "http://site.example/obituaries/"
    feed(planner, busy, MONDAY, 600, lambda t: poisson_count(rng, day_night_rate(t) * 600), 300)
    feed(planner, thin, MONDAY, 600, lambda t: 1 if rng.random() < 0.01 else 0, 300)
    assert planner.shape_of(planner.pages[busy])[0] == "site.example/news"
    assert planner.shape_of(planner.pages[thin])[0] == "site.example"
    lone = "http://other.example/x/"
    feed(planner, lone, MONDAY, 600, lambda t: 1, 3)
    assert planner.shape_of(planner.pages[lone])[0] == "flat"


def test_due_releases_once_then_again_after_max_interval():
    planner = RecrawlPlanner(min_interval=60, max_interval=3600, initial_interval=600)
    planner.on_visit("http://a.example/", "a", MONDAY)
    assert planner.next_wakeup() == MONDAY + 600
    assert planner.due(MONDAY + 599) == []
    assert planner.due(MONDAY + 600) == ["http://a.example/"]
    assert planner.due(MONDAY + 601) == []  # released once
    # Nobody reported a visit: the watchdog releases it again.
    assert planner.due(MONDAY + 600 + 3600) == ["http://a.example/"]
    planner.on_visit("http://a.example/", "a", MONDAY + 5000, new_links=2)
    assert planner.next_wakeup() > MONDAY + 5000


def test_aopic_model_releases_after_min_interval_and_forces_at_max():
    planner = RecrawlPlanner(model="aopic", min_interval=60, max_interval=3600)
    planner.on_visit("http://a.example/", "a", MONDAY)
    assert planner.next_wakeup() == MONDAY + 60
    assert planner.deadline_of("http://a.example/") == MONDAY + 3600


def test_failed_revisits_back_off():
    planner = RecrawlPlanner(min_interval=60, max_interval=3600)
    planner.on_visit("http://a.example/", "a", MONDAY)
    first = planner.on_failure("http://a.example/", "a", MONDAY + 10) - (MONDAY + 10)
    second = planner.on_failure("http://a.example/", "a", MONDAY + 20) - (MONDAY + 20)
    assert first == 120 and second == 240
    for _ in range(10):
        last = planner.on_failure("http://a.example/", "a", MONDAY) - MONDAY
    assert last == 3600


def test_planner_state_round_trips_through_json():
    planner = RecrawlPlanner(min_interval=60, max_interval=7200, initial_interval=600)
    rng = random.Random(1)
    url = "http://x.example/news/"
    t = feed(planner, url, MONDAY, 600, lambda t: poisson_count(rng, 2.0), 50)
    planner.on_visit("http://x.example/about", "x", t, changed=True)
    copy = RecrawlPlanner(min_interval=60, max_interval=7200, initial_interval=600)
    copy.load_state(json.loads(json.dumps(planner.to_state())))
    assert copy.plan_interval(url, t + 1) == pytest.approx(planner.plan_interval(url, t + 1))
    assert copy.next_wakeup() == planner.next_wakeup()
    assert copy.revisits == planner.revisits


def test_planner_rejects_bad_settings():
    with pytest.raises(ValueError):
        RecrawlPlanner(min_interval=100, max_interval=10)
    with pytest.raises(ValueError):
        RecrawlPlanner(model="psychic")
    with pytest.raises(ValueError):
        RecrawlPlanner(rule="sometimes")


def test_overdue_queue_skips_busy_hosts_and_keeps_them():
    queue = OverdueQueue()
    queue.push("http://a/1", "a", 10.0)
    queue.push("http://b/1", "b", 20.0)
    queue.push("http://a/2", "a", 30.0)
    assert queue.pop(5.0) is None  # nothing overdue yet
    assert queue.pop(25.0, ready=lambda host: host != "a") == "http://b/1"
    assert queue.pop(25.0, ready=lambda host: host != "a") is None
    assert queue.pop(35.0) == "http://a/1"  # most overdue first
    queue.discard("http://a/2")
    assert queue.pop(35.0) is None and len(queue) == 0


# -- the forest (optional) -----------------------------------------------------------------


def test_forest_model_learns_the_cycle():
    pytest.importorskip("sklearn")
    model = forest_module.ForestModel(min_events=50, n_estimators=10)
    rng = random.Random(8)
    t = MONDAY
    while t < MONDAY + 7 * DAY:
        step = rng.uniform(600, 1800)
        model.observe("f.example/news", "f.example", t, t + step,
                      poisson_count(rng, day_night_rate(t) * step))  # fmt: skip
        t += step
    assert model.train(t) >= 1
    name, shape = model.shape("f.example/news", "f.example")
    assert name == "f.example/news"
    assert shape.rate_at(MONDAY + 14 * HOUR) > 5 * shape.rate_at(MONDAY + 3 * HOUR)


def test_forest_planner_schedules_like_the_estimator():
    pytest.importorskip("sklearn")
    planner = RecrawlPlanner(model="forest", key_min_events=50, min_interval=60,
                             max_interval=7200, initial_interval=600,
                             forest_options={"n_estimators": 10})  # fmt: skip
    rng = random.Random(2)
    url = "http://f.example/news/"
    t = feed(planner, url, MONDAY, 600, lambda t: poisson_count(rng, day_night_rate(t) * 600),
             3 * 144)  # fmt: skip
    assert planner.forest.fits >= 1
    assert planner.shape_of(planner.pages[url])[0] == "f.example/news"
    base = t - (t - MONDAY) % DAY
    assert planner.plan_interval(url, base + 3 * HOUR) > 2 * planner.plan_interval(
        url, base + 13 * HOUR
    )


def test_forest_is_skipped_cleanly_without_scikit_learn(monkeypatch):
    # A None entry in sys.modules makes "import sklearn" fail like a missing package.
    for name in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)
    assert not forest_module.forest_available()
    with pytest.raises(ImportError, match=r"scrapy-aopic\[ml\]"):
        RecrawlPlanner(model="forest")
    # The estimator path does not need it.
    planner = RecrawlPlanner()
    planner.on_visit("http://a.example/", "a", MONDAY)
    from scrapy.settings import Settings

    from scrapy_aopic.recrawl.hook import planner_from_settings

    with pytest.raises(ImportError, match="scikit-learn"):
        planner_from_settings(Settings({"AOPIC_RECRAWL_MODEL": "forest"}))
    assert planner_from_settings(Settings({})).model == "estimator"


# -- change detection ------------------------------------------------------------------------


def test_validators_and_conditional_headers():
    from scrapy.http import Headers

    date = http_date(MONDAY)
    for headers in (
        {"ETag": '"v1"', "Last-Modified": date},
        Headers({"ETag": '"v1"', "Last-Modified": date}),
        {"etag": '"v1"', "last-modified": date},
    ):
        validators = validators_from_headers(headers)
        assert validators == Validators('"v1"', date)
        assert conditional_headers(validators) == {
            "If-None-Match": '"v1"',
            "If-Modified-Since": date,
        }
    weak = validators_from_headers({"ETag": 'W/"x"', "Last-Modified": "yesterday-ish"})
    assert weak == Validators('W/"x"', None)  # garbage dates are not echoed
    assert conditional_headers(None) == {}
    assert conditional_headers(Validators(None, None)) == {}
    assert is_not_modified(304) and not is_not_modified(200)


def test_change_detection_ignores_trivial_edits():
    text = " ".join(f"word{i}" for i in range(300))
    base = page_version(f"<html><body>{text} updated 10:01</body></html>".encode())
    assert detect_change(None, base) is None
    same = page_version(f"<html><body>{text} updated 10:01</body></html>".encode())
    assert detect_change(base, same) is False
    base = base._replace(fingerprint=text_fingerprint(text + " updated 10:01"))
    clock = page_version(f"<html><body>{text} updated 10:02</body></html>".encode())
    assert hamming(base.fingerprint, clock.fingerprint) <= 3
    assert detect_change(base, clock, max_distance=3) is False
    other = page_version(
        ("<html><body>" + " ".join(f"other{i}" for i in range(300)) + "</body></html>").encode()
    )
    assert detect_change(base, other, max_distance=3) is True
    no_fingerprints = PageVersion(content_checksum(b"a"), None, Validators(None, None))
    assert detect_change(no_fingerprints, PageVersion(content_checksum(b"b"), None,
                                                      Validators(None, None))) is True  # fmt: skip


# -- simulation helpers -------------------------------------------------------------------------


def test_scores_of_fixed_intervals_match_the_general_scorer():
    rng = random.Random(3)
    spec = HubSpec("http://s.example/n/", 80.0)
    arrivals = arrivals_of(make_intensity(spec, MONDAY, 3 * DAY, rng), rng)
    end = MONDAY + 2 * DAY
    for interval in (60.0, 1800.0):
        fetches = [MONDAY + k * interval for k in range(1, int(3 * DAY / interval))]
        general = score_fetches(arrivals, fetches, MONDAY, end)
        fast = score_fixed(arrivals, interval, MONDAY, end)
        assert (fast.fetches, fast.hits, fast.links) == (general.fetches, general.hits, general.links)
        assert fast.mean_delay == pytest.approx(general.mean_delay)
        assert fast.mean_delay == pytest.approx(interval / 2, rel=0.15)
    assert Result().mean_delay == math.inf


def test_aopic_only_and_planner_run_on_the_real_engine():
    rng = random.Random(6)
    hubs = [HubSpec("http://e.example/news/", 150.0), HubSpec("http://e.example/sport/", 20.0)]
    start, end = MONDAY, MONDAY + DAY
    arrivals = {h.url: arrivals_of(make_intensity(h, start, 2 * DAY, rng), rng) for h in hubs}
    aopic, kinds = run_aopic(hubs, arrivals, start, end, fetch_period=60.0,
                             min_interval=60.0, max_interval=7200.0)  # fmt: skip
    assert kinds["hub"] > 0 and kinds["article"] > 0
    planner = RecrawlPlanner(min_interval=60, max_interval=7200, initial_interval=600)
    planned, kinds = run_aopic(hubs, arrivals, start, end, fetch_period=20.0,
                               min_interval=60.0, max_interval=7200.0, planner=planner)  # fmt: skip
    # Due-first revisits keep the busy hub fresh however much else is queued.
    assert planned.mean_delay < aopic.mean_delay
    assert planned.missed == 0


# -- Scrapy glue ---------------------------------------------------------------------------------


def make_crawler(settings=None):
    from scrapy.utils.test import get_crawler

    return get_crawler(settings_dict={"AOPIC_RECRAWL": True, **(settings or {})})


def test_hook_is_off_by_default_and_reads_settings():
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.recrawl.hook import RecrawlHook
    from scrapy_aopic.settings import effective_history_window

    assert RecrawlHook.from_crawler(get_crawler(settings_dict={})) is None
    crawler = make_crawler({"AOPIC_RECRAWL_MIN_INTERVAL": 30, "AOPIC_RECRAWL_MAX_INTERVAL": 900})
    hook = RecrawlHook.from_crawler(crawler)
    assert hook is RecrawlHook.from_crawler(crawler)  # one per crawler
    assert (hook.planner.min_interval, hook.planner.max_interval) == (30.0, 900.0)
    assert effective_history_window(Settings({})) is None
    assert effective_history_window(Settings({"AOPIC_RECRAWL": True})) == 7 * DAY
    assert effective_history_window(
        Settings({"AOPIC_RECRAWL": True, "AOPIC_HISTORY_WINDOW": 3600})
    ) == 3600


def crawled_store(url="http://h.example/news/", host="h.example"):
    """A memory store where ``url`` has been crawled once at MONDAY."""
    from scrapy_aopic.engine import AopicEngine
    from scrapy_aopic.store.base import Link
    from scrapy_aopic.store.memory import MemoryStore

    store = MemoryStore()
    engine = AopicEngine(store, clock=lambda: MONDAY)
    engine.add_seed(Link(url, host, 0))
    engine.add_seed(Link("http://other.example/", "other.example", 0))
    lease = store.pop(lambda h: h == host)
    engine.visit(lease, [Link("http://h.example/a1", host, 1)], now=MONDAY)
    return store, engine


def test_next_lease_releases_due_pages_politely(clock):
    from scrapy_aopic.recrawl.hook import RecrawlHook
    from scrapy_aopic.store.base import CRAWLED, LEASED, PENDING

    clock.now = MONDAY
    url = "http://h.example/news/"
    store, engine = crawled_store(url)
    hook = RecrawlHook(None, RecrawlPlanner(min_interval=60, max_interval=3600,
                                            initial_interval=600), clock=clock)  # fmt: skip
    hook.open(store)
    hook.record_visit(url, "h.example", now=MONDAY)
    clock.now = MONDAY + 300
    assert hook.next_lease(store, lambda h: True) is None  # not due yet
    assert store.get(url).state == CRAWLED
    clock.now = MONDAY + 700
    # Due, but its host is busy: queued again, not handed out.
    assert hook.next_lease(store, lambda h: h != "h.example") is None
    assert store.get(url).state == PENDING
    lease = hook.next_lease(store, lambda h: True)
    assert lease is not None and lease.url == url and lease.visits == 1
    assert store.get(url).state == LEASED
    engine.visit(lease, [], now=clock.now)
    assert engine.conservation_error() < 1e-12


def test_open_adopts_crawled_pages_the_planner_never_saw(clock):
    from scrapy_aopic.recrawl.hook import RecrawlHook

    clock.now = MONDAY + 10
    store, _ = crawled_store()
    hook = RecrawlHook(None, RecrawlPlanner(initial_interval=600), clock=clock)
    hook.open(store)
    assert "http://h.example/news/" in hook.planner.pages
    assert hook.planner.next_wakeup() == MONDAY + 600


def test_hook_state_survives_jobdir(tmp_path, clock):
    from scrapy_aopic.recrawl.hook import RecrawlHook

    clock.now = MONDAY
    hook = RecrawlHook(None, RecrawlPlanner(), clock=clock, state_path=tmp_path / "s.json")
    hook.record_visit("http://a.example/", "a.example", now=MONDAY)
    hook.versions["http://a.example/"] = PageVersion("c", 5, Validators('"e"', None))
    hook.save_state(tmp_path / "s.json")
    again = RecrawlHook(None, RecrawlPlanner(), clock=clock, state_path=tmp_path / "s.json")
    store, _ = crawled_store()
    again.open(store)
    assert again.planner.next_wakeup() == hook.planner.next_wakeup()
    assert again.request_headers("http://a.example/") == {"If-None-Match": '"e"'}
    (tmp_path / "s.json").write_text("{broken")
    third = RecrawlHook(None, RecrawlPlanner(), clock=clock, state_path=tmp_path / "s.json")
    third.open(store)  # unreadable state: starts afresh, adopting the store's pages
    assert "http://h.example/news/" in third.planner.pages


def response_for(url, status=200, body=b"", headers=None, meta=None):
    from scrapy import Request
    from scrapy.http import HtmlResponse

    request = Request(url, meta={"aopic_key": url, **(meta or {})})
    return request, HtmlResponse(url, status=status, body=body, headers=headers or {},
                                 request=request)  # fmt: skip


class FakeFrontier:
    def __init__(self, hook):
        self.hook = hook
        self.settled = []

    def visit_not_modified(self, request, response):
        self.settled.append(request.url)
        self.hook.record_visit(request.meta["aopic_key"], "h.example", not_modified=True)


def test_middleware_makes_revisits_conditional_and_handles_304(clock):
    from scrapy.exceptions import IgnoreRequest

    from scrapy_aopic.meta import RECRAWL_CHANGED as CHANGED
    from scrapy_aopic.middlewares.recrawl import RecrawlMiddleware
    from scrapy_aopic.recrawl.hook import RecrawlHook

    clock.now = MONDAY
    crawler = make_crawler()
    hook = RecrawlHook.from_crawler(crawler)
    hook.clock = clock
    middleware = RecrawlMiddleware.from_crawler(crawler)
    url = "http://h.example/news/"
    request, response = response_for(url, body=b"<p>v1</p>",
                                     headers={"ETag": '"v1"', "Last-Modified": http_date(MONDAY)})  # fmt: skip
    assert middleware.process_request(request) is None
    assert b"If-None-Match" not in request.headers  # first visit: nothing to send
    assert middleware.process_response(request, response) is response
    assert request.meta[CHANGED] is None
    hook.record_visit(url, "h.example")

    clock.now += 600
    revisit, not_modified = response_for(url, status=304, headers={"ETag": '"v1"'})
    middleware.process_request(revisit)
    assert revisit.headers[b"If-None-Match"] == b'"v1"'
    assert revisit.headers[b"If-Modified-Since"] == http_date(MONDAY).encode()
    frontier = FakeFrontier(hook)
    middleware.frontier = frontier
    with pytest.raises(IgnoreRequest):
        middleware.process_response(revisit, not_modified)
    assert frontier.settled == [url]
    assert crawler.stats.get_value("aopic/recrawl/not_modified") == 1
    assert crawler.stats.get_value("aopic/recrawl/conditional_requests") == 1

    # A frontier without visit_not_modified: the 304 goes on, the planner still learns.
    clock.now += 600
    middleware.frontier = object()
    revisit, not_modified = response_for(url, status=304)
    assert middleware.process_response(revisit, not_modified) is not_modified
    assert crawler.stats.get_value("aopic/recrawl/not_modified") == 2

    clock.now += 600
    revisit, changed = response_for(url, body=b"<p>" + b"brand new text " * 50 + b"</p>")
    middleware.process_response(revisit, changed)
    assert revisit.meta[CHANGED] is True


def test_middleware_reports_failed_revisits(clock):
    from scrapy_aopic.middlewares.recrawl import RecrawlMiddleware
    from scrapy_aopic.recrawl.hook import RecrawlHook

    crawler = make_crawler()
    hook = RecrawlHook.from_crawler(crawler)
    hook.clock = clock
    clock.now = MONDAY
    middleware = RecrawlMiddleware.from_crawler(crawler)
    url = "http://h.example/news/"
    hook.record_visit(url, "h.example")
    request, response = response_for(url, status=503)
    middleware.process_response(request, response)
    middleware.process_exception(request, TimeoutError())
    assert crawler.stats.get_value("aopic/recrawl/failures") == 2
    assert hook.planner.pages[url].failures == 2
    # Pages never visited are not the planner's business.
    other, response = response_for("http://h.example/missing", status=404)
    middleware.process_response(other, response)
    assert "http://h.example/missing" not in hook.planner.pages


def test_middleware_is_off_without_recrawl():
    from scrapy.exceptions import NotConfigured
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.middlewares.recrawl import RecrawlMiddleware

    with pytest.raises(NotConfigured):
        RecrawlMiddleware.from_crawler(get_crawler(settings_dict={}))


def test_page_visited_signal_feeds_the_planner_and_idle_keeps_the_spider_open(clock):
    from scrapy.exceptions import DontCloseSpider

    from scrapy_aopic import signals as aopic_signals
    from scrapy_aopic.meta import RECRAWL_CHANGED as CHANGED
    from scrapy_aopic.recrawl.hook import RecrawlHook
    from scrapy_aopic.store.base import Lease

    crawler = make_crawler()
    hook = RecrawlHook.from_crawler(crawler)
    hook.clock = clock
    url = "http://h.example/news/"
    lease = Lease(url, 1, 0.5, "h.example", 0, None, 0.0, None, 0)
    for step, new in enumerate([None, 4, 0]):
        clock.now = MONDAY + 600 * step
        request, response = response_for(url, meta={CHANGED: None if new is None else bool(new)})
        crawler.signals.send_catch_log(
            aopic_signals.page_visited, url=url, links=[], lease=lease, response=response,
            spider=None, new_links=new,
        )  # fmt: skip
    stats = crawler.stats
    assert stats.get_value("aopic/recrawl/revisits") == 2
    assert stats.get_value("aopic/recrawl/new_links") == 4
    assert stats.get_value("aopic/recrawl/changed") == 1
    assert stats.get_value("aopic/recrawl/unchanged") == 1
    assert hook.planner.pages[url].new_links == 4
    with pytest.raises(DontCloseSpider):
        hook._spider_idle(None)
    hook.update_stats()
    assert stats.get_value("aopic/recrawl/top_hubs")[0].startswith(url)


# -- end to end (runs once the frontier calls the hook; see docs/recrawl.rst) -----------------


class _Site:
    """A hub whose list grows by one link per ``period`` real seconds."""

    def __init__(self, period: float = 0.4):
        self.period = period
        self.start = None
        self.requests = []

    def count(self, now):
        return 1 + int((now - self.start) / self.period)


def _serve(site):
    import time as _time

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            now = _time.monotonic()
            site.requests.append((self.path, self.headers.get("If-None-Match")))
            if self.path == "/news/":
                n = site.count(now)
                etag = f'"{n}"'
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                body = "<h1>Latest news from the newsroom of the test site</h1>" + "".join(
                    f'<p><a href="/a{i}">Story number {i}</a></p>' for i in range(n)
                )
                headers = {"ETag": etag}
            else:
                # Distinct articles: the near-duplicate filter must not merge them.
                seed = sum(map(ord, self.path))
                words = " ".join(f"w{(seed * 31 + k * 7919) % 100003}" for k in range(80))
                body, headers = f"<p>{self.path}: {words}</p>", {}
            data = f"<html><body>{body}</body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs=SERVE, daemon=True).start()
    return server


def _hub_fetches(site, count):
    """Whether the hub has been fetched ``count`` times, one conditionally."""
    hub = [etag for path, etag in list(site.requests) if path == "/news/"]
    return len(hub) >= count and any(hub)


def test_end_to_end_continuous_crawl(tmp_path):
    """A real crawl (in its own process: a reactor runs once per process)
    that revisits a changing hub page."""
    import time as _time

    from tests.integration.test_crawl import finish, start_crawl, stop_when

    site = _Site()
    site.start = _time.monotonic()
    server = _serve(site)
    port = server.server_address[1]
    try:
        process, out = start_crawl(tmp_path, "hubs", [f"http://127.0.0.1:{port}/news/"], {
            "DOWNLOADER_MIDDLEWARES": {"scrapy_aopic.middlewares.recrawl.RecrawlMiddleware": 540},
            "AOPIC_RECRAWL": True,
            "AOPIC_RECRAWL_MIN_INTERVAL": 0.5,
            "AOPIC_RECRAWL_MAX_INTERVAL": 2.0,
            "AOPIC_RECRAWL_INITIAL_INTERVAL": 0.5,
            # The hub is due every 0.5-2 s: 3 fetches in 2.5 s at worst.
            "CLOSESPIDER_TIMEOUT": 5,
            "LOG_LEVEL": "WARNING",
        })
        # Stopped once the hub has been fetched three times, one of them
        # conditional (2.5 s at worst; 1-1.5 s mostly), CLOSESPIDER_TIMEOUT
        # the bound if it never is.
        stop_when(process, lambda: _hub_fetches(site, 3))
        stats = finish(process, out)["stats"]
    finally:
        server.shutdown()
    hub_fetches = [r for r in site.requests if r[0] == "/news/"]
    assert len(hub_fetches) >= 3
    assert stats.get("aopic/recrawl/revisits", 0) >= 2
    assert stats.get("aopic/recrawl/new_links", 0) >= 1
    # Stories linked only after the hub's first revisit are new: planned young.
    assert stats.get("aopic/recrawl/young_pages", 0) >= 1
    assert any(etag for _, etag in hub_fetches)  # revisits were conditional
    assert stats["aopic/conservation_error"] <= 1e-9 * max(1.0, stats["aopic/cash_injected"])

# -- hostile validators: bounded per value, counted, logged once ----------------------------------


def test_a_hostile_etag_is_not_kept_counted_and_logged_once(caplog):
    """A server sending 1 MB ETags (and Last-Modified values) on every page:
    before, the hook kept each one for every page until its next visit and
    sent it back on every revisit (50 pages: 100 MB held). Now a value over
    AOPIC_RECRAWL_VALIDATOR_MAX_BYTES is not kept, each one is counted and
    the first is logged; ordinary values are kept as before."""
    import logging

    from scrapy.http import HtmlResponse

    from scrapy_aopic.recrawl.hook import RecrawlHook

    crawler = make_crawler()
    hook = RecrawlHook.from_crawler(crawler)
    assert hook.validator_max_bytes == 256  # the default
    huge = '"' + "e" * (1 << 20) + '"'
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    pages = 50
    with caplog.at_level(logging.WARNING):
        for i in range(pages):
            url = f"http://hostile.example/{i}"
            headers = {"ETag": huge, "Last-Modified": date + " " * (1 << 20) + "x"}
            hook.observe_response(url, HtmlResponse(url, body=f"<p>{i}</p>".encode(), headers=headers))
            # a 304 refreshing the validators is held to the same bound
            hook.refresh_validators(url, HtmlResponse(url, status=304, headers={"ETag": huge}))
        hook.observe_response("http://fine.example/", HtmlResponse(
            "http://fine.example/", body=b"<p>ok</p>", headers={"ETag": '"abc"', "Last-Modified": date}))
    held = sum(len(v.validators.etag or "") + len(v.validators.last_modified or "") for v in hook.versions.values())
    assert held == len('"abc"') + len(date)
    assert crawler.stats.get_value("aopic/recrawl/validators_dropped") == 3 * pages
    assert hook.request_headers("http://hostile.example/3") == {}
    assert hook.request_headers("http://fine.example/") == {"If-None-Match": '"abc"', "If-Modified-Since": date}
    warnings = [r.getMessage() for r in caplog.records if "AOPIC_RECRAWL_VALIDATOR_MAX_BYTES" in r.getMessage()]
    assert len(warnings) == 1 and "Last-Modified header of http://hostile.example/0 is 1048606 bytes" in warnings[0]
    # A state saved without the bound is held to it when loaded.
    state = hook.to_state()
    state["versions"]["http://old.example/"] = [None, None, huge, None]
    again = RecrawlHook(crawler, hook.planner)
    again.load(state)
    assert again.versions["http://old.example/"].validators.etag is None
    assert again.versions["http://fine.example/"].validators.etag == '"abc"'


def test_validator_bound_setting():
    from scrapy_aopic.recrawl.hook import RecrawlHook

    assert RecrawlHook.from_crawler(make_crawler({"AOPIC_RECRAWL_VALIDATOR_MAX_BYTES": 0})).validator_max_bytes is None
    assert RecrawlHook.from_crawler(make_crawler({"AOPIC_RECRAWL_VALIDATOR_MAX_BYTES": "64"})).validator_max_bytes == 64
    with pytest.raises(ValueError, match="AOPIC_RECRAWL_VALIDATOR_MAX_BYTES"):
        RecrawlHook.from_crawler(make_crawler({"AOPIC_RECRAWL_VALIDATOR_MAX_BYTES": -1}))


def test_a_crawl_of_a_site_sending_huge_etags_keeps_its_state_small(tmp_path):
    """A real crawl with revisits of a site whose pages send huge ETags:
    1 MB ones (Scrapy's HTTP/1.1 client refuses those responses itself) and
    12 KB ones, which Scrapy passes on (its limit is 16 KB a line). The re-crawl state saved in JOBDIR
    stays small, revisits are not conditional on the dropped values, and
    every one dropped is counted."""
    from tests.integration.test_crawl import finish, start_crawl, stop_when

    requests = []
    pages = 40

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requests.append((self.path, len(self.headers.get("If-None-Match") or "")))
            n = int(self.path.strip("/") or 0)
            links = "".join(f'<a href="/{(n * 7 + k) % pages}">{k}</a> ' for k in (1, 2, 3))
            data = f"<html><body><p>page {n} {'w%d ' % (n * 9973) * 30}</p>{links}</body></html>".encode()
            size = (1 << 20) if n % 10 == 9 else 12 * 1024
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", '"' + "e" * size + '"')
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client refused the 1 MB header

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs=SERVE, daemon=True).start()
    jobdir = tmp_path / "job"
    try:
        process, out = start_crawl(tmp_path, "hostile", [f"http://127.0.0.1:{server.server_address[1]}/0"], {
            "DOWNLOADER_MIDDLEWARES": {"scrapy_aopic.middlewares.recrawl.RecrawlMiddleware": 540},
            "AOPIC_RECRAWL": True,
            "AOPIC_RECRAWL_MIN_INTERVAL": 0.5,
            "AOPIC_RECRAWL_MAX_INTERVAL": 1.0,
            "AOPIC_RECRAWL_INITIAL_INTERVAL": 0.5,
            "CLOSESPIDER_TIMEOUT": 6,
            "RETRY_ENABLED": False,
            "JOBDIR": str(jobdir),
        })

        def enough():  # every page with a 12 KB ETag fetched, and 10 revisits
            seen = list(requests)
            paths = {path for path, _ in seen}
            small = {f"/{n}" for n in range(pages) if n % 10 != 9}
            return small <= paths and len(seen) - len(paths) >= 10

        stop_when(process, enough)  # CLOSESPIDER_TIMEOUT the bound if it never is
        stats = finish(process, out)["stats"]
    finally:
        server.shutdown()
    log = (tmp_path / "hostile.log").read_text()
    fetched = {path for path, _ in requests}
    revisits = len(requests) - len(fetched)
    assert len(fetched) >= 30 and revisits >= 10, (len(fetched), revisits)
    assert stats["aopic/recrawl/validators_dropped"] >= 30
    assert log.count("more than AOPIC_RECRAWL_VALIDATOR_MAX_BYTES=256") == 1
    assert max(size for _, size in requests) == 0  # no revisit sent a 12 KB If-None-Match back
    versions = json.loads((jobdir / "aopic-recrawl.json").read_text())["versions"]
    assert len(versions) >= 30
    kept = sum(len(v[2] or "") + len(v[3] or "") for v in versions.values())
    assert kept == 0, kept  # main: 12 KB per page, held in memory and saved
    assert stats["aopic/conservation_error"] <= 1e-9 * max(1.0, stats["aopic/cash_injected"])
