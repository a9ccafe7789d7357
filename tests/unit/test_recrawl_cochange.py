"""Co-change hints (issue 17): pages that change together, learnt from the
changed windows revisits see; a change found on one brings its partners'
revisits forward, out of the same budget."""

from __future__ import annotations

import bisect
import json
import random

import pytest

from scrapy_aopic.recrawl.cochange import CoChangeModel
from scrapy_aopic.recrawl.planner import RecrawlPlanner
from scrapy_aopic.recrawl.profile import DAY, HOUR
from scrapy_aopic.recrawl.simulate import EPOCH_MONDAY as MONDAY
from scrapy_aopic.recrawl.simulate import visit_due

PAGES = 40
SPAN = 200 * DAY


def commits(seed: int, group: int = 4, every: float = 8 * DAY) -> dict[str, list[float]]:
    """Pages in groups of ``group`` on 4 hosts; each group changes at once
    (a commit), every ``every`` seconds on average (Poisson)."""
    rng = random.Random(seed)
    pages = {}
    for g in range(PAGES // group):
        times = []
        t = MONDAY + rng.expovariate(1 / every)
        while t < MONDAY + SPAN:
            times.append(t)
            t += rng.expovariate(1 / every)
        for i in range(group):
            pages[f"http://h{g % 4}.example/docs/g{g}p{i}"] = list(times)
    return pages


def drive(planner: RecrawlPlanner, pages: dict[str, list[float]], until: float, start: float = MONDAY):
    """Visit the pages as a crawl does: every page once at ``start`` (unless
    the planner knows it), then each page the planner releases
    (:meth:`~RecrawlPlanner.due`, so hints count). Returns (revisits, mean
    delay of the changes from day 60 on, seconds)."""
    fetched: dict[str, list[float]] = {url: [] for url in pages}

    def visit(url: str, t: float) -> None:
        record = planner.pages.get(url)
        times = fetched[url]
        last = times[-1] if times else (record.last_visit if record is not None else None)
        changed = None
        if last is not None:
            c = pages[url]
            changed = bisect.bisect_right(c, t) > bisect.bisect_right(c, last)
        times.append(t)
        planner.on_visit(url, url.split("/")[2], t, changed=changed)

    for i, url in enumerate(pages):
        if url not in planner.pages:
            visit(url, start + i)
    visit_due(planner, visit, until)
    delays = []
    for url, changes in pages.items():
        times = fetched[url]
        for c in changes:
            if MONDAY + 60 * DAY <= c < until and c >= start:
                i = bisect.bisect_left(times, c)
                delays.append((times[i] if i < len(times) else until + DAY) - c)
    revisits = sum(len(times) for times in fetched.values()) - (0 if start > MONDAY else len(pages))
    return revisits, sum(delays) / max(len(delays), 1)


def planner(cochange: bool, budget: float = float(PAGES), **options) -> RecrawlPlanner:
    return RecrawlPlanner(min_interval=60, max_interval=7 * DAY, budget=budget, cochange=cochange, **options)


def test_partners_are_the_pages_whose_changed_windows_overlap_again_and_again():
    model = CoChangeModel()
    t = MONDAY
    for k in range(4):
        # a and b change together (found by visits at different times), c
        # alone; d once with a (chance).
        now = t + k * 5 * DAY
        assert model.observe("a", "h", now - DAY, now) == (["b"] if k >= 2 else [])
        model.observe("b", "h", now - DAY / 2, now + HOUR)
        model.observe("c", "h", now + 2 * DAY, now + 3 * DAY)
        if k == 1:
            model.observe("d", "h", now - DAY, now + 2 * HOUR)
    assert model.partners["a"]["b"] == 4 and model.partners["b"]["a"] == 4
    assert "c" not in model.partners.get("a", {}) and "c" not in model.partners
    assert model.partners["a"]["d"] == 1  # counted, but under the threshold
    # read without counting: the same partners, nothing counted
    seen = model.changes["a"]
    assert model.partners_of("a") == ["b"] and model.changes["a"] == seen
    assert model.partners_of("a", seen=100) == []  # 4 of 100 changes: under a quarter
    # Another host's windows never match.
    assert model.observe("x", "other", MONDAY - DAY, MONDAY + 30 * DAY) == []
    model.forget_page("a")
    assert "a" not in model.partners and "a" not in model.changes


def test_partner_counts_are_bounded_per_page():
    model = CoChangeModel(max_partners=4)
    for i in range(20):
        model.observe(f"p{i}", "h", MONDAY + i * 60.0 - DAY, MONDAY + i * 60.0)
    assert max(len(c) for c in model.partners.values()) == 4


@pytest.mark.parametrize("share", [0.5, 0.25])
def test_hints_cut_the_delay_at_the_same_budget(share):
    pages = commits(1, every=16 * DAY)
    off = planner(False)
    off_revisits, off_delay = drive(off, pages, until=MONDAY + SPAN)
    on = planner(True, cochange_share=share)
    on_revisits, on_delay = drive(on, pages, until=MONDAY + SPAN)
    budget = PAGES * (SPAN / DAY)
    # The hints come out of the budget: both spend it.
    assert off_revisits == pytest.approx(budget, rel=0.03)
    assert on_revisits == pytest.approx(budget, rel=0.03)
    assert on.hints > 100 and off.hints == 0
    if share == 0.5:
        assert on.hints_changed > 0.8 * on.hints
        assert on_delay < 0.9 * off_delay
        # Partners are the pages of the same commit group, nothing else.
        for url, counts in on.cochange.partners.items():
            for other, n in counts.items():
                if n >= 2 and n >= share * on.cochange.changes[url]:
                    assert other.rsplit("p", 1)[0] == url.rsplit("p", 1)[0], (url, other)
    else:
        # The default admits chance partners here: two or three groups per
        # host, each changing every 16 days, overlap a quarter of the time
        # by chance (docs/recrawl.rst). Still shorter, by less.
        assert on_delay < 0.99 * off_delay


def test_pages_that_change_faster_than_they_are_revisited_get_no_hints():
    pages = commits(1, group=10, every=2 * DAY)
    p = planner(True, budget=10.0)  # a revisit every 4 days, a change every 2
    drive(p, pages, until=MONDAY + SPAN)
    assert p.hints < 0.02 * p.revisits


def test_hints_spend_at_most_their_share_of_the_budget():
    pages = commits(1, every=16 * DAY)
    p = planner(True)
    p.HINT_SHARE = 1e-6
    revisits, _ = drive(p, pages, until=MONDAY + SPAN)
    assert p.hints_skipped > 50 and p.hints < 0.2 * p.hints_skipped
    assert revisits == pytest.approx(PAGES * SPAN / DAY, rel=0.03)


def each_refused(state: dict, new_planner, cases) -> None:
    """Each ``(path, value, match)``: ``state`` with the value at ``path``
    replaced is refused by a new planner's ``load_state`` with a
    ``ValueError`` matching ``match``, and nothing of it is loaded."""
    for path, value, match in cases:
        bad = json.loads(json.dumps(state))
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        r = new_planner()
        with pytest.raises(ValueError, match=match):
            r.load_state(bad)
        assert not r.pages  # all or nothing


def round_trip(new_planner, pages: dict[str, list[float]], until: float):
    """A planner driven until ``until``, its state as the file holds it,
    and a new planner loaded from that state; both solved at ``until``,
    ready to plan on alike."""
    p = new_planner()
    drive(p, pages, until=until)
    state = json.loads(json.dumps(p.to_state()))
    q = new_planner()
    q.load_state(state)
    p.rebalance_now(until)
    q.rebalance_now(until)
    return p, q, state


def test_cochange_state_is_saved_restored_and_checked_on_load():
    pages = commits(3)
    now = MONDAY + 120 * DAY
    p, q, state = round_trip(lambda: planner(True), pages, now)
    assert q.cochange.partners == p.cochange.partners and q.cochange.changes == p.cochange.changes
    assert (q.hints, q.hints_changed, q.hints_skipped) == (p.hints, p.hints_changed, p.hints_skipped)
    later = MONDAY + 140 * DAY
    assert drive(p, pages, later, now) == drive(q, pages, later, now)
    each_refused(state, lambda: planner(True), [
        (("cochange", "partners"), [], "co-change partners"),
        (("cochange", "changes", next(iter(state["cochange"]["changes"]))), -1, "changes of"),
        (("cochange", "recent", next(iter(state["cochange"]["recent"]))), {"a": 1}, "windows"),
        (("hint_clock",), [1.0], "hint clock"),
    ])


def test_state_saved_before_cochanges_still_loads():
    p = planner(False)
    drive(p, commits(4), until=MONDAY + 30 * DAY)
    state = p.to_state()
    state["version"] = 4
    del state["cochange"], state["hint_clock"]
    state["counters"] = state["counters"][:6]
    q = planner(True)
    q.load_state(json.loads(json.dumps(state)))
    assert len(q.pages) == len(p.pages) and not q.cochange.partners and q.hints == 0


def test_the_setting_turns_it_on_and_the_stats_count_it():
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.recrawl.hook import RecrawlHook

    crawler = get_crawler(settings_dict={"AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": float(PAGES)})
    hook = RecrawlHook.from_crawler(crawler)
    assert isinstance(hook.planner.cochange, CoChangeModel)  # on by default
    off = get_crawler(settings_dict={
        "AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": 5.0, "AOPIC_RECRAWL_COCHANGE": False,
    })  # fmt: skip
    assert RecrawlHook.from_crawler(off).planner.cochange is None
    assert off.stats.get_value("aopic/recrawl/cochange_off") is None
    drive(hook.planner, commits(1, every=16 * DAY), until=MONDAY + SPAN)
    hook.update_stats(top_hubs=False)
    p = hook.planner
    assert p.hints > 0
    assert crawler.stats.get_value("aopic/recrawl/cochange_hints") == p.hints
    assert crawler.stats.get_value("aopic/recrawl/cochange_hints_changed") == p.hints_changed
    assert crawler.stats.get_value("aopic/recrawl/cochange_hints_skipped") == 0


def test_without_a_budget_the_hints_are_off_and_it_is_said(caplog):
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.recrawl.hook import RecrawlHook

    crawler = get_crawler(settings_dict={"AOPIC_RECRAWL": True})
    with caplog.at_level("INFO", logger="scrapy_aopic.recrawl.hook"):
        hook = RecrawlHook.from_crawler(crawler)
        RecrawlHook.from_crawler(crawler)  # the same hook: said once
    assert hook.planner.cochange is None
    assert crawler.stats.get_value("aopic/recrawl/cochange_off") == 1
    assert sum("need a revisit budget" in r.getMessage() for r in caplog.records) == 1
    assert crawler.stats.get_value("aopic/recrawl/cochange_chance_ignored") is None
    # the chance level asked for with the hints off: said too
    crawler = get_crawler(settings_dict={"AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": 10.0,
                                         "AOPIC_RECRAWL_COCHANGE": False, "AOPIC_RECRAWL_COCHANGE_CHANCE": True})
    caplog.clear()
    with caplog.at_level("INFO", logger="scrapy_aopic.recrawl.hook"):
        RecrawlHook.from_crawler(crawler)
    assert crawler.stats.get_value("aopic/recrawl/cochange_chance_ignored") == 1
    assert crawler.stats.get_value("aopic/recrawl/cochange_off") is None
    assert sum("COCHANGE_CHANCE ignored" in r.getMessage() for r in caplog.records) == 1


def test_the_trace_figures_count_changes_made_together():
    from tests.support.simdrive import load_benchmark

    bench = load_benchmark("recrawl_cochange")
    from recrawl_traces import Page, Trace  # on sys.path once the benchmark is loaded

    # Two pages changed at the same instant, a third 30 minutes later, a
    # fourth alone a day later: 4 changes, 2 at one instant, 3 within an hour.
    trace = Trace("t", MONDAY, MONDAY + 10 * DAY, [
        Page("http://h/a", "h", [MONDAY + DAY]), Page("http://h/b", "h", [MONDAY + DAY]),
        Page("http://h/c", "h", [MONDAY + DAY + HOUR / 2]), Page("http://h/d", "h", [MONDAY + 2 * DAY]),
    ])  # fmt: skip
    assert bench.together(trace) == (4, 0.5, 0.75, 4 / 3)


def test_hosts_that_stopped_changing_are_swept():
    model = CoChangeModel()
    model.SWEEP_EVERY = 10
    for i in range(5):
        model.observe(f"http://old{i}/p", f"old{i}", MONDAY - DAY, MONDAY)
    later = MONDAY + 10 * DAY
    for i in range(10):
        model.observe(f"http://new/p{i}", "new", later - DAY, later + i)
    assert set(model.recent) == {"new"}
    assert model.changes["http://old0/p"] == 1  # counts are kept: only the windows go


def test_the_held_out_traces_load():
    from tests.support.simdrive import load_benchmark

    load_benchmark("recrawl_cochange")  # puts benchmarks/ on sys.path
    from recrawl_traces import HELDOUT, load

    traces = load(HELDOUT)
    assert [t.name for t in traces] == ["rust-by-example", "flask-docs", "fastapi-docs"]
    assert all(len(t.pages) > 50 and t.events > 400 for t in traces)


def test_the_partner_share_is_a_setting_and_is_checked():
    from scrapy.settings import Settings

    from scrapy_aopic.recrawl.hook import planner_from_settings

    p = planner_from_settings(Settings({
        "AOPIC_RECRAWL": True, "AOPIC_RECRAWL_BUDGET": 10.0, "AOPIC_RECRAWL_COCHANGE_SHARE": 0.3,
    }))  # fmt: skip
    assert p.cochange.threshold == 0.3
    p.load_state(json.loads(json.dumps(p.to_state())))
    assert p.cochange.threshold == 0.3  # a resumed crawl keeps this crawl's setting
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="AOPIC_RECRAWL_COCHANGE_SHARE"):
            RecrawlPlanner(budget=1.0, cochange=True, cochange_share=bad)
    for threshold, expected in ((0.3, ["b"]), (0.5, [])):
        model = CoChangeModel(threshold=threshold)
        for k in range(10):  # b shares 4 of a's 10 changes
            now = MONDAY + k * 5 * DAY
            if k % 3 == 0:
                model.observe("b", "h", now - DAY, now)
            partners = model.observe("a", "h", now - DAY, now + HOUR)
        assert partners == expected and model.partners["a"]["b"] == 4


def test_the_delay_split_accounts_for_every_scored_change():
    from tests.support.simdrive import load_benchmark

    bench = load_benchmark("recrawl_cochange")
    from recrawl_traces import YEAR, Page, Trace

    start = MONDAY
    pages = commits(7, every=6 * DAY)
    # stretch the 200 days of commits over a year and a bit (the warm-up is half a year)
    stretched = {url: [start + (t - start) * 2.2 for t in times] for url, times in pages.items()}
    trace = Trace("t", start, start + 1.2 * YEAR,
                  [Page(url, url.split("/")[2], times) for url, times in stretched.items()])  # fmt: skip
    kinds = bench.split(trace)
    scored = sum(1 for times in stretched.values() for t in times if start + 0.5 * YEAR <= t < trace.end)
    assert sum(n for n, _ in kinds.values()) == scored
    assert set(kinds) <= {"lone, hinted", "lone, planned", "shared, hinted",
                          "shared, planned, found first", "shared, planned, seen elsewhere first"}
    assert kinds["shared, hinted"][0] > 0 and "lone, planned" not in kinds  # every change is shared here


def test_the_ceiling_and_recall_tell_the_true_partners():
    from tests.support.simdrive import load_benchmark

    bench = load_benchmark("recrawl_cochange")
    from recrawl_traces import YEAR, Page, Trace

    start = MONDAY
    # groups of four changing at once, plus one page per host changing alone
    pages = commits(7, every=6 * DAY)
    rng = random.Random(3)
    for h in range(4):
        pages[f"http://h{h}.example/docs/alone"] = sorted(start + rng.uniform(0, SPAN) for _ in range(25))
    stretched = {url: [start + (t - start) * 2.2 for t in times] for url, times in pages.items()}
    trace = Trace("t", start, start + 1.2 * YEAR,
                  [Page(url, url.split("/")[2], times) for url, times in stretched.items()])  # fmt: skip
    (default, fixed), (told, told_fixed) = bench.ceiling(trace, 1.0)
    assert 0 < told < default and fixed > 0 and told_fixed > 0
    figures = bench.recall(trace)
    assert figures["changes found"] > 100
    # at most the three others of the group; the lone pages are nobody's
    assert 0 < figures["true"] <= 3
    assert figures["true learnt"] <= min(figures["true"], figures["learnt"])
    assert figures["true ever"] <= min(figures["true"], figures["ever"])
    assert figures["true learnt"] > 0.5 * figures["true"]  # groups that always move together are learnt
    assert 8 <= figures["host"] <= 12  # 9 or 13 pages a host: 2 or 3 groups and the lone page
    # learnt partners name the true ones far better than a guess would
    assert figures["true learnt"] / figures["learnt"] > 2 * figures["true"] / figures["host"]


def test_a_partner_must_share_changes_above_its_chance_level():
    # b shares 4 of a's 10 changes (0.4): a partner at a quarter unless
    # chance alone would have given it most of that.
    for level, expected in ((0.0, ["b"]), (0.1, ["b"]), (0.2, ["b"]), (0.3, []), (0.9, [])):
        model = CoChangeModel(threshold=0.25)
        for k in range(10):
            now = MONDAY + k * 5 * DAY
            if k % 3 == 0:
                model.observe("b", "h", now - DAY, now)
            partners = model.observe("a", "h", now - DAY, now + HOUR, chance=lambda other: level)
        # 0.4 - level >= 0.25 * (1 - level)  <=>  level <= 0.2
        assert partners == expected, level


def test_chance_partners_of_a_busy_host_are_left_out():
    # Two or three commit groups per host, each changing every 16 days:
    # at a quarter, unrelated groups overlap often enough by chance to be
    # partners; above chance, nearly all partners are of one group again
    # (early on a page has no rate yet, so no chance level).
    pages = commits(1, every=16 * DAY)
    _, off_delay = drive(planner(False), pages, until=MONDAY + SPAN)
    runs = {}
    for chance in (False, True):
        p = planner(True, cochange_share=0.25, cochange_chance=chance)
        strangers = []
        observe = p.cochange.observe

        def spy(url, *args, observe=observe, strangers=strangers):
            partners = observe(url, *args)
            strangers.extend(o for o in partners if o.rsplit("p", 1)[0] != url.rsplit("p", 1)[0])
            return partners

        p.cochange.observe = spy
        _, delay = drive(p, pages, until=MONDAY + SPAN)
        runs[chance] = p, delay, len(strangers)
    (plain, plain_delay, plain_strangers), (above, above_delay, above_strangers) = runs[False], runs[True]
    assert plain_strangers > 100 and above_strangers < 0.2 * plain_strangers
    assert above.hints_changed > 0.9 * above.hints
    assert above_delay < 0.9 * off_delay and above_delay < 0.95 * plain_delay


def test_activity_says_how_much_likelier_a_change_is_on_an_active_site():
    from tests.support.simdrive import load_benchmark

    bench = load_benchmark("recrawl_cochange")
    from recrawl_traces import YEAR, Page, Trace

    start = MONDAY
    rng = random.Random(5)
    # ten pages changing twice in each working session (four days in every
    # 30) and ten changing at random
    sessions = [start + d * DAY for d in range(0, 400, 30)]
    together = {
        f"http://s.example/p{i}": sorted(s + rng.uniform(0, 4 * DAY) for s in sessions for _ in range(2))
        for i in range(10)
    }
    apart = {f"http://r.example/p{i}": sorted(start + rng.uniform(0, 400 * DAY) for _ in range(26)) for i in range(10)}
    for pages, expect_more in ((together, True), (apart, False)):
        trace = Trace("t", start, start + 1.1 * YEAR, [Page(url, url.split("/")[2], t) for url, t in pages.items()])
        share, active, quiet = bench.activity(trace)
        assert 0 < share < 1
        if expect_more:
            assert active > 5 * quiet
        else:
            assert active < 2 * quiet
