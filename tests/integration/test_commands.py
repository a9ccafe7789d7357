"""``scrapy aopic top|stats|export|replay`` against real frontiers.

A real ``scrapy crawl`` (a temporary Scrapy project with the add-on, against
``localsite`` on 127.0.0.1) leaves a JOBDIR; the command then runs as a
subprocess, as a user would run it, and its answers are checked against the
crawl (its own importance export, its stats, the site's link graph).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.localsite import SPECIAL, LocalSite
from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store.journal import JournaledStore
from scrapy_aopic.store.base import PENDING, Link

PAGES = 40

SPIDER = '''
import scrapy
from scrapy.http import TextResponse


class FollowAllSpider(scrapy.Spider):
    """Follows every link; seeds from -a seeds=URL,URL."""

    name = "followall"

    def __init__(self, seeds="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url for url in seeds.split(",") if url]

    def parse(self, response):
        if isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)
        yield {"url": response.url, "status": response.status}
'''


def scrapy_env() -> dict[str, str]:
    """The environment of a ``scrapy`` subprocess: no inherited project."""
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.pop("SCRAPY_PROJECT", None)
    return env


def run_scrapy(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``scrapy ARGS`` run with this interpreter in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        env=scrapy_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Outcome:
    """What a command printed, and its exit status."""

    returncode: int
    stdout: str
    stderr: str


def run_inprocess(args: list[str], capsys, settings: dict | None = None) -> Outcome:
    """``scrapy aopic ARGS`` in this process, as ``scrapy.cmdline`` runs it
    (minus the process start-up, which the subprocess tests cover)."""
    import argparse

    from scrapy.settings import Settings

    from scrapy_aopic.commands import AopicCommand

    command = AopicCommand()
    command.settings = Settings(settings or {})
    parser = argparse.ArgumentParser(conflict_handler="resolve")
    command.add_options(parser)
    opts, rest = parser.parse_known_args(args)
    command.process_options(rest, opts)
    capsys.readouterr()
    command.run(rest, opts)
    captured = capsys.readouterr()
    return Outcome(command.exitcode, captured.out, captured.err)


def make_project(root: Path, extra_settings: str = "", package_name: str = "aopictest") -> Path:
    """A minimal Scrapy project with the add-on and one spider, ``followall``."""
    package = root / package_name
    (package / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text(f"[settings]\ndefault = {package_name}.settings\n")
    (package / "__init__.py").write_text("")
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "followall.py").write_text(SPIDER)
    (package / "settings.py").write_text(
        textwrap.dedent(
            """
            BOT_NAME = "PACKAGE"
            SPIDER_MODULES = ["PACKAGE.spiders"]
            ADDONS = {"scrapy_aopic.Addon": 0}
            ROBOTSTXT_OBEY = False
            TELNETCONSOLE_ENABLED = False
            LOG_LEVEL = "INFO"
            DOWNLOAD_TIMEOUT = 5
            RETRY_TIMES = 1
            """
        )
        .replace("PACKAGE", package_name)
        + extra_settings
    )
    return root


@dataclass
class Crawl:
    """A finished crawl: its project, JOBDIR, importance export and site."""

    project: Path
    jobdir: Path
    export: Path
    report: Path  #: AOPIC_REPORT directory (written if the crawl set it)
    site: LocalSite
    process: subprocess.CompletedProcess

    def ranking(self) -> list[dict]:
        return [json.loads(line) for line in self.export.read_text().splitlines()]


def crawl_site(root: Path, site: LocalSite, *settings: str) -> Crawl:
    """Run ``scrapy crawl followall`` from ``site``'s ``/p0`` with a JOBDIR."""
    project = make_project(root / "project")
    jobdir = root / "job"
    export = root / "importance.jsonl"
    args = ["crawl", "followall", "-a", f"seeds={site.base}/p0", "-s", f"JOBDIR={jobdir}",
            "-s", f"AOPIC_EXPORT_IMPORTANCE={export}", "-s", f"LOG_FILE={root / 'crawl.log'}"]
    for setting in settings:
        args += ["-s", setting]
    process = run_scrapy(args, project)
    log = (root / "crawl.log").read_text() if (root / "crawl.log").exists() else ""
    assert process.returncode == 0, process.stderr + log[-3000:]
    assert "Spider closed (finished)" in log, log[-3000:]
    return Crawl(project, jobdir, export, root / "report", site, process)


def reachable_specials(site: LocalSite) -> set[str]:
    """The awkward paths (404, 500, redirects, binary) linked from reachable pages."""
    return {link for page in site.reachable_pages() for link in site.graph[page] if link in SPECIAL}


_SHARED: dict[str, Crawl] = {}


def shared_crawl(tmp_path_factory) -> Crawl:
    """One real crawl for the session, shared with test_report.py: JOBDIR,
    importance export and crawl report on, throttled (one request at a time,
    20 ms apart) so that the report gets several samples."""
    if "crawl" not in _SHARED:
        root = tmp_path_factory.mktemp("crawl")
        with LocalSite(pages=PAGES, slow_seconds=0.1) as site:
            _SHARED["crawl"] = crawl_site(
                root, site,
                f"AOPIC_REPORT={root / 'report'}", "AOPIC_REPORT_INTERVAL=0.05", "AOPIC_REPORT_TOP=10",
                f"AOPIC_EXPORT_GRAPH={root / 'graph.jsonl'}",
                "DOWNLOAD_DELAY=0.02", "CONCURRENT_REQUESTS_PER_DOMAIN=1",
            )
    return _SHARED["crawl"]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> Crawl:
    return shared_crawl(tmp_path_factory)


def aopic(crawl: Crawl, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_scrapy(["aopic", *args], cwd or crawl.project)


def assert_clean_error(result: subprocess.CompletedProcess | Outcome, expected: str, status: int = 1) -> None:
    """A user error: the given exit status, one line on stderr, no traceback."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("scrapy aopic: error: "), result.stderr
    assert expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


# -- top -----------------------------------------------------------------------------


def test_top_lists_the_crawls_most_important_pages_in_order(crawl):
    result = aopic(crawl, "top", "followall", "-n", "5", "--json", "-s", f"JOBDIR={crawl.jobdir}")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["rank"] for row in rows] == [1, 2, 3, 4, 5]
    importances = [row["importance"] for row in rows]
    assert importances == sorted(importances, reverse=True)
    # The same five pages, in the same order, as the crawl's own export at close.
    expected = crawl.ranking()[:5]
    assert [row["url"] for row in rows] == [row["url"] for row in expected]
    for got, want in zip(rows, expected):
        assert math.isclose(got["importance"], want["importance"], rel_tol=1e-12)


def test_top_after_the_quickstarts_crawl_finds_its_jobdir(crawl):
    """The quickstart: ``scrapy crawl followall -s JOBDIR=...`` then
    ``scrapy aopic top followall``, with no JOBDIR given the second time."""
    result = aopic(crawl, "top", "followall", "-n", "3", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["url"] for row in rows] == [row["url"] for row in crawl.ranking()[:3]]


def test_top_table(crawl, capsys):
    result = run_inprocess(["top", "-n", "3", "--jobdir", str(crawl.jobdir)], capsys)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["rank", "importance", "cash", "history", "visits", "state", "url"]
    assert len(lines) == 4
    assert [line.split()[-1] for line in lines[1:]] == [row["url"] for row in crawl.ranking()[:3]]


def test_top_by_cash_lists_the_richest_pending_urls_of_a_running_crawl(tmp_path, capsys):
    # A frontier written through the store as a crawl writes it, with pending
    # URLs of known cash; the journal is still open (the crawl is running).
    store = JournaledStore(tmp_path / "job" / "aopic")
    engine = AopicEngine(store)
    cash = {"http://a.example/": 0.5, "http://b.example/": 2.0, "http://c.example/": 1.25, "http://d.example/": 0.75}
    for url, amount in cash.items():
        engine.add_seed(Link(url, url.split("/")[2], 0), amount)
    lease = engine.next()  # b.example, the richest, is visited and pays its links
    engine.visit(lease, [Link("http://a.example/", "a.example", 1), Link("http://e.example/", "e.example", 1)])
    expected = {v.url: v.cash for v in store.iter_accounts() if v.state == PENDING}
    try:
        result = run_inprocess(["top", "--by", "cash", "--json", "--jobdir", str(tmp_path / "job")], capsys)
    finally:
        store.close()
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["url"] for row in rows] == sorted(expected, key=lambda url: -expected[url])
    for row in rows:
        assert math.isclose(row["cash"], expected[row["url"]], rel_tol=1e-12)
    assert "http://b.example/" not in {row["url"] for row in rows}  # crawled, not pending


# -- stats ---------------------------------------------------------------------------


def test_stats_agree_with_the_crawl(crawl, capsys):
    result = aopic(crawl, "stats", "--json", "--jobdir", str(crawl.jobdir))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    states = summary["states"]
    crawl_stats = summary["crawl_stats"]
    assert crawl_stats is not None, "the add-on saves the crawl's stats in JOBDIR at close"

    reachable = crawl.site.reachable_pages()
    specials = reachable_specials(crawl.site)
    # Every reachable page crawled once; /slow is an HTML page too.
    assert states["crawled"] == len(reachable) + ("/slow" in specials)
    assert states["crawled"] == summary["visits"] == crawl_stats["aopic/pages_visited"]
    assert summary["pending"] == 0 and summary["leased"] == 0
    # 404, 500 and a binary file are failures; redirects are aliases.
    assert states["failed"] == len(specials & {"/missing", "/error", "/image.png"})
    assert states["alias"] == len(specials & {"/moved", "/moved-known"})
    assert summary["known"] == sum(states.values())
    assert summary["hosts_total"] == 1
    assert summary["hosts"][0]["host"] == "127.0.0.1"
    assert summary["hosts"][0]["known"] == summary["known"]
    assert math.isclose(summary["cash_injected"], 1.0)
    assert summary["conservation_error"] <= 1e-9
    assert summary["history_sum"] > 1.0  # the seed alone passed on its 1.0
    assert math.isclose(summary["convergence"], 1.0 / summary["history_sum"])

    text = run_inprocess(["stats", "--jobdir", str(crawl.jobdir)], capsys)
    assert text.returncode == 0, text.stderr
    assert f"known URLs          {summary['known']}" in text.stdout
    assert f"crawled             {states['crawled']}" in text.stdout
    assert "aopic/pages_visited" in text.stdout  # the saved crawl counters


# -- export --------------------------------------------------------------------------


def test_export_matches_the_crawls_own_export(crawl, tmp_path, capsys):
    jsonl, table = tmp_path / "ranking.jsonl", tmp_path / "out" / "ranking.csv"
    result = aopic(crawl, "export", "--jobdir", str(crawl.jobdir), "-o", str(jsonl))
    assert result.returncode == 0, result.stderr
    result = run_inprocess(["export", "--jobdir", str(crawl.jobdir), "-o", str(table)], capsys)
    assert result.returncode == 0, result.stderr
    expected = crawl.ranking()
    exported = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [row["url"] for row in exported] == [row["url"] for row in expected]
    assert [row["rank"] for row in exported] == list(range(1, len(expected) + 1))
    for got, want in zip(exported, expected):
        assert got["state"] == want["state"] and got["visits"] == want["visits"]
        assert math.isclose(got["importance"], want["importance"], rel_tol=1e-12)
        assert got["host"] == "127.0.0.1"

    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [row["url"] for row in rows] == [row["url"] for row in expected]
    importances = [float(row["importance"]) for row in rows]
    assert importances == sorted(importances, reverse=True)
    assert importances == [row["importance"] for row in exported]  # floats round-trip exactly


# -- errors --------------------------------------------------------------------------


def test_errors_end_to_end_are_one_line_without_traceback(crawl, tmp_path):
    from tests.support.redis_server import free_port  # a port nothing listens on

    try:
        import scrapy_aopic.store.redis  # noqa: F401
    except ImportError:
        redis_error = "Redis backend is not available"
    else:
        redis_error = "cannot reach Redis at redis://127.0.0.1:"
    cases = [
        (["top", "--jobdir", str(tmp_path / "nope")], "does not exist"),
        (["top", "nosuchspider", "--jobdir", str(crawl.jobdir)], "no spider named 'nosuchspider' (spiders: followall)"),
        (["top", "followall", "-s", "AOPIC_BACKEND=redis", "-s", f"REDIS_URL=redis://127.0.0.1:{free_port()}/0"],
         redis_error),
    ]
    # Independent processes: run them side by side.
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda case: aopic(crawl, "--nolog", *case[0]), cases))
    for (_, expected), result in zip(cases, results):
        assert_clean_error(result, expected)


def test_usage_and_frontier_errors(crawl, tmp_path, capsys):
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    cases = [
        (["top", "--jobdir", str(tmp_path / "nope")], "does not exist", 1),
        (["top", "--jobdir", str(empty_dir)], "no AOPIC frontier in JOBDIR", 1),
        (["stats"], "no JOBDIR", 1),
        (["top", "followall"], "no spider named 'followall'", 1),  # no SPIDER_MODULES here
        (["frobnicate"], "unknown subcommand 'frobnicate'", 2),
        ([], "missing subcommand", 2),
        (["top", "a", "b", "--jobdir", str(crawl.jobdir)], "too many arguments", 2),
        (["export", "--jobdir", str(crawl.jobdir)], "export needs -o FILE", 2),
        (["top", "-n", "0", "--jobdir", str(crawl.jobdir)], "-n must be at least 1", 2),
        (["export", "--jobdir", str(crawl.jobdir), "-o", str(empty_dir / "x" / "y.jsonl" / "z")], "", 0),
        (["export", "--jobdir", str(crawl.jobdir), "-o", str(empty_dir)], "cannot write", 1),
    ]
    for args, expected, status in cases:
        result = run_inprocess(args, capsys)
        if status == 0:
            assert result.returncode == 0, result.stderr
            continue
        assert_clean_error(result, expected, status)


def test_spider_settings_pick_the_jobdir(crawl, capsys, monkeypatch):
    # A spider's custom_settings JOBDIR is used when the spider is named.
    spider_file = crawl.project / "aopictest" / "spiders" / "withjob.py"
    spider_file.write_text(
        SPIDER.replace('name = "followall"', 'name = "withjob"\n    custom_settings = {"JOBDIR": %r}' % str(crawl.jobdir))
        .replace("class FollowAllSpider", "class WithJobSpider")
    )
    monkeypatch.syspath_prepend(str(crawl.project))
    project_settings = {"SPIDER_MODULES": ["aopictest.spiders"]}
    try:
        found = run_inprocess(["top", "withjob", "-n", "2", "--json"], capsys, project_settings)
        unknown = run_inprocess(["top", "nosuch"], capsys, project_settings)
    finally:
        spider_file.unlink()
    assert found.returncode == 0, found.stderr
    assert [json.loads(line)["url"] for line in found.stdout.splitlines()] == [r["url"] for r in crawl.ranking()[:2]]
    assert_clean_error(unknown, "no spider named 'nosuch' (spiders: followall, withjob)")


def test_replay_runs_the_simulator_on_the_recorded_graph(crawl, tmp_path, capsys):
    graph = crawl.jobdir.parent / "graph.jsonl"  # AOPIC_EXPORT_GRAPH of the crawl
    missing = run_inprocess(["replay", str(tmp_path / "no-graph.jsonl"), "-o", str(tmp_path / "a")], capsys)
    assert missing.returncode != 0  # a graph that does not exist
    assert "Traceback" not in missing.stderr + missing.stdout
    result = aopic(crawl, "replay", str(graph), "-o", str(tmp_path / "replay"))
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "replay").rglob("*.md")), "the comparison tables"
    try:
        import matplotlib  # noqa: F401  (the [report] or [bench] extra)
    except ImportError:  # replay needs scipy alone: the plot is left out, and said
        assert "needs matplotlib" in result.stderr + result.stdout
    else:
        assert list((tmp_path / "replay").rglob("*.png")), "the comparison plot"


# -- Redis -----------------------------------------------------------------------------


def test_reads_a_redis_frontier(crawl, request, capsys):
    redis_store = pytest.importorskip("scrapy_aopic.store.redis")
    try:
        server = request.getfixturevalue("redis_server")
    except RuntimeError as exc:  # no redis-server binary
        pytest.skip(str(exc))
    from scrapy_aopic.commands import DEFAULT_REDIS_KEY, redis_key_setting
    from scrapy_aopic.settings import SETTINGS

    setting = redis_key_setting()
    template = (SETTINGS[setting].default if setting else None) or DEFAULT_REDIS_KEY
    prefix = template % {"spider": "followall", "name": "followall"}
    store = redis_store.RedisStore.from_url(server.url, key_prefix=prefix)
    store.clear()
    engine = AopicEngine(store)
    for i, host in enumerate(("a.example", "b.example", "c.example")):
        engine.add_seed(Link(f"http://{host}/", host, 0), 1.0 + i)
    lease = engine.next()
    engine.visit(lease, [Link("http://a.example/x", "a.example", 1), Link("http://b.example/", "b.example", 1)])
    expected = [page.url for page in engine.ranking()]
    known = engine.totals().known
    before = {key: store.server.type(key) for key in store.server.keys(f"{prefix}:*")}
    store.close()

    redis_args = ["-s", "AOPIC_BACKEND=redis", "-s", f"REDIS_URL={server.url}"]
    top = aopic(crawl, "top", "followall", "--json", *redis_args)
    assert top.returncode == 0, top.stderr
    assert [json.loads(line)["url"] for line in top.stdout.splitlines()] == expected
    # In process, without the project's spiders: name the frontier by its key.
    stats = run_inprocess(["stats", "--json", "--redis-key", prefix, *redis_args], capsys)
    assert stats.returncode == 0, stats.stderr
    summary = json.loads(stats.stdout)
    assert summary["known"] == known and summary["states"]["crawled"] == 1
    assert summary["conservation_error"] <= 1e-9
    wrong = run_inprocess(["top", "--redis-key", "nothing:here", *redis_args], capsys)
    assert_clean_error(wrong, "no AOPIC frontier under key prefix 'nothing:here'")
    # Read-only: the command created no key.
    import redis

    client = redis.Redis.from_url(server.url)
    assert {key: client.type(key) for key in client.keys(f"{prefix}:*")} == before
    assert client.keys("nothing:here*") == []


def test_a_corrupt_redis_frontier_is_named_not_a_traceback(crawl, request, capsys):
    """A total or a record in Redis that the store never writes: stats, top
    and export say which value (exit 1), never a traceback, and never print
    numbers that silently leave a record out."""
    redis_store = pytest.importorskip("scrapy_aopic.store.redis")
    try:
        server = request.getfixturevalue("redis_server")
    except RuntimeError as exc:  # no redis-server binary
        pytest.skip(str(exc))
    import redis

    prefix = "corrupt:aopic"
    store = redis_store.RedisStore.from_url(server.url, key_prefix=prefix)
    store.clear()
    engine = AopicEngine(store)
    for i, host in enumerate(("a.example", "b.example", "c.example")):
        engine.add_seed(Link(f"http://{host}/", host, 0), 1.0 + i)
    engine.visit(engine.next(), [Link("http://a.example/x", "a.example", 1)])
    store.close()
    keys = redis_store.FrontierKeys.of(prefix)
    client = redis.Redis.from_url(server.url)
    redis_args = ["--redis-key", prefix, "-s", "AOPIC_BACKEND=redis", "-s", f"REDIS_URL={server.url}"]
    commands = (["stats"], ["stats", "--json"], ["top"], ["top", "--by", "cash"], ["export", "-o", "-"])
    for command in commands:
        assert run_inprocess([*command, *redis_args], capsys).returncode == 0, command

    good = client.hget(keys.tot, "dividend")
    client.hset(keys.tot, "dividend", "nan")
    for command in commands:
        assert_clean_error(run_inprocess([*command, *redis_args], capsys), "total dividend = b'nan'")
    # the same through scrapy's own command line (no traceback there either)
    result = aopic(crawl, "stats", *redis_args)
    assert_clean_error(result, "total dividend = b'nan'")
    if good is None:
        client.hdel(keys.tot, "dividend")
    else:
        client.hset(keys.tot, "dividend", good)
    client.hset(keys.tot, "history_sum", "-1e400")  # -inf
    for command in (["stats"], ["top"], ["export", "-o", "-"]):  # (top --by cash reads no total)
        assert_clean_error(run_inprocess([*command, *redis_args], capsys), "total history_sum = b'-1e400'")
    client.hdel(keys.tot, "history_sum")

    client.hset(keys.acct, "http://b.example/", b"\x09not a record")
    for command in commands:
        outcome = run_inprocess([*command, *redis_args], capsys)
        assert outcome.returncode == 1, (command, outcome)
        assert "Traceback" not in outcome.stderr + outcome.stdout
        last = outcome.stderr.strip().splitlines()[-1]
        assert last.startswith("scrapy aopic: error: the frontier holds 1 value(s) its store never writes"), last
        assert "account record of http://b.example/ = b'\\tnot a record'" in last, last
        assert "http://b.example/" not in outcome.stdout  # left out of what was printed, and said so
