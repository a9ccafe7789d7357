"""The frontier sharded by host over a Redis Cluster.

``S`` shards, each a complete :class:`~.store.RedisStore` frontier under its
own hash-tagged prefix ``{<prefix>:s<i>}`` (all of a shard's keys in one
slot, so every script touches one node); a URL belongs to shard
``crc32(hostname) mod S``, so a host's queue, its concurrency cap and its
accounts are on one shard and a pop is one script on one shard. Calls go
through redis-py's ``RedisCluster`` (routing, ``MOVED`` / ``ASK``,
failover), see :class:`~.scripts.ClusterScriptConnection`.

**Cross-shard credits.** A visit settled on shard A whose links belong to
shards B and C is one script on A (``settle_visit_x``): it pays A's own
links and lambda and moves the amounts for B and C into A's outbox (an
entry per destination, with a sequence number) and replies with the
outbox's first entries. The same worker then delivers them: a ``receive``
script on B applies, in sequence order, the entries it has not applied yet
(B remembers the last sequence applied per source shard), then they are
removed from A. Every delivery is of a *prefix* of the outbox, never of a
worker's own entries alone: an entry B skips because a later one from A
was applied was itself applied first, by the same script that applied the
later one (both were in that deliverer's prefix). A worker delivers an
outbox in batches (:data:`DELIVER_ENTRIES`, :data:`DELIVER_SECONDS`). A
worker killed before it delivered leaves the entries in A's outbox, where
the next delivery (any worker's :meth:`activity` or cross-shard settle on
A) finds them; a delivery repeated because the removal never happened is
skipped by B. Each shard
balances on its own (``accounts + lambda + in flight == injected +
received - sent``), the crawl as a whole ``sum(accounts + lambda + in
flight) + in transit == sum(injected)``, ``in transit`` being the cash of
the outbox entries not applied yet, which equals ``sum(sent) -
sum(received)`` unless a failover lost writes between shards (see
:meth:`RedisClusterStore.recount`).

**Lambda** is paid by each shard to its own targets, when due at a pop
there; :meth:`RedisClusterStore.balance_lambda` (every
:data:`LAMBDA_BALANCE_SECONDS` per worker) first moves lambda's cash
between shards, through the outbox, so that every shard holds the share of
the crawl's lambda its targets are of all targets: every target then gets
about the same dividend, as with one lambda (see ``docs/distributed.rst``).

**Selection.** Greedy within a shard; across shards a worker asks first
the shard whose richest pending URL holds the most cash, as read for every
shard in one pipeline every :data:`HEADS_SECONDS` and, in between, as its
own leases leave them (a shard's next head is worth at most the URL just
leased there): a merge of the shards' greedy orders, a moment stale. A pop
that returns nothing has asked every shard.
"""

from __future__ import annotations

import logging
import math
import struct
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from ..base import AccountView, Credit, FrontierCorrupt, FrontierStore, Lease, Link, Totals
from .records import fmt, text
from .store import RedisStore, total_of, totals_of

logger = logging.getLogger(__name__)

#: Seconds between a worker's readings of every shard's richest URL.
HEADS_SECONDS = 0.1
#: A worker delivers a shard's outbox after a cross-shard settle once it
#: holds this many entries or its oldest undelivered settle on that shard is
#: this many seconds old (and always before a pop that finds nothing, at
#: close and in :meth:`RedisClusterStore.activity`): one ``receive`` per
#: destination and one ``ack`` serve many settles.
DELIVER_ENTRIES = 32
DELIVER_SECONDS = 0.2
#: Seconds between a worker's rebalancing of lambda's cash over the shards.
LAMBDA_BALANCE_SECONDS = 1.0
#: Outbox entries read per round trip by :meth:`RedisClusterStore.deliver`.
DELIVERY_BATCH = 256
_OUTBOX_HEAD = struct.Struct(">QI")  # seq, destination shard
#: the store's counters and the crawl stats they add to (docs/stats.rst)
_STATS = {
    "sent": "aopic/cluster/entries_sent",
    "delivered": "aopic/cluster/entries_delivered",
    "redelivered": "aopic/cluster/duplicates_ignored",
    "lambda_moved": "aopic/cluster/lambda_moved",
}


def shard_prefix(key_prefix: str, shard: int) -> str:
    """The hash-tagged prefix of shard ``shard`` of frontier ``key_prefix``."""
    return "{%s:s%d}" % (key_prefix, shard)


def _applied(raw: dict) -> dict[int, int]:
    """A shard's ``P:xin`` (source shard -> last sequence applied), checked:
    what this store never writes there raises :class:`FrontierCorrupt`."""
    applied = {}
    for key, value in raw.items():
        try:
            source = int(text(key))
        except ValueError:
            raise FrontierCorrupt(f"the shared frontier in Redis holds data this store never writes: xin names "
                                  f"source shard {key[:40]!r}; stopping rather than trust its books") from None
        applied[source] = int(total_of(f"xin {source}", value, count=True))
    return applied


def shard_of_host(host: str, shards: int) -> int:
    """The shard of a host (CRC-32: the same in every process)."""
    return zlib.crc32(host.encode("utf-8", "surrogatepass")) % shards


class RedisClusterStore(FrontierStore):
    """:class:`~scrapy_aopic.store.base.FrontierStore` over ``shards``
    :class:`RedisStore` frontiers on a Redis Cluster.

    :param server: a ``redis.cluster.RedisCluster`` (``decode_responses=False``).
    :param shards: how many shards; every worker of a crawl must use the
        same number (recorded on shard 0; a worker with another is refused).
    Other parameters: as :class:`RedisStore`, for every shard.
    """

    shared = True

    def __init__(self, server, key_prefix: str = "aopic", lambda_targets: str = "pending", *,
                 shards: int = 16, owns_server: bool = False, readonly: bool = False, **kwargs):
        if int(shards) < 1:
            raise ValueError(f"AOPIC_REDIS_SHARDS must be >= 1, got {shards!r}")
        try:  # one-slot reads (an account and its lease) are transactions
            server.pipeline(transaction=True)
        except Exception as exc:  # noqa: BLE001 - redis-py's RedisClusterException, by version
            import redis

            raise ValueError(
                f"AOPIC_REDIS_CLUSTER needs a redis-py whose RedisCluster runs transactions "
                f"(redis {redis.__version__} refuses: {exc}); upgrade redis-py"
            ) from None
        self.server = server
        self.key_prefix = key_prefix
        self.lambda_targets = lambda_targets
        self.readonly = readonly
        self._owns_server = owns_server
        self.shards = [RedisStore(server, shard_prefix(key_prefix, 0), lambda_targets, readonly=readonly, **kwargs)]
        self._check_shard_count(int(shards))  # before any other shard is written to
        self.shards += [
            RedisStore(server, shard_prefix(key_prefix, i), lambda_targets, readonly=readonly, **kwargs)
            for i in range(1, int(shards))
        ]
        self.retry_timeout = self.shards[0].retry_timeout
        self.lease_timeout = self.shards[0].lease_timeout
        self.last_lambda_payout = 0.0
        self.last_reclaimed = 0
        self._next = 0  # the shard after the last lease (round robin among equals)
        #: per shard: the cash of its richest pending URL, as last read or leased
        self._heads = [math.inf] * len(self.shards)
        self._heads_at = 0.0
        self._balanced_at = 0.0
        #: per shard: when this worker's oldest undelivered settle there was made
        self._undelivered: dict[int, float] = {}
        #: the crawl's stats (``from_crawler``): the outbox's counters go
        #: there too, as they happen (see :meth:`_count`)
        self.stats = None
        #: outbox entries this store wrote; it delivered and were applied;
        #: it delivered and were already applied (ignored: a delivery
        #: repeated); lambda's cash it moved between shards
        self.sent = 0
        self.delivered = 0
        self.redelivered = 0
        self.lambda_moved = 0.0
        #: found by the last :meth:`recount`: cash sent between shards that
        #: no outbox holds any more and no shard received (or received and
        #: never sent, if negative), and the shards that lost writes their
        #: destinations had applied (see :meth:`recount`)
        self.transit_error = 0.0
        self.rolled_back: list[int] = []
        #: found by the last :meth:`recount`: credits (how many, their cash)
        #: to an alias whose target lives on another shard, paid to lambda
        #: instead (aliases are followed within a shard only)
        self.alias_to_lambda: tuple[int, float] = (0, 0.0)

    @classmethod
    def from_url(cls, url: str, key_prefix: str = "aopic", lambda_targets: str = "pending",
                 **kwargs) -> RedisClusterStore:
        """A store on the Redis Cluster one of whose nodes is at ``url``."""
        from redis.cluster import RedisCluster

        from ...connection import short_retries

        server = short_retries(
            RedisCluster.from_url(url, decode_responses=False, socket_timeout=30, socket_connect_timeout=10)
        )
        return cls(server, key_prefix, lambda_targets, owns_server=True, **kwargs)

    @classmethod
    def from_crawler(cls, crawler, spider, lambda_targets: str = "pending", **kwargs) -> RedisClusterStore:
        """The sharded frontier of ``spider``'s crawl (``AOPIC_REDIS_CLUSTER``)."""
        from ... import settings as aopic_settings
        from ...connection import format_key, get_redis_cluster_from_settings
        from .keys import delete_frontier

        settings = crawler.settings
        prefix = format_key(aopic_settings.get(settings, "AOPIC_REDIS_KEY"), spider)
        host_concurrency = aopic_settings.get(settings, "AOPIC_REDIS_HOST_CONCURRENCY")
        if host_concurrency is None:
            host_concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8)
        kwargs.setdefault("host_concurrency", int(host_concurrency))
        kwargs.setdefault("lease_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_LEASE_TIMEOUT"))
        kwargs.setdefault("retry_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_RETRY_TIMEOUT"))
        kwargs.setdefault("shards", int(aopic_settings.get(settings, "AOPIC_REDIS_SHARDS")))
        server = get_redis_cluster_from_settings(
            settings, aopic_settings.get_float(settings, "AOPIC_REDIS_SOCKET_TIMEOUT")
        )
        if settings.getbool("SCHEDULER_FLUSH_ON_START"):
            deleted = sum(delete_frontier(server, shard_prefix(prefix, i)) for i in range(kwargs["shards"]))
            logger.info("aopic: SCHEDULER_FLUSH_ON_START: deleted the %d keys of frontier %s", deleted, prefix)
        store = cls(server, prefix, lambda_targets, owns_server=True, **kwargs)
        store.stats = crawler.stats
        totals = store.totals()
        logger.info(
            "aopic: shared frontier %s in %d shards on Redis Cluster %s (%d known, %d pending, %d leased)",
            prefix, len(store.shards), store._where(), totals.known, totals.pending, totals.leased,
        )
        return store

    def _check_shard_count(self, shards: int) -> None:
        """A worker with another shard count would file URLs under other
        shards (fetching them twice): refuse it."""
        first = self.shards[0]
        key = first.keys.tot

        def check():
            if not self.readonly:
                self.server.hsetnx(key, "shards", shards)
            return self.server.hget(key, "shards")

        stored = text(first._retrying("setup", check))
        if stored is not None and int(stored) != shards:
            raise ValueError(
                f"the frontier {self.key_prefix} was started with AOPIC_REDIS_SHARDS={stored}; "
                f"this worker uses {shards}"
            )

    # -- routing ---------------------------------------------------------------

    @property
    def corrupt_seen(self) -> int:
        """Records not written by this store that the shards skipped."""
        return sum(shard.corrupt_seen for shard in self.shards)

    @property
    def corrupt_named(self) -> dict[str, str]:
        """What those were, as the shards named them (the first few of each)."""
        return {key: what for shard in self.shards for key, what in shard.corrupt_named.items()}

    def shard_index(self, url: str) -> int:
        """The shard of canonical ``url``: by its host name (Scrapy's default
        download slot), so every call that knows only the URL finds it."""
        return shard_of_host(urlsplit(url).hostname or "", len(self.shards))

    def _of(self, url: str) -> RedisStore:
        return self.shards[self.shard_index(url)]

    # Lease ids are per shard (each counts from 1): the crawl sees
    # ``local id * S + shard``, unique across shards and naming the shard.

    def _global_lease(self, lease: Lease, index: int) -> Lease:
        return lease._replace(lease_id=lease.lease_id * len(self.shards) + index)

    def _lease_shard(self, lease_id: int) -> tuple[int, int]:
        """The shard index of a lease id the crawl holds, and its id there."""
        return int(lease_id) % len(self.shards), int(lease_id) // len(self.shards)

    # -- plumbing shared by every shard ------------------------------------------

    @property
    def fail_fast(self) -> bool:
        return self.shards[0].fail_fast

    @fail_fast.setter
    def fail_fast(self, value: bool) -> None:
        for shard in self.shards:
            shard.fail_fast = value

    @property
    def stalled_for(self) -> float | None:
        stalls = [s.stalled_for for s in self.shards if s.stalled_for is not None]
        return max(stalls) if stalls else None

    def probe(self) -> bool:
        """Whether every shard answers again: a ``ping`` script on each
        shard's slot, so on the node that serves it now (the cluster
        client's ``PING`` asks whichever node it likes: it answered while
        a shard's master was dead and not yet replaced, and the crawl
        ended its stall only to stall again)."""
        from .scripts import FRONTIER
        from .store import _RETRYABLE

        try:
            for shard in self.shards:
                shard._scripts.call(FRONTIER, shard._command("ping"))
        except _RETRYABLE:
            return False
        return True

    def end_stall(self) -> None:
        for shard in self.shards:
            shard.end_stall()

    def _where(self) -> str:
        nodes = sorted({shard._where() for shard in self.shards})
        return ",".join(nodes)

    def check_epoch(self) -> None:
        for shard in self.shards:
            shard.check_epoch()

    @property
    def epoch(self) -> str | None:
        return self.shards[0].epoch

    def _pipelined(self, what: str, build: Callable[[Any], None]) -> list:
        """One cluster pipeline (a round trip per node) built by ``build``."""

        def run():
            pipe = self.server.pipeline(transaction=False)
            build(pipe)
            return pipe.execute()

        return self.shards[0]._retrying(what, run)

    # -- reading ---------------------------------------------------------------

    def shard_totals(self) -> list[tuple[Totals, float, float]]:
        """Per shard: its totals, what it received and what it sent."""

        def build(pipe):
            for shard in self.shards:
                pipe.hgetall(shard.keys.tot)

        rows = []
        for raw in self._pipelined("totals", build):
            values = {text(k): v for k, v in raw.items()}
            rows.append((totals_of(raw), total_of("xrecv", values.get("xrecv")), total_of("xsent", values.get("xsent"))))
        return rows

    def totals(self) -> Totals:
        total = Totals()
        for totals, _, _ in self.shard_totals():
            for field in Totals.__dataclass_fields__:
                setattr(total, field, getattr(total, field) + getattr(totals, field))
        return total

    def in_transit(self) -> float:
        """Cash sent by one shard and not yet received by another."""
        rows = self.shard_totals()
        return sum(sent for _, _, sent in rows) - sum(received for _, received, _ in rows)

    def get(self, url: str) -> AccountView | None:
        return self._of(url).get(url)

    def knows(self, url: str) -> bool:
        return self._of(url).knows(url)

    def count_known(self, urls: Collection[str]) -> int:
        groups: dict[int, list[str]] = {}
        for url in urls:
            groups.setdefault(self.shard_index(url), []).append(url)
        if not groups:
            return 0

        def build(pipe):
            for index, group in groups.items():
                pipe.hmget(self.shards[index].keys.acct, group)

        return sum(raw is not None for found in self._pipelined("count_known", build) for raw in found)

    def iter_accounts(self) -> Iterator[AccountView]:
        for shard in self.shards:
            yield from shard.iter_accounts()

    def peek(self) -> tuple[str, float] | None:
        heads = [head for head in (shard.peek() for shard in self.shards) if head is not None]
        return max(heads, key=lambda head: head[1]) if heads else None

    def recount(self) -> tuple[float, float, float, float]:
        """The books of the whole crawl, shard by shard (each shard's recount
        is one consistent script; the sum is exact when the crawl is idle).

        Cash in transit between shards is counted with the cash in flight
        as what the outboxes hold and their destinations have not applied
        (:meth:`outbox_value`), not as ``sum(sent) - sum(received)``: every
        shard balances on its own whatever happens (its scripts are whole,
        and a replica promoted after a failover holds a prefix of its
        master's writes), so the sum of the shards' books always balances
        with the latter; only the former shows cash that a failover lost
        between shards (an ``ack`` kept whose ``receive`` was lost: the
        cash is sent, in no outbox, received nowhere) or doubled (a
        ``receive`` kept whose sending settle was lost, the settle then made
        again). Such a difference is the crawl's conservation error, left
        in :attr:`transit_error` (with :attr:`rolled_back`) and logged."""
        cash = lambda_cash = in_flight = injected = 0.0
        for shard in self.shards:
            c, lam, fl, inj = shard.recount()
            cash += c
            lambda_cash += lam
            in_flight += fl
            injected += inj
        unapplied, self.rolled_back = self.outbox_value()

        def build(pipe):
            for shard in self.shards:
                pipe.hmget(shard.keys.tot, ["xalias_n", "xalias_cash"])

        rows = self._pipelined("aliases", build)
        self.alias_to_lambda = (sum(int(total_of("xalias_n", n, count=True)) for n, _ in rows),
                                sum(total_of("xalias_cash", c) for _, c in rows))
        self.transit_error = self.in_transit() - unapplied
        if self.rolled_back or abs(self.transit_error) > 1e-9 * max(injected, 1.0):
            logger.error(
                "aopic: cash between shards %s: %.6g sent and received nowhere (negative: received twice); "
                "shards that lost writes others had applied: %s. A master failed over to a replica that "
                "lacked its last writes (Redis replication is asynchronous): the books of the crawl are off "
                "by that much (aopic/cluster/transit_error); every shard's own books still balance",
                "lost" if self.transit_error >= 0 else "doubled", self.transit_error,
                self.rolled_back or "none seen",
            )
        return cash, lambda_cash, in_flight + unapplied, injected

    def outbox_value(self) -> tuple[float, list[int]]:
        """``(cash, shards)``: the cash of every outbox's entries that their
        destination has not applied (``in_transit`` on each shard, given
        the last sequence each destination applied from it), and the shards
        whose last sequence is below one a destination applied from them
        (they lost writes: a failover)."""

        def build(pipe):
            for shard in self.shards:
                pipe.hgetall(shard.keys.tag + ":xin")

        applied = [_applied(raw) for raw in self._pipelined("in transit", build)]
        cash, rolled_back = 0.0, []
        for source, shard in enumerate(self.shards):
            args: list[Any] = []
            for dest, last in enumerate(applied):
                if source in last:
                    args += [dest, last[source]]
            amount, last_sent = shard._run("in_transit", *args)
            cash += float(amount)
            if max((last.get(source, 0) for last in applied), default=0) > int(last_sent):
                rolled_back.append(source)
        return cash, rolled_back

    def shard_books(self) -> list[float]:
        """Per shard: ``accounts + lambda + in flight - (injected + received -
        sent)``, recounted (0 up to rounding when every shard balances)."""
        errors = []
        for shard, (_, received, sent) in zip(self.shards, self.shard_totals()):
            cash, lambda_cash, in_flight, injected = shard.recount()
            errors.append(cash + lambda_cash + in_flight - (injected + received - sent))
        return errors

    def pending_count(self) -> int:
        """Pending URLs over every shard: each shard's count from its last
        pop when this process changed nothing there since, the others read
        in one pipeline (see :meth:`RedisStore.pending_count`)."""
        stale = [shard for shard in self.shards if not shard._pending_fresh]
        if stale:

            def build(pipe):
                for shard in stale:
                    pipe.hget(shard.keys.tot, "pending")

            for shard, raw in zip(stale, self._pipelined("pending", build)):
                shard.last_pending = int(float(raw or 0))
                shard._pending_fresh = True
        return sum(shard.last_pending for shard in self.shards)

    @property
    def last_pending(self) -> int:
        return sum(shard.last_pending for shard in self.shards)

    def request_of(self, url: str) -> Any:
        return self._of(url).request_of(url)

    def claim_books_check(self) -> bool:
        if self.activity()[1]:
            return False
        return self.shards[0].claim_books_check()

    # -- seeds and idleness ------------------------------------------------------

    def take_seeds(self, seeds_key: str, count: int) -> list[bytes]:
        return self.shards[0].take_seeds(seeds_key, count)

    def seeds_scheduled(self, seeds_key: str) -> None:
        self.shards[0].seeds_scheduled(seeds_key)

    def _seeds_waiting(self, seeds_key: str) -> int:
        from .seeds import seed_claims_key

        shard = self.shards[0]
        kind = text(shard._retrying("seeds", lambda: self.server.type(seeds_key)))
        length = {"list": "llen", "set": "scard", "zset": "zcard"}.get(kind)

        def read():
            # one slot (the claims key shares the seeds key's tag): a transaction
            pipe = self.server.pipeline(transaction=True)
            if length:
                getattr(pipe, length)(seeds_key)
            pipe.zcount(seed_claims_key(seeds_key), "(%d" % int(time.time() * 1000), "+inf")
            return pipe.execute()

        return sum(int(n) for n in shard._retrying("seeds", read))

    def _census(self) -> list[tuple[int, int, int, int]]:
        """Per shard: (pending, open leases, outbox entries, leases ever opened)."""

        def build(pipe):
            for shard in self.shards:
                pipe.hmget(shard.keys.tot, ["pending", "next_lease"])
                pipe.hlen(shard.keys.lease)
                pipe.zcard(shard.keys.tag + ":out")

        replies = self._pipelined("activity", build)
        rows = []
        for i in range(0, len(replies), 3):
            (pending, opened), leases, outbox = replies[i:i + 3]
            rows.append((int(float(pending or 0)), int(leases), int(outbox), int(float(opened or 0))))
        return rows

    def activity(self, seeds_key: str | None = None) -> tuple[int, int, int]:
        """``(pending URLs, open leases + undelivered outbox entries, seeds
        waiting)`` over every shard. The shards are read one after another,
        not in one snapshot, so work moving between them (a delivery) could
        be missed by a single pass: the seeds are read first (a worker
        schedules a batch before it drops its claim), then every shard twice;
        work that reached a shard between its two reads is seen by the
        second, or was leased there meanwhile, which its lease counter
        shows. Any such change reports one pending URL (not idle)."""
        seeds = self._seeds_waiting(seeds_key) if seeds_key else 0
        first = self._census()
        for index, row in enumerate(first):
            if row[2] and not self.readonly:  # (a reader only looks)
                self.deliver(index)
        second = self._census()
        pending = sum(row[0] for row in second)
        busy = sum(row[1] + row[2] for row in second)
        if not pending and any(a[3] != b[3] or a[0] or a[1] or a[2] for a, b in zip(first, second)):
            pending = 1
        return pending, busy, seeds

    # -- cash in ----------------------------------------------------------------

    def inject(self, link: Link, cash: float) -> bool:
        return self._of(link.url).inject(link, cash)

    def inject_many(self, seeds: Iterable[tuple[Link, float]], chunk: int = 1000) -> int:
        groups: dict[int, list[tuple[Link, float]]] = {}
        for item in seeds:
            groups.setdefault(self.shard_index(item[0].url), []).append(item)
        return sum(self.shards[i].inject_many(items, chunk) for i, items in groups.items())

    def register(self, link: Link) -> int | None:
        return self._of(link.url).register(link)

    def repend(self, link: Link) -> bool:
        return self._of(link.url).repend(link)

    def refuse(self, url: str, host: str, depth: int) -> None:
        self._of(url).refuse(url, host, depth)

    # -- selection ---------------------------------------------------------------

    def pop(
        self,
        ready: Callable[[str], bool] | None = None,
        min_share: float = 0.0,
        *,
        busy: Collection[str] = (),
        visit_lambda: bool = False,
        now: float | None = None,
    ) -> Lease | None:
        """Lease from the shard whose richest URL is richest first (see the
        module's docstring); each shard applies ``min_share`` against its
        own richest URL and pays its own lambda when due (``visit_lambda``),
        after lambda's cash was rebalanced over the shards."""
        self.last_lambda_payout = 0.0
        self.last_reclaimed = 0
        if visit_lambda and time.monotonic() - self._balanced_at >= LAMBDA_BALANCE_SECONDS:
            self.balance_lambda()
        for attempt in range(2):
            if time.monotonic() - self._heads_at >= HEADS_SECONDS:
                self._read_heads()
            # richest head first; ties (unknown heads) round robin after the last lease
            count = len(self.shards)
            order = sorted(range(count), key=lambda i: (-self._heads[i], (i - self._next) % count))
            for index in order:
                shard = self.shards[index]
                lease = shard.pop(ready, min_share, busy=busy, visit_lambda=visit_lambda and not attempt, now=now)
                self.last_lambda_payout += shard.last_lambda_payout
                self.last_reclaimed += shard.last_reclaimed
                if lease is not None:
                    # the next head there is worth at most this (until credits arrive)
                    self._heads[index] = lease.cash
                    self._next = (index + 1) % count
                    return self._global_lease(lease, index)
                self._heads[index] = -math.inf  # nothing there for us: asked last until reread
            # nothing anywhere: the credits this worker held back may be the work
            if not (self._undelivered and self.deliver_pending()):
                return None
            self._heads_at = 0.0
        return None

    def _read_heads(self) -> None:
        """Every shard's richest pending cash, in one pipeline: its best
        host's score is ``mark - cash`` of its best URL, so the cash with
        its lambda dividend is ``dividend - score``."""
        self._heads_at = time.monotonic()

        def build(pipe):
            for shard in self.shards:
                pipe.zrange(shard.keys.hosts, 0, 0, withscores=True)
                pipe.hget(shard.keys.tot, "dividend")

        replies = self._pipelined("heads", build)
        for index in range(len(self.shards)):
            top, dividend = replies[2 * index], replies[2 * index + 1]
            self._heads[index] = float(dividend or 0.0) - top[0][1] if top else -math.inf

    def take(self, url: str) -> Lease | None:
        index = self.shard_index(url)
        lease = self.shards[index].take(url)
        return None if lease is None else self._global_lease(lease, index)

    def visit_lambda(self) -> float:
        self.balance_lambda()
        return sum(shard.visit_lambda() for shard in self.shards)

    def balance_lambda(self) -> float:
        """Move lambda's cash between shards so that shard *s* holds
        ``Λ × N_s / Σ N`` (``Λ``: lambda's cash over all shards, ``N_s``:
        the shard's lambda targets): each shard with more sends its surplus
        to those with less, in proportion to what they lack, through the
        outbox (delivered at once, idempotent). The shards keep paying
        their own lambda; with the cash spread so, every target of the
        crawl gets about ``Λ / Σ N``, as with one lambda. Figures read
        while others write may be slightly stale: a shard never sends more
        than its lambda holds, so the books stay balanced whatever happens.
        Returns the amount moved."""
        self._balanced_at = time.monotonic()
        targets_of = ("pending", "leased", "crawled") if self.lambda_targets == "all" else ("pending",)

        def build(pipe):
            for shard in self.shards:
                pipe.hmget(shard.keys.tot, ["lambda_cash", *targets_of])

        cash, targets = [], []
        for row in self._pipelined("lambda", build):
            values = [float(v or 0) for v in row]
            cash.append(max(values[0], 0.0))
            targets.append(sum(values[1:]))
        total_cash, total_targets = sum(cash), sum(targets)
        if total_cash <= 0 or total_targets <= 0:
            return 0.0
        surplus = [c - total_cash * n / total_targets for c, n in zip(cash, targets)]
        lacking = {i: -s for i, s in enumerate(surplus) if s < 0}
        short = sum(lacking.values())
        moved = 0.0
        for index, extra in enumerate(surplus):
            if extra <= 1e-12 * total_cash or short <= 0:
                continue
            args: list[Any] = []
            for dest, need in lacking.items():
                args += [dest, fmt(extra * need / short)]
            result = self.shards[index]._run("lambda_send", *args)
            moved += float(result[0])
            self._count("sent", int(result[1]))
            self._deliver_entries(index, result[2:])
        self._count("lambda_moved", moved)
        return moved

    def reclaim_expired(self, now: float | None = None) -> int:
        return sum(shard.reclaim_expired(now) for shard in self.shards)

    def open_leases(self) -> list[tuple[str, int]]:
        count = len(self.shards)
        return [(url, lease_id * count + index)
                for index, shard in enumerate(self.shards) for url, lease_id in shard.open_leases()]

    # -- settling ------------------------------------------------------------------

    def settle_visit(self, url: str, lease_id: int, history: float, visited_at: float,
                     credits: Iterable[Credit]) -> bool:
        index, lease_id = self._lease_shard(lease_id)
        shard = self.shards[index]
        local: list[Any] = []
        remote: dict[int, list[Any]] = {}
        for link, amount in credits:
            target = self.shard_index(link.url)
            args = local if target == index else remote.setdefault(target, [])
            args.extend(shard._link_args(link))
            args.append(fmt(amount))
        if not remote:  # the common case: one script, as on one Redis
            # No discovery cash ("0"): a credit sent to another shard could
            # not bring it (AOPIC_DISCOVERY_CASH is ignored on a cluster).
            return bool(shard._run("settle_visit", url, int(lease_id), fmt(history), fmt(visited_at), "0", *local))
        args: list[Any] = [url, int(lease_id), fmt(history), fmt(visited_at), len(remote)]
        for target, credit_args in remote.items():
            args += [target, len(credit_args) // 5, *credit_args]
        return self._sent(index, shard._run("settle_visit_x", *args, *local), len(remote))

    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        index, lease_id = self._lease_shard(lease_id)
        shard = self.shards[index]
        dest = self.shard_index(target.url)
        if dest == index:
            return shard.settle_transfer(url, lease_id, target)
        return self._sent(index, shard._run("settle_transfer_x", url, int(lease_id), dest,
                                            *shard._link_args(target), ""), 1)

    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        index, lease_id = self._lease_shard(lease_id)
        return self.shards[index].settle_failure(url, lease_id, refuse=refuse)

    def settle_requeue(self, url: str, lease_id: int) -> bool:
        index, lease_id = self._lease_shard(lease_id)
        return self.shards[index].settle_requeue(url, lease_id)

    # -- the outbox ------------------------------------------------------------------

    def _count(self, name: str, amount: float) -> None:
        """Add ``amount`` to counter ``name`` (an attribute) and to the
        crawl's ``aopic/cluster/<stat>`` when the store has its stats."""
        if not amount:
            return
        setattr(self, name, getattr(self, name) + amount)
        if self.stats is not None:
            self.stats.inc_value(_STATS[name], amount)

    def _sent(self, index: int, result, entries: int) -> bool:
        """A cross-shard settle's result (``{1, entry...}``: the outbox's
        first entries, or 0 for a stale lease: then it wrote none of its
        ``entries``); they are delivered now if there are
        :data:`DELIVER_ENTRIES` of them or the oldest settle this worker
        left there is :data:`DELIVER_SECONDS` old."""
        if not result:
            return False
        self._count("sent", entries)
        now = time.monotonic()
        since = self._undelivered.setdefault(index, now)
        if len(result) - 1 >= DELIVER_ENTRIES or now - since >= DELIVER_SECONDS:
            self._undelivered.pop(index, None)
            self._deliver_entries(index, result[1:])
        return True

    def deliver_pending(self) -> int:
        """Deliver the outboxes where this worker left entries."""
        applied = 0
        for index in list(self._undelivered):
            applied += self.deliver(index)
        return applied

    def deliver(self, index: int) -> int:
        """Deliver shard ``index``'s outbox to the shards it credits (see the
        module's docstring); returns how many entries were newly applied.
        Idempotent: a repeated delivery applies nothing twice."""
        self._undelivered.pop(index, None)
        applied = 0
        while True:
            members = self.shards[index]._run("outbox", DELIVERY_BATCH)
            got, removed = self._deliver_entries(index, members)
            applied += got
            if removed < DELIVERY_BATCH:
                return applied

    def _deliver_entries(self, index: int, members: list[bytes]) -> tuple[int, int]:
        """Apply outbox entries of shard ``index`` on their shards (in
        sequence order, one script per destination), then remove them from
        the outbox: ``(newly applied, removed)``."""
        applied = 0
        by_dest: dict[int, list[Any]] = {}
        done = []
        for member in members:
            if len(member) < _OUTBOX_HEAD.size:  # not written by this store, and names no shard
                what = f"outbox entry of shard {index} = {member[:16]!r}"
                self.shards[index]._skip_corrupt(what, what)
                logger.warning("aopic: an entry of shard %d's outbox is unreadable (%r); removed", index, member[:16])
                done.append(member)
                continue
            seq, dest = _OUTBOX_HEAD.unpack_from(member)
            if 0 <= dest < len(self.shards):
                by_dest.setdefault(dest, []).extend((seq, member[_OUTBOX_HEAD.size:]))
                done.append(member)
            else:  # not written by this store: left where it is, its cash in transit
                logger.warning("aopic: an entry of shard %d's outbox names shard %d of %d; left there",
                               index, dest, len(self.shards))
        for dest, entries in by_dest.items():
            got = int(self.shards[dest]._run("receive", index, *entries))
            applied += got
            self._count("delivered", got)
            self._count("redelivered", len(entries) // 2 - got)
        if done:
            self.shards[index]._run("ack", *done)
        return applied, len(done)

    # -- other ------------------------------------------------------------------------

    def clear(self) -> int:
        return sum(shard.clear() for shard in self.shards)

    def close(self) -> None:
        if not self.readonly and self.stalled_for is None:
            try:
                self.deliver_pending()
            except Exception as exc:  # noqa: BLE001 - closing: the entries stay for the next delivery
                logger.warning("aopic: outbox entries left undelivered at close (%s); the other workers "
                               "deliver them", exc)
        for shard in self.shards:
            shard.close()
        if self._owns_server:
            self.server.close()
