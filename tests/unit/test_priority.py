"""Discounted priority (``AOPIC_PRIORITY_HORIZON``, issue 18 item 1): pending
URLs ordered by recent inflow, the cash and its books unchanged."""

from __future__ import annotations

import json
import logging
import math
import random

import pytest

from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store import PENDING, Link, MemoryStore
from scrapy_aopic.store.base import priority_clock, raise_priority
from scrapy_aopic.store.journal import JournaledStore

HORIZON = 100.0


def link(url, host="h"):
    return Link(url, host, 0)


def balanced(engine):
    return engine.conservation_error() <= 1e-9 * max(engine.totals().injected, 1.0)


def old_rich_and_new_poor(engine, hubs=300):
    """``old`` is seeded first with 1.0; ``hubs`` richer seeds are fetched
    one by one (lambda pays their cash to every pending URL, ``old``
    included); the last one links to ``new`` and 99 other new pages.
    Returns the engine with ``old`` holding far more cash than ``new``,
    ``new``'s credit recent."""
    engine.add_seed(link("old", "o"), 1.0)
    for i in range(hubs):
        engine.add_seed(link(f"hub{i}", "hubs"), 10.0)
    for i in range(hubs):
        lease = engine.next()
        assert lease.url.startswith("hub"), lease.url  # richer, and credited at t = 0 too
        last = i == hubs - 1
        engine.visit(lease, [link("new", "n")] + [link(f"junk{j}", "n") for j in range(99)] if last else [])
        assert balanced(engine)
    return engine


@pytest.mark.parametrize("horizon", [0.0, HORIZON])
def test_a_recent_credit_outranks_an_old_larger_one_in_the_engine(horizon):
    engine = old_rich_and_new_poor(AopicEngine(MemoryStore(), priority_horizon=horizon, clock=lambda: 0.0))
    store = engine.store
    assert store.get("old").cash > 5 * store.get("new").cash > 0
    first = engine.next()
    # Cash order: the old URL. Discounted inflow: the credit 300 fetches later weighs e^3 more.
    assert first.url == ("new" if horizon else "old")
    assert engine.priority_horizon == horizon
    assert first.order == (pytest.approx(math.log(first.cash) + priority_clock(300, horizon)) if horizon
                           else first.cash)
    assert balanced(engine)


def test_priority_is_log_of_the_discounted_inflow():
    """Credits at t = 0, 250, 700 with tau = 100 (past the knee the clock grows slower)."""
    prio = -math.inf
    for amount, t in ((0.5, 0), (0.25, 250), (2.0, 700)):
        prio = raise_priority(prio, amount, t / HORIZON)
    assert prio == pytest.approx(math.log(0.5 + 0.25 * math.exp(2.5) + 2.0 * math.exp(7.0)), rel=1e-12)
    # No overflow where exp() would: 1e5 horizons into a crawl.
    assert raise_priority(raise_priority(-math.inf, 1.0, 1e5), 1.0, 1e5) == pytest.approx(1e5 + math.log(2))
    assert priority_clock(2000, HORIZON) == 20.0  # knee: 100 / 0.05
    assert priority_clock(4000, HORIZON) == pytest.approx(20.0 + math.log(2) / 0.05)


def _store_with_history(horizon, rows):
    """A store where ``old`` (credited first, more cash) and ``new`` (credited
    last, less) are pending on host ``p``; ``rows``: as never-fetched rows,
    else as objects (leased and given back)."""
    store = MemoryStore(priority_horizon=horizon)
    store.inject(link("src", "s"), 10.0)
    store.inject(link("old", "p"), 0.0)
    lease = store.pop(lambda h: h == "s")
    store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [(link("old", "p"), 3.0)])
    for i in range(400):  # fetches pass: leaf pages, cash to lambda
        store.inject(link(f"leaf{i}", "l"), 1.0)
        lease = store.pop(lambda h: h == "l")
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [])
    store.inject(link("src2", "s"), 1.0)
    lease = store.pop(lambda h: h == "s")
    store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [(link("new", "p"), 0.5)])
    if not rows:
        for url in ("old", "new"):
            taken = store.take(url)
            assert store.settle_requeue(url, taken.lease_id)  # a requeue keeps the priority
    return store


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "objects"])
@pytest.mark.parametrize("horizon", [0.0, HORIZON])
def test_a_recent_credit_outranks_an_old_larger_one_in_the_memory_store(horizon, rows):
    store = _store_with_history(horizon, rows)
    assert store.get("old").cash == 3.0 and store.get("new").cash == 0.5
    top = "new" if horizon else "old"
    assert store.peek()[0] == top and store.peek()[1] == store.get(top).cash  # peek: the first URL's cash
    order = [store.order_at_rank(1), store.order_at_rank(2)]
    assert order[0] > order[1]
    lease = store.pop(lambda h: True)
    assert lease.url == top and lease.order == order[0]
    assert store.order_at_rank(1) == order[1]


@pytest.mark.parametrize("horizon", [0.0, HORIZON])
def test_min_share_compares_priorities(horizon):
    """``late`` (host b, busy) holds less cash than ``early`` but a recent
    credit: with a horizon ``early`` is far below the first URL and the
    min-share rule waits; in cash order ``early`` is the first URL itself."""
    store = MemoryStore(priority_horizon=horizon)
    store.inject(link("early", "a"), 1.0)  # t = 0
    for i in range(300):
        store.inject(link(f"leaf{i}", "l"), 5.0)
        lease = store.pop(lambda h: h == "l")
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [])
    store.inject(link("late", "b"), 0.5)  # t = 300: 0.5 e^3 ~ 10 > 1.0
    assert store.get("early").cash > store.get("late").cash
    busy_b = lambda h: h != "b"  # noqa: E731
    if horizon:
        assert store.pop(busy_b, min_share=0.5) is None  # early: 1.0 / (0.5 e^3) < 0.5
        assert store.pop(busy_b, min_share=0.05).url == "early"
    else:
        assert store.pop(busy_b, min_share=0.5).url == "early"


def test_order_at_rank_follows_the_priority_order():
    rng = random.Random(3)
    store = MemoryStore(priority_horizon=7.0)
    for i in range(300):
        store.inject(link(f"u{i}", f"h{i % 5}"), rng.random())
        if i % 3 == 0:
            lease = store.pop(lambda h: True)
            credits = [(link(f"u{rng.randrange(400)}", f"h{rng.randrange(5)}"), lease.cash / 4) for _ in range(3)]
            store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, credits)
    ranks = [store.order_at_rank(r) for r in range(1, 60)]
    popped = [store.pop(lambda h: True).order for _ in range(59)]
    assert ranks == popped and popped == sorted(popped, reverse=True)


def _crawl_some(store, rng, steps):
    for _ in range(steps):
        lease = store.pop(lambda h: True)
        if lease is None:
            return
        links = [link(f"u{rng.randrange(200)}", f"h{rng.randrange(4)}") for _ in range(rng.randrange(5))]
        share = lease.cash / (len(links) + 1)
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [(lk, share) for lk in links])
        if rng.random() < 0.3:
            store.visit_lambda()


def _pending_order(store):
    return [(v.url, store.order_at_rank(i + 1)) for i, v in enumerate(
        sorted((v for v in store.iter_accounts() if v.state == PENDING), key=lambda v: v.url))]


def test_the_priority_survives_a_jobdir_resume(tmp_path):
    rng = random.Random(11)
    store = JournaledStore(tmp_path, priority_horizon=5.0, roll_entries=40)  # rolls: snapshots mid-run
    store.inject(link("u0", "h0"), 1.0)
    _crawl_some(store, rng, 120)
    open_lease = store.pop(lambda h: True)  # in flight at the "crash"
    pops = []
    reference = store.memory
    store._journal.flush()
    # The crash: reopen the files while the first store still has them open (lock released by hand).
    store._lock.release()
    again = JournaledStore(tmp_path, priority_horizon=5.0)
    assert again.priority_fallbacks == 0
    reference.settle_requeue(open_lease.url, open_lease.lease_id)  # as the resume did
    while True:
        a, b = reference.pop(lambda h: True), again.pop(lambda h: True)
        assert (a and (a.url, a.order, a.cash)) == (b and (b.url, b.order, pytest.approx(b.cash))), pops
        if a is None:
            break
        pops.append(a.url)
    assert len(pops) > 20
    again.close()


def test_a_snapshot_without_priorities_loads_with_a_counted_fallback(tmp_path, caplog):
    store = JournaledStore(tmp_path)  # written without a horizon (as before the setting)
    store.inject(link("a", "h"), 1.0)
    store.inject(link("b", "h"), 2.0)
    store.close()
    with caplog.at_level(logging.WARNING, logger="scrapy_aopic.store.journal"):
        again = JournaledStore(tmp_path, priority_horizon=HORIZON)
    assert again.priority_fallbacks == 2
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "no usable saved priority" in caplog.records[0].message
    assert again.pop(lambda h: True).url == "b"  # from the cash: 2.0 first
    again.close()
    caplog.clear()
    third = JournaledStore(tmp_path, priority_horizon=HORIZON)  # saved with it now: no fallback
    assert third.priority_fallbacks == 0 and not caplog.records
    third.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "3.0", True, [1.0]])
def test_a_corrupt_saved_priority_is_refused_and_counted(bad):
    store = MemoryStore(priority_horizon=HORIZON)
    store.inject(link("a", "h"), 1.0)
    store.inject(link("b", "h"), 0.25)
    header, records = store.snapshot()
    header = json.loads(json.dumps(header))
    records = [list(r) for r in records]
    assert {r[0]: r[11] for r in records} == {"a": 0.0, "b": math.log(0.25)}
    for r in records:
        if r[0] == "b":
            r[11] = bad
    restored = MemoryStore.restore(header, records, priority_horizon=HORIZON)
    assert restored.priority_fallbacks == 1
    assert math.isfinite(restored.order_at_rank(2))  # b ordered from its cash, never NaN
    assert [restored.pop(lambda h: True).url for _ in range(2)] == ["a", "b"]
    other = MemoryStore.restore(header, records, priority_horizon=2 * HORIZON)  # another horizon
    assert other.priority_fallbacks == 2


def test_switching_the_horizon_on_a_running_store_reorders_without_moving_cash():
    engine = old_rich_and_new_poor(AopicEngine(MemoryStore(), clock=lambda: 0.0), hubs=50)
    before = {v.url: v.cash for v in engine.store.iter_accounts()}
    engine.store.set_priority_horizon(HORIZON)
    assert {v.url: v.cash for v in engine.store.iter_accounts()} == before
    assert engine.store.priority_fallbacks == 0  # it had none to lose
    assert balanced(engine)
    with pytest.raises(ValueError):
        engine.store.set_priority_horizon(-1.0)
    with pytest.raises(ValueError):
        AopicEngine(MemoryStore(), priority_horizon=math.inf)
