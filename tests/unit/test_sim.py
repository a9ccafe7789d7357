"""The policy simulator: PageRank, policies, metrics, graph readers."""

from __future__ import annotations

import json
from collections import deque

import numpy as np
import pytest

from scrapy_aopic.sim.graph import FARM, TRAP, Graph
from scrapy_aopic.sim.pagerank import pagerank
from scrapy_aopic.sim.policies import (
    BacklinkCount,
    BatchPageRank,
    BreadthFirst,
    DepthFirst,
    EnginePolicy,
    EngineWithRevisits,
    LargerSiteFirst,
    Omniscient,
    RandomOrder,
)
from scrapy_aopic.sim.recorded import graph_from_records, read_recorded_graph, write_recorded_graph
from scrapy_aopic.sim.runner import (
    budget_of,
    captured,
    compare,
    default_policies,
    ideal,
    importance_accuracy,
    simulate,
    value_at,
)
from scrapy_aopic.sim.synthetic import scale_free_web

SEED_004 = {"A": ["B", "C"], "B": ["D", "E"], "C": ["E"], "E": ["B"], "D": []}


def all_policies(true_rank):
    return [
        BreadthFirst(),
        DepthFirst(),
        RandomOrder(),
        BacklinkCount(),
        BatchPageRank(30),
        BatchPageRank(30, partial=True),
        LargerSiteFirst(),
        EnginePolicy(),
        EnginePolicy(lambda_targets="all", lambda_tax=0.2),
        EnginePolicy(history_window=3.0),
        EngineWithRevisits(),
        Omniscient(true_rank),
    ]


@pytest.fixture(scope="module")
def small_web():
    return scale_free_web(3_000, seed=7, pages_per_trap=200, pages_per_farm=30, n_seeds=3)


# -- PageRank -------------------------------------------------------------------


def test_pagerank_matches_hand_computation():
    # A -> B, B -> A, C -> A; C has no in-links. With d = 0.85 and n = 3:
    # p_C = 0.05, p_A = 0.05 + 0.85 (p_B + p_C), p_B = 0.05 + 0.85 p_A.
    graph = Graph.from_adjacency({"A": ["B"], "B": ["A"], "C": ["A"]}, ["A"])
    rank = dict(zip(graph.urls, pagerank(graph)))
    p_c = 0.05
    p_a = (0.05 + 0.85 * 0.05 + 0.85 * p_c) / (1 - 0.85**2)
    p_b = 0.05 + 0.85 * p_a
    assert rank["C"] == pytest.approx(p_c, abs=1e-12)
    assert rank["A"] == pytest.approx(p_a, abs=1e-12)
    assert rank["B"] == pytest.approx(p_b, abs=1e-12)
    assert sum(rank.values()) == pytest.approx(1.0, abs=1e-12)


def test_pagerank_spreads_dangling_mass_uniformly():
    # A -> B and B dangling (B's rank is shared by both pages):
    # p_A = (1-d)/2 + d * p_B/2 ; p_B = (1-d)/2 + d * (p_A + p_B/2)
    graph = Graph.from_adjacency({"A": ["B"], "B": []}, ["A"])
    d = 0.85
    m = np.array([[1, -d / 2], [-d, 1 - d / 2]])
    expected = np.linalg.solve(m, [(1 - d) / 2, (1 - d) / 2])
    assert pagerank(graph) == pytest.approx(expected, abs=1e-12)


def test_pagerank_agrees_with_networkx(small_web):
    nx = pytest.importorskip("networkx")
    g = nx.DiGraph()
    g.add_nodes_from(range(small_web.n))
    for u in range(small_web.n):
        g.add_edges_from((u, v) for v in small_web.out(u).tolist())
    expected = nx.pagerank(g, alpha=0.85, tol=1e-13, max_iter=1000)
    ours = pagerank(small_web)
    assert np.abs(ours - np.array([expected[i] for i in range(small_web.n)])).max() < 1e-9


# -- policies -------------------------------------------------------------------


@pytest.mark.parametrize("index", range(12))
def test_every_policy_fetches_every_reachable_page_once(small_web, index):
    true_rank = pagerank(small_web)
    policy = all_policies(true_rank)[index]
    run = simulate(small_web, policy, small_web.n + 10)
    reachable = set(np.flatnonzero(small_web.reachable()).tolist())
    assert len(run.order) == len(reachable), policy.name
    assert len(set(run.order.tolist())) == len(run.order), policy.name
    assert set(run.order.tolist()) == reachable, policy.name


def test_breadth_first_order_is_bfs():
    graph = Graph.from_adjacency(
        {"s": ["a", "b"], "a": ["c", "d"], "b": ["d", "e"], "c": ["f"], "d": [], "e": ["a", "g"]},
        ["s"],
    )
    run = simulate(graph, BreadthFirst(), 100)
    assert [graph.urls[u] for u in run.order] == ["s", "a", "b", "c", "d", "e", "f", "g"]
    # And on a bigger graph: hop distance never decreases along the order.
    web = scale_free_web(2_000, seed=3, trap_share=0, farm_share=0, n_seeds=2)
    order = simulate(web, BreadthFirst(), web.n).order
    dist = web.bfs_distance()[order]
    assert (np.diff(dist) >= 0).all()
    # ...and equals a plain FIFO traversal.
    seen, queue, expected = set(web.seeds.tolist()), deque(web.seeds.tolist()), []
    while queue:
        u = queue.popleft()
        expected.append(u)
        for v in web.out(u).tolist():
            if v not in seen:
                seen.add(v)
                queue.append(v)
    assert order.tolist() == expected


def test_depth_first_fetches_the_last_link_first():
    graph = Graph.from_adjacency({"s": ["a", "b"], "a": ["c"], "b": ["d"]}, ["s"])
    run = simulate(graph, DepthFirst(), 10)
    assert [graph.urls[u] for u in run.order] == ["s", "b", "d", "a", "c"]


def test_larger_site_first_prefers_the_site_with_most_pending_pages():
    adjacency = {"s": ["x1", "y1", "y2", "y3"], "y1": [], "y2": [], "y3": [], "x1": []}
    hosts = {"s": "s", "x1": "x", "y1": "y", "y2": "y", "y3": "y"}
    graph = Graph.from_adjacency(adjacency, ["s"], hosts=hosts)
    run = simulate(graph, LargerSiteFirst(), 10)
    # y has 3 pending pages, x one; once they are level, the site seen first wins.
    assert [graph.urls[u] for u in run.order] == ["s", "y1", "y2", "x1", "y3"]


def test_backlink_count_prefers_most_linked_page():
    adjacency = {"s": ["a", "b", "c"], "a": ["c", "d"], "b": ["c"], "c": [], "d": []}
    graph = Graph.from_adjacency(adjacency, ["s"])
    order = [graph.urls[u] for u in simulate(graph, BacklinkCount(), 10).order]
    # After s: a, b, c have 1 in-link each (a first, discovered first); after a,
    # c has 2; after c, b and d have 1 (b discovered first).
    assert order == ["s", "a", "c", "b", "d"]


def test_omniscient_is_greedy_on_true_pagerank(small_web):
    true_rank = pagerank(small_web)
    order = simulate(small_web, Omniscient(true_rank), 600).order.tolist()
    known, fetched = set(small_web.seeds.tolist()), set()
    for u in order:
        # The page fetched has the highest true PageRank among known pages.
        assert true_rank[u] == max(true_rank[v] for v in known)
        known.discard(u)
        fetched.add(u)
        known.update(v for v in small_web.out(u).tolist() if v not in fetched)


def test_omniscient_is_not_a_ceiling_at_every_budget():
    # s links to a page A of middling rank and to a hub H of low rank; only H
    # leads to X, whose rank comes from many pages nobody can reach. With 3
    # fetches, s, H, X beats the greedy s, A, H. The ideal sort is the only
    # ceiling at every budget; omniscient is the best *greedy* order.
    adjacency = {"s": ["A", "H"], "H": ["X"], "A": []}
    adjacency.update({f"y{i}": ["X"] for i in range(30)})
    adjacency.update({f"z{i}": ["A"] for i in range(10)})
    graph = Graph.from_adjacency(adjacency, ["s"])
    true_rank = pagerank(graph)
    omniscient = captured(true_rank, simulate(graph, Omniscient(true_rank), 3).order)
    hub_first = captured(true_rank, np.array([graph.urls.index(u) for u in ("s", "H", "X")]))
    assert hub_first[2] > omniscient[2]
    # ...and the ideal sort bounds both at every budget.
    top = ideal(true_rank, 3)
    assert (top >= omniscient - 1e-15).all() and (top >= hub_first - 1e-15).all()


def test_omniscient_follows_true_rank_when_everything_is_known_from_the_start():
    # The seed links to every page: after the seed, the greedy order is the
    # ideal sort of the other pages.
    web = scale_free_web(1_000, seed=5, trap_share=0, farm_share=0, n_seeds=1)
    seed = int(web.seeds[0])
    star = Graph.from_edges(
        web.n,
        np.concatenate([np.full(web.n, seed), np.repeat(np.arange(web.n), web.out_degree())]),
        np.concatenate([np.arange(web.n), web.indices]),
        host=web.host,
        host_names=web.host_names,
        seeds=[seed],
    )
    true_rank = pagerank(star)
    order = simulate(star, Omniscient(true_rank), star.n).order
    assert order[0] == seed and len(order) == star.n
    others = np.delete(true_rank, seed)
    assert np.array_equal(true_rank[order[1:]], np.sort(others)[::-1])


def test_ideal_sort_bounds_every_policy_at_every_budget(small_web):
    true_rank = pagerank(small_web)
    top = ideal(true_rank, small_web.n)
    for policy in all_policies(true_rank):
        curve = captured(true_rank, simulate(small_web, policy, small_web.n).order)
        assert (curve <= top[: len(curve)] + 1e-12).all(), policy.name


def test_omniscient_beats_breadth_first_and_opic_early(small_web):
    # Not a theorem (see the test above), but the reason the omniscient order
    # is drawn as the practical ceiling: on a web graph it leads early on.
    true_rank = pagerank(small_web)
    budget = budget_of(small_web.n, 0.05)
    best = captured(true_rank, simulate(small_web, Omniscient(true_rank), budget).order)[-1]
    for policy in (BreadthFirst(), EnginePolicy(), DepthFirst(), RandomOrder()):
        got = captured(true_rank, simulate(small_web, policy, budget).order)[-1]
        assert best > got, policy.name


# -- the engine under the simulator ----------------------------------------------------


def test_seed_004_graph_under_opic_conserves_cash():
    graph = Graph.from_adjacency(SEED_004, ["A"])
    policy = EnginePolicy()
    run = simulate(graph, policy, 10)
    assert sorted(graph.urls[u] for u in run.order) == ["A", "B", "C", "D", "E"]
    engine = policy.engine
    assert engine.conservation_error() < 1e-9
    totals = engine.totals()
    assert totals.injected == pytest.approx(1.0)
    # D has no out-links: its cash went to lambda, not lost.
    accounts, lambda_cash, in_flight, injected = engine.ledger()
    assert accounts + lambda_cash + in_flight == pytest.approx(1.0, abs=1e-12)
    assert totals.visits == 5


def test_engine_policy_uses_the_virtual_clock():
    graph = Graph.from_adjacency(SEED_004, ["A"])
    policy = EnginePolicy(history_window=2.0)
    simulate(graph, policy, 10)
    last = {v.url: v.last_visit for v in policy.store.iter_accounts()}
    # One clock tick per fetch: the five pages were visited at 1..5.
    assert sorted(last.values()) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_engine_with_revisits_conserves_cash_and_revisits(small_web):
    policy = EngineWithRevisits()
    simulate(small_web, policy, budget_of(small_web.n, 0.5))
    assert policy.revisits > 0
    assert policy.engine.conservation_error() < 1e-9


def test_importance_accuracy_metrics():
    true_rank = np.array([0.4, 0.3, 0.2, 0.1])
    perfect = importance_accuracy(np.arange(4), true_rank * 2, true_rank, top=2)
    assert perfect["kendall_tau"] == pytest.approx(1.0)
    assert perfect["top_overlap"] == 1.0
    reversed_ = importance_accuracy(np.arange(4), -true_rank, true_rank, top=2)
    assert reversed_["kendall_tau"] == pytest.approx(-1.0)
    assert reversed_["top_overlap"] == 0.0


def test_compare_table_reports_traps_and_accuracy(small_web):
    true_rank = pagerank(small_web)
    comparison = compare(small_web, [BreadthFirst(), DepthFirst(), EnginePolicy()], true_rank=true_rank)
    rows = {row["policy"]: row for row in comparison.table()}
    assert rows["ideal sort (unreachable ok)"]["ratio"] == [1.0] * 5
    for name in ("breadth-first", "depth-first", "opic pending"):
        captured_values = rows[name]["captured"]
        assert captured_values == sorted(captured_values)  # more fetches, more PageRank
        assert all(0 <= r <= 1 + 1e-12 for r in rows[name]["ratio"])
        assert len(rows[name]["trap_share"]) == 5
    # Depth-first dives into whatever it meets last; the trap share is what it is,
    # but it is a share.
    assert all(0 <= x <= 1 for x in rows["depth-first"]["trap_share"])
    engine_run = next(r for r in comparison.runs if r.policy == "opic pending")
    assert [a["fetched"] for a in engine_run.accuracy] == comparison.budgets()


def test_trap_share_counts_trap_fetches():
    graph = Graph.from_adjacency({"s": ["t1", "n1"], "t1": ["t2"], "t2": [], "n1": []}, ["s"])
    graph.labels = np.array([0 if not u.startswith("t") else TRAP for u in graph.urls], dtype=np.int8)
    comparison = compare(graph, [DepthFirst()], fractions=(0.5, 1.0), accuracy=False)
    row = comparison.table()[1]
    # s, n1 (last link first) in the first two fetches; then t1, t2.
    assert row["trap_share"] == [0.0, 0.5]
    assert row["farm_share"] == [0.0, 0.0]


# -- graphs ----------------------------------------------------------------------


def test_synthetic_graph_is_reproducible_and_labelled():
    a = scale_free_web(5_000, seed=11, pages_per_trap=200)
    b = scale_free_web(5_000, seed=11, pages_per_trap=200)
    c = scale_free_web(5_000, seed=12, pages_per_trap=200)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    assert (a.labels == TRAP).sum() > 0 and (a.labels == FARM).sum() > 0
    # Distinct links, no self-links.
    for u in range(0, a.n, 97):
        links = a.out(u).tolist()
        assert u not in links and len(links) == len(set(links))
    # Scale-free: the most linked page has far more in-links than the median.
    indeg = a.in_degree()
    assert indeg.max() > 50 * max(1, np.median(indeg))


def test_graph_save_load_roundtrip(tmp_path, small_web):
    path = small_web.save(tmp_path / "g.npz")
    loaded = Graph.load(path)
    assert np.array_equal(loaded.indptr, small_web.indptr)
    assert np.array_equal(loaded.indices, small_web.indices)
    assert np.array_equal(loaded.labels, small_web.labels)
    assert loaded.host_names == small_web.host_names
    assert loaded.name == small_web.name


def test_recorded_graph_roundtrip(tmp_path):
    graph = Graph.from_adjacency(
        {
            "https://a.example/": ["https://a.example/x", "https://b.example/"],
            "https://a.example/x": ["https://a.example/"],
            "https://b.example/": ["https://b.example/never-visited"],
        },
        ["https://a.example/"],
        hosts={"https://a.example/": "a.example", "https://a.example/x": "a.example",
               "https://b.example/": "b.example", "https://b.example/never-visited": "b.example"},
    )
    for suffix in ("graph.jsonl", "graph.jsonl.gz"):
        path = write_recorded_graph(graph, tmp_path / suffix)
        back = read_recorded_graph(path)
        assert back.urls == graph.urls
        assert [back.out(u).tolist() for u in range(back.n)] == [graph.out(u).tolist() for u in range(graph.n)]
        assert [back.host_names[h] for h in back.host] == [graph.host_names[h] for h in graph.host]
        assert back.seeds.tolist() == [0]
        assert np.allclose(pagerank(back), pagerank(graph))


def test_recorded_reader_accepts_the_exporter_format(tmp_path):
    # Exactly what AOPIC_EXPORT_GRAPH writes: url, links, host; no depth.
    lines = [
        {"url": "https://s.example/", "links": ["https://s.example/a", "https://s.example/b"], "host": "s.example"},
        {"url": "https://s.example/a", "links": ["https://s.example/b", "https://s.example/a"], "host": "s.example"},
        {"url": "https://t.example/", "links": [], "host": "t.example"},  # a second start URL
    ]
    path = tmp_path / "crawl.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    graph = read_recorded_graph(path)
    assert graph.urls == ["https://s.example/", "https://s.example/a", "https://t.example/", "https://s.example/b"]
    assert sorted(graph.urls[s] for s in graph.seeds) == ["https://s.example/", "https://t.example/"]
    assert graph.out(1).tolist() == [3]  # the self-link is dropped
    dropped = read_recorded_graph(path, unvisited="drop")
    assert dropped.n == 3
    run = simulate(graph, EnginePolicy(), 10)
    assert len(run.order) == 4


def test_recorded_reader_rejects_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"url": "https://x/", "links": "nope"}\n')
    with pytest.raises(ValueError, match="links"):
        read_recorded_graph(path)
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        read_recorded_graph(path)
    with pytest.raises(ValueError, match="no pages"):
        graph_from_records([])


def test_docgraph_builder_resolves_links_stubs_and_directories(tmp_path):
    from scrapy_aopic.sim.docgraph import build_docgraph

    root = tmp_path / "html"
    (root / "book").mkdir(parents=True)
    (root / "std" / "vec").mkdir(parents=True)
    (root / "index.html").write_text(
        '<a href="book/">Book</a> <A HREF=\'std/index.html#top\'>std</A> '
        '<a href="https://elsewhere.example/">x</a> <a href="style.css">css</a> <a href="#here">self</a>'
    )
    # root-absolute: from the root of the site serving the tree, or the tree's own path on disk
    (root / "book" / "index.html").write_text('<a href="../std/old.html">old</a><a href="../missing.html">404</a>'
                                              '<a href="/std/index.html">abs</a><a href="/nothere.html">404</a>')
    (root / "std" / "index.html").write_text('<a href="vec/struct.Vec.html?x=1">Vec</a><a href="../index.html">up</a>'
                                             f'<a href="{root}/book/">disk</a>')
    (root / "std" / "old.html").write_text(
        '<html><head><meta http-equiv="refresh" content="0;URL=\'vec/struct.Vec.html\'"></head></html>'
    )
    (root / "std" / "vec" / "struct.Vec.html").write_text('<a href="../../book">book</a><a href="%73truct.Vec.html">me</a>'
                                                          '<a href="/">home</a>')
    graph = build_docgraph(root, "tiny")
    links = {graph.urls[u]: sorted(graph.urls[v] for v in graph.out(u)) for u in range(graph.n)}
    assert links == {
        "book/index.html": ["std/index.html", "std/vec/struct.Vec.html"],  # Vec: through the redirect stub
        "index.html": ["book/index.html", "std/index.html"],
        "std/index.html": ["book/index.html", "index.html", "std/vec/struct.Vec.html"],
        "std/vec/struct.Vec.html": ["book/index.html", "index.html"],
    }
    assert graph.meta["redirect_stubs"] == 1
    assert [graph.urls[s] for s in graph.seeds] == ["index.html"]
    assert sorted(graph.host_names) == ["_root", "book", "std"]


def test_replay_command_writes_table_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from scrapy_aopic.sim.__main__ import main

    web = scale_free_web(600, seed=2, pages_per_trap=50, pages_per_farm=20, n_seeds=2)
    graph_file = write_recorded_graph(web, tmp_path / "web.jsonl")
    out = tmp_path / "out"
    assert main(["replay", str(graph_file), "--out", str(out), "--quick"]) == 0
    markdown = (out / "ordering-web.md").read_text()
    assert "| breadth-first |" in markdown and "| opic pending |" in markdown
    png = (out / "ordering-web.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2


def test_default_policies_cover_the_spec_list():
    names = {p.name for p in default_policies(np.ones(3))}
    for expected in (
        "breadth-first",
        "depth-first",
        "random",
        "backlink-count",
        "batch-pagerank",
        "partial-pagerank",
        "larger-site-first",
        "opic pending",
        "opic all",
        "omniscient",
    ):
        assert expected in names
    assert any(n.startswith("aopic T=") for n in names)
    assert any("tax=" in n for n in names)
    assert value_at(np.array([]), 3) == 0.0


@pytest.mark.parametrize("targets", ["pending", "all", "pending-cash"])
def test_lambda_payout_to_traps_is_measured_exactly(targets):
    """The simulator's share of lambda's payouts landing in trap pages
    (issue 16) matches a recount of the trap accounts' cash around each
    payout, for every rule."""
    from scrapy_aopic.sim.runner import lambda_trap_share, simulate
    from scrapy_aopic.store.base import CRAWLED, LEASED, PENDING
    from scrapy_aopic.store.memory import MemoryStore

    graph = scale_free_web(3000, seed=2, trap_share=0.4, pages_per_trap=600, trap_fanout=30, trap_linkers=0)
    trap = graph.labels == TRAP
    policy = EnginePolicy(lambda_targets=targets)
    recount = {"paid": 0.0, "to_traps": 0.0}

    states = (PENDING, LEASED, CRAWLED) if targets == "all" else (PENDING,)

    def trap_cash(store):
        return sum(view.cash for view in store.iter_accounts()
                   if trap[int(view.url)] and view.state in states)

    original_start = policy.start

    def start(*args):
        original_start(*args)
        measured = policy.store.visit_lambda

        def checked():
            store = policy.store
            before = trap_cash(store)
            paid = measured()
            recount["paid"] += paid
            recount["to_traps"] += trap_cash(store) - before
            return paid

        policy.store.visit_lambda = checked

    policy.start = start
    run = simulate(graph, policy, 1500)
    assert run.lambda_log and recount["paid"] > 0
    share = lambda_trap_share(run.lambda_log, 1500)
    assert share == pytest.approx(recount["to_traps"] / recount["paid"], rel=1e-6, abs=1e-9)
    assert 0.0 < share < 1.0
    assert isinstance(policy.store, MemoryStore)


def _engine_config(engine):
    return {
        "lambda_targets": engine.store.lambda_targets,
        "lambda_tax": engine.lambda_tax,
        "history_window": engine.history_window,
        "seed_cash": engine.seed_cash,
        "link_memory": engine.link_memory,
        "max_revisits": engine.max_revisits,
        "priority_horizon": engine.priority_horizon,
        "discovery_cash": (engine.discovery_cash, engine.store.discovery_cash),
    }


def test_benchmark_default_row_is_the_engine_a_default_crawl_builds():
    """The ordering benchmark's "default engine" row runs the engine a crawl
    with every setting at its default builds (it described lambda ->
    "pending" after the default became "pending-cash", issue 16)."""
    import importlib.util
    from pathlib import Path

    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.frontier import Frontier

    crawler = get_crawler(Spider, settings_dict={"ADDONS": {"scrapy_aopic.Addon": 0}})
    frontier = Frontier.from_crawler(crawler)
    frontier.open(Spider("t"))
    product = _engine_config(frontier.engine)

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ordering.py"
    spec = importlib.util.spec_from_file_location("bench_ordering", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    graph = Graph.from_adjacency(SEED_004, ["A"])
    (policy,) = [p for p in default_policies(np.ones(graph.n)) if p.name == bench.DEFAULT_ENGINE]
    policy.start(graph, [0], None)
    assert _engine_config(policy.engine) == product
    assert product["lambda_targets"] == "pending-cash"  # what issue 16 shipped
    # the rule before stays in the tables for comparison
    assert "opic pending" in {p.name for p in default_policies(np.ones(3))} - {bench.DEFAULT_ENGINE}


def test_ordering_summary_keeps_the_rows_of_graphs_not_run(tmp_path):
    """``bench_ordering.py --graphs X`` replaces X's summary row and keeps
    the others (each dated by its run); a summary of other columns is not
    merged."""
    from tests.support.simdrive import load_benchmark

    bench = load_benchmark("bench_ordering")
    header = ["graph", "measured", "value"]
    summary = tmp_path / "ordering-summary.md"
    summary.write_text("intro\n\n" + bench.markdown_table(header, [["rust-doc", "2026-11-01 00:00", "1 %"],
                                                                 ["python3-doc", "2026-11-01 00:00", "2 %"]]) + "\n")
    assert bench.kept_rows(summary, header, {"python3-doc": None}) == [["rust-doc", "2026-11-01 00:00", "1 %"]]
    assert bench.kept_rows(summary, ["graph", "value"], {"python3-doc": None}) == []
    assert bench.kept_rows(tmp_path / "none.md", header, {}) == []
