"""Hostile NUMBERS and STRUCTURE read back from Redis (issue 14's rule:
data read back is checked, never trusted), against a real redis-server.

test_redis_hostile.py plants hostile stored requests and start URLs; this
fuzz changes one value of any key a worker's scripts read — a total of
``P:tot``, an account or lease record (one field: nan, inf, negative,
1e308; or the whole record: text, empty, invalid UTF-8, truncated), a
host's lease count, an advertisement, a queue or host-order entry, the
identity, a pop token, a key of the wrong Redis type — in the middle of a
small crawl through the real scheduler, then drives the crawl on. The
contract (:func:`tests.support.redisfuzz.verdict`): a refusal that names
the value (log line) and counts it (``aopic/redis_corrupt``,
``aopic/frontier_corrupt``...), or the books balanced; never a traceback,
never NaN / inf in the books. A few plausible numbers only the recount can
tell from honest ones (:func:`~tests.support.redisfuzz.detected_at_close`)
must be reported by the books check at close.

Every change of :func:`~tests.support.redisfuzz.targets` is made once, the
crawl driven by a generator seeded from ``REDIS_FUZZ_SEED`` (default 0);
``REDIS_FUZZ_ROUNDS`` runs every change that many times with other seeds,
``REDIS_FUZZ_STEPS`` (default 30) sets the steps after the change. On a
Redis Cluster: every cross-shard change and ``REDIS_FUZZ_CLUSTER_SAMPLE``
(default 40) of the others. The default run takes about 15 s.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import redis

from tests.integration.test_redis_crawl import shared_scheduler
from tests.support import redisfuzz as fuzz

SEED = int(os.environ.get("REDIS_FUZZ_SEED", "0"))
ROUNDS = int(os.environ.get("REDIS_FUZZ_ROUNDS", "1"))
STEPS = int(os.environ.get("REDIS_FUZZ_STEPS", "30"))


def _maker(redis_url):
    def make():
        scheduler, crawler, _, _ = shared_scheduler(redis_url)
        return fuzz.Crawl(scheduler, crawler, redis.Redis.from_url(redis_url), scheduler.frontier.store.keys)

    return make


def _names(make) -> list[str]:
    crawl = make()
    fuzz.setup(crawl)
    names = [name for name, _ in fuzz.targets(crawl)]
    crawl.scheduler.close("finished")
    return names


def test_the_honest_crawl_balances_and_refuses_nothing(redis_url):
    """The control: the same crawl with nothing changed (so a refusal or an
    imbalance in the fuzz is the changed value's doing)."""
    outcome = fuzz.run_case(_maker(redis_url), "nothing", SEED, STEPS)
    assert fuzz.verdict(outcome) is None
    assert outcome.balanced and outcome.steps == STEPS
    assert not any(outcome.stats.get(s) for s in fuzz.REFUSAL_STATS) and not outcome.logs


def test_one_hostile_value_anywhere_is_refused_by_name_or_balanced(redis_url):
    make = _maker(redis_url)
    names = _names(make)
    assert len(names) > 300
    broken, kinds = [], Counter()
    for round_ in range(ROUNDS):
        for i, name in enumerate(names):
            outcome = fuzz.run_case(make, name, SEED + round_ * len(names) + i, STEPS)
            problem = fuzz.verdict(outcome)
            if problem:
                broken.append(f"{name} (seed {SEED + round_ * len(names) + i}): {problem}")
            kinds[_kind(outcome)] += 1
    assert not broken, "\n".join(broken)
    # every outcome the contract allows happened: the fuzz reaches each check
    assert {"frontier_corrupt", "record_refused", "balanced", "detected_at_close"} <= set(kinds), kinds


def _kind(outcome) -> str:
    if outcome.lost:
        return outcome.lost
    if outcome.stats.get("aopic/redis_corrupt") or outcome.stats.get("aopic/failed/undecodable"):
        return "record_refused"
    return "balanced" if outcome.balanced else "detected_at_close"


#: Found by the fuzz on main (value: what it did there). Each must now end
#: as named: closed as frontier_corrupt, or the record refused and counted.
REGRESSIONS = {
    # ResponseError from Lua arithmetic ("value is not a valid float")
    "tot.lambda_cash=nan": "frontier_corrupt",
    # ValueError: cannot convert float NaN to integer (Python's totals)
    "tot.pending=nan": "frontier_corrupt",
    # ValueError: __len__() should return >= 0
    "tot.pending=negative": "frontier_corrupt",
    # books off silently (text read as 0)
    "tot.injected=word": "frontier_corrupt",
    # ResponseError WRONGTYPE out of next_request
    "acct=wrong_type": "frontier_corrupt",
    "tot=wrong_type": "frontier_corrupt",
    # ResponseError "hash value is not an integer" (HINCRBY), after the lease was written
    "hbusy[a]=word": "record_refused",
    # ValueError from fmt(): inf cash passed the NaN-only check
    "acct[pending].cash=inf": "record_refused",
    # books non-finite: the recount summed NaN
    "acct[crawled].cash=nan": "record_refused",
    # ValueError from fmt(): a lease's NaN cash
    "lease.cash=nan": "record_refused",
    # books off by the fake lease's cash, nothing said
    "lease=of_pending_url": "record_refused",
    "lease=unknown_url": "record_refused",
    # a leased account's lease deleted: its cash lost, nothing said
    "lease=missing": "record_refused",
    # skipped and logged, but counted nowhere
    "lease=word": "record_refused",
    # an entry of no account dropped silently
    "queue[a]=unknown_url": "record_refused",
    # a pending account turned ALIAS: lambda still divided among it, books off, nothing
    # said (the recount now holds the state counts against the records)
    "acct[pending].state=alias,no_target": "record_refused",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_a_hostile_value_found_by_the_fuzz_ends_named(redis_url, name):
    outcome = fuzz.run_case(_maker(redis_url), name, SEED, STEPS)
    assert fuzz.verdict(outcome) is None, fuzz.verdict(outcome)
    assert _kind(outcome) == REGRESSIONS[name], (outcome.stats, outcome.logs)
    assert outcome.finite


# -- Redis Cluster: the sharded frontier's own numbers, and a sample of the rest ----------------

SHARDS = 3
#: single-frontier changes also made on a shard (a seeded sample: the
#: cluster's cases cost more), besides every cross-shard one
CLUSTER_SAMPLE = int(os.environ.get("REDIS_FUZZ_CLUSTER_SAMPLE", "40"))


def _cluster_maker(cluster):
    """Crawls whose three hosts live on shard 0 (its keys are the ones
    changed), each page also linking a host of shard 1 (cross-shard
    credits through shard 0's outbox)."""
    from scrapy_aopic.store.redis.cluster import shard_of_host

    by_shard: dict[int, list[str]] = {}
    for n in range(100):
        by_shard.setdefault(shard_of_host(f"h{n}.test", SHARDS), []).append(f"h{n}.test")
    client = redis.RedisCluster.from_url(cluster.url)

    def make():
        scheduler, crawler, _, _ = shared_scheduler(cluster.url, AOPIC_REDIS_CLUSTER=True, AOPIC_REDIS_SHARDS=SHARDS)
        shards = scheduler.frontier.store.shards
        return fuzz.Crawl(scheduler, crawler, client, shards[0].keys, hosts=tuple(by_shard[0][:3]),
                          cross=by_shard[1][0], other=shards[1].keys, home_index=0, other_index=1)

    return make


def test_on_a_cluster_one_hostile_value_is_refused_by_name_or_balanced(redis_cluster):
    import random

    make = _cluster_maker(redis_cluster)
    names = _names(make)
    crawl = make()
    fuzz.setup(crawl)
    cross = [name for name, _ in fuzz.cluster_targets(crawl)]
    crawl.scheduler.close("finished")
    single = [name for name in names if name not in cross]
    chosen = cross + random.Random(SEED).sample(single, min(CLUSTER_SAMPLE, len(single)))
    broken, kinds = [], Counter()
    for i, name in enumerate(chosen):
        outcome = fuzz.run_case(make, name, SEED + i, STEPS)
        problem = fuzz.verdict(outcome)
        if problem:
            broken.append(f"{name} (seed {SEED + i}): {problem}")
        kinds[_kind(outcome)] += 1
    assert not broken, "\n".join(broken)
    assert {"frontier_corrupt", "balanced"} <= set(kinds), kinds
