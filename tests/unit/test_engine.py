"""The AOPIC engine on every store backend: conservation, lambda, greedy
selection, the history window and importance (SPEC 2)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from scrapy_aopic.engine import AopicEngine, lambda_split, windowed_history
from scrapy_aopic.store import ALIAS, CRAWLED, FAILED, PENDING, REFUSED, Link, MemoryStore

SEED_004 = {"A": ["B", "C"], "B": ["D", "E"], "C": ["E"], "E": ["B"], "D": []}


def link(url, host="h", depth=0, request=None):
    return Link(url, host, depth, request)


def crawl_once(engine, graph, order=None):
    """Visit pages greedily until nothing is pending; returns the visit order."""
    visited = []
    while True:
        lease = engine.next()
        if lease is None:
            return visited
        visited.append(lease.url)
        engine.visit(lease, [link(v, depth=lease.depth + 1) for v in graph[lease.url]])


def assert_balanced(engine):
    injected = engine.totals().injected
    assert engine.conservation_error() <= 1e-9 * max(injected, 1.0)


# -- the worked example of SPEC 2 (seed 004) ----------------------------------


def test_seed_004_conserves_cash_where_nutch_creates_it(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("A"))
    crawl_once(engine, SEED_004)
    totals = engine.totals()
    assert totals.injected == 1.0
    assert_balanced(engine)
    # Nutch ends with 3.75 of score from 1.0 injected and loses D's cash.
    accounts, lambda_cash, in_flight, injected = engine.ledger()
    assert math.isclose(accounts + lambda_cash + in_flight, 1.0, rel_tol=1e-12)
    assert totals.visits == 5


def test_seed_004_leaf_pays_everything_to_lambda(make_store, clock):
    store = make_store()
    engine = AopicEngine(store, clock=clock)
    engine.add_seed(link("D"))
    lease = engine.next()
    before = store.totals().lambda_cash
    result = engine.visit(lease, [])
    assert result.lambda_amount == 1.0 and result.links == 0
    assert store.totals().lambda_cash == pytest.approx(before + 1.0)
    assert_balanced(engine)


@pytest.mark.parametrize("cash, links", [(0.3, 7), (1.0, 9), (0.6, 10)])
def test_shares_that_sum_past_the_cash_by_rounding_leave_lambda_at_zero(make_store, clock, cash, links):
    # 0.3 / 7 added 7 times is 0.3 + 5.6e-17: the remainder lambda would
    # get is below zero by rounding. Found by the random-sequence test on
    # Redis, whose script refuses a negative total when it reads it back
    # (and a JOBDIR header would too): lambda keeps 0.
    store = make_store()
    engine = AopicEngine(store, clock=clock, lambda_tax=0.0)
    engine.add_seed(link("A"), cash=cash)
    lease = engine.next()
    engine.visit(lease, [link(f"L{i}", depth=1) for i in range(links)])
    assert store.totals().lambda_cash == 0.0
    engine.visit(engine.next(), [])  # the next operation reads the totals back
    assert store.totals().lambda_cash > 0
    assert_balanced(engine)


def stationary_with_lambda(graph):
    """PageRank of ``graph`` with the lambda page (OPIC's fixed point when
    lambda pays every page): each page links to its links and to lambda,
    each with 1/(m+1); a page without links gives all to lambda; lambda links
    to every page equally."""
    nodes = sorted(graph) + ["λ"]
    index = {u: i for i, u in enumerate(nodes)}
    n = len(nodes)
    transition = np.zeros((n, n))
    for u, links in graph.items():
        targets = [index[v] for v in links] + [index["λ"]]
        for t in targets:
            transition[index[u], t] += 1.0 / len(targets)
    for u in graph:
        transition[index["λ"], index[u]] = 1.0 / len(graph)
    pi = np.full(n, 1.0 / n)
    for _ in range(10_000):
        nxt = pi @ transition
        if np.abs(nxt - pi).sum() < 1e-15:
            break
        pi = nxt
    return {u: pi[index[u]] for u in nodes}


def revisit_forever(engine, graph, visits, clock=None):
    """A continuous crawl: every visited page goes straight back to the
    frontier (all pages always pending), ``visits`` fetches in all."""
    for _ in range(visits):
        if clock is not None:
            clock.now += 1
        lease = engine.next()
        engine.visit(lease, [link(v, depth=lease.depth + 1) for v in graph[lease.url]])
        engine.store.repend(link(lease.url))


def test_seed_004_importance_converges_to_pagerank_with_lambda(make_store, clock):
    engine = AopicEngine(make_store("all"), clock=clock)
    engine.add_seed(link("A"))
    revisit_forever(engine, SEED_004, 3000 if make_store.backend == "memory" else 1000, clock)
    truth = stationary_with_lambda(SEED_004)
    estimate = {u: engine.importance(u) for u in SEED_004}
    for u in SEED_004:
        assert estimate[u] == pytest.approx(truth[u], abs=0.01), u
    ranking = [p.url for p in engine.ranking()]
    assert ranking == sorted(SEED_004, key=lambda u: -truth[u])
    assert_balanced(engine)


# -- the formulas ----------------------------------------------------------------


def test_lambda_split_default_is_one_more_link():
    assert lambda_split(1.0, 3, None) == pytest.approx((0.25, 0.25))
    assert lambda_split(1.0, 0, None) == (1.0, 0.0)


def test_lambda_split_fixed_tax():
    to_lambda, share = lambda_split(2.0, 4, 0.1)
    assert to_lambda == pytest.approx(0.2)
    assert share == pytest.approx(0.45)
    assert lambda_split(2.0, 0, 0.1) == (2.0, 0.0)


@given(st.floats(0, 1e6), st.integers(0, 10_000), st.one_of(st.none(), st.floats(0, 1)))
def test_lambda_split_conserves(cash, links, tax):
    to_lambda, share = lambda_split(cash, links, tax)
    assert to_lambda >= -1e-9 * max(cash, 1)
    assert math.isclose(to_lambda + share * links, cash, rel_tol=1e-12, abs_tol=1e-12)


def test_window_formulas():
    # Plain OPIC and first visits add the cash.
    assert windowed_history(2.0, None, 1.0, 10.0, 5.0) == 3.0
    assert windowed_history(2.0, 0.0, 1.0, 10.0, None) == 3.0
    # T < S: only the part of c that accrued inside the window.
    assert windowed_history(2.0, 0.0, 1.0, 10.0, 5.0) == pytest.approx(1.0 * 5 / 10)
    # S <= T: old history scaled by the part of the window left, plus c.
    assert windowed_history(2.0, 6.0, 1.0, 10.0, 5.0) == pytest.approx(2.0 * (5 - 4) / 5 + 1.0)
    assert windowed_history(2.0, 10.0, 1.0, 10.0, 5.0) == pytest.approx(3.0)


def test_engine_applies_the_window(make_store, clock):
    engine = AopicEngine(make_store(), history_window=10.0, clock=clock)
    engine.add_seed(link("A"))
    lease = engine.next()
    engine.visit(lease, [link("B")])  # first visit: H = 1
    assert engine.store.get("A").history == pytest.approx(1.0)
    engine.store.repend(link("A"))
    engine.store.inject(link("Z"), 0.0)
    clock.now = 4.0
    # Give A cash through a visit of B, then revisit A at t=4 (S=4 <= T=10).
    lease_b = engine.next()
    assert lease_b.url == "B"
    engine.visit(lease_b, [link("A")])
    lease_a = engine.next()
    assert lease_a.url == "A"
    engine.visit(lease_a, [])
    assert engine.store.get("A").history == pytest.approx(1.0 * 6 / 10 + lease_a.cash)


def test_invalid_parameters_are_refused():
    with pytest.raises(ValueError, match="AOPIC_LAMBDA_TAX"):
        AopicEngine(MemoryStore(), lambda_tax=1.5)
    with pytest.raises(ValueError, match="AOPIC_HISTORY_WINDOW"):
        AopicEngine(MemoryStore(), history_window=0)
    with pytest.raises(ValueError, match="AOPIC_LAMBDA_TARGETS"):
        MemoryStore("everyone")


# -- lambda ------------------------------------------------------------------------


def test_lambda_is_visited_when_richest(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("A"))
    engine.add_seed(link("B"), cash=0.1)
    engine.visit(engine.next(), [])  # A pays 1.0 to lambda
    assert engine.totals().lambda_cash == pytest.approx(1.0)
    lease = engine.next()  # lambda (1.0) >= B (0.1): lambda pays B first
    assert engine.totals().lambda_cash == 0
    assert engine.totals().lambda_visits == 1
    assert lease.url == "B" and lease.cash == pytest.approx(1.1)
    assert_balanced(engine)


def test_lambda_targets_all_pays_crawled_pages(make_store, clock):
    engine = AopicEngine(make_store("all"), clock=clock)
    engine.add_seed(link("A"))
    engine.add_seed(link("B"))
    engine.visit(engine.next(), [])
    engine.store.visit_lambda()
    # Two known pages (one crawled, one pending) share lambda's 1.0.
    assert engine.store.get("A").cash == pytest.approx(0.5)
    assert engine.store.get("B").cash == pytest.approx(1.5)
    assert_balanced(engine)


def test_lambda_payout_does_not_touch_accounts():
    """A payout is O(1): it only moves the dividend; accounts settle later."""
    store = MemoryStore("pending")
    engine = AopicEngine(store)
    for i in range(10_000):
        engine.add_seed(link(f"u{i}", host=f"h{i % 50}"), cash=1.0 + i * 1e-6)
    engine.visit(engine.next(), [])
    raw_before = {u: acc.cash for u, acc in store._accounts.items()}
    assert store.visit_lambda() > 0
    raw_after = {u: acc.cash for u, acc in store._accounts.items()}
    assert raw_before == raw_after  # nothing written per account...
    # ...yet every pending account is owed its share.
    share = 1.0 + 9_999 * 1e-6
    assert store.get("u0").cash == pytest.approx(1.0 + share / 9_999)
    assert_balanced(engine)


def _trap_share_of_payout(targets: str, minted: int) -> float:
    """A normal page and a trap page, 1.0 each; the normal one links to 2
    new pages, the trap to ``minted`` new ones; lambda then pays what both
    visits gave it. Returns the share of that payout the trap URLs got."""
    store = MemoryStore(targets)
    engine = AopicEngine(store)
    engine.add_seed(link("normal", host="site"))
    engine.add_seed(link("trap", host="site"))
    engine.visit(store.take("normal"), [link(f"n{i}", host="site") for i in range(2)])
    engine.visit(store.take("trap"), [link(f"t{i}", host="site") for i in range(minted)])
    trap_urls = [f"t{i}" for i in range(minted)]
    before = math.fsum(store.get(u).cash for u in trap_urls)
    paid = store.visit_lambda()
    assert paid == pytest.approx(1 / 3 + 1 / (minted + 1))
    assert_balanced(engine)
    return (math.fsum(store.get(u).cash for u in trap_urls) - before) / paid


def test_lambda_by_cash_does_not_feed_traps_by_url_count():
    """Issue 16: with "pending" each pending URL gets the same dividend, so
    a trap minting N URLs per fetch draws N/(N+2) of the payout (0.83 for
    10, 0.998 for 1,000). With "pending-cash" the trap's share is what its
    URLs hold, i.e. what the trap page passed on: at most 0.6 whatever N."""
    shares = {n: _trap_share_of_payout("pending-cash", n) for n in (10, 100, 1_000)}
    for minted, share in shares.items():
        held = minted / (minted + 1)  # what the trap page passed to its links
        assert share == pytest.approx(held / (held + 2 / 3)), minted
        assert share < 0.61, minted
    assert shares[1_000] - shares[10] < 0.06
    # The old rule, measured the same way: the share follows N.
    assert _trap_share_of_payout("pending", 1_000) == pytest.approx(1_000 / 1_002)


def test_lambda_by_cash_pays_in_proportion_and_keeps_the_order():
    store = MemoryStore("pending-cash")
    engine = AopicEngine(store)
    for url, cash in [("a", 1.0), ("b", 3.0), ("c", 0.5), ("d", 2.0)]:
        engine.add_seed(link(url, host=url), cash=cash)
    engine.visit(store.take("a"), [])  # 1.0 to lambda
    raw_before = {u: acc.cash for u, acc in store._accounts.items()}
    assert store.visit_lambda() == pytest.approx(1.0)
    # O(1): no account written; each is owed cash * (1 + 1.0 / 5.5).
    assert {u: acc.cash for u, acc in store._accounts.items()} == raw_before
    for url, cash in [("b", 3.0), ("c", 0.5), ("d", 2.0)]:
        assert store.get(url).cash == pytest.approx(cash * (1 + 1.0 / 5.5))
    assert_balanced(engine)
    # Credits after the payout add at face value, and the order follows cash.
    engine.visit(store.take("c"), [link("d", host="d")])
    assert store.get("d").cash == pytest.approx(2.0 * (1 + 1 / 5.5) + 0.5 * (1 + 1 / 5.5) / 2)
    assert [store.pop(lambda h: True).url for _ in range(2)] == ["b", "d"]
    assert_balanced(engine)


def test_lambda_by_cash_keeps_its_cash_when_no_pending_url_holds_any():
    store = MemoryStore("pending-cash")
    engine = AopicEngine(store)
    engine.add_seed(link("a"))
    engine.discover(link("b"))  # known, no cash
    engine.visit(store.take("a"), [])
    assert store.visit_lambda() == 0.0
    assert store.totals().lambda_cash == pytest.approx(1.0)
    assert store.get("b").cash == 0.0
    assert_balanced(engine)


def test_lambda_by_cash_rebases_its_scale():
    """The scale restarts at 1 past 1e12 (an O(n) pass): cash and order
    are kept, and new credits stay far from float underflow."""
    store = MemoryStore("pending-cash")
    engine = AopicEngine(store)
    engine.add_seed(link("rich", host="x"), cash=1e-9)
    engine.add_seed(link("poor", host="y"), cash=1e-10)
    scales = []
    for i in range(3):
        engine.add_seed(link(f"s{i}", host="z"), cash=1e3)
        engine.visit(store.take(f"s{i}"), [])
        store.visit_lambda()  # each adds about 9e11 to the scale
        scales.append(store._dividend)
    assert scales[0] > 9e11 and scales[1] < scales[0]  # rebased at the second
    assert_balanced(engine)
    assert store.get("rich").cash / store.get("poor").cash == pytest.approx(10.0)
    assert store.pop(lambda h: True).url == "rich"


# -- greedy selection --------------------------------------------------------------


def test_richest_first_and_fifo_on_ties(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    for url, cash in [("a", 1.0), ("b", 3.0), ("c", 1.0), ("d", 2.0), ("e", 1.0)]:
        engine.add_seed(link(url, host=url), cash=cash)
    order = [engine.next().url for _ in range(5)]
    assert order == ["b", "d", "a", "c", "e"]


def test_increase_key_reorders(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("hub"), cash=1.0)
    engine.add_seed(link("x"), cash=0.3)
    engine.add_seed(link("y"), cash=0.2)
    lease = engine.next()
    engine.visit(lease, [link("y"), link("z")])  # y gets 1/3 -> 0.533
    assert engine.next().url == "y"


def test_busy_hosts_do_not_block_others(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    for i in range(100):
        engine.add_seed(link(f"big/{i}", host="big"), cash=10.0)
    engine.add_seed(link("small/0", host="small"), cash=0.1)
    lease = engine.next(ready=lambda host: host != "big")
    assert lease.url == "small/0"
    assert engine.next().host == "big"
    assert engine.next(ready=lambda host: False) is None
    assert_balanced(engine)


# -- settling ------------------------------------------------------------------------


def test_failure_refusal_and_stale_leases(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("a"))
    engine.add_seed(link("b"))
    lease = engine.next()
    assert engine.fail(lease)
    assert not engine.fail(lease)  # settled once
    assert engine.visit(lease, [link("x")]) is None
    assert engine.store.get(lease.url).state == FAILED
    lease_b = engine.next()
    assert engine.fail(lease_b, refuse=True)
    assert engine.store.get("b").state == REFUSED
    # Cash sent to refused or failed pages goes to lambda.
    engine.add_seed(link("c"))
    before = engine.totals().lambda_cash
    lease_c = engine.next()
    engine.visit(lease_c, [link("a"), link("b")])
    assert engine.totals().lambda_cash == pytest.approx(before + 1.0)
    assert_balanced(engine)


def test_transfer_makes_an_alias(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("short"))
    engine.add_seed(link("other"), cash=0.5)
    lease = engine.next()
    assert engine.transfer(lease, link("long"))
    assert engine.store.get("short").state == ALIAS
    assert engine.store.get("short").target == "long"
    assert engine.store.get("long").cash == pytest.approx(1.0)
    # Later credit to the alias reaches the target.
    lease_long = engine.next()
    assert lease_long.url == "long"
    engine.visit(lease_long, [])
    lease_other = engine.next()
    engine.visit(lease_other, [link("short")])
    # other got lambda's 1.0 before its visit; half of it reaches "long".
    assert lease_other.cash == pytest.approx(1.5)
    assert engine.store.get("long").cash == pytest.approx(lease_other.cash / 2)
    assert engine.store.get("long").state == CRAWLED
    assert_balanced(engine)


def test_transfer_to_itself_requeues_with_the_new_request(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("a", request={"url": "a", "meta": {"retry_times": 0}}))
    lease = engine.next()
    assert engine.transfer(lease, link("a", request={"url": "a", "meta": {"retry_times": 1}}))
    again = engine.next()
    assert again.url == "a" and again.cash == pytest.approx(1.0)
    assert again.request["meta"]["retry_times"] == 1


def test_alias_loops_send_cash_to_lambda(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("a"))
    engine.transfer(engine.next(), link("b"))
    engine.transfer(engine.next(), link("a"))  # b -> a -> b ...
    assert engine.totals().pending == 0
    assert engine.totals().lambda_cash == pytest.approx(1.0)
    assert_balanced(engine)


def test_known_seed_brings_no_cash(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    assert engine.add_seed(link("a"))
    assert not engine.add_seed(link("a"))
    assert engine.totals().injected == 1.0


def test_requeue_returns_cash(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("a"))
    lease = engine.next()
    assert engine.totals().in_flight == pytest.approx(1.0)
    assert engine.requeue(lease)
    assert engine.totals().in_flight == 0
    assert engine.store.get("a").state == PENDING
    assert engine.next().cash == pytest.approx(1.0)


# -- property-based: any sequence keeps the books and the order ----------------------

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["visit", "visit", "visit", "fail", "redirect", "requeue",
                         "lambda", "seed", "refuse", "repend", "pop_busy"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=60,
)


def _effective_pending(store):
    return {v.url: v.cash for v in store.iter_accounts() if v.state == PENDING}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    graph_seed=st.integers(0, 2**32 - 1),
    events=EVENTS,
    targets=st.sampled_from(["pending", "all", "pending-cash"]),
    tax=st.sampled_from([None, 0.0, 0.15, 1.0]),
    horizon=st.sampled_from([0.0, 0.0, 2.0]),  # AOPIC_PRIORITY_HORIZON: same books, another order
)
def test_random_event_sequences_keep_the_books(make_store, graph_seed, events, targets, tax, horizon):
    assume(targets != "pending-cash" or make_store.backend == "memory")  # memory only
    assume(not horizon or make_store.backend == "memory")
    rng = random.Random(graph_seed)
    nodes = [f"u{i}" for i in range(25)]
    graph = {u: rng.sample(nodes, rng.randint(0, 6)) for u in nodes}
    engine = AopicEngine(make_store(targets), lambda_tax=tax, clock=lambda: 0.0, priority_horizon=horizon)
    store = engine.store
    engine.add_seed(link("u0", host="h0"))
    leases = []
    for kind, arg in events:
        if kind == "seed":
            engine.add_seed(link(nodes[arg % 25], host=f"h{arg % 3}"), cash=1 + arg % 5)
        elif kind == "lambda":
            store.visit_lambda()
        elif kind == "pop_busy":
            busy = f"h{arg % 3}"
            pending = _effective_pending(store)
            lease = store.pop(lambda h: h != busy)
            if lease is not None:
                assert lease.host != busy
                leases.append(lease)
        elif kind == "repend":
            store.repend(link(nodes[arg % 25], host=f"h{arg % 3}"))
        elif kind == "refuse":
            store.refuse(nodes[arg % 25], f"h{arg % 3}", 0)
        elif leases:
            lease = leases.pop(arg % len(leases))
            if kind == "visit":
                engine.visit(lease, [link(v, host=f"h{int(v[1:]) % 3}") for v in graph[lease.url]])
            elif kind == "fail":
                engine.fail(lease)
            elif kind == "redirect":
                engine.transfer(lease, link(nodes[arg % 25], host=f"h{arg % 3}"))
            else:
                engine.requeue(lease)
        # Greedy: a plain pop hands out the richest pending URL (with a
        # horizon: the first by priority, which the budget rule's rank agrees with).
        if kind in ("visit", "seed") and arg % 2:
            pending = _effective_pending(store)
            engine.visit_lambda_if_due()
            pending = _effective_pending(store)
            first = store.order_at_rank(1) if horizon else None
            lease = store.pop(lambda h: True)
            if pending:
                assert lease is not None
                if horizon:
                    assert lease.order == first
                else:
                    assert lease.cash >= max(pending.values()) - 1e-9
                leases.append(lease)
        assert_balanced(engine)
    for lease in leases:
        engine.requeue(lease)
    assert engine.totals().in_flight == pytest.approx(0, abs=1e-12)
    assert_balanced(engine)


# -- convergence on a scale-free graph ------------------------------------------------


def scale_free_graph(n, m, seed):
    """Directed preferential attachment: each new page links to ``m`` pages
    picked in proportion to their in-degree (+1); a few old pages link back."""
    rng = random.Random(seed)
    graph = {0: []}
    weights = [0]
    for u in range(1, n):
        targets = set()
        while len(targets) < min(m, u):
            targets.add(rng.choice(weights) if rng.random() < 0.8 else rng.randrange(u))
        graph[u] = sorted(targets)
        weights.extend(targets)
        weights.append(u)
        if rng.random() < 0.3:
            graph[rng.randrange(u)].append(u)
    return {f"p{u}": [f"p{v}" for v in links] for u, links in graph.items()}


def test_importance_converges_on_scale_free_graph():
    """Kendall tau of importance vs the PageRank of the graph with lambda
    rises with visits and ends high.

    Measured on this graph: tau 0.97 after 10 visits per page, 0.99 after 60;
    ranking pages by in-degree gives 0.84 and a random order 0.0. The test
    asks for > 0.97 after 60 visits per page and a clear margin over the
    in-degree ranking, so a mis-ordering of the hubs fails it."""
    graph = scale_free_graph(300, 3, seed=7)
    truth = stationary_with_lambda(graph)
    pages = sorted(graph)
    true_ranks = [truth[u] for u in pages]
    engine = AopicEngine(MemoryStore("all"))
    engine.add_seed(link("p0"))
    for u in pages[1:]:
        engine.add_seed(link(u), cash=0.0)  # every page known: "all" pays them

    taus = []
    for visits_per_page in (1, 4, 55):
        revisit_forever(engine, graph, visits_per_page * len(pages))
        estimate = [engine.importance(u) for u in pages]
        taus.append(kendalltau(estimate, true_ranks).statistic)
    in_degree = {u: 0 for u in pages}
    for links in graph.values():
        for v in links:
            in_degree[v] += 1
    baseline = kendalltau([in_degree[u] for u in pages], true_ranks).statistic
    assert taus[0] < taus[1] < taus[2], taus
    assert taus[-1] > 0.97, taus
    assert taus[-1] > baseline + 0.1, (taus, baseline)
    assert_balanced(engine)


def test_min_share_waits_for_a_busy_host_instead_of_fetching_junk(make_store, clock):
    engine = AopicEngine(make_store(), clock=clock)
    engine.add_seed(link("good/1", host="good"), cash=1.0)
    engine.add_seed(link("good/2", host="good"), cash=0.8)
    engine.add_seed(link("farm/1", host="farm"), cash=0.01)
    busy = lambda host: host != "good"  # noqa: E731
    assert engine.store.pop(busy, min_share=0.05) is None  # 0.01 < 5 % of 1.0
    assert engine.store.pop(busy, min_share=0.005).url == "farm/1"
    assert engine.store.pop(lambda host: True, min_share=0.05).url == "good/1"
    assert_balanced(engine)
