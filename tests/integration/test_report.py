"""The crawl report (``AOPIC_REPORT``): a real crawl writes valid PNG plots
and one self-contained HTML page; the sampling stays cheap; without
matplotlib the report is written with its tables only."""

from __future__ import annotations

import json
import logging
import math
import struct
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from scrapy_aopic.extensions import report as report_module
from scrapy_aopic.extensions.report import PLOTS, AopicReport, rank_agreement, write_report
from scrapy_aopic.store.base import Link
from tests.integration.test_commands import shared_crawl

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VOID_TAGS = {"meta", "img", "br", "hr", "link", "input"}
ROOT = Path(__file__).resolve().parents[2]


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, after checking its signature and IHDR chunk."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


class TagChecker(HTMLParser):
    """Collects tags, checks they nest, and records every src/href."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.links: list[str] = []
        self.rows_by_table: list[int] = []
        self.doctype = False

    def handle_decl(self, decl):
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href"):
                self.links.append(value or "")
        if tag == "table":
            self.rows_by_table.append(0)
        if tag == "tr" and self.rows_by_table:
            self.rows_by_table[-1] += 1
        if tag not in VOID_TAGS:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()


def check_html(text: str) -> TagChecker:
    checker = TagChecker()
    checker.feed(text)
    checker.close()
    assert checker.doctype
    assert checker.errors == [] and checker.stack == []
    return checker


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """The session's real crawl (see test_commands.shared_crawl), which ran
    with ``AOPIC_REPORT`` sampled every 50 ms, and its report directory."""
    crawl = shared_crawl(tmp_path_factory)
    return crawl, crawl.report


def test_report_files_after_a_real_crawl(reported):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    crawl, directory = reported
    for name, _ in PLOTS:
        data = (directory / f"{name}.png").read_bytes()
        width, height = png_size(data)
        assert 400 <= width <= 2000 and 200 <= height <= 2000
        pixels = imread(directory / f"{name}.png")
        assert pixels.shape[:2] == (height, width)
        assert pixels.std() > 0.01  # not a blank image

    html = (directory / "report.html").read_text(encoding="utf-8")
    checker = check_html(html)
    # Opens offline: every image is embedded, nothing is fetched from elsewhere.
    assert [link for link in checker.links if not link.startswith("data:image/png;base64,")] == []
    assert len(checker.links) == len(PLOTS)
    # The top pages table: AOPIC_REPORT_TOP rows, the crawl's most important pages.
    assert "Top pages by importance" in html
    top = json.loads((directory / "report.json").read_text())["top"]
    assert [row["url"] for row in top] == [row["url"] for row in crawl.ranking()[:10]]
    assert 11 in checker.rows_by_table  # 10 rows + the header
    for row in top:
        assert row["url"] in html


def test_report_samples_follow_the_crawl(reported):
    crawl, directory = reported
    data = json.loads((directory / "report.json").read_text())
    stats = json.loads((directory / "stats.json").read_text())
    samples = data["samples"]
    assert len(samples) >= 3
    times = [s["t"] for s in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    for key in ("visits", "history_sum", "cash_to_links", "cash_to_lambda_tax", "known"):
        values = [s[key] for s in samples]
        assert values == sorted(values), key  # cumulative figures never go down
    last = samples[-1]
    crawled = sum(1 for row in crawl.ranking() if row["state"] == "crawled")
    assert last["visits"] == stats["aopic/pages_visited"] == crawled
    assert last["pending"] == 0 and math.isclose(last["injected"], 1.0)
    # The last sample is taken at close: its top 100 is the final ranking.
    assert last["final_overlap"] == 1.0 and last["final_tau"] == 1.0
    stabilities = [s["top_overlap"] for s in samples if s.get("top_overlap") is not None]
    assert stabilities and all(0.0 <= v <= 1.0 for v in stabilities)
    assert stats["aopic/conservation_error"] <= 1e-9
    assert stats["finish_reason"] == "finished"
    # With JOBDIR the same stats are saved for `scrapy aopic stats`.
    saved = json.loads((crawl.jobdir / "aopic-stats.json").read_text())
    assert saved["aopic/pages_visited"] == stats["aopic/pages_visited"]


def test_every_stat_of_a_real_crawl_is_documented(reported):
    from tests.integration.test_docs import undocumented_stats

    _, directory = reported
    stats = json.loads((directory / "stats.json").read_text())
    names = {name for name in stats if name.startswith("aopic/")}
    assert len(names) > 10
    assert undocumented_stats(names) == []


# -- sampling ----------------------------------------------------------------------------


def test_rank_agreement():
    assert rank_agreement(["a", "b", "c"], ["a", "b", "c"]) == (1.0, 1.0)
    assert rank_agreement(["a", "b", "c"], ["c", "b", "a"]) == (1.0, -1.0)
    assert rank_agreement(["a", "b"], ["c", "d"]) == (0.0, None)
    assert rank_agreement([], []) == (None, None)
    overlap, tau = rank_agreement(["a", "b", "c", "d"], ["a", "c", "b", "e"])
    assert overlap == 0.75
    assert math.isclose(tau, (2 - 1) / 3)  # (a,c) (a,b) concordant, (c,b) discordant


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def open_report(tmp_path, monkeypatch, clock):
    monkeypatch.setattr(report_module.time, "monotonic", clock)
    crawler = get_crawler(Spider, {"AOPIC_REPORT": str(tmp_path / "report")})
    ext = AopicReport.from_crawler(crawler)
    ext.frontier.open(Spider("sampled"))
    engine = ext.frontier.engine
    for i in range(150):
        engine.add_seed(Link(f"http://h{i % 7}.example/{i}", f"h{i % 7}.example", 0), 1.0 + i % 13)
    return ext


def test_top_scans_stay_within_their_time_budget(tmp_path, monkeypatch):
    clock = FakeClock()
    ext = open_report(tmp_path, monkeypatch, clock)
    real_top = report_module.top_urls

    def slow_top(store, k=report_module.TOP_K):
        clock.now += 1.0  # pretend a scan takes one second
        return real_top(store, k)

    monkeypatch.setattr(report_module, "top_urls", slow_top)
    first = ext.sample()
    assert "_top" in first and len(first["_top"]) == 100
    # 1 s of scanning may come back only after 1 / SCAN_BUDGET = 20 s.
    clock.now += 5
    assert "_top" not in ext.sample()
    clock.now += 15
    third = ext.sample()
    assert "_top" in third and third["top_overlap"] == 1.0 and third["kendall_tau"] == 1.0


def test_samples_are_thinned_on_long_crawls(tmp_path, monkeypatch):
    clock = FakeClock()
    ext = open_report(tmp_path, monkeypatch, clock)
    monkeypatch.setattr(report_module, "MAX_SAMPLES", 40)
    for _ in range(200):
        clock.now += 5
        ext.sample()
    assert 20 <= len(ext.samples) <= 40
    times = [s["t"] for s in ext.samples]
    assert times[0] == 5.0  # the first sample is kept
    gaps = {round(b - a, 6) for a, b in zip(times, times[1:])}
    assert len(gaps) == 1  # evenly spaced
    (gap,) = gaps
    assert gap >= 25.0  # 200 ticks of 5 s in at most 40 samples
    assert times[-1] > 1000.0 - gap  # up to date


# -- without matplotlib -------------------------------------------------------------------


def hide_matplotlib(monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_report_without_matplotlib_has_tables_and_says_why(tmp_path, monkeypatch, caplog):
    hide_matplotlib(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="scrapy_aopic.extensions.report"):
        AopicReport.from_crawler(get_crawler(Spider, {"AOPIC_REPORT": str(tmp_path / "r")}))
    assert "matplotlib is not installed" in caplog.text

    samples = [
        {"t": t, "visits": t, "pending": 3, "known": 5 + t, "injected": 1.0, "lambda_cash": 0.1,
         "lambda_visits": 0, "history_sum": 1.0 + t, "cash_to_links": 0.5, "cash_to_lambda_tax": 0.2,
         "cash_to_lambda_failed": 0.0, "lambda_paid": 0.0, "refused": 0, "failed": 0}
        for t in range(3)
    ]
    data = {"spider": "s<b>", "samples": samples, "top": [
        {"rank": 1, "url": "http://x.example/?a=1&b=<2>", "importance": 0.5, "cash": 0.1, "history": 0.4,
         "visits": 1, "depth": 0, "state": "crawled"}],
        "hosts": [{"host": "x.example", "known": 1, "crawled": 1, "failed": 0, "refused": 0, "pending": 0,
                   "alias": 0, "leased": 0}],
        "settings": {"AOPIC_REPORT": "r"}, "stats": {"aopic/pages_visited": 2}}
    path = write_report(tmp_path / "out", data, {"aopic/pages_visited": 2})
    html = path.read_text(encoding="utf-8")
    check_html(html)
    assert "No plots" in html and "scrapy-aopic[report]" in html
    assert "http://x.example/?a=1&amp;b=&lt;2&gt;" in html  # escaped
    assert "s&lt;b&gt;" in html
    assert list((tmp_path / "out").glob("*.png")) == []
    assert json.loads((tmp_path / "out" / "report.json").read_text())["samples"] == samples


def test_disabled_without_report_or_jobdir():
    from scrapy.exceptions import NotConfigured

    with pytest.raises(NotConfigured):
        AopicReport.from_crawler(get_crawler(Spider, {}))


def test_hosts_plot_with_absurdly_long_host_names(tmp_path):
    """A hostile site's hosts (300 letters, two alike but for the middle)
    leave the hosts plot its room and their own bars: no matplotlib
    warning ('constrained_layout not applied'), one label per host."""
    import warnings

    pytest.importorskip("matplotlib")
    long = ["a." * 150 + "com", "a." * 150 + "org", "a." * 75 + "b." + "a." * 74 + "com", "x.example"]
    samples = [{"t": t, "visits": t, "pending": 3, "known": 5 + t, "injected": 1.0, "lambda_cash": 0.1,
                "lambda_visits": 0, "history_sum": 1.0 + t, "cash_to_links": 0.5, "cash_to_lambda_tax": 0.2,
                "cash_to_lambda_failed": 0.0, "lambda_paid": 0.0, "refused": 0, "failed": 0, "in_flight": 0}
               for t in range(3)]
    hosts = [{"host": h, "known": 1, "crawled": 1, "failed": 0, "refused": 0, "pending": 0, "alias": 0}
             for h in long]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        images = report_module.draw_plots({"samples": samples, "hosts": hosts, "top": []})
    assert "hosts" in images
    labels = report_module._host_labels(long)
    assert len(set(labels)) == len(long) and max(map(len, labels)) <= 45
    assert labels[-1] == "x.example"
