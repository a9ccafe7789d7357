"""Link memory and virtual revisits (``AOPIC_LINK_MEMORY``): a crawled page's
cash moves on along its remembered links without a fetch, the books stay
balanced, and JOBDIR keeps the links."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store.journal import JournaledStore
from scrapy_aopic.store import CRAWLED, Link, MemoryStore
from tests.unit.test_engine import SEED_004, crawl_once, stationary_with_lambda


def link(url, host="h", depth=0, request=None):
    return Link(url, host, depth, request)


def capable(make_store, targets="pending"):
    store = make_store(targets)
    if not getattr(store, "supports_link_memory", False):
        pytest.skip(f"{make_store.backend} store has no link memory")
    return store


def assert_balanced(engine):
    assert engine.conservation_error() <= 1e-9 * max(engine.totals().injected, 1.0)


def memory_of(store):
    return store.memory if isinstance(store, JournaledStore) else store


def remembered(store):
    """``{url: [linked urls]}`` of every account with remembered links."""
    memory = memory_of(store)
    links = {view.url: memory.remembered_links(view.url) for view in memory.iter_accounts()}
    return {url: [link.url for link in found] for url, found in links.items() if found is not None}


def hub_crawl(engine):
    """Hub H is crawled, then C (crawled) pays H more than any pending URL
    holds. Tax 0: no cash to lambda while pages have links.

    H 1.0 -> [C, X, Y]: C 1 + 1/3, X 1/3, Y 1/3. C 4/3 -> [H]: H (crawled) 4/3.
    Pending then: Z 0.6, X 1/3, Y 1/3.
    """
    engine.add_seed(link("H"))
    engine.add_seed(link("C"))
    engine.add_seed(link("Z"), cash=0.6)
    lease = engine.store.pop(lambda h: True)
    assert lease.url == "H"
    engine.visit(lease, [link("C", depth=1), link("X", depth=1), link("Y", depth=1)])
    lease = engine.store.pop(lambda h: True)
    assert lease.url == "C"
    engine.visit(lease, [link("H", depth=1)])


# -- the virtual visit itself --------------------------------------------------


def test_revisit_pays_the_hubs_cash_to_its_links(make_store, clock):
    store = capable(make_store)
    engine = AopicEngine(store, lambda_tax=0.0, clock=clock, link_memory=True)
    hub_crawl(engine)
    assert remembered(store)["H"] == ["C", "X", "Y"]
    assert store.peek_crawled() == ("H", pytest.approx(4 / 3))
    hub_before = store.get("H")
    cash, share, links = store.revisit("H", 0.0)
    assert (cash, links) == (pytest.approx(4 / 3), 3)
    assert share == pytest.approx(4 / 9)
    hub = store.get("H")
    assert hub.cash == 0.0
    assert hub.history == pytest.approx(hub_before.history + 4 / 3)  # plain OPIC
    assert (hub.visits, hub.last_visit, hub.state) == (hub_before.visits, hub_before.last_visit, CRAWLED)
    assert store.get("X").cash == pytest.approx(1 / 3 + 4 / 9)
    assert store.get("Y").cash == pytest.approx(1 / 3 + 4 / 9)
    assert store.get("C").cash == pytest.approx(4 / 9)  # crawled: accumulates
    totals = store.totals()
    assert totals.virtual_visits == 1 and totals.visits == 2
    assert store.revisit("X", 0.0) is None  # pending: not revisitable
    assert_balanced(engine)


def test_revisit_changes_the_pending_order(make_store, clock):
    orders = {}
    for memory in (False, True):
        store = capable(make_store)
        engine = AopicEngine(store, lambda_tax=0.0, clock=clock, link_memory=memory)
        hub_crawl(engine)
        lease = engine.next()
        orders[memory] = (lease.url, lease.cash, store.totals().virtual_visits)
        assert_balanced(engine)
    # Without link memory H's 4/3 sits idle and Z (0.6) goes first; with it,
    # H's revisit lifts X to 1/3 + 4/9 = 7/9 > 0.6.
    assert orders[False] == ("Z", pytest.approx(0.6), 0)
    assert orders[True] == ("X", pytest.approx(7 / 9), 1)


def test_no_revisit_when_the_frontier_is_richer(make_store, clock):
    store = capable(make_store)
    engine = AopicEngine(store, lambda_tax=0.0, clock=clock, link_memory=True)
    hub_crawl(engine)
    engine.add_seed(link("RICH"), cash=5.0)
    assert engine.upkeep().revisits == 0
    assert engine.next().url == "RICH"
    assert store.totals().virtual_visits == 0


def test_revisit_follows_aliases_and_skips_refused(make_store, clock):
    store = capable(make_store)
    engine = AopicEngine(store, lambda_tax=0.0, clock=clock, link_memory=True)
    hub_crawl(engine)
    # X redirects to T; Y is refused: a revisit pays X's share to T, Y's to lambda.
    lease = store.pop(lambda h: h == "h")  # Z (0.6) first
    engine.requeue(lease)
    lease = store.take("X")
    engine.transfer(lease, link("T"))
    store.refuse("Y", "h", 1)
    lambda_before = store.totals().lambda_cash
    t_before = store.get("T").cash
    cash, share, _ = store.revisit("H", 0.0)
    assert store.get("T").cash == pytest.approx(t_before + share)
    assert store.totals().lambda_cash == pytest.approx(lambda_before + share)
    assert_balanced(engine)


def test_all_targets_crawled_pages_earn_dividends_and_stay_ordered(make_store, clock):
    """In "all" mode crawled accounts grow with lambda payouts without a heap
    push; the richest crawled page must still be found."""
    store = capable(make_store, "all")
    engine = AopicEngine(store, clock=clock, link_memory=True)
    hub_crawl(engine)
    store.revisit("H", None)  # H now holds 0 but keeps earning dividends
    for _ in range(3):
        engine.add_seed(link(f"leaf{_}"), cash=1.0)
        lease = store.pop(lambda h: True)
        engine.visit(lease, [])  # all to lambda
        store.visit_lambda()
    assert store.peek_crawled()[1] == pytest.approx(brute_richest_crawled(store))
    assert_balanced(engine)


# -- conservation on random sequences ---------------------------------------------


def brute_richest_crawled(store):
    memory = memory_of(store)
    cash = [
        view.cash
        for view in memory.iter_accounts()
        if view.state == CRAWLED and memory.remembered_links(view.url) is not None
    ]
    return max(cash) if cash else None


def random_crawl(engine, rng, steps, nodes=30):
    """Visits, failures, redirects, requeues, re-pends, refusals, lambda
    visits and revisits in random order over a random graph."""
    store = engine.store
    names = [f"u{i}" for i in range(nodes)]
    graph = {u: rng.sample(names, rng.randint(0, 7)) for u in names}
    engine.add_seed(link("u0", host="h0"))
    for step in range(steps):
        kind = rng.random()
        if kind < 0.08:
            u = rng.choice(names)
            engine.add_seed(link(u, host=f"h{int(u[1:]) % 3}"), cash=rng.choice([0.5, 1.0, 3.0]))
        elif kind < 0.14:
            store.visit_lambda()
        elif kind < 0.2:
            crawled = [v.url for v in store.iter_accounts() if v.state == CRAWLED]
            if crawled:
                store.revisit(rng.choice(crawled), engine.lambda_tax)
        elif kind < 0.24:
            crawled = [v.url for v in store.iter_accounts() if v.state == CRAWLED]
            if crawled:
                u = rng.choice(crawled)
                store.repend(link(u, host=f"h{int(u[1:]) % 3}"))
        elif kind < 0.27:
            u = rng.choice(names)
            store.refuse(u, f"h{int(u[1:]) % 3}", 1)
        else:
            lease = engine.next()
            if lease is None:
                continue
            roll = rng.random()
            if roll < 0.75:
                links = [link(v, host=f"h{int(v[1:]) % 3}", depth=lease.depth + 1) for v in graph[lease.url]]
                engine.visit(lease, links)
            elif roll < 0.85:
                engine.fail(lease)
            elif roll < 0.93:
                target = rng.choice(names)
                engine.transfer(lease, link(target, host=f"h{int(target[1:]) % 3}"))
            else:
                engine.requeue(lease)
        assert_balanced(engine)
        richest = store.peek_crawled()
        brute = brute_richest_crawled(store)
        if not brute:  # none, or all empty: an empty one need not be found
            assert richest is None or richest[1] == 0
        else:
            assert math.isclose(richest[1], brute, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    targets=st.sampled_from(["pending", "all", "pending-cash"]),
    tax=st.sampled_from([None, 0.0, 0.2, 1.0]),
    max_revisits=st.integers(1, 4),
)
def test_random_sequences_with_revisits_keep_the_books(make_store, seed, targets, tax, max_revisits):
    assume(targets != "pending-cash" or make_store.backend == "memory")  # memory only
    store = capable(make_store, targets)
    engine = AopicEngine(store, lambda_tax=tax, clock=lambda: 0.0, link_memory=True, max_revisits=max_revisits)
    random_crawl(engine, random.Random(seed), 150)
    totals = store.totals()
    recount = math.fsum(v.history for v in store.iter_accounts()) + totals.lambda_history
    assert math.isclose(totals.history_sum, recount, rel_tol=1e-9, abs_tol=1e-12)


def test_random_crawl_does_revisit(make_store):
    store = capable(make_store)
    engine = AopicEngine(store, clock=lambda: 0.0, link_memory=True, max_revisits=2)
    random_crawl(engine, random.Random(7), 300)
    assert store.totals().virtual_visits > 10


# -- seed 004 ------------------------------------------------------------------


def test_seed_004_with_link_memory_conserves_and_converges(make_store, clock):
    """After one pass, revisits alone (no fetch) keep computing OPIC on the
    stored graph: importance converges to the PageRank with lambda."""
    store = capable(make_store, "all")
    engine = AopicEngine(store, clock=clock, link_memory=True)
    engine.add_seed(link("A"))
    crawl_once(engine, SEED_004)
    assert store.totals().visits == 5
    assert_balanced(engine)
    for _ in range(3000):
        engine.upkeep()
    assert store.totals().virtual_visits > 1000
    assert_balanced(engine)
    truth = stationary_with_lambda(SEED_004)
    for u in SEED_004:
        assert engine.importance(u) == pytest.approx(truth[u], abs=0.01), u


# -- JOBDIR: journal replay and snapshots -----------------------------------------


def books(store):
    t = store.totals()
    return (
        sorted(store.iter_accounts()),
        (t.injected, t.lambda_cash, t.lambda_history, t.history_sum, t.lambda_visits, t.visits,
         t.virtual_visits, t.known, t.pending),
        remembered(store),
        store.peek(),
        store.peek_crawled(),
    )


def settle_all(store):
    for url, lease_id in store.open_leases():
        store.settle_requeue(url, lease_id)


@pytest.mark.parametrize("targets", ["pending", "all", "pending-cash"])
def test_journal_replay_rebuilds_link_memory(tmp_path, targets):
    store = JournaledStore(tmp_path / "job", targets)
    engine = AopicEngine(store, clock=lambda: 1.0, link_memory=True, max_revisits=2)
    random_crawl(engine, random.Random(3), 250)
    settle_all(store)
    assert store.totals().virtual_visits > 0
    expected = books(store)
    store._journal.close()  # a crash: no snapshot, the journal alone
    store._lock.release()
    replayed = JournaledStore(tmp_path / "job", targets)
    assert replayed.replayed > 0
    assert books(replayed) == expected
    # ... and a clean close writes a snapshot that keeps it all.
    replayed.close()
    reopened = JournaledStore(tmp_path / "job", targets)
    assert reopened.replayed == 0
    assert books(reopened) == expected
    reopened.close()


def test_old_snapshot_without_links_still_loads():
    store = MemoryStore()
    engine = AopicEngine(store, clock=lambda: 1.0, link_memory=True)
    hub_crawl(engine)
    header, records = store.snapshot()
    old = [record[:10] for record in records]  # the format before link memory
    header.pop("virtual_visits")
    restored = MemoryStore.restore(header, old)
    assert remembered(restored) == {}
    assert restored.peek_crawled() is None
    assert restored.get("H").cash == store.get("H").cash


# -- switched off -----------------------------------------------------------------


class _NoLinkMemory(MemoryStore):
    supports_link_memory = False


def test_off_changes_nothing():
    runs = []
    for store in (MemoryStore(link_memory=True), _NoLinkMemory(link_memory=False)):
        engine = AopicEngine(store, clock=lambda: 1.0, link_memory=False)
        assert engine.link_memory is False
        random_crawl(engine, random.Random(11), 300)
        assert remembered(store) == {}
        assert store.peek_crawled() is None
        runs.append(sorted(store.iter_accounts()))
        assert store.totals().virtual_visits == 0
    assert runs[0] == runs[1]


def test_engine_without_capability_stays_off():
    engine = AopicEngine(_NoLinkMemory(link_memory=False), link_memory=True)
    assert engine.link_memory is False
    assert engine.upkeep().revisits == 0


def test_setting_reaches_the_engine():
    from tests.integration.test_scheduler import make_scheduler

    on, _ = make_scheduler()
    off, _ = make_scheduler({"AOPIC_LINK_MEMORY": False})
    assert on.frontier.engine.link_memory is True
    assert off.frontier.engine.link_memory is False
