"""The Redis store: one AOPIC frontier shared by any number of workers.

Every method that changes the books is **one Lua script call** (``EVALSHA``,
one round trip), which Redis runs atomically: workers on any number of machines can enqueue,
lease and settle at the same time without creating or losing cash and without
leasing a URL twice. The script mirrors :class:`~scrapy_aopic.store.memory.MemoryStore`
operation by operation (the same float arithmetic in the same order), so both
stores give the same crawl order.

The package, by job: :mod:`.keys` (key names, hash-tagged), :mod:`.records`
(binary records and the checked request codec), :mod:`.scripts` (the Lua
files and the one call path), :mod:`.store` (the store operations),
:mod:`.seeds` (start URLs and idleness), :mod:`.cluster` (the frontier
sharded by host over a Redis Cluster: one such frontier per shard). The
Lua lives in ``lua/*.lua``.

Key layout (``P`` is the key prefix in braces, e.g. ``{myspider:aopic}``: a
Redis Cluster hash tag, so one crawl's keys share one slot):

``P:tot`` (hash)
    running totals (:class:`~scrapy_aopic.store.base.Totals`), the lambda
    ``dividend`` and the sequence / lease counters.
``P:acct`` (hash ``url -> record``)
    one packed record per account: state, cash, dividend mark, history, last
    visit, discovery sequence, visits, depth (50 bytes, little-endian
    ``<BBdddddii``) followed by the host. Doubles are stored as their 8 bytes,
    so nothing is lost to decimal formatting.
``P:req`` (hash ``url -> JSON``)
    the request to fetch, only for accounts whose request is not a plain GET
    of their URL. JSON text, never pickle; decoded in Python only.
``P:alias`` (hash ``url -> url``)
    target of each ALIAS account (redirects, near-duplicates).
``P:q:<host>`` (sorted set)
    pending URLs of one host. Score ``mark - cash`` (the negated
    :class:`MemoryStore` key, so the richest comes first), member
    ``seq (8 bytes, big-endian) + url``: equal scores sort by member, which
    is the discovery order (FIFO ties), not the URL's spelling.
``P:hosts`` (sorted set) and ``P:hadv`` (hash ``host -> seq + score``)
    every host with pending URLs, scored by its best entry, member
    ``seq of that entry + host``: the cross-host order, FIFO ties included;
    ``P:hadv`` remembers what is advertised, so a credit that does not beat
    a host's best entry costs no write there.
``P:lease`` (hash ``url -> lease record``), ``P:ldl`` (sorted set ``url``
by deadline) and ``P:hbusy`` (hash ``host -> open leases``)
    open leases (id, cash, deadline, and what is needed to undo the lease
    exactly), their expiry and the per-host count that enforces the
    concurrency cap across all workers.
``P:pop:<worker>`` (string ``seq \n lease id \n url``, expires with the lease)
    the last lease a worker process (a :class:`RedisStore`) was given and the
    sequence number of that request: a pop resent after a connection failure
    gets the same lease back instead of leaving it to expire.

Lambda payouts are O(1): they raise ``dividend`` in ``P:tot``; a target
account is settled when it is next touched (see :mod:`~scrapy_aopic.store.memory`).

Leases expire after ``lease_timeout`` seconds of Redis server time; every
:meth:`RedisStore.pop` first requeues a few expired leases, so the cash of a
SIGKILLed worker returns to the frontier. Connection failures are retried
with backoff for ``retry_timeout`` seconds (a Redis restart is survived);
scripts are reloaded after a restart (``NOSCRIPT``).
"""

from .keys import FrontierKeys, delete_frontier, key_tag
from .records import MAX_REQUEST_BYTES, decode_request_data, encode_request_data
from .seeds import SEED_CLAIM_SECONDS, seed_claims_key
from .store import RedisStore

__all__ = [
    "MAX_REQUEST_BYTES",
    "SEED_CLAIM_SECONDS",
    "FrontierKeys",
    "RedisStore",
    "decode_request_data",
    "delete_frontier",
    "encode_request_data",
    "key_tag",
    "seed_claims_key",
]
