"""The push-propagation prototype of ``benchmarks/bench_ordering_push.py``
(issue 18): its books balance after every fetch under every teleport rule,
and pushed to convergence it is batch PageRank of the known graph."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_aopic.sim.synthetic import scale_free_web
from tests.support.simdrive import crawl, load_benchmark

pytest.importorskip("scipy")

from scrapy_aopic.sim.pagerank import pagerank_csr  # noqa: E402


@pytest.fixture(scope="module")
def push():
    return load_benchmark("bench_ordering_push")


@pytest.mark.parametrize("teleport", ["known", "seeds", "lambda-cash", "lambda-uniform"])
def test_books_balance_after_every_fetch(push, teleport):
    graph = scale_free_web(2000, seed=2)
    policy = push.PushRank(1e-5, teleport, "total")
    seen = set()
    moved = 0
    for node in crawl(policy, graph, 600):
        assert node not in seen
        seen.add(node)
        books = policy.books()
        assert sum(books.values()) == pytest.approx(policy.total, rel=1e-12)
        assert min(books.values()) >= 0
        moved = books["pending"]
    assert len(seen) == 600
    assert moved > 0  # cash did reach the frontier
    assert sum(policy.pushes) > 600  # crawled pages were pushed again, not only released


def known_graph_rank(graph, crawled, known):
    """Batch PageRank's score: the known graph, pending URLs dangling."""
    cid = {u: i for i, u in enumerate(known)}
    src, dst = [], []
    for u in crawled:
        for v in graph.out(u).tolist():
            src.append(cid[u])
            dst.append(cid[v])
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(len(known) + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.array(src), minlength=len(known)), out=indptr[1:])
    return pagerank_csr(indptr, np.array(dst)[order].astype(np.int32), len(known), tol=1e-14, max_iter=5000)


def test_pushed_to_convergence_it_is_known_graph_pagerank(push):
    """With a negligible threshold and the ``known`` teleport, a pending
    URL's cash and a crawled page's estimate are the known graph's PageRank
    times one common factor, after a crawl of 200 pages."""
    graph = scale_free_web(1500, seed=5)
    policy = push.PushRank(1e-12, "known", "total")
    crawled = list(crawl(policy, graph, 200))
    known = [v for v in range(graph.n) if policy.state[v]]
    rank = known_graph_rank(graph, crawled, known)
    a = 1 - policy.damping
    mine = np.array([policy.p[v] + a * policy.r[v] if policy.state[v] == 2 else a * policy.r[v] for v in known])
    ratio = mine / rank
    assert ratio.std() / ratio.mean() < 1e-6
    pending = [i for i, v in enumerate(known) if policy.state[v] == 1]
    assert len(pending) > 100


def test_the_threshold_bounds_the_work(push):
    graph = scale_free_web(2000, seed=2)
    coarse, fine = push.PushRank(0.3, "known", "page"), push.PushRank(1e-3, "known", "page")
    for policy in (coarse, fine):
        for _ in crawl(policy, graph, 500):
            pass
    assert sum(coarse.pushes) < sum(fine.pushes)
    assert coarse.books()["crawled residual"] > fine.books()["crawled residual"]


def test_engine_with_cash_per_new_url_keeps_its_books(push):
    """The shipped engine given one seed's cash per URL discovered: every
    URL known brought exactly that much, and the engine's books balance."""
    graph = scale_free_web(2000, seed=2)
    policy = push.EngineTeleport()
    fetched = 0
    for _ in crawl(policy, graph, 400):
        fetched += 1
        engine = policy.engine
        totals = engine.totals()
        assert totals.injected == pytest.approx(totals.known * engine.seed_cash, rel=1e-12)
        assert engine.conservation_error() <= 1e-9 * totals.injected
    assert fetched == 400 and policy.engine.totals().known > 400
