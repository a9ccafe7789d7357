"""``scrapy aopic``: ask an AOPIC frontier questions, during or after a crawl.

Registered through the ``scrapy.commands`` entry point, so it works in any
Scrapy project (and outside one, given ``--jobdir``) once scrapy-aopic is
installed::

    scrapy aopic top    [SPIDER] [-n 20] [--by importance|cash] [--json]
    scrapy aopic stats  [SPIDER] [--hosts 20] [--json]
    scrapy aopic export [SPIDER] -o ranking.jsonl|ranking.csv [--format jsonl|csv]
    scrapy aopic replay GRAPH [ARGS...]

The frontier is read, never written: a ``JOBDIR`` (``AOPIC_BACKEND =
"memory"``, the default) is loaded into a private copy — safe while the crawl
is still running — and a Redis frontier (``AOPIC_BACKEND = "redis"``) is only
read. Errors (no ``JOBDIR``, unknown spider, Redis unreachable) print one line
to stderr and exit with status 1 (2 for a usage error).

This module is imported by *every* ``scrapy`` command (entry points are
loaded eagerly), so it imports nothing heavy at module level.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import Settings

    from .store.base import FrontierStore

SUBCOMMANDS = ("top", "stats", "export", "replay")

#: Crawl statistics saved next to the frontier at close (see
#: :class:`scrapy_aopic.extensions.report.AopicReport`); ``stats`` shows them if present.
STATS_FILE = "aopic-stats.json"

#: Fields of ``export`` (the first seven are those of ``AOPIC_EXPORT_IMPORTANCE``).
EXPORT_FIELDS = ("rank", "url", "importance", "cash", "history", "visits", "depth", "state", "host")

#: Key template of the Redis frontier when the Redis backend does not declare one.
DEFAULT_REDIS_KEY = "%(spider)s:aopic"


class CommandError(Exception):
    """A problem the user can fix; shown as one line, without a traceback."""

    def __init__(self, message: str, exitcode: int = 1):
        super().__init__(message)
        self.exitcode = exitcode


class FrontierView:
    """A read-only view of a crawl's frontier: its store, an engine over it,
    where it came from, and what else the crawl left behind."""

    def __init__(self, store: FrontierStore, where: str, crawl_stats: dict | None = None):
        from .engine import AopicEngine

        self.store = store
        self.engine = AopicEngine(store)
        self.where = where
        self.crawl_stats = crawl_stats

    def close(self) -> None:
        self.store.close()


class AopicCommand(ScrapyCommand):
    """``scrapy aopic top|stats|export|replay``: inspect an AOPIC frontier."""

    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "top|stats|export|replay [SPIDER] [options]"

    def short_desc(self) -> str:
        return "Inspect an AOPIC frontier (top pages, stats, export, replay)"

    def long_desc(self) -> str:
        return (
            "Read the AOPIC frontier of a crawl (its JOBDIR, or its Redis frontier when "
            "AOPIC_BACKEND='redis') and print the top pages (top), the state of the books "
            "(stats), or write the importance ranking (export); replay runs the policy "
            "simulator on a recorded link graph. SPIDER picks up the spider's "
            "custom_settings (JOBDIR, Redis key). Nothing is written to the frontier."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--jobdir", metavar="DIR", help="JOBDIR of the crawl (default: the JOBDIR setting)"
        )
        parser.add_argument(
            "-n", dest="limit", type=int, default=20, metavar="N", help="top: pages to show (default 20)"
        )
        parser.add_argument(
            "--by",
            choices=("importance", "cash"),
            default="importance",
            help="top: most important pages (default) or richest pending URLs (fetched next)",
        )
        parser.add_argument(
            "--hosts", type=int, default=20, metavar="N", help="stats: hosts to list (default 20)"
        )
        parser.add_argument("--json", action="store_true", help="top, stats: print JSON")
        parser.add_argument(
            "-o", "--output", metavar="FILE", help="export: file to write ('-' for stdout); replay: output directory"
        )
        parser.add_argument(
            "--format",
            choices=("jsonl", "csv"),
            help="export: file format (default: from the file name, else jsonl)",
        )
        parser.add_argument(
            "--redis-key", metavar="PREFIX", help="Redis backend: key prefix of the frontier (default from the spider name)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from .store.base import StoreUnavailable

        try:
            self._run(args, opts)
        except CommandError as exc:
            self._fail(str(exc), exc.exitcode)
        except StoreUnavailable as exc:
            # FrontierCorrupt (a total not written by the store, named) or the
            # store gone mid-read: what, not a traceback
            self._fail(str(exc), 1)
        except BrokenPipeError:  # `scrapy aopic top | head`
            sys.stderr.close()
        except KeyboardInterrupt:
            self._fail("interrupted", 130)

    def _fail(self, message: str, exitcode: int) -> None:
        print(f"scrapy aopic: error: {message}", file=sys.stderr)
        self.exitcode = exitcode

    def _run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise CommandError(f"missing subcommand: one of {', '.join(SUBCOMMANDS)}", 2)
        subcommand, rest = args[0], args[1:]
        if subcommand not in SUBCOMMANDS:
            raise CommandError(
                f"unknown subcommand {subcommand!r}: one of {', '.join(SUBCOMMANDS)}", 2
            )
        if subcommand == "replay":
            self.replay(rest, opts)
            return
        unknown = [a for a in rest if a.startswith("-")]
        if unknown:
            raise CommandError(f"unknown option {unknown[0]!r} (see scrapy aopic -h)", 2)
        if len(rest) > 1:
            raise CommandError(f"too many arguments: {' '.join(rest)}", 2)
        spider_name = rest[0] if rest else None
        if opts.limit < 1:
            raise CommandError("-n must be at least 1", 2)
        if subcommand == "export" and not opts.output:
            raise CommandError("export needs -o FILE (or -o - for stdout)", 2)
        frontier = open_frontier(self.settings, spider_name, jobdir=opts.jobdir, redis_key=opts.redis_key)
        try:
            if subcommand == "top":
                self.top(frontier, opts)
            elif subcommand == "stats":
                self.stats(frontier, opts)
            else:
                self.export(frontier, opts)
            # records the store skipped as not its own (a Redis frontier's
            # hostile data): the output above left them out, so say which
            skipped = dict(getattr(frontier.store, "corrupt_named", {}))
            if skipped:
                raise CommandError(
                    f"the frontier holds {len(skipped)}{' or more' if len(skipped) >= 20 else ''} "
                    "value(s) its store never writes, left out of the output: " + "; ".join(skipped.values())
                )
        finally:
            frontier.close()

    # -- top ----------------------------------------------------------------------

    def top(self, frontier: FrontierView, opts: argparse.Namespace) -> None:
        """Most important pages, or the richest pending URLs (``--by cash``)."""
        if opts.by == "cash":
            rows = richest_pending(frontier.store, opts.limit)
        else:
            records = itertools.islice(ranking_records(frontier, hosts=False), opts.limit)
            rows = [{"rank": i, **record} for i, record in enumerate(records, 1)]
        if opts.json:
            for row in rows:
                print(json.dumps(row, ensure_ascii=False))
            return
        if not rows:
            print("(no pages)" if opts.by == "importance" else "(nothing pending)")
            return
        if opts.by == "cash":
            print(f"{'rank':>4}  {'cash':>10}  {'history':>10}  {'depth':>5}  url")
            for row in rows:
                print(f"{row['rank']:>4}  {row['cash']:>10.4g}  {row['history']:>10.4g}  {row['depth']:>5}  {row['url']}")
        else:
            print(f"{'rank':>4}  {'importance':>10}  {'cash':>10}  {'history':>10}  {'visits':>6}  {'state':<8} url")
            for row in rows:
                print(
                    f"{row['rank']:>4}  {row['importance']:>10.4g}  {row['cash']:>10.4g}  "
                    f"{row['history']:>10.4g}  {row['visits']:>6}  {row['state']:<8} {row['url']}"
                )

    # -- stats --------------------------------------------------------------------

    def stats(self, frontier: FrontierView, opts: argparse.Namespace) -> None:
        """Frontier size, lambda, convergence, per-host counts, crawl counters."""
        summary = frontier_summary(frontier, host_limit=opts.hosts)
        if opts.json:
            print(json.dumps(summary, ensure_ascii=False, indent=2, sort_keys=True))
            return
        for line in format_summary(summary):
            print(line)

    # -- export -------------------------------------------------------------------

    def export(self, frontier: FrontierView, opts: argparse.Namespace) -> None:
        """The importance ranking to JSON Lines or CSV, most important first."""
        fmt = opts.format or ("csv" if opts.output.lower().endswith(".csv") else "jsonl")
        records = ranking_records(frontier, hosts=True)
        if opts.output == "-":
            write_ranking(sys.stdout, records, fmt)
            return
        path = Path(opts.output)
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8", newline="") as out:
                count = write_ranking(out, records, fmt)
            tmp.replace(path)  # readers never see a half-written file
        except OSError as exc:
            if tmp.is_file():
                tmp.unlink()
            raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
        print(f"wrote {count} pages ({fmt}) to {path}", file=sys.stderr)

    # -- replay -------------------------------------------------------------------

    def replay(self, args: list[str], opts: argparse.Namespace) -> None:
        """Run the policy simulator on a recorded link graph
        (``AOPIC_EXPORT_GRAPH``): every ordering policy, a table and a plot
        in the output directory (``-o``). Options after ``--`` go to the
        simulator (``python -m scrapy_aopic.sim replay --help``)."""
        argv = [a for a in args if a != "--"]
        if not argv:
            raise CommandError("replay needs the path of a recorded link graph (AOPIC_EXPORT_GRAPH)", 2)
        if opts.output:
            argv += ["--out", opts.output]
        try:
            from .sim.__main__ import main as simulate
        except ImportError as exc:  # numpy, scipy: the plot alone also wants matplotlib
            raise CommandError(f"replay needs {exc.name or exc}: pip install \"scrapy-aopic[replay]\"") from None
        try:
            status = simulate(["replay", *argv])
        except SystemExit as exc:  # an argparse error inside the simulator
            status = exc.code
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"replay failed: {exc}") from None
        if status not in (None, 0):
            self.exitcode = status if isinstance(status, int) else 1


def spider_settings(settings: Settings, spider_name: str | None) -> Settings:
    """``settings`` with ``spider_name``'s ``custom_settings`` applied."""
    merged = settings.copy()
    if spider_name is None:
        return merged
    from .compat import get_spider_loader

    try:
        loader = get_spider_loader(settings)
    except Exception as exc:  # noqa: BLE001 - a broken project: say what, not where
        raise CommandError(f"cannot load the project's spiders: {exc}") from None
    try:
        spidercls = loader.load(spider_name)
    except KeyError:
        known = sorted(loader.list())
        if not known:
            raise CommandError(
                f"no spider named {spider_name!r} (not in a Scrapy project, or it has no spiders; "
                "use --jobdir DIR without a spider name)"
            ) from None
        raise CommandError(
            f"no spider named {spider_name!r} (spiders: {', '.join(known)})"
        ) from None
    spidercls.update_settings(merged)
    return merged


def open_frontier(
    settings: Settings,
    spider_name: str | None,
    *,
    jobdir: str | None = None,
    redis_key: str | None = None,
) -> FrontierView:
    """The frontier a crawl of ``spider_name`` with ``settings`` uses, read-only."""
    from . import settings as aopic_settings

    merged = spider_settings(settings, spider_name)
    backend = aopic_settings.get(merged, "AOPIC_BACKEND")
    if backend == "redis":
        return open_redis_frontier(merged, spider_name, redis_key)
    if backend != "memory":
        raise CommandError(f"AOPIC_BACKEND must be 'memory' or 'redis', got {backend!r}")
    return open_jobdir_frontier(jobdir or merged.get("JOBDIR") or remembered_jobdir(spider_name))


#: File in the project's data directory (``.scrapy/aopic/``) where each crawl
#: with a ``JOBDIR`` notes it under its spider's name, so that ``scrapy aopic
#: top SPIDER`` right after ``scrapy crawl SPIDER -s JOBDIR=...`` finds it.
JOBDIRS_FILE = "jobdirs.json"


def remember_jobdir(spider_name: str, jobdir: str) -> None:
    """Note ``jobdir`` as the last ``JOBDIR`` of ``spider_name`` (in a
    Scrapy project; elsewhere nothing is written)."""
    from scrapy.utils.project import data_path, inside_project

    if not inside_project():
        return
    path = Path(data_path("aopic", createdir=True)) / JOBDIRS_FILE
    known = _read_jobdirs(path)
    known[spider_name] = str(Path(jobdir).resolve())
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def remembered_jobdir(spider_name: str | None) -> str | None:
    """The ``JOBDIR`` the last crawl of ``spider_name`` ran with, if noted."""
    from scrapy.utils.project import data_path, inside_project

    if spider_name is None or not inside_project():
        return None
    jobdir = _read_jobdirs(Path(data_path("aopic")) / JOBDIRS_FILE).get(spider_name)
    return jobdir if isinstance(jobdir, str) else None


def _read_jobdirs(path: Path) -> dict:
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def open_jobdir_frontier(jobdir: str | None) -> FrontierView:
    """The frontier a crawl saved in ``jobdir`` (a private in-memory copy)."""
    from .store.journal import load_jobdir

    if not jobdir:
        raise CommandError(
            "no JOBDIR: pass --jobdir DIR or -s JOBDIR=DIR (the directory the crawl ran with; "
            "a crawl run in this project with -s JOBDIR=... is remembered by spider name)"
        )
    root = Path(jobdir)
    if not root.is_dir():
        raise CommandError(f"JOBDIR {root} does not exist")
    directory = root / "aopic"
    if not directory.is_dir():
        raise CommandError(
            f"no AOPIC frontier in JOBDIR {root} (expected {directory}; was the crawl run "
            "with the scrapy-aopic add-on?)"
        )
    try:
        store = load_jobdir(directory)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:  # JobdirError is a RuntimeError
        raise CommandError(f"cannot read the frontier in {directory}: {exc}") from None
    return FrontierView(store, f"JOBDIR {root}", read_crawl_stats(root))


def read_crawl_stats(jobdir: Path) -> dict | None:
    """The crawl statistics saved at the last close, if any."""
    path = jobdir / STATS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def redis_key_setting() -> str:
    """Name of the setting holding the Redis frontier's key template (a
    ``%(spider)s`` template), if the Redis backend declares one."""
    from . import settings as aopic_settings

    for name, setting in aopic_settings.SETTINGS.items():
        template = setting.default
        if "REDIS" in name and "KEY" in name and isinstance(template, str) and "%(" in template:
            return name
    return ""


def open_redis_frontier(settings: Settings, spider_name: str | None, redis_key: str | None) -> FrontierView:
    """The Redis frontier of ``spider_name``, opened without changing it."""
    try:
        from .connection import get_redis_from_settings
        from .store.redis import FrontierKeys, RedisStore
    except ImportError as exc:
        raise CommandError(
            f"AOPIC_BACKEND is 'redis' but the Redis backend is not available ({exc})"
        ) from None
    import redis

    if redis_key is None:
        if spider_name is None:
            raise CommandError(
                "the Redis frontier is named after the spider: give a SPIDER name (or --redis-key PREFIX)"
            )
        setting = redis_key_setting()
        template = (settings.get(setting) if setting else None) or DEFAULT_REDIS_KEY
        try:
            redis_key = template % {"spider": spider_name, "name": spider_name}
        except (KeyError, TypeError, ValueError):
            raise CommandError(f"bad Redis key template {template!r}") from None
    where = settings.get("REDIS_URL") or f"{settings.get('REDIS_HOST', 'localhost')}:{settings.get('REDIS_PORT', 6379)}"
    if settings.getbool("AOPIC_REDIS_CLUSTER"):
        return open_cluster_frontier(settings, redis_key, where)
    try:
        # A tool should say "unreachable" in seconds, not after a crawl's long timeouts.
        server = get_redis_from_settings(settings, socket_timeout=10.0, connect_timeout=5.0)
        server.ping()
        keys = FrontierKeys.of(redis_key)
        stored_targets = server.hget(keys.tot, "lambda_targets")
        exists = server.exists(keys.tot, keys.acct)
    except redis.exceptions.RedisError as exc:
        raise CommandError(f"cannot reach Redis at {where}: {exc}") from None
    if not exists:
        raise CommandError(
            f"no AOPIC frontier under key prefix {redis_key!r} in Redis at {where} "
            "(wrong spider name, or --redis-key?)"
        )
    lambda_targets = stored_targets.decode() if stored_targets else "pending"
    try:
        # readonly: a tool must not write to the crawl's frontier, not even
        # the lambda-targets marker of a frontier that has none yet
        store = RedisStore(server, redis_key, lambda_targets, retry_timeout=0, owns_server=True, readonly=True)
    except (ValueError, redis.exceptions.RedisError) as exc:
        raise CommandError(f"cannot open the Redis frontier {redis_key!r}: {exc}") from None
    return FrontierView(store, f"Redis {where} key {redis_key}", None)


def open_cluster_frontier(settings: Settings, redis_key: str, where: str) -> FrontierView:
    """The frontier ``redis_key`` sharded over a Redis Cluster
    (``AOPIC_REDIS_CLUSTER``), every shard opened read-only."""
    import redis

    from .connection import get_redis_cluster_from_settings
    from .store.redis import FrontierKeys
    from .store.redis.cluster import RedisClusterStore, shard_prefix

    try:
        server = get_redis_cluster_from_settings(settings, socket_timeout=10.0)
        first = FrontierKeys.of(shard_prefix(redis_key, 0))
        shards, stored_targets = server.hmget(first.tot, ["shards", "lambda_targets"])
    except redis.exceptions.RedisError as exc:
        raise CommandError(f"cannot reach the Redis Cluster at {where}: {exc}") from None
    if shards is None:
        raise CommandError(
            f"no sharded AOPIC frontier under key prefix {redis_key!r} in the Redis Cluster at {where} "
            "(wrong spider name, or --redis-key?)"
        )
    lambda_targets = stored_targets.decode() if stored_targets else "pending"
    try:
        store = RedisClusterStore(server, redis_key, lambda_targets, shards=int(shards), retry_timeout=0,
                                  owns_server=True, readonly=True)
    except (ValueError, redis.exceptions.RedisError) as exc:
        raise CommandError(f"cannot open the sharded frontier {redis_key!r}: {exc}") from None
    return FrontierView(store, f"Redis Cluster {where} key {redis_key} ({int(shards)} shards)", None)


# -- what the subcommands compute ---------------------------------------------------


def ranking_records(frontier: FrontierView, *, hosts: bool):
    """Yield the importance ranking as export records, most important first."""
    from .frontier import export_record

    host_of: dict[str, str] = {}
    if hosts:
        host_of = {view.url: view.host for view in frontier.store.iter_accounts()}
    for rank, page in enumerate(frontier.engine.ranking(), 1):
        record = export_record(page)
        if hosts:
            record = {"rank": rank, **record, "host": host_of.get(page.url, "")}
        yield record


def write_ranking(out, records, fmt: str) -> int:
    """Write ``records`` to ``out`` as ``jsonl`` or ``csv``; returns the count."""
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow({k: _csv_value(record.get(k)) for k in EXPORT_FIELDS})
            count += 1
    else:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def _csv_value(value: Any) -> Any:
    # repr() keeps every bit of a float; CSV readers parse it back exactly.
    return repr(value) if isinstance(value, float) else value


def richest_pending(store: FrontierStore, limit: int) -> list[dict]:
    """The ``limit`` pending URLs with the most cash (what is fetched next;
    ties: earliest discovered, which the store does not expose here, so URL)."""
    import heapq

    from .store.base import PENDING

    pending = (v for v in store.iter_accounts() if v.state == PENDING)
    best = heapq.nsmallest(limit, pending, key=lambda v: (-v.cash, v.url))
    return [
        {"rank": i, "url": v.url, "cash": v.cash, "history": v.history, "depth": v.depth, "host": v.host}
        for i, v in enumerate(best, 1)
    ]


def frontier_summary(frontier: FrontierView, host_limit: int = 20) -> dict:
    """Everything ``scrapy aopic stats`` shows, as plain data."""
    from .store.base import STATE_NAMES

    engine = frontier.engine
    totals = engine.totals()
    states: Counter[str] = Counter()
    hosts: dict[str, Counter[str]] = {}
    account_cash = 0.0
    in_flight = 0.0
    for view in frontier.store.iter_accounts():
        state = STATE_NAMES.get(view.state, str(view.state))
        states[state] += 1
        hosts.setdefault(view.host, Counter())[state] += 1
        account_cash += view.cash
        in_flight += view.leased
    # a sharded frontier: cash between shards (sent, not yet received)
    in_flight += getattr(frontier.store, "in_transit", lambda: 0.0)()
    error = abs(math.fsum((account_cash, totals.lambda_cash, in_flight)) - totals.injected)
    richest = frontier.store.peek()
    host_rows = sorted(hosts.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    summary = {
        "frontier": frontier.where,
        "known": totals.known,
        "pending": totals.pending,
        "leased": totals.leased,
        "states": {name: states.get(name, 0) for name in STATE_NAMES.values()},
        "visits": totals.visits,
        "cash_injected": totals.injected,
        "lambda_cash": totals.lambda_cash,
        "lambda_history": totals.lambda_history,
        "lambda_visits": totals.lambda_visits,
        "in_flight_cash": totals.in_flight,
        "history_sum": totals.history_sum,
        # The importance estimate's error shrinks like 1/history_sum (``docs/concepts.rst``).
        "convergence": 1.0 / totals.history_sum if totals.history_sum > 0 else None,
        "conservation_error": error,
        "richest_pending": {"url": richest[0], "cash": richest[1]} if richest else None,
        "hosts_total": len(hosts),
        "hosts": [
            {"host": host, "known": sum(counts.values()), **{n: counts.get(n, 0) for n in STATE_NAMES.values()}}
            for host, counts in host_rows[:host_limit]
        ],
        "crawl_stats": frontier.crawl_stats,
    }
    return summary


def format_summary(summary: dict) -> list[str]:
    """The human-readable lines of ``scrapy aopic stats``."""
    states = summary["states"]
    richest = summary["richest_pending"]
    convergence = summary["convergence"]
    lines = [
        f"frontier            {summary['frontier']}",
        f"known URLs          {summary['known']}",
        f"pending (frontier)  {summary['pending']}",
        f"in flight           {summary['leased']}",
        f"crawled             {states.get('crawled', 0)}",
        f"failed              {states.get('failed', 0)}",
        f"refused             {states.get('refused', 0)}   (traps, robots.txt, duplicates: never fetched)",
        f"aliases             {states.get('alias', 0)}   (redirects and near-duplicates merged into another URL)",
        f"page visits         {summary['visits']}",
        f"cash injected       {summary['cash_injected']:.6g}",
        f"lambda cash         {summary['lambda_cash']:.6g}   ({summary['lambda_visits']} lambda visits)",
        f"history sum         {summary['history_sum']:.6g}   (convergence indicator"
        + (f"; the importance error shrinks like 1/{summary['history_sum']:.3g} = {convergence:.2g})"
           if convergence else ")"),
        f"conservation error  {summary['conservation_error']:.3g}",
        f"richest pending     {richest['url']} ({richest['cash']:.4g})" if richest else "richest pending     -",
        "",
        f"hosts ({summary['hosts_total']}; top {len(summary['hosts'])} by known URLs)",
    ]
    width = max([len(row["host"]) for row in summary["hosts"]] + [4])
    lines.append(f"  {'host':<{width}}  {'known':>6}  {'pending':>7}  {'crawled':>7}  {'failed':>6}  {'refused':>7}  {'alias':>5}")
    for row in summary["hosts"]:
        lines.append(
            f"  {row['host']:<{width}}  {row['known']:>6}  {row['pending']:>7}  {row['crawled']:>7}  "
            f"{row['failed']:>6}  {row['refused']:>7}  {row['alias']:>5}"
        )
    crawl_stats = summary["crawl_stats"]
    lines.append("")
    if crawl_stats:
        lines.append(f"counters of the last crawl run (closed {crawl_stats.get('finish_time', '?')}, reason {crawl_stats.get('finish_reason', '?')})")
        for key in sorted(k for k in crawl_stats if k.startswith("aopic/")):
            lines.append(f"  {key:<40} {_number(crawl_stats[key])}")
    else:
        lines.append(
            f"counters of the crawl (traps, duplicates): not saved ({STATS_FILE} is written at "
            "close by the report extension when JOBDIR is set)"
        )
    return lines


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
