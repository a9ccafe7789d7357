"""The bundled demo site (example_project/demosite), its server, the example
project's ``broad`` spider and the demo script."""

from __future__ import annotations

import concurrent.futures
import http.client
import itertools
import re
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from protego import Protego
from simhash import Simhash

sys.path.insert(0, str(Path(__file__).parents[2] / "example_project"))

from demosite import (  # noqa: E402
    DUPLICATE_KINDS,
    REAL_KINDS,
    generate,
    normalize_target,
    reference_crawl,
    serve,
)


@pytest.fixture(scope="module")
def site():
    return generate(pages=120, hosts=6, seed=3)


@pytest.fixture(scope="module")
def served(site):
    with serve(site, slow_seconds=3.0) as running:
        yield running


def get(url: str, timeout: float = 5.0, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""))
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def visible_text(body: bytes) -> str:
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", body.decode("utf-8"), flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def hrefs(body: bytes) -> list[str]:
    return re.findall(r'href="([^"]*)"', body.decode("utf-8", "replace"))


# -- generator ----------------------------------------------------------------


def test_same_seed_same_site_other_seed_other_site():
    first, second = generate(pages=80, hosts=5, seed=11), generate(pages=80, hosts=5, seed=11)
    assert list(first.resources) == list(second.resources)
    assert first.pagerank() == second.pagerank()
    for loc in first.resources:
        assert first.respond(*loc, port=8000) == second.respond(*loc, port=8000)
    # Trap pages (generated on request) are deterministic too.
    farm = (first.farm_host, "/farm/12345.html")
    assert first.respond(*farm, port=8000) == second.respond(*farm, port=8000)
    other = generate(pages=80, hosts=5, seed=12)
    assert other.real_pages() != first.real_pages()


def test_size_and_hosts_follow_the_arguments():
    small, big = generate(pages=50, hosts=4, seed=1), generate(pages=500, hosts=10, seed=1)
    assert len(small.hosts) == 4 and len(big.hosts) == 10
    articles = [loc for loc in big.real_pages() if big.resources[loc].kind == "article"]
    assert len(articles) == 500
    assert len({h.ip for h in big.hosts}) == 10
    assert all(h.ip.startswith("127.0.0.") and h.ip != "127.0.0.1" for h in big.hosts)
    with pytest.raises(ValueError):
        generate(pages=50, hosts=3)


def test_in_degree_is_scale_free_skewed():
    big = generate(pages=600, hosts=8, seed=5)
    degrees = big.in_degrees()
    articles = sorted((degrees[loc] for loc in big.real_pages() if big.resources[loc].kind == "article"),
                      reverse=True)
    median = articles[len(articles) // 2]
    # Preferential attachment: hubs far above the typical page ...
    assert articles[0] >= 10 * max(median, 1)
    # ... and the top 5 % of articles hold a large share of the in-links
    # (a uniform random graph would give them about 5 %).
    top = articles[: len(articles) // 20]
    assert sum(top) / sum(articles) >= 0.25
    # Many leaves: most articles have few in-links.
    assert sum(1 for d in articles if d <= 3) >= len(articles) / 2


def test_pagerank_is_a_distribution_and_a_fixed_point(site):
    ranks = site.pagerank()
    graph = site.real_graph()
    assert set(ranks) == set(site.real_pages()) == set(graph)
    assert sum(ranks.values()) == pytest.approx(1.0, abs=1e-12)
    assert min(ranks.values()) > 0
    # Check the PageRank equation itself, independently of the iteration.
    n, d = len(graph), 0.85
    dangling = sum(ranks[u] for u, outs in graph.items() if not outs)
    incoming = {u: 0.0 for u in graph}
    for u, outs in graph.items():
        for v in outs:
            incoming[v] += ranks[u] / len(outs)
    for u in graph:
        assert ranks[u] == pytest.approx((1 - d) / n + d * (incoming[u] + dangling / n), rel=1e-8)


def test_real_graph_is_reachable_from_the_seeds(site):
    graph = site.real_graph()
    seen, stack = set(site.seeds), list(site.seeds)
    while stack:
        for target in graph[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    assert seen == set(site.real_pages())


def test_every_trap_is_linked_and_endless(site):
    # A breadth-first crawl with a generous budget walks into every trap.
    crawl = reference_crawl(site, "bfs", budget=3 * len(site.real_pages()))
    fetched = [site.loc(url) for url in crawl.fetched]
    for trap in site.trap_patterns:
        assert any(trap.matches(loc) for loc in fetched), f"trap {trap.name} is never reached"
    # Following the calendar's "Next month" link never ends.
    url = next(site.url(loc, 8000) for loc in fetched if loc and site.kind(loc) == "trap:calendar")
    months = set()
    for _ in range(40):
        loc = site.loc(url)
        reply = site.respond(*loc, port=8000)
        assert reply.status == 200 and reply.kind == "trap:calendar"
        months.add(loc[1])
        body = reply.body.decode()
        match = re.search(r'href="([^"]*)">Next (?:month|day)', body)
        url = urljoin(url, match.group(1))
    assert len(months) == 40
    # Session ids are minted per page: each shop page spelling links new spellings.
    shop = site.url((site.shop_host, "/shop/"), 8000)
    first_links = [h for h in hrefs(site.respond(site.shop_host, "/shop/", 8000).body) if "jsessionid" in h]
    assert first_links
    second = site.respond(site.shop_host, urlsplit(urljoin(shop, first_links[0])).path, 8000)
    second_links = [h for h in hrefs(second.body) if "jsessionid" in h or "sid=" in h]
    assert second.page == (site.shop_host, "/shop/item-0.html")
    assert not set(second_links) & set(first_links)


def test_depth_first_misses_the_important_pages(site):
    budget = int(0.6 * len(site.real_pages()))
    captured = {order: reference_crawl(site, order, budget).captured_pagerank for order in ("dfs", "bfs", "omniscient")}
    # Ordering matters: LIFO dives into traps and finds little of the
    # PageRank; breadth-first does much better; the omniscient order best.
    assert captured["dfs"] < 0.5 * captured["bfs"]
    assert captured["bfs"] <= captured["omniscient"]
    top = sorted(site.pagerank().items(), key=lambda kv: -kv[1])[:10]
    dfs_first = reference_crawl(site, "dfs", len(top) * 3).real_pages
    assert len({loc for loc, _ in top} & dfs_first) < len(top) / 2


def test_near_duplicates_copy_their_original(site):
    assert {site.resources[dup].kind for dup in site.near_duplicates} == set(DUPLICATE_KINDS)
    articles = [loc for loc in site.real_pages() if site.resources[loc].kind == "article"]
    hashes = {loc: Simhash(visible_text(site.respond(*loc, port=8000).body)) for loc in articles}
    for dup, original in site.near_duplicates.items():
        assert site.resources[original].kind == "article"
        assert site.resources[dup].paragraphs == site.resources[original].paragraphs
        dup_text = visible_text(site.respond(*dup, port=8000).body)
        if site.resources[dup].kind == "mirror":
            assert dup_text == visible_text(site.respond(*original, port=8000).body)
        dup_hash = Simhash(dup_text)
        # Closer to its original than to any other article.
        assert dup_hash.distance(hashes[original]) < min(
            dup_hash.distance(hashes[other]) for other in articles if other != original)
    # Different articles are far apart (no accidental near-duplicates).
    sample = list(hashes.values())[:40]
    assert min(a.distance(b) for a, b in itertools.combinations(sample, 2)) > 3


def test_ground_truth_lists_match_what_is_served(site):
    port = 8000
    assert site.dead and site.errors and site.redirects and site.binaries and site.disallowed and site.slow
    for loc in site.dead:
        assert site.respond(*loc, port=port).status == 404
    for loc in site.errors:
        assert site.respond(*loc, port=port).status == 500
    for loc, next_hop in site.redirects.items():
        reply = site.respond(*loc, port=port)
        assert reply.status in (301, 302)
        assert dict(reply.headers)["Location"] == site.url(next_hop, port)
    # Redirect chains exist (legacy -> old -> article) and end at real pages.
    chains = [loc for loc, hop in site.redirects.items() if hop in site.redirects]
    assert chains and all(site.resolve(loc) in site.pagerank() for loc in chains)
    assert any(info.role == "shortener" for info in site.hosts)
    for loc in site.binaries:
        reply = site.respond(*loc, port=port)
        assert reply.status == 200 and reply.page is None
        assert b"\x00" in reply.body or not reply.body.decode("utf-8", "ignore").lstrip().startswith("<")
    png = [loc for loc in site.binaries if loc[1].endswith(".png")]
    assert png and site.respond(*png[0], port=port).body.startswith(b"\x89PNG\r\n\x1a\n")
    for loc in site.disallowed:
        rules = Protego.parse(site.respond(loc[0], "/robots.txt", port).body.decode())
        assert not rules.can_fetch(site.url(loc, port), "*")
    for loc in site.real_pages():
        rules_reply = site.respond(loc[0], "/robots.txt", port)
        if rules_reply.status == 200:
            assert Protego.parse(rules_reply.body.decode()).can_fetch(site.url(loc, port), "*")
    assert not set(site.real_pages()) & set(site.near_duplicates)
    assert all(site.resources[loc].kind in REAL_KINDS for loc in site.real_pages())


def test_url_variants_normalize_to_the_page():
    assert normalize_target("/shop/item-1.html;jsessionid=ABC123") == "/shop/item-1.html"
    assert normalize_target("/shop/?sid=12ab&x=1") == "/shop/?x=1"
    assert normalize_target("/a.html?utm_source=3&utm_medium=link#top") == "/a.html"
    assert normalize_target("/news/?page=2") == "/news/?page=2"


# -- server ---------------------------------------------------------------------


def test_hosts_are_distinct_loopback_ips_on_one_port(served, site):
    netlocs = [urlsplit(u) for u in served.base_urls]
    assert len({n.hostname for n in netlocs}) == len(site.hosts)
    assert {n.port for n in netlocs} == {served.port}
    for url in served.base_urls:
        status, _, _ = get(url + "robots.txt")
        assert status in (200, 404)
    assert served.seeds and all(url in served.base_urls for url in served.seeds)


def test_server_answers_each_kind(served, site):
    home = served.seeds[0]
    status, headers, body = get(home)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"<title>" in body and hrefs(body)
    assert get(served.url(site.dead[0]))[0] == 404
    assert get(served.url(site.errors[0]))[0] == 500
    source, target = next(iter(site.redirects.items()))
    status, headers, _ = get(served.url(source))
    assert status in (301, 302) and headers["Location"] == served.url(target)
    png = next(loc for loc in site.binaries if loc[1].endswith(".png"))
    status, headers, body = get(served.url(png))
    assert status == 200 and headers["Content-Type"] == "image/png" and body.startswith(b"\x89PNG")
    status, headers, body = get(served.url(png), method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    robots = {h.index: get(served.url((h.index, "/robots.txt"))) for h in site.hosts}
    assert any(b"Disallow: /private/" in r[2] for r in robots.values())
    assert any(b"Crawl-delay:" in r[2] for r in robots.values())
    assert any(r[0] == 404 for r in robots.values())


def test_counters_count_pages_whatever_the_spelling(served, site):
    served.reset_counts()
    page = next(loc for loc in site.real_pages() if site.resources[loc].kind == "article")
    url = served.url(page)
    get(url)
    get(url + "?utm_source=x&utm_medium=y")
    shop_item = (site.shop_host, "/shop/item-1.html")
    get(served.url(shop_item) + ";jsessionid=FEEDBEEF")
    get(served.url(shop_item) + ";jsessionid=DEADBEEF")
    get(served.url(site.dead[0]))
    pages = served.page_fetch_counts()
    assert pages[url] == 2 and pages[served.url(shop_item)] == 2
    assert served.fetch_counts()[url] == 1
    assert served.total_requests() == 5
    assert served.kind_counts()["missing"] == 1
    assert served.captured_pagerank() == pytest.approx(
        served.pagerank()[url] + served.pagerank()[served.url(shop_item)])
    assert [f.url for f in served.log][-1] == served.url(site.dead[0])


def test_server_handles_concurrent_requests_and_counts_exactly(served, site):
    served.reset_counts()
    urls = [served.url(loc) for loc in site.real_pages()[:60]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(lambda u: get(u)[0], urls * 2))
    assert statuses == [200] * len(urls) * 2
    counts = served.page_fetch_counts()
    assert all(counts[u] == 2 for u in urls)
    assert served.total_requests() == 2 * len(urls)


def test_slow_page_times_out_and_stop_is_quick(site):
    with serve(site, slow_seconds=30.0) as running:
        with pytest.raises(TimeoutError):
            get(running.url(site.slow[0]), timeout=0.3)
        started = time.monotonic()
    assert time.monotonic() - started < 2.0
    # A slow page within the client's patience does arrive.
    with serve(site, slow_seconds=0.2) as running:
        status, _, body = get(running.url(site.slow[0]), timeout=5)
        assert status == 200 and b"Annual report" in body


# -- the example project's spider and the demo ----------------------------------


def test_broad_spider_follows_links_and_skips_binaries(tmp_path):
    import asyncio

    from example_project.spiders.broad import BroadSpider, read_seeds
    from scrapy import Request
    from scrapy.http import HtmlResponse, Response

    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("http://127.0.0.2:1/\n# comment\n\nhttp://127.0.0.3:1/\n")
    assert read_seeds("http://127.0.0.4:1/,http://127.0.0.2:1/", str(seeds_file)) == [
        "http://127.0.0.4:1/", "http://127.0.0.2:1/", "http://127.0.0.3:1/"]
    with pytest.raises(ValueError):
        BroadSpider()
    spider = BroadSpider(seeds="http://127.0.0.2:1/")

    async def collect():
        return [r async for r in spider.start()]

    starts = asyncio.run(collect())
    assert [r.url for r in starts] == ["http://127.0.0.2:1/"]
    page = HtmlResponse(
        "http://127.0.0.2:1/news/", body=b'<html><head><title> News </title><link rel="next" href="?page=2">'
        b'</head><body><a href="a.html">A</a><a href="mailto:x@y">m</a><a href="#top">t</a>'
        b'<a href="http://127.0.0.3:1/b">B</a></body></html>', encoding="utf-8")
    out = list(spider.parse(page))
    items = [o for o in out if isinstance(o, dict)]
    assert items == [{"url": page.url, "title": "News", "status": 200, "content_type": ""}]
    # Document order; mailto: and fragment-only links are not followed.
    assert [r.url for r in out if isinstance(r, Request)] == [
        "http://127.0.0.2:1/news/?page=2", "http://127.0.0.2:1/news/a.html", "http://127.0.0.3:1/b"]
    binary = Response("http://127.0.0.2:1/x.png", body=b"\x89PNG\r\n\x00\x01",
                      headers={"Content-Type": "image/png"})
    out = list(spider.parse(binary))
    assert out == [{"url": binary.url, "title": None, "status": 200, "content_type": "image/png"}]


def test_demo_script_runs_a_real_crawl(tmp_path, capsys):
    import run_demo

    status = run_demo.main(["--pages", "40", "--hosts", "5", "--no-baseline", "--out", str(tmp_path),
                            "--", "-s", "DOWNLOAD_TIMEOUT=1"])
    output = capsys.readouterr().out
    assert status == 0, output
    export = tmp_path / "importance.jsonl"
    rows = run_demo.read_export(export)
    assert rows and all({"url", "importance", "cash", "history", "visits"} <= set(r) for r in rows)
    importances = [r["importance"] for r in rows]
    assert importances == sorted(importances, reverse=True)
    assert "Top 10 pages by importance" in output and str(export) in output
    assert re.search(r"scrapy-aopic\s+\d+\.\d%", output)
