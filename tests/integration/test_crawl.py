"""Real `scrapy crawl`s with the add-on against a local site (SPEC 2, issue 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.localsite import SPECIAL, LocalSite

RUNNER = Path(__file__).parents[1] / "support" / "crawlrun.py"


def start_crawl(tmp_path, name, seeds, settings, check_greedy=False, spider_args=None):
    out = tmp_path / f"{name}.json"
    config = tmp_path / f"{name}.config.json"
    config.write_text(json.dumps({
        "seeds": seeds, "settings": settings, "out": str(out), "check_greedy": check_greedy,
        "spider_args": spider_args or {},
    }))
    log = open(tmp_path / f"{name}.log", "w")
    process = subprocess.Popen([sys.executable, str(RUNNER), str(config)], stdout=log, stderr=subprocess.STDOUT)
    return process, out


def finish(process, out, timeout=120):
    assert process.wait(timeout=timeout) == 0, f"crawl failed, see {out.parent}"
    return json.loads(out.read_text())


def stop_when(process, condition, timeout=60):
    """Stop the crawl ``process`` gracefully (SIGINT: Scrapy closes the
    spider as at any other close, in-flight requests finished) once
    ``condition()`` holds, rather than wait out a fixed CLOSESPIDER_TIMEOUT
    that only bounds it; returns early if the crawl ends by itself first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)


# AOPIC_PRIORITY_HORIZON: another order, the same books; AOPIC_DISCOVERY_CASH: more cash in, still balanced
@pytest.mark.parametrize("horizon, discovery", [(0.0, 0.0), (5.0, 0.0), (0.0, 0.05)])
def test_crawl_with_errors_redirects_timeouts_and_binaries(tmp_path, horizon, discovery):
    export = tmp_path / "importance.jsonl"
    with LocalSite(pages=60, slow_seconds=3.0) as site:
        process, out = start_crawl(tmp_path, "crawl", [site.base + "/p0"], {
            "AOPIC_PRIORITY_HORIZON": horizon,
            "AOPIC_DISCOVERY_CASH": discovery,
            "CONCURRENT_REQUESTS": 1,  # one at a time: the order must be exactly greedy
            "DOWNLOAD_TIMEOUT": 1,
            "RETRY_TIMES": 1,
            "AOPIC_EXPORT_IMPORTANCE": str(export),
            "AOPIC_EXPORT_GRAPH": str(tmp_path / "graph.jsonl"),
        }, check_greedy=True)
        report = finish(process, out)
        hits = dict(site.hits)
        reachable = site.reachable_pages()
    stats = report["stats"]

    # The books balance, whatever happened to each request.
    injected = stats["aopic/cash_injected_total"]
    # The seed, and the share per URL a page's links made known (every
    # reachable page but the seed, and the error pages; no redirect target).
    discovered = (injected - 1.0) / discovery if discovery else 0
    assert discovered == pytest.approx(round(discovered), abs=1e-6)
    if discovery:
        assert len(reachable) - 1 <= round(discovered) < len(reachable) + 20
    else:
        assert injected == 1.0
    assert stats["aopic/conservation_error"] <= 1e-9 * injected
    # Every fetch took the richest URL there was (the first by priority with a horizon).
    assert len(report["fetched_cash"]) > len(reachable)
    assert report["greedy_violations"] == []
    # Every reachable page fetched exactly once; the redirect to a known
    # page did not fetch it again.
    assert {p: hits.get(p, 0) for p in reachable} == {p: 1 for p in reachable}
    assert stats["aopic/redirects_to_known"] >= 1
    assert stats["aopic/redirected"] >= 1
    # Each kind of failure returned its cash to lambda.
    assert stats["aopic/failed/http_404"] >= 1
    assert stats["aopic/failed/http_500"] >= 1
    assert stats["aopic/failed/not_text"] >= 1
    assert any(k.startswith("aopic/failed/") and "Timeout" in k for k in stats), stats
    assert stats["aopic/retried"] >= 2  # the 500 and the timeout, once each
    assert hits["/error"] == 2 and hits["/slow"] == 2
    # The export: every page, most important first.
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert {"url", "importance", "cash", "history", "visits"} <= rows[0].keys()
    importances = [r["importance"] for r in rows]
    assert importances == sorted(importances, reverse=True)
    crawled = {r["url"].removeprefix(site.base) for r in rows if r["state"] == "crawled"}
    assert crawled == reachable
    assert sum(importances) <= 1.0 + 1e-9
    # The recorded link graph: one line per visited page, its real links.
    graph = [json.loads(line) for line in (tmp_path / "graph.jsonl").read_text().splitlines()]
    assert len(graph) == stats["aopic/pages_visited"]
    assert {g["url"].removeprefix(site.base) for g in graph} == reachable
    for page in graph:
        expected = {site.base + href for href in site.graph[page["url"].removeprefix(site.base)]}
        assert set(page["links"]) == expected - {page["url"]}


def test_offsite_links_are_refused_as_they_come_in(tmp_path):
    """Links outside allowed_domains get no cash and no turn: refused when
    their page is visited, never handed out to be dropped by Scrapy."""
    with LocalSite(pages=40) as site:
        offsite = site.base.replace("127.0.0.1", "localhost")
        for i, path in enumerate(sorted(site.graph)[:10]):
            site.graph[path] = site.graph[path] + [f"{offsite}/p{i}", f"http://offsite.invalid/{i}"]
        process, out = start_crawl(tmp_path, "offsite", [site.base + "/p0"], {"RETRY_TIMES": 0},
                                   spider_args={"allowed_domains": ["127.0.0.1"]})
        report = finish(process, out)
        hits = dict(site.hits)
        reachable = site.reachable_pages()
    stats = report["stats"]
    # Distinct offsite URLs (20, each linked once), each counted once.
    assert 10 <= stats["aopic/refused/offsite"] <= stats["aopic/refused_links"]
    assert "aopic/failed/ignored" not in stats and "offsite/filtered" not in stats
    assert {p: hits.get(p, 0) for p in reachable} == {p: 1 for p in reachable}
    assert stats["aopic/conservation_error"] <= 1e-9


@pytest.mark.parametrize("discovery", [0.0, 0.01])  # AOPIC_DISCOVERY_CASH: replayed from the journal
def test_sigkill_mid_crawl_then_resume(tmp_path, discovery):
    """Killed with SIGKILL, resumed from JOBDIR: every reachable page is
    fetched, at most the requests in flight at the kill twice, and no cash
    is created but the seed's and each discovered URL's."""
    jobdir = tmp_path / "job"
    concurrency = 4
    settings = {"JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": concurrency, "RETRY_TIMES": 0,
                "DOWNLOAD_TIMEOUT": 1, "AOPIC_DISCOVERY_CASH": discovery}
    with LocalSite(pages=400, delay=0.01, slow_seconds=1.5) as site:
        seeds = [site.base + "/p0"]
        process, _ = start_crawl(tmp_path, "killed", seeds, settings)
        deadline = time.monotonic() + 180  # generous: CI machines may be busy
        while sum(site.hits[p] for p in site.graph) < 120:
            log = (tmp_path / "killed.log").read_text()[-3000:]
            assert process.poll() is None, f"the crawl ended before it could be killed:\n{log}"
            assert time.monotonic() < deadline, f"no progress in 180 s:\n{log}"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        fetched_before = sum(site.hits[p] for p in site.graph)
        assert fetched_before < 400

        process, out = start_crawl(tmp_path, "resumed", seeds, settings)
        report = finish(process, out)
        hits = dict(site.hits)
        reachable = site.reachable_pages()
    stats = report["stats"]
    assert all(hits.get(p, 0) >= 1 for p in reachable)
    twice = sum(hits.get(p, 0) - 1 for p in reachable)
    # Fetched again: only what was in flight at the kill (downloads plus the
    # responses waiting to be parsed: how many depends on Scrapy's engine,
    # 2.13 lets more wait than 2.19).
    assert stats["aopic/resumed_in_flight"] >= twice
    assert twice <= 8 * concurrency, twice
    injected = stats["aopic/cash_injected_total"]
    if discovery:
        # the seed brought cash once, and every URL a link made known (all
        # accounts but the seed and a redirect's target, if new) its share
        from scrapy_aopic.store.journal import load_jobdir

        known = load_jobdir(jobdir / "aopic").totals().known
        discovered = (injected - 1.0) / discovery
        assert discovered == pytest.approx(round(discovered), abs=1e-6)
        assert known - 1 - len(SPECIAL) <= round(discovered) <= known - 1
    else:
        assert injected == 1.0  # the seed brought cash once
    assert stats["aopic/conservation_error"] <= 1e-9
    # The resumed run fetched only what was left (and what was in flight).
    assert stats["aopic/pages_visited"] <= len(reachable) - fetched_before + stats["aopic/resumed_in_flight"] + 1


def test_numpy_is_imported_only_with_near_duplicate_detection_on(tmp_path):
    """Optional work costs nothing when it is off: with
    ``AOPIC_SIMHASH_ENABLED = False`` a whole crawl never imports numpy
    (0.05-0.1 s of start-up); with it on (the default), it does."""
    with LocalSite(pages=12) as site:
        # The two crawls side by side (each its own process): neither
        # waits for the other's start-up.
        started = {name: start_crawl(tmp_path, name, [site.base + "/p0"], settings)
                   for name, settings in (("off", {"AOPIC_SIMHASH_ENABLED": False}), ("on", {}))}
        reports = {name: finish(process, out) for name, (process, out) in started.items()}
    assert reports["off"]["stats"]["aopic/pages_visited"] >= 10
    assert reports["off"]["numpy_imported"] is False
    assert reports["on"]["numpy_imported"] is True
