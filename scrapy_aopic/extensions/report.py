"""Extension: the crawl report (``AOPIC_REPORT = "dir"``).

While the spider runs, :class:`AopicReport` samples the frontier every
``AOPIC_REPORT_INTERVAL`` seconds: the running totals (pages visited, frontier
size, lambda cash, sum of history — all O(1)), the cash-flow counters of the
stats, and the top 100 pages by importance, to measure how stable the
ranking has become (top-100 overlap and Kendall tau between consecutive
samples, and against the final ranking). The top-100 scan reads every
account, so it runs at most as often as keeps it under :data:`SCAN_BUDGET` of
the crawl's wall time.

When the spider closes it writes, in the report directory:

* ``report.html`` — one self-contained page (plots embedded as data URIs)
  that opens offline: summary, plots, top pages, hosts, settings;
* ``convergence.png``, ``cash_flow.png``, ``frontier.png``, ``hosts.png``;
* ``report.json`` — every sample and the summary, for your own plots;
* ``stats.json`` — the crawl's final Scrapy stats.

The plots need matplotlib (``pip install "scrapy-aopic[report]"``); without
it the report is written with its tables only, and a warning says why.

With ``JOBDIR`` set the extension also saves the final stats as
``JOBDIR/aopic-stats.json`` (even without ``AOPIC_REPORT``), which
``scrapy aopic stats`` shows next to the frontier.
"""

from __future__ import annotations

import base64
import datetime
import heapq
import html
import io
import json
import logging
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from .. import settings as aopic_settings
from ..compat import create_looping_call
from .. import signals as aopic_signals
from ..frontier import Frontier
from .logstats import refused_urls
from ..store.base import ALIAS, STATE_NAMES, StoreStalled

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Pages compared between samples to measure ranking stability.
TOP_K = 100
#: Largest share of wall time the top-k scans may take.
SCAN_BUDGET = 0.05
#: Samples kept; beyond this every other one is dropped and the rate halved
#: (long crawls). Even, so that the latest sample survives a thinning.
MAX_SAMPLES = 2000
#: Hosts drawn in the pages-per-host plot and listed in the table.
HOSTS_SHOWN = 25
#: Name of the crawl's stats saved in ``JOBDIR`` (read by ``scrapy aopic stats``).
JOBDIR_STATS_FILE = "aopic-stats.json"

PLOTS = (
    ("convergence", "Importance convergence"),
    ("cash_flow", "Cash flow"),
    ("frontier", "Frontier"),
    ("hosts", "Pages per host"),
)


def rank_agreement(previous: list[str], current: list[str]) -> tuple[float | None, float | None]:
    """``(top_overlap, kendall_tau)`` of two top-k URL lists.

    ``top_overlap`` is the share of URLs the lists have in common (1.0: the
    same set); ``kendall_tau`` compares the order of those common URLs (1.0:
    the same order, -1.0: reversed; ``None`` with fewer than two in common).
    """
    size = max(len(previous), len(current))
    if size == 0:
        return None, None
    position = {url: i for i, url in enumerate(previous)}
    common = [(position[url], i) for i, url in enumerate(current) if url in position]
    overlap = len(common) / size
    n = len(common)
    if n < 2:
        return overlap, None
    concordant = discordant = 0
    for a in range(n):
        pa, ca = common[a]
        for b in range(a + 1, n):
            pb, cb = common[b]
            if (pa - pb) * (ca - cb) > 0:
                concordant += 1
            else:
                discordant += 1
    return overlap, (concordant - discordant) / (n * (n - 1) / 2)


def top_urls(store, k: int = TOP_K) -> list[str]:
    """The ``k`` most important URLs of ``store`` (one pass, no full sort).

    Importance is proportional to ``history + cash`` (``docs/concepts.rst``), and the
    denominator is the same for every page, so it is left out.
    """
    views = (v for v in store.iter_accounts() if v.state != ALIAS)
    # Same order as AopicEngine.ranking(): importance descending, then URL.
    best = heapq.nsmallest(k, views, key=lambda v: (-(v.history + v.cash + v.leased), v.url))
    return [v.url for v in best]


class AopicReport:
    """Samples the frontier during the crawl and writes the report at close
    (``AOPIC_REPORT``); saves the final stats in ``JOBDIR`` when that is set."""

    def __init__(
        self,
        crawler: Crawler,
        directory: str | None,
        interval: float,
        top_rows: int,
        jobdir: str | None,
    ):
        self.crawler = crawler
        self.frontier = Frontier.from_crawler(crawler)
        self.directory = Path(directory) if directory else None
        self.interval = interval
        self.top_rows = top_rows
        self.jobdir = Path(jobdir) if jobdir else None
        #: One dict per sample; a sample that scanned the top k keeps that
        #: URL list under ``"_top"`` (left out of report.json).
        self.samples: list[dict[str, Any]] = []
        self.task = None
        self._started = time.monotonic()
        self._started_at = datetime.datetime.now(datetime.timezone.utc)
        self._next_scan = 0.0
        self._last_top: list[str] | None = None
        self._ticks = 0
        self._stride = 1
        #: The final frontier, read at ``frontier_closing`` (before the store closes).
        self._final: tuple[list[dict], dict[str, Counter], bool] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicReport:
        settings = crawler.settings
        directory = aopic_settings.get(settings, "AOPIC_REPORT")
        jobdir = settings.get("JOBDIR")
        if not directory and not jobdir:
            raise NotConfigured
        interval = aopic_settings.get_float(settings, "AOPIC_REPORT_INTERVAL")
        if directory and not interval > 0:
            raise ValueError(f"AOPIC_REPORT_INTERVAL must be > 0 seconds, got {interval!r}")
        top_rows = aopic_settings.get_int(settings, "AOPIC_REPORT_TOP")
        ext = cls(crawler, directory, interval, top_rows, jobdir)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.frontier_closing, signal=aopic_signals.frontier_closing)
        crawler.signals.connect(ext.jobdir_refused, signal=aopic_signals.jobdir_refused)
        if directory and not _has_matplotlib():
            logger.warning(
                "aopic: matplotlib is not installed: the crawl report in %s will have "
                "tables but no plots (pip install \"scrapy-aopic[report]\")",
                directory,
            )
        return ext

    # -- sampling ------------------------------------------------------------------

    def spider_opened(self, spider: Spider) -> None:
        self._started = time.monotonic()
        self._started_at = datetime.datetime.now(datetime.timezone.utc)
        if self.directory is None:
            return
        self.task = create_looping_call(self.sample)
        self.task.start(self.interval, now=True)

    def sample(self, *, force_scan: bool = False) -> dict[str, Any] | None:
        """Record the frontier's figures now (the top-k scan when it is due);
        ``None`` when no sample is due, or when Redis is not answering: that
        tick is skipped and counted (``aopic/report/samples_stalled``), as
        raising would stop this looping call, and every later sample."""
        try:
            return self._sample(force_scan)
        except StoreStalled:
            self.crawler.stats.inc_value("aopic/report/samples_stalled")
            return None

    def _sample(self, force_scan: bool) -> dict[str, Any] | None:
        engine = self.frontier.engine
        if engine is None:
            return None
        self._ticks += 1
        # After thinning, keep only every _stride-th tick, so samples stay evenly spaced.
        if not force_scan and (self._ticks - 1) % self._stride:
            return None
        now = time.monotonic()
        totals = engine.totals()
        stats = self.crawler.stats.get_stats()
        record: dict[str, Any] = {
            "t": now - self._started,
            "pages_visited": stats.get("aopic/pages_visited", 0),
            "visits": totals.visits,
            "pending": totals.pending,
            "known": totals.known,
            "in_flight": totals.in_flight,
            "injected": totals.injected,
            "lambda_cash": totals.lambda_cash,
            "lambda_visits": totals.lambda_visits,
            "history_sum": totals.history_sum,
            "cash_to_links": stats.get("aopic/cash_to_links", 0.0),
            "cash_to_lambda_tax": stats.get("aopic/cash_to_lambda_tax", 0.0),
            "cash_to_lambda_failed": stats.get("aopic/cash_to_lambda_failed", 0.0),
            "lambda_paid": stats.get("aopic/lambda_paid", 0.0),
            "refused": refused_urls(stats)[0],  # distinct URLs, offsite apart
            "offsite": refused_urls(stats)[1],
            "failed": sum(v for k, v in stats.items() if k.startswith("aopic/failed/")),
            "top_overlap": None,
            "kendall_tau": None,
        }
        if force_scan or now >= self._next_scan:
            top = top_urls(engine.store)
            spent = time.monotonic() - now
            # Keep the scans under SCAN_BUDGET of wall time whatever the frontier size.
            self._next_scan = time.monotonic() + spent / SCAN_BUDGET
            if self._last_top is not None:
                record["top_overlap"], record["kendall_tau"] = rank_agreement(self._last_top, top)
            self._last_top = top
            record["scan_seconds"] = spent
            record["_top"] = top
        self.samples.append(record)
        if len(self.samples) > MAX_SAMPLES and not force_scan:  # keep the final sample
            self._thin()
        return record

    def _thin(self) -> None:
        """Halve the samples and the sampling rate: a long crawl keeps at
        most MAX_SAMPLES evenly spaced samples (the first one included)."""
        self.samples = self.samples[::2]
        self._stride *= 2

    # -- closing -------------------------------------------------------------------

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self.task is not None and self.task.running:
            self.task.stop()
        stats = dict(self.crawler.stats.get_stats())
        stats.setdefault("finish_reason", reason)
        stats.setdefault("finish_time", datetime.datetime.now(datetime.timezone.utc))
        if self.jobdir is not None:
            try:
                _write_json(self.jobdir / JOBDIR_STATS_FILE, stats)
            except OSError as exc:
                logger.error("aopic: cannot save the crawl stats in %s: %s", self.jobdir, exc)
        if self.directory is None:
            return
        try:
            path = self.write(stats, reason)
        except Exception:  # a report must never turn a finished crawl into a failure
            logger.exception("aopic: the crawl report could not be written to %s", self.directory)
            return
        logger.info("aopic: crawl report written to %s", path, extra={"spider": spider})

    def jobdir_refused(self, reason: str) -> None:
        # The JOBDIR's saved stats are its last crawl's, not a refused run's.
        self.jobdir = None

    def frontier_closing(self, frontier, reason: str) -> None:
        """Read the final frontier while its store is still open."""
        if self.directory is not None:
            self._final = self.final_state()

    def final_state(self) -> tuple[list[dict], dict[str, Counter], bool]:
        """``(ranking records, host -> state counts, read ok)`` at close.

        The store was closed by the scheduler just before; the in-memory and
        JOBDIR stores stay readable, a remote one may not, and then the
        report falls back to what the last sample saw.
        """
        engine = self.frontier.engine
        if engine is None:
            return [], {}, False
        try:
            self.sample(force_scan=True)
            ranking = engine.ranking()
            hosts: dict[str, Counter] = {}
            for view in engine.store.iter_accounts():
                hosts.setdefault(view.host, Counter())[STATE_NAMES.get(view.state, "?")] += 1
        except Exception as exc:  # noqa: BLE001 - e.g. a Redis connection closed at close
            logger.warning("aopic: report: cannot read the final frontier (%s); using the last sample", exc)
            return [], {}, False
        records = [
            {
                "rank": i,
                "url": p.url,
                "importance": p.importance,
                "cash": p.cash,
                "history": p.history,
                "visits": p.visits,
                "depth": p.depth,
                "state": STATE_NAMES.get(p.state, "?"),
            }
            for i, p in enumerate(ranking, 1)
        ]
        return records, hosts, True

    def write(self, stats: dict[str, Any], reason: str) -> Path:
        """Write the report files; returns the path of ``report.html``."""
        ranking, hosts, complete = self._final if self._final is not None else self.final_state()
        if complete:
            final_top = [r["url"] for r in ranking[:TOP_K]]
        else:
            final_top = next((s["_top"] for s in reversed(self.samples) if "_top" in s), [])
        samples = []
        for record in self.samples:
            record = dict(record)
            top = record.pop("_top", None)
            if top is not None:
                record["final_overlap"], record["final_tau"] = rank_agreement(final_top, top)
            samples.append(record)
        settings = {
            name: self.crawler.settings.get(name, setting.default)
            for name, setting in aopic_settings.SETTINGS.items()
        }
        data = {
            "spider": getattr(self.frontier.spider, "name", None),
            "started": self._started_at.isoformat(timespec="seconds"),
            "finish_reason": reason,
            "interval": self.interval,
            "top_k": TOP_K,
            "complete": complete,
            "samples": samples,
            "top": ranking[: self.top_rows],
            "hosts": _host_rows(hosts),
            "hosts_total": len(hosts),
            "settings": settings,
            "stats": {k: v for k, v in stats.items() if k.startswith("aopic/")},
        }
        return write_report(self.directory, data, stats)


# -- writing the report (pure functions: no Scrapy, testable alone) ---------------------


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _host_rows(hosts: dict[str, Counter]) -> list[dict[str, Any]]:
    rows = [
        {"host": host or "(none)", "known": sum(c.values()), **{n: c.get(n, 0) for n in STATE_NAMES.values()}}
        for host, c in hosts.items()
    ]
    rows.sort(key=lambda r: (-r["crawled"], -r["known"], r["host"]))
    return rows


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=_json_default), encoding="utf-8")
    os.replace(tmp, path)


def write_report(directory: str | os.PathLike, data: dict[str, Any], stats: dict[str, Any]) -> Path:
    """Write ``report.json``, ``stats.json``, the PNG plots (if matplotlib is
    installed) and ``report.html`` into ``directory``; returns the HTML path.

    ``data`` holds ``samples``, ``top``, ``hosts`` and the other fields
    :meth:`AopicReport.write` gathers.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _write_json(directory / "report.json", data)
    _write_json(directory / "stats.json", stats)
    images: dict[str, bytes] = {}
    plot_error = None
    if not data["samples"]:
        plot_error = "no samples were taken (the spider closed before its frontier opened)"
    else:
        try:
            images = draw_plots(data)
        except ImportError as exc:
            plot_error = f"plots need matplotlib ({exc.name or exc}): pip install \"scrapy-aopic[report]\""
    for name, png in images.items():
        (directory / f"{name}.png").write_bytes(png)
    path = directory / "report.html"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(data, images, plot_error), encoding="utf-8")
    os.replace(tmp, path)
    return path


# -- plots ----------------------------------------------------------------------------------


def _host_labels(hosts: list[str], width: int = 40) -> list[str]:
    """Host names short enough to label a bar: a hostile site's 300-letter
    host left the plot no room ("constrained_layout not applied" and a
    squashed plot). The middle is cut; a cut label that another host
    already has gets the host's rank, as equal labels would share a bar."""
    labels: list[str] = []
    for rank, host in enumerate(hosts, 1):
        label = host if len(host) <= width else f"{host[: width // 2 - 1]}…{host[-(width // 2 - 1):]}"
        labels.append(label if label not in labels else f"{label} #{rank}")
    return labels


def draw_plots(data: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of every plot. Raises ImportError without matplotlib.

    Uses matplotlib's object API with the Agg canvas, so it never touches
    pyplot's global state or the backend of the process.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def render(fig) -> bytes:
        FigureCanvasAgg(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()

    samples = data["samples"]
    span = samples[-1]["t"] if samples else 0.0
    # The unit that gives readable ticks: a test crawl lasts seconds, a broad crawl days.
    unit, scale = (("seconds", 1.0) if span < 180 else ("minutes", 60.0) if span < 3 * 3600 else ("hours", 3600.0))
    minutes = [s["t"] / scale for s in samples]
    xlabel = f"{unit} since the spider opened"
    images = {}

    # Importance convergence: the indicator, and how stable the ranking is.
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.plot(minutes, [s["history_sum"] for s in samples], color="C0", label="sum of history (convergence indicator)")
    top.set_ylabel("sum of history")
    twin = top.twinx()
    twin.plot(minutes, [s["visits"] for s in samples], color="C7", linestyle="--", label="pages visited")
    twin.set_ylabel("pages visited")
    _legend(top, twin, "lower right")
    top.set_title("Importance convergence: the error shrinks like 1 / sum of history")
    k = data.get("top_k", TOP_K)
    for key, label, style in (
        ("top_overlap", f"top-{k} overlap with previous sample", dict(color="C1")),
        ("kendall_tau", "Kendall tau with previous sample", dict(color="C2")),
        ("final_overlap", f"top-{k} overlap with final ranking", dict(color="C1", linestyle=":")),
        ("final_tau", "Kendall tau with final ranking", dict(color="C2", linestyle=":")),
    ):
        points = [(m, s[key]) for m, s in zip(minutes, samples) if s.get(key) is not None]
        if points:
            bottom.plot(*zip(*points), marker=".", label=label, **style)
    bottom.set_ylim(-1.05, 1.05)
    bottom.axhline(1.0, color="0.8", linewidth=0.8)
    bottom.set_ylabel(f"agreement of the top {k}")
    bottom.set_xlabel(xlabel)
    if bottom.lines[1:]:
        bottom.legend(loc="lower right", fontsize="small")
    images["convergence"] = render(fig)

    # Cash flow: where visited pages' cash went, cumulatively.
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    flows = (
        ("cash_to_links", "to links"),
        ("cash_to_lambda_tax", "to lambda (tax, pages without links)"),
        ("cash_to_lambda_failed", "to lambda (failed fetches)"),
    )
    top.stackplot(minutes, *[[s[key] for s in samples] for key, _ in flows], labels=[l for _, l in flows],
                  colors=("C0", "C1", "C3"), alpha=0.85)
    top.plot(minutes, [s["lambda_paid"] for s in samples], color="k", linestyle="--", label="paid out by lambda")
    top.set_ylabel("cash (cumulative)")
    top.set_title("Cash flow: cash paid by visited pages, and what lambda gave back")
    top.legend(loc="center right", fontsize="small")
    bottom.plot(minutes, [s["refused"] for s in samples], color="C4",
                label="URLs refused (traps, robots, duplicate patterns; distinct)")
    bottom.plot(minutes, [s.get("offsite", 0) for s in samples], color="C7", linestyle=":",
                label="offsite URLs (distinct)")
    bottom.plot(minutes, [s["failed"] for s in samples], color="C3", label="fetches failed (cash to lambda)")
    bottom.set_ylabel("URLs (cumulative)")
    bottom.set_xlabel(xlabel)
    bottom.legend(loc="upper left", fontsize="small")
    images["cash_flow"] = render(fig)

    # Frontier: its size and lambda's cash.
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.subplots()
    ax.plot(minutes, [s["known"] for s in samples], color="C0", label="known URLs")
    ax.plot(minutes, [s["pending"] for s in samples], color="C1", label="pending (frontier size)")
    ax.plot(minutes, [s["visits"] for s in samples], color="C2", label="pages visited")
    ax.set_ylabel("URLs")
    ax.set_xlabel(xlabel)
    twin = ax.twinx()
    twin.plot(minutes, [s["lambda_cash"] for s in samples], color="C3", linestyle="--", label="lambda cash")
    twin.set_ylabel("lambda cash")
    _legend(ax, twin, "below")
    ax.set_title("Frontier")
    images["frontier"] = render(fig)

    # Pages per host: the hosts with the most crawled pages.
    hosts = data["hosts"][:HOSTS_SHOWN]
    fig = Figure(figsize=(8, max(2.5, 0.3 * len(hosts) + 1.2)), layout="constrained")
    ax = fig.subplots()
    names = _host_labels([h["host"] for h in hosts])[::-1]
    left = [0] * len(names)
    for state, color in (("crawled", "C2"), ("failed", "C3"), ("refused", "C4"), ("pending", "C1"), ("alias", "C7")):
        values = [h.get(state, 0) for h in hosts][::-1]
        ax.barh(names, values, left=left, color=color, label=state)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("URLs")
    total = data.get("hosts_total", len(data["hosts"]))
    ax.set_title(f"Pages per host ({len(hosts)} of {total} hosts, most crawled first)")
    if hosts:
        fig.legend(loc="outside lower center", ncols=5, fontsize="small", frameon=False)
    ax.tick_params(axis="y", labelsize="small")
    images["hosts"] = render(fig)
    return images


def _legend(ax, twin, where: str) -> None:
    """One legend for the lines of an axes and its twin (``where``: a
    matplotlib location, or ``"below"`` the axes, clear of the data)."""
    lines = ax.get_lines() + twin.get_lines()
    labels = [line.get_label() for line in lines]
    if where == "below":
        ax.figure.legend(lines, labels, loc="outside lower center", ncols=len(lines),
                         fontsize="small", frameon=False)
    else:
        ax.legend(lines, labels, loc=where, fontsize="small")


# -- HTML ---------------------------------------------------------------------------------

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: right; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
td.url { text-align: left; word-break: break-all; max-width: 45em; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.note { color: #8a4b00; background: #fff6e5; padding: 0.5em 1em; border-left: 4px solid #f0a030; }
.muted { color: #777; }
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]], text_columns: set[int] = frozenset(), url_column: int = -1) -> str:
    head = "".join(
        f'<th class="text">{html.escape(h)}</th>' if i in text_columns or i == url_column else f"<th>{html.escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            text = html.escape(_fmt(value))
            if i == url_column:
                cells.append(f'<td class="url">{text}</td>')
            elif i in text_columns:
                cells.append(f'<td class="text">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(data: dict[str, Any], images: dict[str, bytes], plot_error: str | None = None) -> str:
    """The report as one HTML page; images are embedded (``data:`` URIs)."""
    samples = data["samples"]
    last = samples[-1] if samples else {}
    stats = data.get("stats", {})
    title = f"AOPIC crawl report — {data.get('spider') or 'spider'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">started {html.escape(str(data.get("started", "?")))}, '
        f"finished: {html.escape(str(data.get('finish_reason', '?')))}, "
        f"{len(samples)} samples every {_fmt(data.get('interval'))} s</p>",
    ]
    if not data.get("complete", True):
        parts.append(
            '<p class="note">The frontier could not be read when the spider closed: the top pages '
            "and hosts tables are missing, and the plots end at the last sample.</p>"
        )
    injected = last.get("injected") or 0.0
    summary = [
        ["pages visited", last.get("visits")],
        ["known URLs", last.get("known")],
        ["pending (frontier size)", last.get("pending")],
        ["cash injected", injected],
        ["lambda cash", last.get("lambda_cash")],
        ["lambda visits", last.get("lambda_visits")],
        ["sum of history (convergence indicator)", last.get("history_sum")],
        ["cash to links", last.get("cash_to_links")],
        ["cash to lambda (tax)", last.get("cash_to_lambda_tax")],
        ["cash to lambda (failed)", last.get("cash_to_lambda_failed")],
        ["URLs refused (traps, robots, duplicate patterns; distinct)", last.get("refused")],
        ["offsite URLs (distinct)", last.get("offsite")],
        ["conservation error", stats.get("aopic/conservation_error")],
    ]
    parts += ["<h2>Summary</h2>", _table(["figure", "value"], summary, text_columns={0})]
    parts.append("<h2>Plots</h2>")
    if plot_error:
        parts.append(f'<p class="note">No plots: {html.escape(plot_error)}.</p>')
    for name, caption in PLOTS:
        png = images.get(name)
        if png is None:
            continue
        encoded = base64.b64encode(png).decode("ascii")
        parts.append(f'<h3>{html.escape(caption)}</h3><img alt="{html.escape(caption)}" src="data:image/png;base64,{encoded}">')
    parts.append("<h2>Top pages by importance</h2>")
    top_rows = [
        [r["rank"], r["importance"], r["cash"], r["history"], r["visits"], r["depth"], r["state"], r["url"]]
        for r in data.get("top", [])
    ]
    parts.append(
        _table(["rank", "importance", "cash", "history", "visits", "depth", "state", "url"], top_rows,
               text_columns={6}, url_column=7)
        if top_rows else '<p class="muted">(no pages)</p>'
    )
    host_rows = [
        [h["host"], h["known"], h["crawled"], h["failed"], h["refused"], h["pending"], h["alias"]]
        for h in data.get("hosts", [])[:HOSTS_SHOWN]
    ]
    parts.append(f"<h2>Hosts ({_fmt(data.get('hosts_total', len(host_rows)))})</h2>")
    parts.append(
        _table(["host", "known", "crawled", "failed", "refused", "pending", "alias"], host_rows, text_columns={0})
        if host_rows else '<p class="muted">(no hosts)</p>'
    )
    counters = [[k, v] for k, v in sorted(stats.items())]
    parts += ["<h2>AOPIC stats</h2>", _table(["stat", "value"], counters, text_columns={0})]
    settings_rows = [[k, repr(v)] for k, v in sorted(data.get("settings", {}).items())]
    parts += ["<h2>Settings</h2>", _table(["setting", "value"], settings_rows, text_columns={0, 1})]
    parts.append("</body></html>")
    return "\n".join(parts)
