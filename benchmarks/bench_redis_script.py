"""What each ``frontier.lua`` op costs Redis, from the server's own figures.

    python benchmarks/bench_redis_script.py [--baseline DIR] [--rounds 4]

Runs the ops a crawl makes, by raw ``EVALSHA`` with their real arguments, on
a ``redis-server`` of its own (AOF on, as in ``bench_scheduler.py``; no
automatic AOF rewrite, see ``main``):
``inject`` and ``register`` of new URLs over 5,000 hosts, ``register`` of
known ones, ``pop`` as a drain (no lambda due, no min share), a visit with 10
links (``settle_visit``: 5 new, 5 known), ``pop`` with lambda due and
``AOPIC_MIN_CASH_SHARE`` 0.5, then (when every tree has it) the same visit
on a shard of a Redis Cluster frontier, 5 of its links credited to two
other shards through the outbox (``settle_visit_x``), and prints for each
the script's ``usec_per_call`` from ``INFO commandstats`` (the server's
time inside the script, the commands it runs included; least of
``--rounds`` rounds), and the time the server's main thread was on a
CPU per call (Linux ``schedstat``: the clock's time less the time Redis
waited for a CPU; median of the rounds and of the round-by-round ratios).

``--baseline DIR`` runs the ``frontier.lua`` of another checkout
(``git archive <commit> | tar -x -C DIR``) on its own keys in the same
server, op by op, interleaved with this one: the ratio column is this tree
over the baseline. Both scripts take the same ``KEYS`` and ``ARGV``.

A second table gives the bytes the Lua heap grows by in one call of each op
(the collector stopped for that call, on a copy of the script). Unlike
times, it does not move with the machine's load, and on Redis 6, where a
script keeps nothing from one run to the next, allocation (every function,
table and string a run creates, and the collector's work for it) is most of
a script's cost.
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from scrapy_aopic.store.redis.keys import FrontierKeys  # noqa: E402
from scrapy_aopic.store.redis.records import LEASE_HEAD  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

HOSTS = 5000


def url(i: int) -> str:
    return f"http://host{i % HOSTS}.example.com/section/{i // HOSTS}/page-{i}.html"


def host(i: int) -> str:
    return f"host{i % HOSTS}.example.com"


class Frontier:
    """One tree's ``frontier.lua`` on its own keys."""

    def __init__(self, server: redis.Redis, source: str, prefix: str):
        self.server = server
        self.sha = server.script_load(source)
        keys = FrontierKeys.of(prefix)
        self.keys = list(keys.script_keys)
        self.tag = keys.tag
        self.leases: list[tuple[bytes, int]] = []
        self.token = 0

    def run(self, op: str, *args, sha: str | None = None):
        return self.server.evalsha(sha or self.sha, len(self.keys), *self.keys, self.tag, op, "0", *args)

    def pop(self, visit_lambda: str, min_share: str, sha: str | None = None):
        self.token += 1
        reply = self.run("pop", 0, "600", 16, "", visit_lambda, min_share, "0", f"bench:{self.token}", sha=sha)
        head = LEASE_HEAD.unpack(reply[0])
        if head[0]:
            self.leases.append((reply[1], int(head[1])))

    def visit_args(self, lease: tuple[bytes, int], rng: random.Random, known: int, new_from: int) -> list:
        """A visit of ``lease`` with 10 links: 5 of the first ``known`` URLs,
        5 new ones from ``new_from`` on."""
        args = [lease[0], lease[1], "0.5", "1700000000"]
        for k in range(10):
            j = rng.randrange(known) if k % 2 else new_from + k // 2
            args += [url(j), host(j), 2, "", "0.05"]
        return args

    def visit(self, args: list, sha: str | None = None):
        """``settle_visit`` of :meth:`visit_args` (no discovery cash)."""
        return self.run("settle_visit", *args[:4], "0", *args[4:], sha=sha)

    def visit_x(self, args: list, sha: str | None = None):
        """The same visit on a frontier sharded over a Redis Cluster
        (``settle_visit_x``): links 0-2 and 3-4 credited to two other
        shards through the outbox, 5-9 here. The outbox is emptied (by a
        plain ``DEL``, not counted) when it holds a delivery batch (32
        entries), as a worker's delivery would."""
        head, links = args[:4], [args[4 + 5 * k:9 + 5 * k] for k in range(10)]
        reply = self.run("settle_visit_x", *head, 2, 1, 3, *sum(links[:3], []), 2, 2, *sum(links[3:5], []),
                         *sum(links[5:], []), sha=sha)
        if isinstance(reply, list) and len(reply[0]) > 32:  # (not the allocation probe's reply)
            self.server.delete(f"{self.tag}:out")
        return reply


def phases(sizes: dict[str, int], cross_shard: bool = False):
    """``(name, function of a Frontier)`` for each timed op, in order."""
    n_inject, n_register, n_pop = sizes["inject"], sizes["register"], sizes["pop"]
    known_end = n_inject + n_register

    def inject(f):
        for i in range(n_inject):
            f.run("inject", url(i), host(i), 0, "", "1.0")

    def register_new(f):
        for i in range(n_inject, known_end):
            f.run("register", url(i), host(i), 1, "")

    def register_known(f):
        for i in range(0, known_end, 4):
            f.run("register", url(i), host(i), 1, "")

    def pop(visit_lambda, min_share):
        def run(f):
            for _ in range(n_pop):
                f.pop(visit_lambda, min_share)
        return run

    def visit(f):
        rng = random.Random(1)
        new_from = known_end + f.token * 10
        for lease in f.leases:
            f.visit(f.visit_args(lease, rng, known_end, new_from))
            new_from += 5
        f.leases = []

    def visit_x(f):
        rng = random.Random(2)
        new_from = known_end + f.token * 10
        for lease in f.leases:
            f.visit_x(f.visit_args(lease, rng, known_end, new_from))
            new_from += 5
        f.leases = []

    return [
        ("inject (new URL)", inject),
        ("register (new URL)", register_new),
        ("register (known URL)", register_known),
        ("pop (drain)", pop("0", "0")),
        ("settle_visit (10 links)", visit),
        ("pop (lambda due, share 0.5)", pop("1", "0.5")),
    ] + ([("settle_visit_x (5 of 10 out)", visit_x)] if cross_shard else [])


def on_cpu_ns(pid: int | None) -> int | None:
    """Nanoseconds the ``redis-server`` main thread has run on a CPU
    (Linux ``schedstat``): unlike ``INFO commandstats``, which times a call
    by the clock, not the time the server waits for a CPU meanwhile."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as stat:
            return int(stat.read().split()[0])
    except (OSError, ValueError, IndexError, TypeError):
        return None


def timed(server: redis.Redis, trees: dict[str, str], rounds: int, sizes: dict[str, int],
          cross_shard: bool, pid: int | None = None) -> tuple[dict, dict]:
    figures: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    for round_ in range(rounds):
        frontiers = {name: Frontier(server, source, f"bench-script:{round_}:{name}") for name, source in trees.items()}
        # the trees take turns to go first: the second one runs on a larger
        # server (both frontiers' keys), which must not favour either
        order = list(frontiers.items())
        if round_ % 2:
            order.reverse()
        for phase, run in phases(sizes, cross_shard):
            for name, frontier in order:
                server.config_resetstat()
                before = on_cpu_ns(pid)
                run(frontier)
                after = on_cpu_ns(pid)
                stats = server.info("commandstats")["cmdstat_evalsha"]
                figures.setdefault((phase, name), []).append(stats["usec"] / stats["calls"])
                if before is not None and after is not None:
                    cpu.setdefault((phase, name), []).append((after - before) / 1000 / stats["calls"])
    return figures, cpu


def _probe(source: str) -> str:
    """``source`` run with the collector stopped; replies the bytes allocated."""
    return (
        "collectgarbage('stop') local before = collectgarbage('count')\n"
        "local _ = (function()\n" + source + "\nend)()\n"
        "local used = collectgarbage('count') - before\ncollectgarbage('restart')\n"
        "return tostring(used * 1024)"
    )


def allocated(server: redis.Redis, trees: dict[str, str], cross_shard: bool) -> dict:
    figures = {}
    for name, source in trees.items():
        f = Frontier(server, source, f"bench-script:alloc:{name}")
        probe = server.script_load(_probe(source))
        for i in range(2000):
            f.run("inject", url(i), host(i), 0, "", "1.0")
        rng = random.Random(1)

        def median(call) -> int:
            return int(statistics.median(float(call(n)) for n in range(7)))

        def visit(n):
            f.pop("0", "0")
            return f.visit(f.visit_args(f.leases.pop(), rng, 2000, 10_000 + 10 * n), sha=probe)

        figures[name] = {
            "inject (new URL)": median(lambda n: f.run("inject", url(5000 + n), host(5000 + n), 0, "", "1.0", sha=probe)),
            "register (new URL)": median(lambda n: f.run("register", url(6000 + n), host(6000 + n), 0, "", sha=probe)),
            "register (known URL)": median(lambda n: f.run("register", url(n), host(n), 0, "", sha=probe)),
            "pop (drain)": median(lambda n: f.run("pop", 0, "600", 16, "", "0", "0", "0", f"a:{n}", sha=probe)),
            "settle_visit (10 links)": median(visit),
            "pop (lambda due, share 0.5)": median(
                lambda n: f.run("pop", 0, "600", 16, "", "1", "0.5", "0", f"b:{n}", sha=probe)),
        }
        if cross_shard:
            def visit_x(n):
                f.pop("0", "0")
                args = f.visit_args(f.leases.pop(), rng, 2000, 20_000 + 10 * n)
                return f.visit_x(args, sha=probe)

            figures[name]["settle_visit_x (5 of 10 out)"] = median(visit_x)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="DIR", help="also the frontier.lua of the checkout in DIR")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pops", type=int, default=3000)
    args = parser.parse_args()
    lua = Path("scrapy_aopic/store/redis/lua/frontier.lua")
    trees = {}
    if args.baseline:
        trees["baseline"] = (Path(args.baseline) / lua).read_text()
    trees["this tree"] = (ROOT / lua).read_text()
    sizes = {"inject": 10_000, "register": 10_000, "pop": args.pops}
    # the cross-shard settle, when every tree has it (not before 987fa40)
    cross_shard = all("'settle_visit_x'" in source for source in trees.values())
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir)).start()
        try:
            client = redis.Redis.from_url(server.url)
            # No AOF rewrite in the middle of a timed phase: the fork and the
            # copy-on-write faults it brings slow the writes of whichever tree
            # is running when the file doubles (mostly in the visits, the ops
            # that append the most): a visit phase in which one started took
            # 1.16x the other one's, just before it (identical scripts).
            client.config_set("auto-aof-rewrite-percentage", 0)
            times, cpu = timed(client, trees, args.rounds, sizes, cross_shard, server.process.pid)
            allocs = allocated(client, trees, cross_shard)
        finally:
            server.kill()
    names = list(trees)
    ratio = len(names) == 2
    print(f"frontier.lua, µs per call inside Redis (INFO commandstats, least of {args.rounds} rounds)")
    print(f"{'op':30s}" + "".join(f"{n:>12s}" for n in names) + ("   ratio" if ratio else ""))
    for phase, _ in phases(sizes, cross_shard):
        values = [min(times[(phase, n)]) for n in names]
        print(f"{phase:30s}" + "".join(f"{v:12.1f}" for v in values)
              + (f"   {values[1] / values[0]:.3f}" if ratio else ""))
    if cpu:
        print(f"\nµs of the server's main thread on a CPU per call (schedstat; median of {args.rounds} rounds,"
              " and of the round-by-round ratios)")
        for phase, _ in phases(sizes, cross_shard):
            values = [statistics.median(cpu[(phase, n)]) for n in names]
            line = f"{phase:30s}" + "".join(f"{v:12.1f}" for v in values)
            if ratio:
                ratios = sorted(b / a for a, b in zip(cpu[(phase, names[0])], cpu[(phase, names[1])]))
                line += f"   {statistics.median(ratios):.3f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"
            print(line)
    print("\nbytes allocated by one call (Lua heap, collector stopped; median of 7 calls)")
    for phase in allocs[names[0]]:
        values = [allocs[n][phase] for n in names]
        print(f"{phase:30s}" + "".join(f"{v:12d}" for v in values)
              + (f"   {values[1] / values[0]:.3f}" if ratio else ""))


if __name__ == "__main__":
    main()
