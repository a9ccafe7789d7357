"""Seeds and idleness of a shared crawl: start URLs taken from a
scrapy-redis style key, and how much work the whole crawl still has."""

from __future__ import annotations

import logging
import uuid

from .keys import key_tag
from .records import text
from .scripts import ACTIVITY, TAKE_SEEDS

logger = logging.getLogger(__name__)

#: Seconds a batch of seeds taken by a worker counts as work of the crawl
#: before that worker has scheduled it (longer only if the worker died).
SEED_CLAIM_SECONDS = 60


def seed_claims_key(seeds_key: str) -> str:
    """The sorted set of claims on batches taken from ``seeds_key``: in the
    same Redis Cluster slot as ``seeds_key`` (its hash tag is the whole
    seeds key, or the seeds key's own tag), as a script touching both must."""
    return f"{key_tag(seeds_key)}:taken"


class SharedSeeds:
    """The seeds-and-idle half of :class:`~.store.RedisStore` (a mixin: it
    uses the store's ``_script``, ``_retrying``, ``server`` and ``keys``)."""

    def activity(self, seeds_key: str | None = None) -> tuple[int, int, int]:
        """``(pending URLs, open leases, entries waiting in seeds_key)``,
        read in one script: a consistent snapshot of how much work the whole
        crawl has, whichever worker holds it. ``(0, 0, 0)`` is final unless
        someone adds seeds: a lease is closed in the same script that queues
        the links its page yielded."""
        keys = [self.keys.tot, self.keys.lease]
        if seeds_key:
            keys += [seeds_key, seed_claims_key(seeds_key)]
        pending, leases, seeds = self._script("activity", ACTIVITY, keys, ())
        self.last_pending = int(pending)
        self._pending_fresh = True
        return int(pending), int(leases), int(seeds)

    def take_seeds(self, seeds_key: str, count: int) -> list[bytes]:
        """Remove and return up to ``count`` entries of ``seeds_key`` (a
        list: from the head; a set: any; a sorted set: highest score first),
        atomically: two workers never get the same entry. Entries are raw
        bytes, to be checked by the caller, who then calls
        :meth:`seeds_scheduled`: until then (at most
        :data:`SEED_CLAIM_SECONDS`) :meth:`activity` counts the batch as
        seeds waiting, so no other worker sees the crawl idle meanwhile."""
        if count <= 0:
            return []
        token = uuid.uuid4().hex
        keys = [seeds_key, seed_claims_key(seeds_key)]
        args = [int(count), token, int(SEED_CLAIM_SECONDS * 1000)]
        reply = self._script("seeds", TAKE_SEEDS, keys, args)
        kind, entries = text(reply[0]), reply[1:]
        if kind not in ("list", "set", "zset", "none"):
            logger.warning("aopic: seeds key %s is a Redis %s, not a list, set or sorted set; ignored",
                           seeds_key, kind)
        if entries:
            self._seed_claims.append(token)
        return entries

    def seeds_scheduled(self, seeds_key: str) -> None:
        """The batches this worker took from ``seeds_key`` are in the
        frontier (or were skipped): drop their claims."""
        claims, self._seed_claims = self._seed_claims, []
        if claims:
            self._retrying("seeds", lambda: self.server.zrem(seed_claims_key(seeds_key), *claims))
