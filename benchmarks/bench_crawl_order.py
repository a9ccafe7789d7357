"""Ordering in a real crawl: the PageRank a `scrapy crawl` has fetched after k % of a site.

    python benchmarks/bench_crawl_order.py [--tree NAME ...] [--setups aopic,plain]
                                           [--fractions 1,5,10,25] [--rounds 1]
    python benchmarks/bench_crawl_order.py --tree postgresql-doc-15 --tree python3-doc --rounds 2
    python benchmarks/bench_crawl_order.py --tree rust-doc --setups aopic,discovery --fractions 5,10

The simulator (``bench_ordering.py``) drives the engine one fetch at a time
over a link graph; a real crawl has 16 requests in flight, Scrapy's
middlewares, redirects and the pages' own markup. This serves a Debian
documentation tree (``rust-doc``, ``python3-doc``, ``postgresql-doc-15``
or any HTML root) on 127.0.0.1, runs the example project's ``broad``
spider on it (its settings as shipped: 16 concurrent requests, 4 per host;
``allowed_domains=127.0.0.1``) from the tree's top ``index.html``, and
records every GET the server answers, in order. Each fetch costs one unit
of the budget, whatever it was (a redirect stub, a 404, a stylesheet a
link pointed to): k % of a tree is k % of the pages of its link graph
(:func:`scrapy_aopic.sim.docgraph.load_docgraph`, the simulator's graph of
the same files) counted in fetches. The figure is the true PageRank of the
graph's pages fetched within that many fetches, as a share of what the
ideal sort (the top pages by true PageRank) holds at the same count: the
simulator's ``bench_ordering.py`` figure, measured on the crawl.

Two scores are printed. ``pages`` is that figure. ``content`` merges the
pages the add-on's own near-duplicate detection finds alike (its
fingerprint and index with default settings, fed every page of the tree in
descending PageRank) into one node, recomputes PageRank on that graph and
counts a class held once any of its pages is fetched: one page, one account,
as the crawl treats them. The two differ where a tree publishes the same
text at several URLs (rust-doc: ``std`` re-exports ``core``, a third of its
pages), where the page score charges the crawl for the copy it folded.
``--simulator`` also prints the simulator's order (the engine with the
site-crawl defaults, one fetch at a time) on the page graph, by both
scores, and on the merged graph, as if the copies were known unfetched.

Setups (``--setups``, comma-separated): ``aopic`` (the add-on's defaults:
a site crawl, so ``AOPIC_DISCOVERY_CASH`` is 0.01), ``no-discovery``
(``AOPIC_DISCOVERY_CASH=0``, the default before it chose by the spider),
``discovery`` (``AOPIC_DISCOVERY_CASH=0.01``), ``horizon``
(``AOPIC_PRIORITY_HORIZON=100``), ``plain`` (Scrapy without the add-on:
depth-first, its default) and ``plain-bfs`` (Scrapy breadth-first:
``DEPTH_PRIORITY=1`` with FIFO queues). Rounds alternate the setups'
order; a crawl stops at the largest fraction's fetch count (the server
counts), so a round of the Rust tree at 25 % is about 5,500 fetches a setup.
"""

from __future__ import annotations

import argparse
import posixpath
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
from scrapy.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import arglists  # noqa: E402
from loopback import QuietServer  # noqa: E402

from scrapy_aopic import settings as aopic_settings  # noqa: E402
from scrapy_aopic.meta import DUPLICATE_OF  # noqa: E402
from scrapy_aopic.middlewares.simhash import SimhashDedupMiddleware  # noqa: E402
from scrapy_aopic.sim.docgraph import DOC_TREES, load_docgraph  # noqa: E402
from scrapy_aopic.sim.graph import Graph  # noqa: E402
from scrapy_aopic.sim.pagerank import pagerank  # noqa: E402
from scrapy_aopic.sim.policies import SCRAPY_BREADTH_FIRST, EnginePolicy, shipped_engine_kwargs  # noqa: E402
from scrapy_aopic.sim.runner import simulate  # noqa: E402

#: name -> the Scrapy settings of its crawls (``-s NAME=VALUE``).
SETUPS = {
    "aopic": [],
    "no-discovery": ["AOPIC_DISCOVERY_CASH=0"],
    "discovery": ["AOPIC_DISCOVERY_CASH=0.01"],
    "horizon": ["AOPIC_PRIORITY_HORIZON=100"],
    "plain": ["ADDONS={}"],
    "plain-bfs": ["ADDONS={}"] + [f"{name}={value}" for name, value in SCRAPY_BREADTH_FIRST.items()],
}
CRAWL_TIMEOUT = 1800


class CountedTree:
    """A static tree on 127.0.0.1 that records the path of every GET, in
    the order it answered them, and stops answering (503) after ``limit``
    counted fetches (``/robots.txt`` is not counted)."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.Lock()
        self.paths: list[str] = []
        self.limit = 0
        tree = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = urlsplit(self.path).path
                if path != "/robots.txt":
                    with tree.lock:
                        if len(tree.paths) >= tree.limit:
                            self.send_error(503)
                            return
                        tree.paths.append(path)
                super().do_GET()

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.seed = f"http://127.0.0.1:{self.server.server_address[1]}/index.html"

    def reset(self, limit: int) -> None:
        with self.lock:
            self.paths = []
            self.limit = limit

    def close(self) -> None:
        self.server.shutdown()


def node_of_path(path: str, index: dict[str, int]) -> int | None:
    """The graph node a fetched URL path is, or None (a redirect stub, a
    404, a file that is no page): the docgraph's names are tree-relative,
    percent-decoded, a directory meaning its ``index.html``."""
    name = posixpath.normpath(unquote(path)).lstrip("/")  # a request path: "/" at least
    if path.endswith("/") or not name:
        name = posixpath.join(name, "index.html")
    return index.get(name)


def crawl(tree: CountedTree, setup: str, fetches: int, workdir: Path) -> list[str]:
    """One ``scrapy crawl broad`` of the served tree; the paths it fetched."""
    tree.reset(fetches)
    log = workdir / f"crawl-{setup}.log"
    command = [sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={tree.seed}",
               "-a", "allowed_domains=127.0.0.1", "-s", f"LOG_FILE={log}", "-s", "LOG_LEVEL=INFO",
               "-s", "ROBOTSTXT_OBEY=False", "-s", f"CLOSESPIDER_PAGECOUNT={fetches}",
               # the server refuses fetches past the budget; not worth retrying
               "-s", "RETRY_ENABLED=False"]
    for setting in SETUPS[setup]:
        command += ["-s", setting]
    subprocess.run(command, cwd=ROOT / "example_project", check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=CRAWL_TIMEOUT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    with tree.lock:
        return list(tree.paths)


def shares(paths: list[str], index: dict[str, int], rank: np.ndarray, counts: list[int]) -> list[float]:
    """Per count: the true PageRank of the distinct pages among the first
    ``count`` fetches, as a share of the ideal sort's at ``count``."""
    top = np.cumsum(np.sort(rank)[::-1])
    seen: set[int] = set()
    held, result, fetched = 0.0, [], 0
    for count in counts:
        for path in paths[fetched:count]:
            node = node_of_path(path, index)
            if node is not None and node not in seen:
                seen.add(node)
                held += rank[node]
        fetched = count
        result.append(100.0 * held / top[min(count, len(top)) - 1])
    return result


class _FoldRecorder(SimhashDedupMiddleware):
    """The dedup middleware, recording what a page is a duplicate of
    instead of settling its account (there is no crawl)."""

    def _duplicate(self, request, response, key, original, kind, distance):
        request.meta[DUPLICATE_OF] = original
        return response


def fold_detector() -> _FoldRecorder:
    """The add-on's near-duplicate detection with its default settings, no
    crawl around it (learned URL patterns off: they judge URLs, not text)."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(Spider, {"ADDONS": {"scrapy_aopic.addon.Addon": 0}, "AOPIC_DUPLICATE_PATTERNS": False})
    return _FoldRecorder.from_crawler(crawler)


def near_duplicate_classes(graph: Graph, root: Path, rank: np.ndarray) -> np.ndarray:
    """Per node, the node of its near-duplicate class's original (itself
    for an original): every page of ``root`` through the add-on's
    detection, richest first."""
    from scrapy.http import HtmlResponse, Request

    detector = fold_detector()
    base = "http://127.0.0.1/"
    node_of_url = {base + url: u for u, url in enumerate(graph.urls)}
    class_of = np.arange(graph.n)
    for u in np.argsort(-rank, kind="stable"):
        url = base + graph.urls[u]
        request = Request(url)
        body = (root / graph.urls[u]).read_bytes()
        detector.process_response(request, HtmlResponse(url, body=body, request=request))
        original = request.meta.get(DUPLICATE_OF)
        if original is not None:
            class_of[u] = class_of[node_of_url[original]]
    return class_of


def merged(graph: Graph, class_of: np.ndarray) -> tuple[Graph, np.ndarray]:
    """The graph whose nodes are ``class_of``'s classes (links between
    classes kept once, links inside one dropped; a class named by its
    original's URL), and each node's class number in it."""
    originals, number = np.unique(class_of, return_inverse=True)
    src = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    urls = None if graph.urls is None else [graph.urls[node] for node in originals]
    quotient = Graph.from_edges(len(originals), number[src], number[graph.indices],
                                host=graph.host[originals], host_names=graph.host_names,
                                seeds=np.unique(number[graph.seeds]), urls=urls, name=f"{graph.name}-content")
    return quotient, number


def simulated_shares(graph: Graph, index: dict[str, int], rank: np.ndarray, counts: list[int]) -> list[float]:
    """:func:`shares` of the simulator's order over ``graph``: the engine
    with the site-crawl defaults (discovery cash as a spider with
    ``allowed_domains`` gets it), one fetch at a time."""
    engine_kwargs = shipped_engine_kwargs()
    engine_kwargs["discovery_cash"] = aopic_settings.discovery_cash(Settings(), allowed_domains=["127.0.0.1"])
    order = simulate(graph, EnginePolicy("site crawl", **engine_kwargs), counts[-1]).order
    return shares(["/" + graph.urls[node] for node in order], index, rank, counts)


def run_tree(name: str, setups: list[str], fractions: list[float], rounds: int, simulator: bool = False) -> None:
    graph = load_docgraph(name, verbose=True)
    rank = pagerank(graph)
    index = {url: i for i, url in enumerate(graph.urls)}
    counts = [max(1, round(graph.n * f / 100)) for f in fractions]
    root = Path(DOC_TREES.get(name, name)).resolve()
    content, number = merged(graph, near_duplicate_classes(graph, root, rank))
    scorings = {"pages": (index, rank),
                "content": ({url: int(number[i]) for url, i in index.items()}, pagerank(content))}
    if simulator:
        for label, sim_graph, (score_index, score_rank) in (
                ("page graph, pages", graph, scorings["pages"]),
                ("page graph, content", graph, scorings["content"]),
                ("merged graph, content", content, scorings["content"])):
            row = simulated_shares(sim_graph, score_index, score_rank, counts)
            print(f"  simulator, {label:<22}" + "  ".join(f"{f:g} %: {v:5.1f}" for f, v in zip(fractions, row)),
                  flush=True)
    tree = CountedTree(root)
    print(f"{name}: {graph.n} pages in the graph ({content.n} once near-duplicates are merged); "
          f"budgets {', '.join(map(str, counts))} fetches; served at {tree.seed}", flush=True)
    results = {(setup, score): [] for setup in setups for score in scorings}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for round_number in range(rounds):
                order = setups if round_number % 2 == 0 else list(reversed(setups))
                for setup in order:
                    paths = crawl(tree, setup, counts[-1], Path(tmp))
                    pages = sum(1 for p in paths if node_of_path(p, index) is not None)
                    for score, (score_index, score_rank) in scorings.items():
                        row = shares(paths, score_index, score_rank, counts)
                        results[setup, score].append(row)
                        print(f"  round {round_number + 1} {setup:<10} {score:<8}"
                              + "  ".join(f"{f:g} %: {v:5.1f}" for f, v in zip(fractions, row))
                              + (f"   ({len(paths)} fetches, {pages} of them graph pages)"
                                 if score == "pages" else ""), flush=True)
    finally:
        tree.close()
    print(f"{name}, share of the ideal sort's PageRank (%), median of {rounds} round(s):")
    print("  setup       score   " + "".join(f"{f:>7g} %" for f in fractions))
    for setup in setups:
        for score in scorings:
            rows = results[setup, score]
            medians = [statistics.median(r[i] for r in rows) for i in range(len(fractions))]
            print(f"  {setup:<11} {score:<8}" + "".join(f"{m:9.1f}" for m in medians), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append",
                        help="rust-doc, python3-doc, postgresql-doc-15 or an HTML root; repeatable "
                             "(default: postgresql-doc-15)")
    parser.add_argument("--setups", type=arglists.names(SETUPS, none=False),
                        default=["aopic", "no-discovery", "plain", "plain-bfs"])
    parser.add_argument("--fractions", type=arglists.numbers, default=[1.0, 5.0, 10.0, 25.0],
                        help="shares of the graph's pages, in %% (comma-separated)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--simulator", action="store_true",
                        help="print the simulator's order, scored the same way, before the crawls")
    args = parser.parse_args()
    if not args.fractions or sorted(args.fractions) != args.fractions or args.fractions[0] <= 0:
        parser.error("--fractions must be positive and ascending")
    for name in args.tree or ["postgresql-doc-15"]:
        run_tree(name, args.setups, args.fractions, args.rounds, args.simulator)


if __name__ == "__main__":
    main()
