"""The store operations of the Redis frontier: one ``frontier.lua`` call
per operation (see the package's docstring for the key layout)."""

from __future__ import annotations

import logging
import math
import os
import struct
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

import redis

from ..base import (
    ALIAS,
    CRAWLED,
    LEASED,
    PENDING,
    AccountView,
    Credit,
    FrontierCorrupt,
    FrontierLost,
    FrontierStore,
    Lease,
    Link,
    StoreStalled,
    StoreUnavailable,
    Totals,
)
from .keys import FrontierKeys, delete_frontier
from .records import LEASE, LEASE_HEAD, RECORD, decode_request_data, encode_request_data, fmt, text
from .scripts import FRONTIER, LuaScript, script_connection
from .seeds import SharedSeeds

logger = logging.getLogger(__name__)

# (the cluster errors: a Redis Cluster failing over or resharding, see .cluster)
_RETRYABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)

#: Seconds one worker's claim to recount the books at its close lasts.
BOOKS_CLAIM_SECONDS = 60

#: Script ops that change nothing (or only what ``pop`` reports itself).
_READ_OPS = frozenset({"pop", "peek", "ping", "recount", "in_transit"})


#: Totals that may drift below 0 by an ulp (sums of additions and subtractions).
_SIGNED_TOTALS = frozenset({"in_flight", "history_sum"})


def total_of(name: str, raw: bytes | str | None, *, count: bool = False) -> float:
    """Total ``name`` of ``P:tot`` as read: ``0`` when missing; anything
    ``frontier.lua`` never writes there (text, nan, inf, a negative amount,
    a count that is no integer) raises :class:`FrontierCorrupt` naming it,
    as the script does (``load_totals``)."""
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (value < 0 and name not in _SIGNED_TOTALS) or (
        count and (value != int(value) or value > 2**53)
    ):
        raise FrontierCorrupt(f"the shared frontier in Redis holds data this store never writes: total {name} = "
                              f"{raw[:40]!r}; stopping rather than trust its books")
    return value


def totals_of(raw: dict) -> Totals:
    """The :class:`Totals` of a frontier's ``P:tot`` hash (as read, checked:
    :func:`total_of`)."""
    values = {text(k): v for k, v in raw.items()}

    def num(name: str) -> float:
        return total_of(name, values.get(name))

    def cnt(name: str) -> int:
        return int(total_of(name, values.get(name), count=True))

    return Totals(
        injected=num("injected"),
        lambda_cash=num("lambda_cash"),
        lambda_history=num("lambda_history"),
        in_flight=num("in_flight"),
        history_sum=num("history_sum"),
        lambda_visits=cnt("lambda_visits"),
        visits=cnt("visits"),
        known=cnt("known"),
        pending=cnt("pending"),
        leased=cnt("leased"),
    )


#: Words of a Redis error reply that say the data is not ours: a key of
#: the wrong type, a total the script refused (AOPICCORRUPT), a number
#: Redis itself could not read, a script stopped by what it read.
_CORRUPT_REPLIES = ("WRONGTYPE", "AOPICCORRUPT", "not an integer", "not a valid float", "user_script")


class RedisStore(SharedSeeds, FrontierStore):
    """:class:`~scrapy_aopic.store.base.FrontierStore` in Redis, shared by workers.

    :param server: a ``redis.Redis`` client created with
        ``decode_responses=False`` (records are binary).
    :param key_prefix: prefix of every key (e.g. ``"myspider:aopic"``).
    :param lambda_targets: ``"pending"`` or ``"all"``; every worker of a crawl
        must use the same value.
    :param host_concurrency: most open leases per host across all workers
        (``CONCURRENT_REQUESTS_PER_DOMAIN``); ``0`` means no cap.
    :param lease_timeout: seconds (Redis server time) after which a lease
        nobody settled is requeued by the next :meth:`pop` — a dead worker's
        requests come back. Make it longer than a download can take.
    :param retry_timeout: how long a call keeps retrying while Redis is
        unreachable before it raises; ``0`` fails at once.
    :param reclaim_batch: expired leases requeued per :meth:`pop`.
    :param owns_server: :meth:`close` also closes ``server``'s connections.
    :param readonly: for tools that only read: the constructor does not
        record the lambda targets of a frontier that has none yet.
    """

    shared = True

    supports_discovery_cash = True

    def __init__(
        self,
        server: redis.Redis,
        key_prefix: str = "aopic",
        lambda_targets: str = "pending",
        *,
        host_concurrency: int = 8,
        lease_timeout: float = 600.0,
        retry_timeout: float = 300.0,
        reclaim_batch: int = 16,
        owns_server: bool = False,
        readonly: bool = False,
    ):
        if lambda_targets not in ("pending", "all"):
            # "pending-cash" (lambda paid by cash) is in the memory store only:
            # the frontier falls back to "pending" before it builds this store.
            raise ValueError(
                f"AOPIC_LAMBDA_TARGETS must be 'pending' or 'all' with the Redis backend, got {lambda_targets!r}"
            )
        if not lease_timeout > 0:
            raise ValueError(f"lease_timeout must be > 0 seconds, got {lease_timeout!r}")
        if server.get_encoder().decode_responses:
            raise ValueError("RedisStore needs a Redis client with decode_responses=False")
        self.server = server
        self.key_prefix = key_prefix
        self.lambda_targets = lambda_targets
        self._all_flag = "1" if lambda_targets == "all" else "0"
        self.host_concurrency = int(host_concurrency or 0)
        self.lease_timeout = float(lease_timeout)
        self.retry_timeout = float(retry_timeout)
        self.reclaim_batch = int(reclaim_batch)
        self._owns_server = owns_server
        #: a reader (``scrapy aopic``): the constructor writes nothing
        self.readonly = readonly
        #: never wait for Redis: raise :class:`StoreStalled` (a crawl sets it
        #: once open, so its reactor keeps serving downloads)
        self.fail_fast = False
        self._stalled_at: float | None = None
        self._scripts = script_connection(server)
        #: lambda payout made by the last :meth:`pop` (``visit_lambda=True``)
        self.last_lambda_payout = 0.0
        #: pending URLs right after the last :meth:`pop`
        self.last_pending = 0
        #: expired leases the last :meth:`pop` requeued
        self.last_reclaimed = 0
        # Whether ``last_pending`` still holds: no change by this process
        # since it was read (other workers' changes are seen by the next pop).
        self._pending_fresh = False
        #: records not written by this store that the scripts skipped (named in the log)
        self.corrupt_seen = 0
        #: what those were, by key or URL, each named once (the first few: a
        #: tool reports them)
        self.corrupt_named: dict[str, str] = {}
        self._seed_claims: list[str] = []  # see take_seeds
        # pop tokens (see the script's 'pop'): this worker's id and a counter
        self._worker_id = ""
        self._token_pid = 0
        self._pop_seq = 0
        self._unanswered_pop: str | None = None
        self._unlease_later: list[tuple[str, int]] = []
        #: every key name of this frontier (hash-tagged: one Cluster slot)
        self.keys = FrontierKeys.of(key_prefix)
        self._script_keys = [key.encode() for key in self.keys.script_keys]
        self._tag_arg = self.keys.tag.encode()
        self._refuse_old_layout()
        self._check_lambda_targets()
        #: the identity of the frontier this store opened (``P:epoch``)
        self.epoch = self._open_epoch()

    @classmethod
    def from_url(cls, url: str, key_prefix: str = "aopic", lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``)."""
        # a Redis that hangs (stopped, network partition) must raise, not block forever
        server = redis.Redis.from_url(url, decode_responses=False, socket_timeout=30, socket_connect_timeout=10)
        return cls(server, key_prefix, lambda_targets, owns_server=True, **kwargs)

    @classmethod
    def from_settings(cls, settings, key_prefix: str, lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """A store on the Redis described by Scrapy ``settings`` (``REDIS_URL``,
        ``REDIS_PARAMS``, ``REDIS_HOST`` / ``REDIS_PORT``, as in scrapy-redis)."""
        from ...connection import get_redis_from_settings

        return cls(get_redis_from_settings(settings), key_prefix, lambda_targets, owns_server=True, **kwargs)

    @classmethod
    def from_crawler(cls, crawler, spider, lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """The shared frontier of ``spider``'s crawl, configured by the
        crawler's settings (``AOPIC_REDIS_*``, scrapy-redis' ``REDIS_*``).

        ``SCHEDULER_FLUSH_ON_START`` deletes the frontier first: set it only
        on the *first* worker of a fresh crawl (any later worker would wipe
        what the others did).
        """
        from ... import settings as aopic_settings
        from ...connection import format_key, get_redis_from_settings

        settings = crawler.settings
        prefix = format_key(aopic_settings.get(settings, "AOPIC_REDIS_KEY"), spider)
        host_concurrency = aopic_settings.get(settings, "AOPIC_REDIS_HOST_CONCURRENCY")
        if host_concurrency is None:
            host_concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8)
        kwargs.setdefault("host_concurrency", int(host_concurrency))
        kwargs.setdefault("lease_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_LEASE_TIMEOUT"))
        kwargs.setdefault("retry_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_RETRY_TIMEOUT"))
        server = get_redis_from_settings(
            settings, aopic_settings.get_float(settings, "AOPIC_REDIS_SOCKET_TIMEOUT")
        )
        if settings.getbool("SCHEDULER_FLUSH_ON_START"):
            deleted = delete_frontier(server, prefix)
            logger.info("aopic: SCHEDULER_FLUSH_ON_START: deleted the %d keys of frontier %s", deleted, prefix)
        store = cls(server, prefix, lambda_targets, owns_server=True, **kwargs)
        totals = store.totals()
        logger.info(
            "aopic: shared frontier %s on Redis %s (%d known, %d pending, %d leased)",
            prefix, store._where(), totals.known, totals.pending, totals.leased,
        )
        return store

    # -- plumbing -------------------------------------------------------------

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """Run ``call``; while Redis is unreachable, log and retry with backoff
        for up to ``retry_timeout`` seconds.

        With :attr:`fail_fast` (a crawl: its reactor must not sleep), a
        failure raises :class:`StoreStalled` at once instead, and so does
        every call until :meth:`probe` finds Redis back, without touching
        the socket; past ``retry_timeout`` it is :class:`StoreUnavailable`.
        """
        if self.fail_fast and self._stalled_at is not None:
            self._raise_stalled(what, None)
        failures = 0
        delay = 0.05
        give_up_at = None
        while True:
            try:
                result = call()
            except redis.ResponseError as exc:
                message = str(exc)
                if not any(word in message for word in _CORRUPT_REPLIES):
                    raise
                raise FrontierCorrupt(
                    f"the shared frontier {self.key_prefix} on Redis {self._where()} holds data "
                    f"this store never writes ({what}: {message}); stopping rather than trust its books"
                ) from exc
            except _RETRYABLE as exc:
                now = time.monotonic()
                if self.fail_fast:
                    self._stalled_at = now
                    logger.warning(
                        "aopic: Redis at %s unreachable (%s: %s) during %s; the crawl goes on "
                        "without it, holding what it must write, and retries for up to %.0fs",
                        self._where(), type(exc).__name__, exc, what, self.retry_timeout,
                    )
                    self._raise_stalled(what, exc)
                if give_up_at is None:
                    give_up_at = now + self.retry_timeout
                failures += 1
                if now >= give_up_at:
                    raise StoreUnavailable(
                        f"Redis at {self._where()} unreachable for {self.retry_timeout:.0f}s "
                        f"({type(exc).__name__}: {exc}); gave up on {what}"
                    ) from exc
                logger.warning(
                    "aopic: Redis at %s unreachable (%s: %s); %s retry %d in %.2fs",
                    self._where(), type(exc).__name__, exc, what, failures, delay,
                )
                time.sleep(min(delay, max(0.0, give_up_at - now)))
                delay = min(delay * 2, 5.0)
                continue
            if failures:
                logger.warning("aopic: Redis at %s is back; %s succeeded after %d retries",
                               self._where(), what, failures)
            return result

    def _raise_stalled(self, what: str, cause: BaseException | None):
        stalled = time.monotonic() - self._stalled_at
        if stalled >= self.retry_timeout:
            raise StoreUnavailable(
                f"Redis at {self._where()} unreachable for {stalled:.0f}s "
                f"(AOPIC_REDIS_RETRY_TIMEOUT {self.retry_timeout:.0f}s); gave up on {what}"
            ) from cause
        raise StoreStalled(f"Redis at {self._where()} not answering for {stalled:.1f}s ({what})") from cause

    @property
    def stalled_for(self) -> float | None:
        """Seconds since Redis stopped answering a :attr:`fail_fast` store."""
        return None if self._stalled_at is None else time.monotonic() - self._stalled_at

    def probe(self) -> bool:
        """One ``PING``: whether Redis answers again (see :meth:`end_stall`).
        Blocks up to the socket timeout: a crawl calls it from a thread."""
        try:
            self.server.ping()
        except _RETRYABLE:
            return False
        return True

    def end_stall(self) -> None:
        """Redis answers again (:meth:`probe`): calls go to it again. Called
        by the crawl's reactor thread, before it makes the writes it held."""
        if self._stalled_at is not None:
            logger.warning("aopic: Redis at %s is back after %.1fs", self._where(), self.stalled_for)
            self._stalled_at = None

    def _where(self) -> str:
        if not hasattr(self.server, "connection_pool"):  # a RedisCluster: the node of this slot
            return self.server.get_node_from_key(self.keys.tot).name
        kwargs = self.server.connection_pool.connection_kwargs
        if "path" in kwargs:
            return kwargs["path"]
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

    def _run(self, op: str, *args: Any, head: int = 0) -> Any:
        """Run script ``op``; log hostile records it skipped (listed after
        the result); return the result (``head=0``) or the first ``head``
        elements of the reply."""
        if op not in _READ_OPS:
            self._pending_fresh = False
        command = self._command(op, *args)
        reply = self._retrying(op, lambda: self._scripts.call(FRONTIER, command))
        return self._result(reply, head)

    def _command(self, op: str, *args: Any) -> bytes:
        """The packed ``frontier.lua`` call of ``op``."""
        return self._scripts.pack(FRONTIER, self._script_keys, (self._tag_arg, op, self._all_flag, *args))

    def _result(self, reply: list, head: int = 0) -> Any:
        """The result of a ``frontier.lua`` reply; the hostile records the
        script skipped (listed after the result) are logged and counted
        (:attr:`corrupt_seen`)."""
        size = head or 1
        for what in reply[size:]:
            self._skip_corrupt(text(what), text(what))
            logger.warning(
                "aopic: frontier data in Redis not written by this store: %s; skipped "
                "(aopic/redis_corrupt; a pending URL's cash goes to lambda)",
                text(what),
            )
        return reply[:size] if head else reply[0]

    def _skip_corrupt(self, key: str, what: str, replace: bool = False) -> None:
        """One record not written by this store, skipped: counted in
        :attr:`corrupt_seen` and named by ``key`` in :attr:`corrupt_named`
        (the caller logs it)."""
        self.corrupt_seen += 1
        # (bounded: a frontier full of foreign data must not fill a worker's
        # memory; a record the script named by its URL is named with its
        # bytes when read here)
        if key in self.corrupt_named:
            if replace:
                self.corrupt_named[key] = what
        elif len(self.corrupt_named) < 20:
            self.corrupt_named[key] = what

    def _script(self, what: str, script: LuaScript, keys: list, args: list | tuple) -> Any:
        """Run a helper script (seeds, activity) with its declared keys."""
        return self._retrying(what, lambda: self._scripts.call(script, self._scripts.pack(script, keys, args)))

    def _open_epoch(self) -> str | None:
        """The frontier's identity, written when it is created: a Redis that
        restarts empty loses it, which :meth:`check_epoch` notices."""
        key = self.keys["epoch"]

        def open_epoch():
            if not self.readonly:
                self.server.set(key, uuid.uuid4().hex, nx=True)
            return self.server.get(key)

        return text(self._retrying("epoch", open_epoch))

    def check_epoch(self) -> None:
        """Raise :class:`FrontierLost` when the frontier this store opened is
        gone (its identity key missing or replaced): an empty Redis must not
        look like a finished crawl."""
        if self.epoch is None:
            return  # a reader of a frontier that had none
        current = text(self._retrying("epoch", lambda: self.server.get(self.keys["epoch"])))
        if current != self.epoch:
            raise FrontierLost(
                f"the shared frontier {self.key_prefix} on Redis {self._where()} is gone "
                f"(identity {self.epoch} now {current or 'missing'}): Redis lost its data "
                "(restarted without persistence?) or the keys were deleted"
            )

    def _refuse_old_layout(self) -> None:
        """A frontier written before the keys carried a hash tag
        (``prefix:tot`` instead of ``{prefix}:tot``) is not silently ignored
        (a new, empty frontier would re-crawl everything): say so and stop."""
        if self.keys.tag == self.key_prefix:
            return  # the prefix is its own tag: the layout never changed
        old, new = f"{self.key_prefix}:tot", self.keys.tot
        found = self._retrying("setup", lambda: (self.server.exists(old), self.server.exists(new)))
        if found[0] and not found[1]:
            raise ValueError(
                f"Redis holds a frontier under the old key layout ({old}); this version names "
                f"its keys {self.keys.tag}:*. Finish that crawl with the version that started it, "
                f"or delete its keys (redis-cli --scan --pattern '{self.key_prefix}:*' | xargs "
                "redis-cli unlink) to start afresh (see docs/troubleshooting.rst)"
            )

    def _check_lambda_targets(self) -> None:
        """Record the crawl's lambda targets; refuse to join with another value."""
        key = self.keys["tot"]

        def check():
            stored = self.server.hget(key, "lambda_targets")
            if stored is None and not self.readonly:
                self.server.hsetnx(key, "lambda_targets", self.lambda_targets)
                stored = self.server.hget(key, "lambda_targets")
            return stored

        stored = text(self._retrying("setup", check))
        if stored is not None and stored != self.lambda_targets:
            raise ValueError(
                f"the frontier at {key} was started with AOPIC_LAMBDA_TARGETS={stored!r}; "
                f"this worker uses {self.lambda_targets!r}"
            )

    def _lease(self, reply: list) -> tuple[Lease | None, float, int, int]:
        """``(lease or None, lambda payout, pending, reclaimed)`` of a
        pop / take reply (see ``lease_reply`` in the script)."""
        header, url, host, req = reply
        (has, lease_id, cash, history, has_last, last_visit, visits, depth,
         paid, pending, reclaimed) = LEASE_HEAD.unpack(header)
        if pending < 0:  # counted down from a count that was not the frontier's
            raise FrontierCorrupt(f"the shared frontier in Redis holds data this store never writes: total pending "
                                  f"counted down to {pending}; stopping rather than trust its books")
        if not has:
            return None, paid, int(pending), int(reclaimed)
        url = text(url)
        lease = Lease(
            url,
            int(lease_id),
            cash,
            text(host),
            int(depth),
            decode_request_data(url, req),
            history,
            last_visit if has_last else None,
            int(visits),
            cash,  # the Redis store orders by cash (no priority horizon)
        )
        return lease, paid, int(pending), int(reclaimed)

    def _view(self, url: str, raw: bytes, dividend: float, leased: float, target: str | None) -> AccountView | None:
        try:
            state, flags, cash, mark, history, last_visit, _seq, visits, depth = RECORD.unpack_from(raw)
        except struct.error:
            state = None
        # (as the script's load: cash, mark, history finite and >= 0; not the
        # mark against the dividend: iter_accounts reads that before the
        # records, which a running crawl may write meanwhile)
        if state is None or state > ALIAS or not (
            0 <= cash < math.inf and 0 <= mark < math.inf and 0 <= history < math.inf
        ):
            self._skip_corrupt(url, f"account record of {url} = {raw[:24]!r}", replace=True)
            logger.warning("aopic: unreadable account record for %s in Redis; skipped", url)
            return None
        if state == PENDING or (self._all_flag == "1" and state in (LEASED, CRAWLED)):
            cash = cash + (dividend - mark)
        return AccountView(
            url,
            state,
            cash,
            history,
            leased,
            visits,
            last_visit if flags & 1 else None,
            depth,
            text(raw[RECORD.size:]),
            target,
        )

    @staticmethod
    def _lease_cash(raw: bytes | None) -> float:
        if raw is None or len(raw) != LEASE.size:
            return 0.0
        cash = LEASE.unpack(raw)[1]
        return cash if 0 <= cash < math.inf else 0.0  # (the script refuses it: see close_lease)

    def _link_args(self, link: Link) -> list[Any]:
        return [link.url, link.host, int(link.depth), encode_request_data(link.request)]

    # -- reading --------------------------------------------------------------

    def totals(self) -> Totals:
        return totals_of(self._retrying("totals", lambda: self.server.hgetall(self.keys["tot"])))

    def _dividend(self) -> float:
        raw = self._retrying("dividend", lambda: self.server.hget(self.keys["tot"], "dividend"))
        return total_of("dividend", raw)

    def get(self, url: str) -> AccountView | None:
        def read():
            pipe = self.server.pipeline(transaction=True)
            pipe.hget(self.keys["acct"], url)
            pipe.hget(self.keys["lease"], url)
            pipe.hget(self.keys["alias"], url)
            pipe.hget(self.keys["tot"], "dividend")
            return pipe.execute()

        raw, lease, target, dividend = self._retrying("get", read)
        if raw is None:
            return None
        view = self._view(url, raw, total_of("dividend", dividend), self._lease_cash(lease), None)
        if view is not None and view.state == ALIAS:
            view = view._replace(target=text(target))
        return view

    def knows(self, url: str) -> bool:
        return bool(self._retrying("knows", lambda: self.server.hexists(self.keys["acct"], url)))

    def count_known(self, urls: Collection[str]) -> int:
        urls = list(urls)
        if not urls:
            return 0
        found = self._retrying("count_known", lambda: self.server.hmget(self.keys["acct"], urls))
        return sum(raw is not None for raw in found)

    def iter_accounts(self, batch: int = 1000) -> Iterator[AccountView]:
        """Every account (HSCAN). Consistent when no worker is writing."""
        dividend = self._dividend()
        leases = self._retrying("leases", lambda: self.server.hgetall(self.keys["lease"]))
        leased = {text(k): self._lease_cash(v) for k, v in leases.items()}
        cursor = 0
        while True:
            cursor, page = self._retrying(
                "scan", lambda c=cursor: self.server.hscan(self.keys["acct"], c, count=batch)
            )
            items = [(text(k), v) for k, v in page.items()]
            aliases = [url for url, raw in items if raw[:1] == bytes([ALIAS])]
            targets = {}
            if aliases:
                found = self._retrying(
                    "aliases", lambda: self.server.hmget(self.keys["alias"], aliases)
                )
                targets = {u: text(t) for u, t in zip(aliases, found)}
            for url, raw in items:
                view = self._view(url, raw, dividend, leased.get(url, 0.0), targets.get(url))
                if view is not None:
                    yield view
            if cursor == 0:
                return

    def peek(self) -> tuple[str, float] | None:
        url, cash = self._run("peek", head=2)
        if not url:
            return None
        return text(url), float(cash)

    def recount(self) -> tuple[float, float, float, float]:
        """``(account_cash, lambda_cash, in_flight, injected)`` recounted in
        one script: a consistent snapshot even while workers write, unlike
        :meth:`iter_accounts` (the shape of :meth:`AopicEngine.ledger`).

        O(n) inside Redis, which serves nobody else meanwhile (about 1 s per
        10^6 accounts): for checks at the end of a crawl and in tests.
        """
        cash, lambda_cash, in_flight, injected, _ = self._run("recount", head=5)
        return float(cash), float(lambda_cash), float(in_flight), float(injected)

    def claim_books_check(self) -> bool:
        """Only a worker that sees no open lease (after giving back its own)
        recounts at its close, and one at a time (a claim for
        :data:`BOOKS_CLAIM_SECONDS`): the recount blocks Redis for every
        worker, about 1 s per 10^6 accounts. The others' figures would be
        stale a moment later anyway; ``scrapy aopic stats`` recounts on
        demand."""
        if self.activity()[1]:
            return False
        claim = self.epoch or "-"
        return bool(self._retrying(
            "books", lambda: self.server.set(self.keys.books, claim, nx=True, ex=BOOKS_CLAIM_SECONDS)
        ))

    def pending_count(self) -> int:
        """Pending URLs of the shared frontier: :attr:`last_pending` when
        this process changed nothing since the last :meth:`pop` (no round
        trip), else read from Redis (one ``HGET``). Other workers' changes
        since then are not seen: :meth:`activity` is the exact figure."""
        if self._pending_fresh:
            return self.last_pending
        raw = self._retrying("pending", lambda: self.server.hget(self.keys["tot"], "pending"))
        self.last_pending = int(total_of("pending", raw, count=True))
        self._pending_fresh = True
        return self.last_pending

    def request_of(self, url: str) -> Any:
        """The stored request data of ``url`` (decoded safely), if any."""
        raw = self._retrying("request", lambda: self.server.hget(self.keys["req"], url))
        return decode_request_data(url, raw)

    # -- cash in --------------------------------------------------------------

    def inject(self, link: Link, cash: float) -> bool:
        return bool(self._run("inject", *self._link_args(link), fmt(cash)))

    def inject_many(self, seeds: Iterable[tuple[Link, float]], chunk: int = 1000) -> int:
        """:meth:`inject` for many seeds, pipelined (``chunk`` per round
        trip); returns how many were new. Safe to retry: a known URL brings
        no cash."""
        new = 0
        batch: list[tuple[Link, float]] = []
        self._pending_fresh = False

        def flush(items):
            commands = [self._command("inject", *self._link_args(link), fmt(cash)) for link, cash in items]
            replies = self._retrying("inject_many", lambda: self._scripts.call_many(FRONTIER, commands))
            return sum(self._result(reply) for reply in replies)

        for item in seeds:
            batch.append(item)
            if len(batch) == chunk:
                new += flush(batch)
                batch = []
        if batch:
            new += flush(batch)
        return new

    def register(self, link: Link) -> int | None:
        state = self._run("register", *self._link_args(link))
        return None if state == -1 else int(state)

    def repend(self, link: Link) -> bool:
        return bool(self._run("repend", *self._link_args(link)))

    # -- selection ------------------------------------------------------------

    def pop(
        self,
        ready: Callable[[str], bool] | None = None,
        min_share: float = 0.0,
        *,
        busy: Collection[str] = (),
        visit_lambda: bool = False,
        now: float | None = None,
    ) -> Lease | None:
        """Lease the richest pending URL of a host that is ready here and has
        fewer than ``host_concurrency`` open leases across all workers, and
        whose cash is at least ``min_share`` times the richest pending URL's
        (see :meth:`FrontierStore.pop`).

        ``busy``: hosts known not to be ready here (the local downloader's
        full slots); they are skipped inside the script, so the common case
        is one round trip. ``ready`` is still asked about the result: a host
        it refuses is requeued and excluded, and the next host is tried.
        ``visit_lambda=True`` first visits lambda when it is due (as
        :meth:`AopicEngine.visit_lambda_if_due`), in the same round trip;
        the amount paid is left in :attr:`last_lambda_payout` and the number
        of pending URLs after the pop in :attr:`last_pending` (no extra trip
        for the scheduler's ``has_pending_requests``). Each call also
        requeues up to ``reclaim_batch`` expired leases.
        """
        excluded = list(dict.fromkeys(busy))
        self.last_lambda_payout = 0.0
        self.last_reclaimed = 0
        now_arg = "" if now is None else fmt(now)
        pay_lambda = "1" if visit_lambda else "0"
        while self._unlease_later:  # leases a stall kept from being given back
            url, lease_id = self._unlease_later[0]
            self._run("unlease", url, lease_id)
            self._unlease_later.pop(0)
        while True:
            # A pop whose reply a stall swallowed may have leased a URL:
            # the next pop resends its token and gets that lease back.
            token = self._unanswered_pop or self._pop_token()
            try:
                reply = self._run(
                    "pop",
                    self.host_concurrency,
                    fmt(self.lease_timeout),
                    self.reclaim_batch,
                    now_arg,
                    pay_lambda,
                    fmt(min_share),
                    fmt(self.discovery_cash),  # not counted in the min-share test
                    token,
                    *excluded,
                    head=4,
                )
            except StoreStalled:
                self._unanswered_pop = token
                raise
            self._unanswered_pop = None
            lease, paid, pending, reclaimed = self._lease(reply)
            self.last_lambda_payout += paid
            self.last_pending = pending
            self.last_reclaimed += reclaimed
            self._pending_fresh = True
            if reclaimed:
                logger.info("aopic: %d expired leases requeued (their workers died or hung)", reclaimed)
            if lease is None:
                return None
            if lease.host in excluded:  # would loop forever: the script ignored the list
                raise RuntimeError(f"aopic: Redis script leased excluded host {lease.host!r}")
            if ready is None or ready(lease.host):
                return lease
            # Not ready here after all: give it back untouched and skip the host.
            try:
                self._run("unlease", lease.url, lease.lease_id)
            except StoreStalled:
                self._unlease_later.append((lease.url, lease.lease_id))
                raise
            excluded.append(lease.host)
            pay_lambda = "0"

    def _pop_token(self) -> str:
        """``worker:seq``, new for every pop call (the retries of one call
        resend the same bytes, hence the same token)."""
        pid = os.getpid()
        if self._token_pid != pid:  # a forked copy is another worker
            self._token_pid = pid
            self._worker_id = uuid.uuid4().hex
        self._pop_seq += 1
        return f"{self._worker_id}:{self._pop_seq}"

    def take(self, url: str) -> Lease | None:
        return self._lease(self._run("take", url, fmt(self.lease_timeout), "", head=4))[0]

    def visit_lambda(self) -> float:
        return float(self._run("visit_lambda"))

    def reclaim_expired(self, now: float | None = None) -> int:
        """Requeue every lease past its deadline (``now``: Redis server time
        by default); returns how many. Their cash goes back to their accounts."""
        total = 0
        now_arg = "" if now is None else fmt(now)
        while True:
            n = int(self._run("reclaim", now_arg, 256))
            total += n
            if n < 256:
                return total

    # -- settling -------------------------------------------------------------

    def settle_visit(
        self,
        url: str,
        lease_id: int,
        history: float,
        visited_at: float,
        credits: Iterable[Credit],
    ) -> bool:
        args: list[Any] = [url, int(lease_id), fmt(history), fmt(visited_at), fmt(self.discovery_cash)]
        for link, amount in credits:
            args.extend(self._link_args(link))
            args.append(fmt(amount))
        return bool(self._run("settle_visit", *args))

    def set_discovery_cash(self, cash: float) -> None:
        # This worker's amount, sent with each visit (the Lua adds it to
        # 'injected' with every account the visit opens): workers of one
        # crawl should use the same value; the books balance either way.
        if not 0.0 <= cash < math.inf:
            raise ValueError(f"discovery cash must be a finite amount >= 0, got {cash!r}")
        self.discovery_cash = float(cash)

    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        return bool(self._run("settle_failure", url, int(lease_id), "1" if refuse else "0"))

    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        return bool(self._run("settle_transfer", url, int(lease_id), *self._link_args(target)))

    def settle_requeue(self, url: str, lease_id: int) -> bool:
        return bool(self._run("settle_requeue", url, int(lease_id)))

    def open_leases(self) -> list[tuple[str, int]]:
        raw = self._retrying("leases", lambda: self.server.hgetall(self.keys["lease"]))
        leases = []
        for url, record in raw.items():
            if len(record) == LEASE.size:
                leases.append((text(url), int(LEASE.unpack(record)[0])))
        return leases

    # -- other ------------------------------------------------------------------

    def refuse(self, url: str, host: str, depth: int) -> None:
        self._run("refuse", url, host, int(depth))

    def clear(self) -> int:
        """Delete every key of this frontier; returns how many were deleted."""
        deleted = self._retrying("clear", lambda: delete_frontier(self.server, self.key_prefix))
        self._check_lambda_targets()
        self.epoch = self._open_epoch()  # a new, empty frontier
        return deleted

    def close(self) -> None:
        self._scripts.close()
        if self._owns_server:
            self.server.close()

