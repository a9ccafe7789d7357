"""A seeded fuzz of the values a worker reads back from the Redis frontier.

One *case*: a small crawl on a fresh frontier through the real scheduler
(seeds on three hosts, pages visited with links, leases left open), then ONE
value of one key changed to something hostile (see :data:`VALUES` and
:func:`targets`), then the scheduler driven on as Scrapy's engine drives it
(next request, visit with links, new start requests), then every lease
settled. :func:`run_case` says what happened; :func:`verdict` holds it to
the contract: a clear refusal (a log line naming the value and an
``aopic/...`` stat) or the books balanced, never a traceback nor NaN / inf
in the books.
"""

from __future__ import annotations

import logging
import math
import random
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import redis
from scrapy import Request
from scrapy.http import HtmlResponse

from scrapy_aopic.store.base import StoreUnavailable
from scrapy_aopic.store.redis.records import LEASE, RECORD

#: Hostile text values for a number, a count or a record.
VALUES: dict[str, bytes] = {
    "word": b"abc",
    "nan": b"nan",
    "inf": b"inf",
    "-inf": b"-inf",
    "negative": b"-5",
    "1e308": b"1e308",
    "huge_int": b"123456789012345678901234567890",
    "empty": b"",
    "bad_utf8": b"\xff\xfe\x80",
}

#: Hostile doubles written into a binary record's field.
FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "negative": -5.0, "1e308": 1e308}

#: The fields of ``P:tot`` a worker's scripts read (``load_totals``).
TOTALS = ("injected", "lambda_cash", "lambda_history", "in_flight", "history_sum", "lambda_visits",
          "visits", "known", "pending", "leased", "crawled", "dividend", "next_seq", "next_lease")

HOSTS = ("a.test", "b.test", "c.test")


@dataclass
class Crawl:
    """The state a case's crawl left: which URLs are where."""

    scheduler: Any
    crawler: Any
    client: redis.Redis
    keys: Any
    hosts: tuple = HOSTS  # (on a cluster: hosts of one shard, whose keys are ``keys``)
    cross: str | None = None  # a host on another shard, linked from every page
    other: Any = None  # (a cluster) the keys of the cross host's shard
    home_index: int = 0
    other_index: int = 0
    held: list = field(default_factory=list)  # requests handed out, not visited yet
    pending: list = field(default_factory=list)
    crawled: list = field(default_factory=list)
    made: int = 0

    def link(self, host: str) -> Request:
        self.made += 1
        return Request(f"http://{host}/p{self.made}")


def page(request: Request) -> HtmlResponse:
    return HtmlResponse(request.url, body=b"<html></html>", request=request)


def visit(crawl: Crawl, request: Request, links: int = 2) -> None:
    host = request.url.split("/")[2]
    frontier = crawl.scheduler.frontier
    made = [crawl.link(host) for _ in range(links)]
    if crawl.cross and links:
        made.append(crawl.link(crawl.cross))
    for out in frontier.visit(page(request), made):
        crawl.scheduler.enqueue_request(out)
    crawl.crawled.append(request.url)


def setup(crawl: Crawl) -> None:
    """Seeds on three hosts, four pages visited (each with two links), two
    leases left open: every kind of record exists when the value changes."""
    scheduler = crawl.scheduler
    for i, host in enumerate(crawl.hosts):
        scheduler.enqueue_request(Request(f"http://{host}/", meta={"is_start_request": True}))
        scheduler.enqueue_request(Request(f"http://{host}/s{i}", meta={"is_start_request": True}))
    for _ in range(4):
        visit(crawl, scheduler.next_request())
    for _ in range(2):
        crawl.held.append(scheduler.next_request())
    store = scheduler.frontier.store
    crawl.pending = [v.url for v in store.iter_accounts() if v.state == 0 and v.host in crawl.hosts]


def _rec(crawl: Crawl, url: str) -> bytes:
    return crawl.client.hget(crawl.keys.acct, url)


def _with_field(raw: bytes, index: int, value) -> bytes:
    fields = list(RECORD.unpack_from(raw))
    fields[index] = value
    return RECORD.pack(*fields) + raw[RECORD.size:]


def targets(crawl: Crawl) -> list[tuple[str, Callable[[Crawl], None]]]:
    """Every (name, change) a case may make, on this crawl's keys."""
    k, c = crawl.keys, crawl.client
    a = crawl.hosts[0]
    out: list[tuple[str, Callable[[Crawl], None]]] = []

    def add(name, change):
        out.append((name, change))

    add("nothing", lambda cr: None)  # the control
    # totals, each field: every hostile text, or missing
    for f in TOTALS:
        for vname, v in VALUES.items():
            add(f"tot.{f}={vname}", lambda cr, f=f, v=v: c.hset(k.tot, f, v))
        add(f"tot.{f}=missing", lambda cr, f=f: c.hdel(k.tot, f))
    # account records of a pending, a leased and a crawled URL
    for kind in ("pending", "leased", "crawled"):
        def url_of(cr, kind=kind):
            if kind == "pending":
                return cr.pending[0]
            if kind == "leased":
                return cr.held[0].url
            return cr.crawled[0]
        for fname, index in (("cash", 2), ("mark", 3), ("history", 4), ("last_visit", 5)):
            for vname, v in FLOATS.items():
                add(f"acct[{kind}].{fname}={vname}",
                    lambda cr, u=url_of, i=index, v=v: c.hset(k.acct, u(cr), _with_field(_rec(cr, u(cr)), i, v)))
        for fname, index, v in (("state", 0, 9), ("seq", 6, -1), ("seq", 6, 2**31 - 1), ("visits", 7, -7),
                                ("depth", 8, -3), ("depth", 8, 2**31 - 1)):
            add(f"acct[{kind}].{fname}={v}",
                lambda cr, u=url_of, i=index, v=v: c.hset(k.acct, u(cr), _with_field(_rec(cr, u(cr)), i, v)))
        for vname, v in VALUES.items():
            add(f"acct[{kind}]={vname}", lambda cr, u=url_of, v=v: c.hset(k.acct, u(cr), v))
        add(f"acct[{kind}]=short", lambda cr, u=url_of: c.hset(k.acct, u(cr), _rec(cr, u(cr))[:20]))
        add(f"acct[{kind}]=host_bad_utf8",
            lambda cr, u=url_of: c.hset(k.acct, u(cr), _rec(cr, u(cr))[:RECORD.size] + b"\xff\xfe"))
        add(f"acct[{kind}]=missing", lambda cr, u=url_of: c.hdel(k.acct, u(cr)))
        add(f"alias[{kind}]=unknown", lambda cr, u=url_of: c.hset(k.alias, u(cr), b"http://nowhere.test/x"))
    # an alias record turned into ALIAS state with a missing / looping target
    add("acct[pending].state=alias,no_target",
        lambda cr: c.hset(k.acct, cr.pending[0], _with_field(_rec(cr, cr.pending[0]), 0, 5)))
    add("acct[pending].state=alias,self",
        lambda cr: (c.hset(k.acct, cr.pending[0], _with_field(_rec(cr, cr.pending[0]), 0, 5)),
                    c.hset(k.alias, cr.pending[0], cr.pending[0])))
    # leases
    for fname, index in (("id", 0), ("cash", 1), ("deadline", 2), ("before_cash", 3), ("before_mark", 4),
                         ("before_dividend", 5), ("before_flight", 6)):
        for vname, v in FLOATS.items():
            def change(cr, i=index, v=v):
                url = cr.held[0].url
                fields = list(LEASE.unpack(c.hget(k.lease, url)))
                fields[i] = v
                c.hset(k.lease, url, LEASE.pack(*fields))
            add(f"lease.{fname}={vname}", change)
    for vname, v in VALUES.items():
        add(f"lease={vname}", lambda cr, v=v: c.hset(k.lease, cr.held[0].url, v))
    add("lease=missing", lambda cr: c.hdel(k.lease, cr.held[0].url))
    add("lease=unknown_url", lambda cr: (
        c.hset(k.lease, "http://nowhere.test/", LEASE.pack(99, 3.0, 0, 0, 0, 0, 0)),
        c.zadd(k.ldl, {"http://nowhere.test/": 0})))
    add("lease=of_pending_url", lambda cr: (
        c.hset(k.lease, cr.pending[0], LEASE.pack(99, 3.0, 0, 0, 0, 0, 0)),
        c.zadd(k.ldl, {cr.pending[0]: 0})))
    add("ldl=expired_now", lambda cr: c.zadd(k.ldl, {cr.held[0].url: 0}))
    add("ldl=-inf", lambda cr: c.zadd(k.ldl, {cr.held[0].url: "-inf"}))
    add("ldl=unknown_url", lambda cr: c.zadd(k.ldl, {"http://nowhere.test/": 0}))
    # host order, advertisements, queues, host caps
    for vname, v in VALUES.items():
        add(f"hadv[a]={vname}", lambda cr, v=v: c.hset(k.hadv, a, v))
        add(f"hbusy[a]={vname}", lambda cr, v=v: c.hset(k.hbusy, a, v))
    add("hadv[a]=seq8+nan", lambda cr: c.hset(k.hadv, a, b"\0" * 8 + b"nan"))
    add("hadv[a]=missing", lambda cr: c.hdel(k.hadv, a))
    add("hosts=short_member", lambda cr: c.zadd(k.hosts, {b"x": -1e9}))
    add("hosts=unknown_host", lambda cr: c.zadd(k.hosts, {b"\0" * 8 + b"zz.test": -1e9}))
    add("hosts=-inf", lambda cr: c.zadd(k.hosts, {b"\0" * 8 + a.encode(): "-inf"}))
    add("hosts=bad_utf8_host", lambda cr: c.zadd(k.hosts, {b"\0" * 8 + b"\xff\xfe": -1e9}))
    add("hosts=emptied", lambda cr: c.delete(k.hosts))
    q = k.queue_prefix + a
    add("queue[a]=short_member", lambda cr: c.zadd(q, {b"x": -1e9}))
    add("queue[a]=unknown_url", lambda cr: c.zadd(q, {b"\0" * 8 + b"http://nowhere.test/q": -1e9}))
    add("queue[a]=-inf", lambda cr: c.zadd(q, {b"\0" * 8 + f"http://{a}/".encode(): "-inf"}))
    add("queue[a]=other_hosts_url",
        lambda cr: c.zadd(q, {b"\0" * 8 + f"http://{crawl.hosts[1]}/".encode(): -1e9}))
    add("queue[zz]=bad_utf8", lambda cr: (c.zadd(k.queue_prefix + "zz.test", {b"\0" * 8 + b"\xff": -1e9}),
                                           c.zadd(k.hosts, {b"\0" * 8 + b"zz.test": -1e9})))
    add("req[pending]=bad_utf8", lambda cr: c.hset(k.req, cr.pending[0], b"\xff\xfe"))
    add("epoch=changed", lambda cr: c.set(k.epoch, b"someone-else"))
    add("pop_token=garbage", lambda cr: [c.set(key, b"\xff\n\xff\n\xff") for key in c.scan_iter(k.tag + ":pop:*")])
    # a key of the wrong Redis type (WRONGTYPE): a string where a hash / zset is expected
    for name in ("tot", "acct", "req", "alias", "hosts", "hadv", "lease", "ldl", "hbusy", "epoch"):
        add(f"{name}=wrong_type", lambda cr, name=name: (c.delete(k[name]), c.lpush(k[name], b"x")))
    add("queue[a]=wrong_type", lambda cr: (c.delete(q), c.set(q, b"x")))
    if crawl.other is not None:
        out += cluster_targets(crawl)
    return out


#: An outbox entry (seq, destination shard, msgpack credits) written by a
#: script, as frontier.lua writes them (msgpack from Redis' own cmsgpack).
_PLANT_ENTRY = """
local entry = struct.pack('>I8I4', tonumber(ARGV[1]), tonumber(ARGV[2])) .. cmsgpack.pack({ARGV[3], ARGV[4], '1', '', ARGV[5]})
return redis.call('ZADD', KEYS[1], ARGV[1], entry)
"""


def cluster_targets(crawl: Crawl) -> list[tuple[str, Callable[[Crawl], None]]]:
    """The numbers and records of a sharded frontier's cross-shard books, on
    the home shard (``keys``, sending) and the other (``other``, receiving)."""
    k, o, c = crawl.keys, crawl.other, crawl.client
    home, other = crawl.home_index, crawl.other_index
    out: list[tuple[str, Callable[[Crawl], None]]] = []

    def add(name, change):
        out.append((name, change))

    for f in ("xseq", "xsent", "xrecv", "xalias_n", "xalias_cash"):
        for vname, v in VALUES.items():
            add(f"tot.{f}={vname}", lambda cr, f=f, v=v: c.hset(k.tot, f, v))
            add(f"other.tot.{f}={vname}", lambda cr, f=f, v=v: c.hset(o.tot, f, v))
    for vname, v in VALUES.items():
        add(f"xin[home]={vname}", lambda cr, v=v: c.hset(o.tag + ":xin", home, v))
    add("xin=bad_source", lambda cr: c.hset(o.tag + ":xin", b"\xff", 1))
    add("xin=wrong_type", lambda cr: (c.delete(o.tag + ":xin"), c.lpush(o.tag + ":xin", b"x")))
    outbox = k.tag + ":out"
    add("out=short_member", lambda cr: c.zadd(outbox, {b"x": 1}))
    add("out=bad_msgpack", lambda cr: c.zadd(outbox, {struct.pack(">QI", 10**6, other) + b"\xc1\xc1": 10**6}))
    add("out=unknown_shard", lambda cr: c.zadd(outbox, {struct.pack(">QI", 10**6, 99) + b"\x90": 10**6}))
    add("out=wrong_type", lambda cr: (c.delete(outbox), c.lpush(outbox, b"x")))
    for vname, v in (("nan", "nan"), ("inf", "inf"), ("negative", "-5"), ("word", "abc")):
        add(f"out.amount={vname}", lambda cr, v=v: c.eval(
            _PLANT_ENTRY, 1, outbox, 10**6, other, f"http://{cr.cross}/planted", cr.cross, v))
    return out


@dataclass
class Outcome:
    name: str
    crash: str | None = None  # a traceback that escaped the scheduler
    lost: str | None = None  # the frontier's closing reason
    stats: dict = field(default_factory=dict)
    logs: list = field(default_factory=list)
    error: float | None = None  # conservation error (None: could not recount)
    injected: float | None = None
    finite: bool = True
    steps: int = 0

    @property
    def balanced(self) -> bool:
        return self.error is not None and self.error <= 1e-9 * max(1.0, self.injected)


def drive(crawl: Crawl, rng: random.Random, steps: int) -> int:
    """The scheduler driven as an engine would: ``steps`` actions."""
    scheduler = crawl.scheduler
    done = 0
    for _ in range(steps):
        if scheduler.frontier.lost is not None:
            break
        action = rng.random()
        if action < 0.55:
            request = scheduler.next_request()
            if request is not None:
                if rng.random() < 0.7:
                    visit(crawl, request, rng.randrange(0, 3))
                else:
                    crawl.held.append(request)
        elif action < 0.8 and crawl.held:
            visit(crawl, crawl.held.pop(rng.randrange(len(crawl.held))), rng.randrange(0, 3))
        else:
            scheduler.enqueue_request(Request(f"http://{rng.choice(crawl.hosts)}/n{done}",
                                              meta={"is_start_request": True}))
        scheduler.has_pending_requests()
        len(scheduler)
        done += 1
    for request in crawl.held:  # every lease settled
        visit(crawl, request, 0)
    crawl.held = []
    return done


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def run_case(make_crawl: Callable[[], Crawl], name: str, seed: int, steps: int = 30) -> Outcome:
    """One case: crawl, change ``name``, drive on, close; what happened."""
    crawl = make_crawl()
    scheduler, crawler = crawl.scheduler, crawl.crawler
    rng = random.Random(seed)
    outcome = Outcome(name)
    capture = _Capture()
    log = logging.getLogger("scrapy_aopic")
    level = log.level
    log.setLevel(logging.WARNING)  # whatever the caller's logging, warnings are seen
    log.addHandler(capture)
    try:
        setup(crawl)
        dict(targets(crawl))[name](crawl)
        try:
            outcome.steps = drive(crawl, rng, steps)
        except Exception:  # noqa: BLE001 - what the contract forbids
            outcome.crash = traceback.format_exc(limit=6)
        frontier = scheduler.frontier
        outcome.lost = frontier.lost
        if frontier.lost is None and outcome.crash is None:
            try:
                outcome.error = frontier.engine.conservation_error()
                totals = frontier.engine.totals()
                outcome.injected = totals.injected
                outcome.finite = all(math.isfinite(x) for x in (
                    totals.injected, totals.lambda_cash, totals.in_flight, totals.history_sum, outcome.error))
            except StoreUnavailable:
                pass  # refused by the recount: the close must say so (below)
            except Exception:  # noqa: BLE001
                outcome.crash = "at the books check: " + traceback.format_exc(limit=6)
        try:
            scheduler.close("finished")
        except Exception:  # noqa: BLE001
            outcome.crash = (outcome.crash or "") + "at close: " + traceback.format_exc(limit=6)
        outcome.lost = frontier.lost
    finally:
        log.removeHandler(capture)
        log.setLevel(level)
    outcome.stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("aopic/")}
    outcome.logs = capture.messages
    return outcome


#: Log lines that name what was refused (the URL, host, total or key in them).
NAMING_LINES = ("frontier data in Redis not written by this store:", "holds data this store never writes",
                "outbox is unreadable", "outbox names shard",
                "unreadable account record for", "stored request for", "is gone (identity")

#: Stats that say a value read back was refused (named, counted).
REFUSAL_STATS = ("aopic/redis_corrupt", "aopic/frontier_corrupt", "aopic/frontier_lost",
                 "aopic/failed/undecodable")


def verdict(outcome: Outcome) -> str | None:
    """``None`` when the contract holds, else what broke it."""
    if outcome.crash:
        return "crash: " + outcome.crash.strip().splitlines()[-1]
    refused = [s for s in REFUSAL_STATS if outcome.stats.get(s)]
    named = any(marker in line for line in outcome.logs for marker in NAMING_LINES)
    if outcome.lost is not None:
        if not refused or not named:
            return f"closed ({outcome.lost}) without a refusal stat or a log line naming it"
        return None
    if outcome.error is None:
        return "the books could not be recounted, and the crawl did not close as refused"
    if not outcome.finite:
        return f"non-finite books: error {outcome.error}, injected {outcome.injected}"
    if outcome.balanced:
        return None
    if refused and named:
        return None  # refused and said so (its cash could not be recovered)
    if detected_at_close(outcome.name) and outcome.stats.get("aopic/conservation_error", 0) > 0 and any(
        "cash conservation broken" in line for line in outcome.logs
    ):
        return None  # a plausible number: only the recount at close can tell, and it says so
    return f"books off by {outcome.error:.6g} of {outcome.injected:.6g}, nothing refused"


def detected_at_close(name: str) -> bool:
    """Changes no check can tell from honest data, one value at a time: a
    finite number where an amount is kept (1e308, a huge integer), an
    amount or the pending count missing (an honest frontier omits a total
    still 0: a count may go back to 0 in the op that raised it), an account
    deleted (its queue entry is named; its cash goes unaccounted). The
    books check at close (a recount) is what reports them."""
    field, _, value = name.partition("=")
    if field.startswith("tot.") and field[4:] in ("injected", "lambda_cash", "dividend"):
        return value in ("1e308", "huge_int", "missing")
    if name == "tot.pending=missing":  # lambda then divides among too few: cash multiplied
        return True
    return name in ("acct[pending]=missing", "acct[pending].cash=1e308", "acct[leased].cash=1e308",
                    "acct[crawled].cash=1e308", "lease.cash=1e308")
