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


def _page(words: list[str]) -> str:
    return "<html><body><main><p>" + " ".join(words) + "</p></main></body></html>"


def test_content_score_merges_the_pages_the_detection_finds_alike(crawl_order, tmp_path):
    from scrapy_aopic.sim.graph import Graph

    words = [f"w{(i * 7919) % 1009}x{i % 13}" for i in range(400)]
    near = words[:-1] + ["changed"]
    other = [f"v{(i * 104729) % 2003}y{i % 17}" for i in range(400)]
    for name, text in {"a.html": _page(words), "b.html": _page(words), "c.html": _page(near),
                       "d.html": _page(other)}.items():
        (tmp_path / name).write_text(text)
    graph = Graph.from_edges(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), host=np.zeros(4),
                             host_names=["h"], seeds=[0], urls=["a.html", "b.html", "c.html", "d.html"])
    rank = np.array([0.1, 0.4, 0.2, 0.3])
    class_of = crawl_order.near_duplicate_classes(graph, tmp_path, rank)
    # b is the richest of a, b (its exact copy) and c (one word changed): their original
    assert class_of.tolist() == [1, 1, 1, 3]
    content, number = crawl_order.merged(graph, class_of)
    assert number.tolist() == [0, 0, 0, 1] and content.n == 2
    assert content.out(0).tolist() == [1] and content.out(1).tolist() == []  # links inside a class dropped
    assert content.seeds.tolist() == [0] and content.urls == ["b.html", "d.html"]  # named by the originals


def test_the_content_graph_keeps_links_between_classes_once(crawl_order):
    from scrapy_aopic.sim.graph import Graph

    # 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3; pages 1 and 2 alike
    graph = Graph.from_edges(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), host=np.arange(4),
                             host_names=list("abcd"), seeds=[0, 2])
    content, number = crawl_order.merged(graph, np.array([0, 1, 1, 3]))
    assert number.tolist() == [0, 1, 1, 2]
    assert [content.out(u).tolist() for u in range(3)] == [[1], [2], []]
    assert content.host.tolist() == [0, 1, 3] and content.seeds.tolist() == [0, 1]


def test_the_simulators_order_is_scored_like_a_crawl(crawl_order):
    from scrapy_aopic.sim.graph import Graph

    # a seed linking to three pages; the simulator fetches all four
    graph = Graph.from_edges(4, np.array([0, 0, 0]), np.array([1, 2, 3]), host=np.zeros(4), host_names=["h"],
                             seeds=[0], urls=["index.html", "a.html", "b.html", "c.html"])
    index = {url: i for i, url in enumerate(graph.urls)}
    rank = np.array([0.4, 0.3, 0.2, 0.1])
    assert crawl_order.simulated_shares(graph, index, rank, [1, 4]) == [pytest.approx(100.0), pytest.approx(100.0)]
    # scored against another ranking, the same order holds less of the top
    two = crawl_order.simulated_shares(graph, index, np.array([0.1, 0.2, 0.3, 0.4]), [1, 4])
    assert two[0] == pytest.approx(100 * 0.1 / 0.4) and two[1] == pytest.approx(100.0)
