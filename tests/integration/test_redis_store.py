"""The Redis store against a real redis-server: the same books as MemoryStore,
shared safely by several processes, surviving dead workers, hostile data and
a Redis restart."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import pickle
import queue
import random
import signal
import threading
import time
import uuid

import pytest
import redis

from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store.base import ALIAS, CRAWLED, FAILED, LEASED, PENDING, REFUSED, Credit, Link
from scrapy_aopic.store.memory import MemoryStore
from scrapy_aopic.store.redis import RedisStore

from tests.support.redis_server import RedisServer  # tests/ is on sys.path


def link(url: str, host: str | None = None, depth: int = 0, request=None) -> Link:
    return Link(url, host or url.split("/")[2], depth, request)


def new_store(server, **kwargs) -> RedisStore:
    kwargs.setdefault("key_prefix", f"t-{uuid.uuid4().hex[:10]}:aopic")
    return RedisStore.from_url(server.url, **kwargs)


@pytest.fixture
def store(redis_server):
    s = new_store(redis_server)
    yield s
    s.clear()
    s.close()


def assert_balanced(store, rel=1e-9):
    engine = AopicEngine(store)
    injected = store.totals().injected
    assert engine.conservation_error() <= rel * max(injected, 1.0)
    # the server-side recount agrees with the account-by-account one
    accounts, lambda_cash, in_flight, recount_injected = store.recount()
    assert recount_injected == injected
    assert abs(accounts + lambda_cash + in_flight - injected) <= rel * max(injected, 1.0)
    assert accounts == pytest.approx(engine.ledger()[0], rel=1e-12, abs=1e-12)


def assert_queues_consistent(store: RedisStore) -> None:
    """The Redis selection structures match the accounts: every PENDING
    account is queued once under its host with score ``mark - cash``, and
    the host order advertises each host's best entry."""
    client = store.server
    pending = {v.url: v for v in store.iter_accounts() if v.state == PENDING}
    queued = {}
    advertised = {}
    for key in client.scan_iter(match=store.keys.queue_prefix + "*"):
        host = key[len(store.keys.queue_prefix):].decode()
        entries = client.zrange(key, 0, -1, withscores=True)
        assert entries, f"empty queue key left for {host}"
        for member, _score in entries:
            queued[member[8:].decode()] = host
        advertised[entries[0][0][:8] + host.encode()] = entries[0][1]
    assert set(queued) == set(pending)
    assert all(pending[url].host == host for url, host in queued.items())
    assert dict(client.zrange(store.keys["hosts"], 0, -1, withscores=True)) == advertised
    assert client.hlen(store.keys["hadv"]) == len(advertised)


# -- the same books as MemoryStore, bit for bit ------------------------------------


def drive_both(memory: MemoryStore, shared: RedisStore, seed: int, steps: int) -> None:
    """Apply one random sequence of every store operation to both stores and
    require identical answers, leases and totals after every step."""
    rnd = random.Random(seed)
    urls = [f"http://h{i % 5}.test/{i}" for i in range(50)]
    hosts = sorted({u.split("/")[2] for u in urls})
    open_m, open_r = [], []
    for step in range(steps):
        op = rnd.random()
        if op < 0.08:
            u, cash = rnd.choice(urls), rnd.choice([1.0, 0.5, 0.3])
            assert memory.inject(link(u), cash) == shared.inject(link(u), cash)
        elif op < 0.12:
            u = rnd.choice(urls)
            assert memory.register(link(u, depth=2)) == shared.register(link(u, depth=2))
        elif op < 0.45:
            busy = set(rnd.sample(hosts, rnd.randint(0, 2)))
            ready = lambda h: h not in busy  # noqa: E731
            min_share = rnd.choice([0.0, 0.0, 0.05, 0.5])
            lm = memory.pop(ready, min_share)
            # half the time the busy hosts are passed, half the time only ready()
            lr = shared.pop(ready, min_share, busy=busy if rnd.random() < 0.5 else ())
            assert (lm is None) == (lr is None), step
            if lm:
                assert lm._replace(lease_id=0) == lr._replace(lease_id=0), step
                open_m.append(lm)
                open_r.append(lr)
        elif op < 0.7 and open_m:
            i = rnd.randrange(len(open_m))
            lm, lr = open_m.pop(i), open_r.pop(i)
            kind = rnd.random()
            if kind < 0.6:
                outs = [o for o in rnd.sample(urls, rnd.randint(0, 6)) if o != lm.url]
                share = lm.cash / (len(outs) + 1)
                credits = [Credit(link(o, depth=lm.depth + 1), share) for o in outs]
                assert memory.settle_visit(lm.url, lm.lease_id, lm.history + lm.cash, step, credits)
                assert shared.settle_visit(lr.url, lr.lease_id, lr.history + lr.cash, step, credits)
            elif kind < 0.7:
                refuse = rnd.random() < 0.5
                assert memory.settle_failure(lm.url, lm.lease_id, refuse=refuse)
                assert shared.settle_failure(lr.url, lr.lease_id, refuse=refuse)
            elif kind < 0.85:
                target = rnd.choice(urls + [lm.url] * 5)
                request = rnd.choice([None, {"url": target, "meta": {"retry_times": 1}}, target + "?x"])
                assert memory.settle_transfer(lm.url, lm.lease_id, link(target, depth=1, request=request))
                assert shared.settle_transfer(lr.url, lr.lease_id, link(target, depth=1, request=request))
            else:
                assert memory.settle_requeue(lm.url, lm.lease_id)
                assert shared.settle_requeue(lr.url, lr.lease_id)
            # a settled lease is stale from now on
            assert not shared.settle_requeue(lr.url, lr.lease_id)
        elif op < 0.8:
            assert memory.visit_lambda() == shared.visit_lambda()
        elif op < 0.85:
            u = rnd.choice(urls)
            memory.refuse(u, "x.test", 0)
            shared.refuse(u, "x.test", 0)
        elif op < 0.9:
            u = rnd.choice(urls)
            assert memory.repend(link(u)) == shared.repend(link(u))
        elif op < 0.95:
            u = rnd.choice(urls)
            lm, lr = memory.take(u), shared.take(u)
            assert (lm is None) == (lr is None)
            if lm:
                assert lm._replace(lease_id=0) == lr._replace(lease_id=0)
                open_m.append(lm)
                open_r.append(lr)
        else:
            assert memory.peek() == shared.peek()
        assert memory.totals() == shared.totals(), step
    assert sorted(memory.iter_accounts()) == sorted(shared.iter_accounts())
    assert_queues_consistent(shared)
    for u in urls:
        if memory.knows(u) and memory.get(u).state != ALIAS:
            assert memory.request_of(u) == shared.request_of(u)


class _SeedCounting(MemoryStore):
    seeded = 0.0  # cash the seeds brought

    def inject(self, link, cash):
        done = super().inject(link, cash)
        if done:
            self.seeded += cash
        return done


@pytest.mark.parametrize("targets", ["pending", "all"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("discovery", [0.0, 0.05])  # AOPIC_DISCOVERY_CASH x seed cash
def test_same_books_as_memory_store(redis_server, seed, targets, discovery):
    shared = new_store(redis_server, lambda_targets=targets, host_concurrency=0)
    memory = _SeedCounting(targets)
    shared.set_discovery_cash(discovery)
    memory.set_discovery_cash(discovery)
    drive_both(memory, shared, seed, 500)
    # What came in besides the seeds: the discovery cash of the URLs visits opened.
    opened = (shared.totals().injected - memory.seeded) / (discovery or 1.0)
    assert opened == pytest.approx(round(opened), abs=1e-6) and (round(opened) >= 5 if discovery else opened == 0)
    assert_balanced(shared)
    assert shared.totals().visits > 10  # the sequence really crawled
    shared.clear()


# -- the contract, directly -------------------------------------------------------------


def test_richest_first_fifo_ties_not_lexicographic(store):
    # Discovery order is the reverse of the URLs' spelling order, across and
    # within hosts: ties must follow discovery (scrapy-redis sorts them by bytes).
    seeds = [
        ("http://z.test/9", 1.0),
        ("http://y.test/8", 1.0),
        ("http://z.test/1", 1.0),
        ("http://a.test/rich", 2.0),
        ("http://a.test/0", 1.0),
    ]
    for url, cash in seeds:
        assert store.inject(link(url), cash)
    order = [store.pop().url for _ in seeds]
    assert order == ["http://a.test/rich", "http://z.test/9", "http://y.test/8", "http://z.test/1", "http://a.test/0"]
    assert store.pop() is None


def test_increase_key_and_exact_float_keys(store):
    store.inject(link("http://a.test/x"), 0.1)
    store.inject(link("http://b.test/y"), 0.3)
    lease = store.pop()
    assert lease.url == "http://b.test/y" and lease.cash == 0.3
    # 0.1 + 0.2 != 0.3 in doubles: the store must keep every bit of it
    store.settle_visit(lease.url, lease.lease_id, 0.3, 1.0, [Credit(link("http://a.test/x"), 0.2)])
    assert store.get("http://a.test/x").cash == 0.1 + 0.2
    assert store.peek() == ("http://a.test/x", 0.1 + 0.2)
    assert store.get(lease.url).last_visit == 1.0 and store.get(lease.url).history == 0.3


def test_alias_refuse_requeue_and_stale_leases(store):
    for u in ("http://a.test/old", "http://a.test/dead", "http://a.test/again"):
        store.inject(link(u), 1.0)
    old = store.take("http://a.test/old")
    assert store.settle_transfer(old.url, old.lease_id, link("http://b.test/new", depth=3))
    view = store.get(old.url)
    assert view.state == ALIAS and view.target == "http://b.test/new" and view.cash == 0.0
    assert store.get("http://b.test/new").cash == 1.0 and store.get("http://b.test/new").depth == 0
    # credit to the alias lands on its target
    again = store.take("http://a.test/again")
    store.settle_visit(again.url, again.lease_id, 1.0, 0.0, [Credit(link(old.url), 0.5)])
    assert store.get("http://b.test/new").cash == 1.5
    assert store.totals().lambda_cash == 0.5
    assert not store.settle_visit(again.url, again.lease_id, 1.0, 0.0, [])  # stale
    dead = store.take("http://a.test/dead")
    assert store.settle_failure(dead.url, dead.lease_id)
    assert store.get(dead.url).state == FAILED
    assert store.totals().lambda_cash == 1.5
    store.refuse("http://b.test/new", "b.test", 0)
    assert store.get("http://b.test/new").state == REFUSED
    assert store.totals().lambda_cash == 3.0
    assert store.pop() is None  # the refused account left the queue
    store.inject(link("http://c.test/1"), 1.0)
    lease = store.pop()
    assert store.get(lease.url).state == LEASED and store.get(lease.url).leased == 1.0
    assert store.settle_requeue(lease.url, lease.lease_id)
    assert not store.settle_requeue(lease.url, lease.lease_id)
    assert store.get(lease.url).state == PENDING and store.get(lease.url).cash == 1.0
    assert store.totals().in_flight == 0.0
    assert_balanced(store)


def test_lease_ids_reject_an_older_lease_of_the_same_url(store):
    store.inject(link("http://a.test/"), 1.0)
    first = store.pop()
    assert store.reclaim_expired(now=time.time() + 3600) == 1  # first's worker looked dead
    second = store.pop()
    assert second.url == first.url and second.lease_id != first.lease_id
    for settle in (
        lambda lease: store.settle_visit(lease.url, lease.lease_id, 1.0, 0.0, []),
        lambda lease: store.settle_failure(lease.url, lease.lease_id),
        lambda lease: store.settle_transfer(lease.url, lease.lease_id, link("http://b.test/")),
        lambda lease: store.settle_requeue(lease.url, lease.lease_id),
    ):
        assert not settle(first)  # the late worker changes nothing
    assert store.get(first.url).state == LEASED and store.totals().lambda_cash == 0.0
    assert store.get("http://b.test/") is None
    assert store.settle_visit(second.url, second.lease_id, 1.0, 0.0, [])
    assert_balanced(store)


def test_pop_visits_lambda_when_due_in_the_same_call(store):
    store.inject(link("http://a.test/1"), 1.0)
    store.inject(link("http://a.test/2"), 0.2)
    store.inject(link("http://b.test/3"), 0.1)
    lease = store.pop()
    store.settle_visit(lease.url, lease.lease_id, 1.0, 0.0, [])  # lambda: 1.0
    # lambda (1.0) is richer than every pending URL: paid out before the pop
    lease = store.pop(visit_lambda=True)
    assert store.totals().lambda_visits == 1 and store.totals().lambda_cash == 0.0
    assert store.last_lambda_payout == 1.0 and store.last_pending == 1
    assert lease.url == "http://a.test/2" and lease.cash == pytest.approx(0.7)
    store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [Credit(link("http://b.test/3"), 0.1)])
    # lambda now holds 0.6 and b.test/3 0.6 + 0.1: not due
    assert store.peek()[1] == pytest.approx(0.7)
    lease = store.pop(visit_lambda=True)
    assert store.totals().lambda_visits == 1 and lease.url == "http://b.test/3"
    assert store.last_lambda_payout == 0.0 and store.last_pending == 0
    assert_balanced(store)


def _commands_run(client, action) -> dict[str, int]:
    """Calls per Redis command while ``action`` runs (INFO commandstats;
    the commands a script runs count under their own names)."""
    def snapshot():
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in client.info("commandstats").items()}

    before = snapshot()
    action()
    after = snapshot()
    return {name: calls - before.get(name, 0) for name, calls in after.items()
            if calls > before.get(name, 0) and name != "info"}


def test_registering_a_known_url_reads_no_totals(store, redis_server):
    """Most links a crawl registers are known already: that costs one read
    of the account, not the frontier's totals (which every op read before)."""
    store.inject(link("http://a.test/1"), 1.0)
    store.register(link("http://a.test/2"))
    client = redis.Redis.from_url(redis_server.url)
    run = _commands_run(client, lambda: [store.register(link(f"http://a.test/{i % 2 + 1}")) for i in range(10)])
    assert run.get("hgetall", 0) == 0 and run.get("hmget", 0) == 0
    assert run.get("hget") == 10 and run.get("evalsha") == 10
    assert not ({"hset", "zadd", "hincrby"} & set(run))  # nothing written
    # a new URL reads them (one HMGET) and counts itself
    run = _commands_run(client, lambda: store.register(link("http://a.test/3")))
    assert run.get("hmget") == 1 and store.totals().known == 3 and store.totals().pending == 3
    assert_balanced(store)


def test_a_pop_reads_the_richest_head_once(store, redis_server):
    """Lambda's check, the min-share floor and the pop itself look at the
    same host order, queue head and account: each is read once per pop."""
    for i in range(6):
        store.inject(link(f"http://h{i % 3}.test/{i}"), 1.0 + i)
    lease = store.pop()
    store.settle_visit(lease.url, lease.lease_id, 1.0, 0.0, [])  # lambda holds 6.0: due
    client = redis.Redis.from_url(redis_server.url)
    leases = []
    run = _commands_run(client, lambda: leases.append(store.pop(min_share=0.5, visit_lambda=True)))
    assert store.last_lambda_payout == 6.0 and leases[0] is not None
    # the host order once, the queue head before and after the pop once each
    assert run.get("zrange") == 3, run
    # the popped account once, its stored request once, the host's lease count once
    assert run.get("hget") == 3, run
    assert leases[0].url == "http://h1.test/4" and leases[0].cash == pytest.approx(5.0 + 6.0 / 5)
    store.settle_visit(leases[0].url, leases[0].lease_id, leases[0].cash, 0.0, [])
    assert_balanced(store)
    assert_queues_consistent(store)


def test_request_data_round_trips_as_json(store, redis_server):
    request = {"url": "http://a.test/form", "method": "POST", "body": {"__b64__": "eD0x"}, "meta": {"k": [1, 2]}}
    store.inject(link("http://a.test/form", request=request), 1.0)
    store.inject(link("http://a.test/spelt", request="http://a.test/Spelt"), 0.5)
    raw = redis.Redis.from_url(redis_server.url).hget(store.keys["req"], "http://a.test/form")
    assert json.loads(raw) == request  # data, readable by anyone, not a pickle
    assert store.pop().request == request
    assert store.pop().request == "http://a.test/Spelt"
    with pytest.raises(TypeError, match="JSON"):
        store.inject(link("http://a.test/obj", request=object()), 1.0)
    assert store.get("http://a.test/obj") is None


def test_lambda_payout_is_o1_with_10k_pending(store, redis_server):
    client = redis.Redis.from_url(redis_server.url)
    seeds = ((link(f"http://h{i % 50}.test/{i}"), 1.0 + i * 1e-6) for i in range(10_000))
    assert store.inject_many(seeds) == 10_000
    assert store.totals().pending == 10_000
    lease = store.pop()
    store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [])  # all to lambda
    records_before = client.hgetall(store.keys["acct"])
    calls_before = sum(v["calls"] for v in client.info("commandstats").values())
    paid = store.visit_lambda()
    calls = sum(v["calls"] for v in client.info("commandstats").values()) - calls_before
    assert paid == lease.cash
    assert calls < 20  # EVALSHA + a few hash commands, not 10^4 writes
    assert client.hgetall(store.keys["acct"]) == records_before  # no account touched
    share = paid / 9_999
    assert store.get("http://h0.test/0").cash == pytest.approx(1.0 + share)
    assert store.get("http://h1.test/1").cash == pytest.approx(1.0 + 1e-6 + share)
    assert_balanced(store)


# -- politeness across workers ------------------------------------------------------------


def test_host_cap_holds_across_workers(redis_server):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    one = new_store(redis_server, key_prefix=prefix, host_concurrency=2)
    two = new_store(redis_server, key_prefix=prefix, host_concurrency=2)
    for i in range(5):
        one.inject(link(f"http://big.test/{i}"), 10.0)
    one.inject(link("http://small.test/0"), 1.0)
    assert one.pop().host == "big.test"
    assert two.pop().host == "big.test"
    third = two.pop()  # big.test has 2 open leases across the two workers
    assert third.url == "http://small.test/0"
    assert one.pop() is None
    one.settle_requeue(third.url, third.lease_id)
    assert one.pop(busy={"small.test"}) is None  # busy here, capped there
    leases = sorted(one.open_leases())
    assert len(leases) == 2
    url, lease_id = leases[0]
    one.settle_failure(url, lease_id)
    assert two.pop().host == "big.test"  # a slot freed up
    one.clear()


def test_busy_hosts_skipped_in_one_round_trip(store, redis_server):
    client = redis.Redis.from_url(redis_server.url)
    for i in range(20):
        store.inject(link(f"http://busy{i}.test/"), 5.0)
    store.inject(link("http://free.test/"), 1.0)
    before = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    lease = store.pop(lambda h: h == "free.test", busy={f"busy{i}.test" for i in range(20)})
    assert lease.url == "http://free.test/"
    assert client.info("commandstats")["cmdstat_evalsha"]["calls"] - before == 1


def test_not_ready_host_is_given_back_exactly(store):
    store.inject(link("http://a.test/1"), 0.7)
    store.inject(link("http://b.test/1"), 0.3)
    store.inject(link("http://a.test/2"), 0.7)
    before = sorted(store.iter_accounts())
    lease = store.pop(lambda h: h == "b.test")  # a.test is tried, given back
    assert lease.url == "http://b.test/1"
    store.settle_requeue(lease.url, lease.lease_id)
    assert sorted(store.iter_accounts()) == before
    assert [store.pop().url for _ in range(3)] == ["http://a.test/1", "http://a.test/2", "http://b.test/1"]


# -- several processes ---------------------------------------------------------------------


def _crawl_worker(url, prefix, worker, out):
    """Pop and visit until the frontier is drained; report the URLs leased."""
    store = RedisStore.from_url(url, key_prefix=prefix, host_concurrency=0)
    engine = AopicEngine(store, clock=lambda: 1.0)
    leased = []
    requeued = set()
    idle = 0
    while idle < 50:
        lease = engine.next()
        if lease is None:
            if store.totals().leased == 0:
                break
            idle += 1
            time.sleep(0.01)
            continue
        idle = 0
        leased.append(lease.url)
        page = int(lease.url.rsplit("/", 1)[1])
        # a fixed random-looking graph: each page links to three others < 600
        outs = [link(f"http://h{(page * k + 7) % 600 % 8}.test/{(page * k + 7) % 600}") for k in (3, 5, 11)]
        if page % 17 == 0:
            engine.fail(lease)
        elif page % 23 == 0 and lease.url not in requeued:
            requeued.add(lease.url)
            engine.requeue(lease)
            leased.pop()  # will be leased again
        else:
            engine.visit(lease, outs)
    out.put((worker, leased))
    store.close()


def test_two_processes_never_lease_the_same_url(redis_server):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    store = new_store(redis_server, key_prefix=prefix)
    engine = AopicEngine(store)
    for i in range(0, 600, 3):
        engine.add_seed(link(f"http://h{i % 8}.test/{i}"))
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_crawl_worker, args=(redis_server.url, prefix, w, out)) for w in range(2)]
    for p in procs:
        p.start()
    results = {}
    recounts = 0
    deadline = time.monotonic() + 60
    while len(results) < len(procs) and time.monotonic() < deadline:
        # while both write: the server-side recount is a consistent snapshot
        accounts, lambda_cash, in_flight, injected = store.recount()
        assert abs(accounts + lambda_cash + in_flight - injected) <= 1e-9 * injected
        recounts += 1
        try:
            worker, leased = out.get(timeout=0.02)
            results[worker] = leased
        except queue.Empty:
            pass
    assert recounts > 1
    for p in procs:
        p.join(10)
    a, b = results[0], results[1]
    assert a and b  # both really worked
    everything = a + b
    assert len(everything) == len(set(everything))  # no URL leased twice
    visited = {v.url for v in store.iter_accounts() if v.state in (CRAWLED, FAILED)}
    assert visited == set(everything)
    t = store.totals()
    assert t.pending == 0 and t.leased == 0 and t.in_flight == 0.0
    assert_balanced(store)
    store.clear()


def _lease_and_hang(url, prefix, ready_event):
    store = RedisStore.from_url(url, key_prefix=prefix, host_concurrency=0, lease_timeout=0.5)
    for _ in range(5):
        store.pop()
    ready_event.set()
    time.sleep(60)  # killed long before


def test_sigkilled_worker_leases_come_back(redis_server):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    store = new_store(redis_server, key_prefix=prefix, host_concurrency=0)  # 600 s leases
    for i in range(8):
        store.inject(link(f"http://h{i}.test/"), 1.0 + i)
    ctx = multiprocessing.get_context("fork")
    ready_event = ctx.Event()
    worker = ctx.Process(target=_lease_and_hang, args=(redis_server.url, prefix, ready_event))
    worker.start()
    assert ready_event.wait(20)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()
    assert store.totals().leased == 5
    assert store.pop().cash == 3.0  # the richest left; the 5 richest are leased
    time.sleep(0.6)  # past the dead worker's leases (Redis server time)
    got = []
    while (lease := store.pop()) is not None:
        got.append(lease.cash)
    assert sorted(got) == [1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # the 5 came back, cash intact
    assert_balanced(store)
    store.clear()


def test_reclaim_expired_requeues_with_cash(store):
    for i in range(3):
        store.inject(link(f"http://h{i}.test/"), 1.0)
    leases = [store.pop() for _ in range(3)]
    assert store.reclaim_expired() == 0  # not yet due (600 s)
    assert store.reclaim_expired(now=time.time() + 3600) == 3
    assert store.totals().leased == 0 and store.totals().pending == 3
    assert not store.settle_visit(leases[0].url, leases[0].lease_id, 1.0, 0.0, [])  # stale
    assert store.get(leases[0].url).cash == 1.0
    assert_balanced(store)


# -- hostile data -----------------------------------------------------------------------------


class _Trap:
    """Unpickling this creates a file: proof that something ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_hostile_request_data_is_skipped_and_never_run(store, redis_server, tmp_path, caplog):
    trap = tmp_path / "pwned"
    hostile = {
        "http://a.test/garbage": b"\x80\xff\x00\x13garbage",
        "http://b.test/pickle": pickle.dumps(_Trap(str(trap))),
        "http://c.test/badjson": b'{"url": "http://c.test/badjson", ',
        "http://d.test/wrongtype": b"[1, 2, 3]",
        "http://e.test/file": b'"file:///etc/passwd"',
        "http://f.test/filedict": b'{"url": "file:///etc/passwd"}',
    }
    client = redis.Redis.from_url(redis_server.url)
    for url in hostile:
        store.inject(link(url), 1.0)
        client.hset(store.keys["req"], url, hostile[url])
    from scrapy_aopic.frontier.requestcodec import UndecodableRequest, decode_request
    from scrapy_aopic.store.base import UnreadableData

    seen = set()
    while (lease := store.pop()) is not None:
        # Never a plain GET in its place: the frontier refuses it by name.
        assert isinstance(lease.request, UnreadableData), lease.request
        with pytest.raises(UndecodableRequest, match=lease.url.replace(".", r"\.")):
            decode_request(lease.url, lease.request, None)
        seen.add(lease.url)
        store.settle_failure(lease.url, lease.lease_id)
    assert seen == set(hostile)
    assert not trap.exists()  # nothing was unpickled
    assert_balanced(store)


def test_hostile_account_record_is_skipped(store, redis_server, caplog):
    client = redis.Redis.from_url(redis_server.url)
    store.inject(link("http://a.test/broken"), 5.0)
    store.inject(link("http://b.test/fine"), 1.0)
    client.hset(store.keys["acct"], "http://a.test/broken", b"\x00not a record")
    caplog.set_level(logging.WARNING, logger="scrapy_aopic.store.redis")
    lease = store.pop()
    assert lease.url == "http://b.test/fine"
    assert any("http://a.test/broken" in r.getMessage() for r in caplog.records)
    # its queue score still told its cash: 5.0 went to lambda, and the
    # account is refused (not pending: the crawl can end)
    assert store.totals().lambda_cash == 5.0
    assert store.get("http://a.test/broken").state == REFUSED
    # credit for the broken account goes to lambda instead of crashing
    store.settle_visit(lease.url, lease.lease_id, 1.0, 0.0, [Credit(link("http://a.test/broken"), 0.5)])
    assert store.totals().lambda_cash == 6.0  # and the 0.5 credit and the 0.5 remainder
    assert store.pop() is None
    assert store.totals().pending == 0 and store.activity() == (0, 0, 0)
    assert_balanced(store)



def test_hostile_record_with_a_hostile_queue_score_brings_no_cash(store, redis_server, caplog):
    """A queue score that is not ours either (more cash than was ever
    injected) is not believed: nothing goes to lambda for it, both are
    named, and the crawl still ends."""
    client = redis.Redis.from_url(redis_server.url)
    store.inject(link("http://a.test/broken"), 5.0)
    queue = store.keys.queue_prefix + "a.test"
    (member,) = client.zrange(queue, 0, -1)
    client.zadd(queue, {member: -1e300})
    client.hset(store.keys["acct"], "http://a.test/broken", b"\x00not a record")
    caplog.set_level(logging.WARNING, logger="scrapy_aopic.store.redis")
    assert store.pop() is None
    assert store.totals().lambda_cash == 0.0 and store.totals().pending == 0
    assert any("queue score of http://a.test/broken" in r.getMessage() for r in caplog.records)
    assert store.get("http://a.test/broken").state == REFUSED

# -- Redis faults ------------------------------------------------------------------------------


def test_redis_killed_and_restarted_mid_sequence(tmp_path, caplog):
    # appendfsync always: with everysec a busy disk lets Redis acknowledge
    # writes it has not yet written (up to 2 s), and a SIGKILL loses them
    # (a lease taken just before the kill came back unknown at load 8);
    # this test is about the client's retry, not the disk
    server = RedisServer(tmp_path / "redis", appendfsync="always").start()
    try:
        store = RedisStore.from_url(server.url, key_prefix="crash:aopic", retry_timeout=30)
        engine = AopicEngine(store, clock=lambda: 0.0)
        for i in range(20):
            engine.add_seed(link(f"http://h{i % 4}.test/{i}"))
        leases = [engine.next() for _ in range(6)]
        engine.visit(leases[0], [link("http://h1.test/new")])
        server.kill()  # SIGKILL: only the AOF survives
        caplog.set_level(logging.WARNING, logger="scrapy_aopic.store.redis")
        threading.Timer(0.5, server.start).start()
        # blocks, retrying, until the server is back; then the scripts are reloaded
        assert engine.visit(leases[1], [link("http://h2.test/new")]).links == 1
        messages = [r.getMessage() for r in caplog.records]
        assert any("unreachable" in m for m in messages)
        assert any("is back" in m for m in messages)
        for lease in leases[2:]:
            engine.visit(lease, [])
        assert store.totals().visits == 6 and store.totals().injected == 20.0
        while (lease := engine.next()) is not None:
            engine.visit(lease, [])
        assert store.totals().pending == 0
        assert_balanced(store)
        store.close()
    finally:
        server.stop()


def test_redis_gone_for_too_long_raises_a_clear_error(tmp_path, caplog):
    server = RedisServer(tmp_path / "redis").start()
    store = RedisStore.from_url(server.url, key_prefix="gone:aopic", retry_timeout=0.3)
    server.stop()
    caplog.set_level(logging.WARNING, logger="scrapy_aopic.store.redis")
    started = time.monotonic()
    from scrapy_aopic.store.base import StoreUnavailable

    with pytest.raises(StoreUnavailable, match="gave up on inject") as raised:
        store.inject(link("http://a.test/"), 1.0)
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    assert time.monotonic() - started < 5


# -- setup ------------------------------------------------------------------------------------


def test_workers_must_agree_on_lambda_targets(redis_server):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    first = new_store(redis_server, key_prefix=prefix, lambda_targets="all")
    with pytest.raises(ValueError, match="AOPIC_LAMBDA_TARGETS"):
        new_store(redis_server, key_prefix=prefix, lambda_targets="pending")
    first.clear()



def test_keys_share_one_cluster_slot_and_an_old_layout_is_refused(redis_server):
    from redis.crc import key_slot

    from scrapy_aopic.store.redis import key_tag

    store = new_store(redis_server, key_prefix="slot:aopic")
    store.inject(link("http://a.test/"), 1.0)
    keys = redis.Redis.from_url(redis_server.url).keys(b"{slot:aopic}:*")
    assert len(keys) >= 6 and len({key_slot(k) for k in keys}) == 1
    assert key_tag("crawl:{shard1}") == "crawl:{shard1}" and key_tag("a{}b") == "{a{}b}"
    store.clear()
    client = redis.Redis.from_url(redis_server.url)
    client.hset("old:aopic:tot", "injected", "1.0")  # written by an earlier version
    with pytest.raises(ValueError, match="old key layout"):
        new_store(redis_server, key_prefix="old:aopic")
    client.delete("old:aopic:tot")

def test_clear_deletes_only_its_own_keys(redis_server):
    a = new_store(redis_server, key_prefix="clear1")
    b = new_store(redis_server, key_prefix="clear10")
    a.inject(link("http://a.test/"), 1.0)
    b.inject(link("http://b.test/"), 1.0)
    assert a.clear() >= 3
    assert a.totals().known == 0
    assert b.get("http://b.test/").cash == 1.0
    b.clear()


def test_store_from_scrapy_settings(redis_server):
    from scrapy.settings import Settings

    settings = Settings({"REDIS_URL": redis_server.url, "REDIS_DECODE_RESPONSES": True})
    store = RedisStore.from_settings(settings, key_prefix=f"t-{uuid.uuid4().hex[:10]}")
    assert store.inject(link("http://a.test/"), 1.0)
    assert store.pop().url == "http://a.test/"
    store.clear()


def test_store_from_crawler_settings(redis_server):
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    class Books(Spider):
        name = f"books{uuid.uuid4().hex[:6]}"

    settings = {
        "REDIS_URL": redis_server.url,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 3,
        "AOPIC_REDIS_LEASE_TIMEOUT": 42,
    }
    crawler = get_crawler(Books, settings)
    store = RedisStore.from_crawler(crawler, Books(), lambda_targets="all")
    assert store.key_prefix == f"{Books.name}:aopic"
    assert (store.host_concurrency, store.lease_timeout, store.retry_timeout) == (3, 42.0, 300.0)
    store.inject(link("http://a.test/"), 1.0)
    # another worker joins: same frontier
    again = RedisStore.from_crawler(get_crawler(Books, settings), Books(), lambda_targets="all")
    assert again.totals().known == 1
    # SCHEDULER_FLUSH_ON_START starts afresh (even with other lambda targets)
    fresh = RedisStore.from_crawler(
        get_crawler(Books, {**settings, "SCHEDULER_FLUSH_ON_START": True, "AOPIC_REDIS_HOST_CONCURRENCY": 0}),
        Books(),
    )
    assert fresh.totals().known == 0 and fresh.host_concurrency == 0
    fresh.clear()


def test_seeds_taken_count_as_work_until_scheduled(store, monkeypatch):
    """Between a worker's take and its scheduling, the start-URLs key is
    empty and the frontier too: the claim keeps other workers from seeing
    the crawl idle (and closing) in that window. A dead taker's claim ends."""
    import scrapy_aopic.store.redis.seeds as redis_seeds

    key = f"{store.key_prefix}:start_urls"
    store.server.rpush(key, b"http://a.example/", b"http://b.example/")
    assert store.activity(key) == (0, 0, 2)
    assert store.take_seeds(key, 16) == [b"http://a.example/", b"http://b.example/"]
    assert store.server.llen(key) == 0
    assert store.activity(key) == (0, 0, 1)  # one batch in transit
    store.seeds_scheduled(key)
    assert store.activity(key) == (0, 0, 0)
    assert store.take_seeds(key, 16) == []  # nothing taken: no claim
    assert store.activity(key) == (0, 0, 0)
    # Long enough that a stalled shared machine still sees the claim live.
    monkeypatch.setattr(redis_seeds, "SEED_CLAIM_SECONDS", 0.5)
    store.server.rpush(key, b"http://c.example/")
    assert store.take_seeds(key, 16) == [b"http://c.example/"]
    assert store.activity(key)[2] == 1
    time.sleep(0.6)  # the taker died: its claim runs out
    assert store.activity(key) == (0, 0, 0)


def test_knows_and_count_known_agree_with_get(store):
    """Every state counts as known (aliases and refusals too), on Redis as
    in memory; ``count_known`` answers for a page's links in one call."""
    memory = MemoryStore()
    for target in (store, memory):
        for u in ("http://a.test/old", "http://a.test/crawled"):
            target.inject(link(u), 1.0)
        old = target.take("http://a.test/old")
        target.settle_transfer(old.url, old.lease_id, link("http://b.test/new"))
        target.refuse("http://c.test/refused", "c.test", 0)
        urls = ["http://a.test/old", "http://a.test/crawled", "http://b.test/new",
                "http://c.test/refused", "http://d.test/unknown", "http://e.test/unknown"]
        assert [target.knows(u) for u in urls] == [target.get(u) is not None for u in urls]
        assert [target.knows(u) for u in urls] == [True, True, True, True, False, False]
        assert target.count_known(urls) == 4
        assert target.count_known([]) == 0


def test_referer_only_links_round_trip_without_a_warning(store, caplog):
    """Scrapy gives every followed link a Referer: its portable form (the
    Referer, and the URL only when spelt differently) is read back as it
    was written, with nothing logged; a malformed one is refused."""
    from scrapy import Request

    from scrapy_aopic.frontier.requestcodec import decode_request, encode_request

    caplog.set_level(logging.WARNING, logger="scrapy_aopic.store.redis")
    for spelt in ("http://a.test/page", "http://a.test/Page"):
        request = Request(spelt, headers={"Referer": "http://a.test/"})
        store.inject(link("http://a.test/page", request=encode_request(request, "http://a.test/page", None)), 1.0)
        lease = store.pop()
        back = decode_request(lease.url, lease.request, None)
        assert back.url == spelt and back.headers.getlist("Referer") == [b"http://a.test/"]
        store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [])
        store.clear()
    assert not caplog.records
    from scrapy_aopic.store.base import UnreadableData

    for hostile in ({"aopic_referer": 5}, {"aopic_referer": "x", "url": "file:///etc/passwd"}):
        store.inject(link("http://b.test/hostile", request=hostile), 1.0)
        assert isinstance(store.pop().request, UnreadableData)  # refused, never a plain GET
        store.clear()


@pytest.mark.parametrize(("chosen", "level"), [(True, "WARNING"), (False, "INFO")])
def test_frontier_falls_back_to_pending_lambda_with_redis(redis_server, caplog, chosen, level):
    """The Redis store's Lua pays every pending URL alike: a crawl asking
    for "pending-cash" gets "pending" there, with a warning and a stat; left
    at the default ("pending-cash"), the same said once at INFO."""
    import logging

    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.frontier import Frontier

    class Books(Spider):
        name = f"books{uuid.uuid4().hex[:6]}"

    settings = {"REDIS_URL": redis_server.url, "AOPIC_BACKEND": "redis"}
    if chosen:
        settings["AOPIC_LAMBDA_TARGETS"] = "pending-cash"
    crawler = get_crawler(Books, settings)
    frontier = Frontier(crawler)
    with caplog.at_level("INFO"):
        store = frontier._build_store(Books())
    try:
        assert store.lambda_targets == "pending"
        assert crawler.stats.get_value("aopic/lambda_targets_fallback") == 1
        said = [r for r in caplog.records if "pending-cash" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == getattr(logging, level)
    finally:
        store.clear()
        store.close()


def test_a_test_server_whose_picked_port_was_taken_moves_to_another(tmp_path, monkeypatch):
    """The test harness itself: a port picked free can be taken before the
    server binds it (CI once lost a cluster test so); the server moves."""
    import socket

    from tests.support.redis_server import RedisServer, find_redis_server, free_port

    try:
        find_redis_server()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(RedisServer, "_free_port", staticmethod(lambda: next(picks, None) or free_port()))
        server = RedisServer(tmp_path / "moved")
        assert server.port == taken.getsockname()[1]
        with server:
            assert server.port != taken.getsockname()[1] and server.ping()
            assert str(server.port) in server.url
            server.restart()  # a restart keeps the port it bound
            assert server.port != taken.getsockname()[1] and server.ping()


@pytest.mark.parametrize("thaw", [False, True])
def test_a_minting_host_does_not_pass_the_min_share_test_on_its_discovery_cash(store, thaw):
    """As the memory stores (tests/unit/test_discovery_cash.py): the Lua pop
    compares cash beyond the discovery cash every URL brought in."""
    from tests.unit.test_discovery_cash import minting_host_scenario

    farm = minting_host_scenario(store, thaw)
    assert store.get(farm[0]).cash > 0.5 * store.peek()[1]
    lease = store.pop(lambda host: host != "site.test", 0.5, busy=["site.test"])
    assert lease.url == "http://other.test/x"
    store.settle_requeue(lease.url, lease.lease_id)
    before = sorted((v.url, v.cash) for v in store.iter_accounts())
    assert store.pop(None, 0.5, busy=["site.test", "other.test"]) is None
    assert sorted((v.url, v.cash) for v in store.iter_accounts()) == before
    assert store.pop(None, 0.0, busy=["site.test", "other.test"]).url == farm[0]
    assert_balanced(store)


def test_pop_refuses_a_bad_discovery_amount_before_any_write(store):
    store.inject(link("http://a.test/"), 1.0)
    store.discovery_cash = -1.0  # (fmt itself refuses NaN and infinities)
    with pytest.raises(redis.ResponseError, match="discovery cash is not an amount"):
        store.pop(None, 0.5)
    store.discovery_cash = 0.0
    assert store.pop(None, 0.5).url == "http://a.test/"


def test_a_test_server_whose_port_another_server_holds_moves_to_a_free_one(redis_server, tmp_path):
    """Two servers picked one free port: the second fails to bind while the
    first answers its PING. It must notice it is not the one answering and
    move (a cluster fixture came up one node short on CI)."""
    from tests.support.redis_server import RedisServer

    second = RedisServer(tmp_path / "second")
    second._move_to(redis_server.port)  # as if the free-port pick had returned the same port
    second.start()
    try:
        assert second.port != redis_server.port and second.running and second.ping()
    finally:
        second.stop()
