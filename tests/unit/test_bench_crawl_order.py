"""``benchmarks/bench_crawl_order.py`` (issue 18): the served tree counts
fetches and stops at its budget, fetched paths map to the graph's pages as
the docgraph names them, and the score is the ideal sort's share."""

from __future__ import annotations

import urllib.error
import urllib.request

import numpy as np
import pytest

from tests.support.simdrive import load_benchmark


@pytest.fixture(scope="module")
def crawl_order():
    return load_benchmark("bench_crawl_order")


def test_paths_map_to_the_graphs_pages(crawl_order):
    index = {"index.html": 0, "std/index.html": 1, "std/fn.a b.html": 2}
    node = crawl_order.node_of_path
    assert node("/index.html", index) == 0 and node("/", index) == 0
    assert node("/std/", index) == 1 and node("/std/./index.html", index) == 1
    assert node("/std/fn.a%20b.html", index) == 2  # percent-decoded, as the docgraph reads links
    assert node("/std/stub.html", index) is None  # a redirect stub, a 404, a source file: no page


def test_the_score_counts_each_page_once_against_the_ideal_sort(crawl_order):
    index = {"a": 0, "b": 1, "c": 2, "d": 3}
    rank = np.array([0.1, 0.4, 0.2, 0.3])
    # fetches: b, a stub, b again, d, c
    paths = ["/b", "/stub", "/b", "/d", "/c"]
    one, two, four, five = crawl_order.shares(paths, index, rank, [1, 2, 4, 5])
    assert one == pytest.approx(100.0)  # b is the top page
    assert two == pytest.approx(100 * 0.4 / 0.7)  # the stub cost a fetch and brought nothing
    assert four == pytest.approx(100 * 0.7 / 1.0)  # b once, d: 0.7 of the top four's 1.0
    assert five == pytest.approx(100 * 0.9 / 1.0)


def test_the_served_tree_records_fetches_in_order_and_stops_at_the_budget(crawl_order, tmp_path):
    for name in ("index.html", "a.html", "b.html"):
        (tmp_path / name).write_text(f"<html><body>{name}</body></html>")
    tree = crawl_order.CountedTree(tmp_path)
    base = tree.seed.rsplit("/", 1)[0]
    try:
        tree.reset(2)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/robots.txt", timeout=5)
        assert missing.value.code == 404  # answered, not counted
        for name in ("a.html", "index.html"):
            assert urllib.request.urlopen(f"{base}/{name}", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/b.html", timeout=5)
        assert refused.value.code == 503
        assert tree.paths == ["/a.html", "/index.html"]
    finally:
        tree.close()
