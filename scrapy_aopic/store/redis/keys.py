"""Key names of one Redis frontier.

Every key of a crawl starts with its *tag*: the key prefix in braces
(``{myspider:aopic}``), a Redis Cluster hash tag, so all of one crawl's keys
live in one slot and every script touches one slot only. A prefix that
already holds a hash tag (``crawl:{shard1}``) is used as it is.
"""

from __future__ import annotations

from typing import NamedTuple

import redis

def key_tag(prefix: str) -> str:
    """The tag every key of frontier ``prefix`` starts with."""
    # Redis Cluster hashes what lies between the first "{" and the next "}",
    # when that is not empty.
    opening = prefix.find("{")
    if opening >= 0 and prefix.find("}", opening + 1) > opening + 1:
        return prefix
    return "{" + prefix + "}"


class FrontierKeys(NamedTuple):
    """The fixed keys of one frontier (``KEYS[1..9]`` of ``frontier.lua``,
    in this order) and the identity key."""

    tot: str  #: hash: running totals, the lambda dividend, counters
    acct: str  #: hash url -> packed account record
    req: str  #: hash url -> request JSON (only for non-plain requests)
    alias: str  #: hash url -> target of an ALIAS account
    hosts: str  #: sorted set: hosts with pending URLs, by their best entry
    hadv: str  #: hash host -> what ``hosts`` advertises for it
    lease: str  #: hash url -> open lease record
    ldl: str  #: sorted set url by lease deadline
    hbusy: str  #: hash host -> open leases (the cross-worker host cap)
    epoch: str  #: string: the frontier's identity, written at creation
    books: str  #: string: a worker's claim to recount the books at its close

    @classmethod
    def of(cls, prefix: str) -> FrontierKeys:
        tag = key_tag(prefix)
        return cls(*(f"{tag}:{name}" for name in cls._fields))

    @property
    def tag(self) -> str:
        return self.tot[: -len(":tot")]

    @property
    def queue_prefix(self) -> str:
        """Prefix of the per-host queues (``<tag>:q:<host>``, sorted sets)."""
        return self.tag + ":q:"

    @property
    def script_keys(self) -> tuple[str, ...]:
        """What ``frontier.lua`` declares in ``KEYS``."""
        return self[:9]

    def __getitem__(self, item):  # keys["tot"] as well as keys[0]
        if isinstance(item, str):
            return getattr(self, item)
        return tuple.__getitem__(self, item)


def delete_frontier(server: redis.Redis, key_prefix: str) -> int:
    """Delete every key of frontier ``key_prefix`` (SCAN + UNLINK, in
    batches); returns how many."""
    pattern = _glob_escape(key_tag(key_prefix)) + ":*"
    deleted = 0
    batch: list[bytes] = []
    for key in server.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) == 1000:
            deleted += server.unlink(*batch)
            batch = []
    if batch:
        deleted += server.unlink(*batch)
    return deleted


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob specials escaped (for SCAN MATCH)."""
    return "".join("\\" + ch if ch in "*?[]\\{}" else ch for ch in text)
