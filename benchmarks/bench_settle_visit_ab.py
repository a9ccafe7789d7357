"""``settle_visit`` of several ``frontier.lua`` files, side by side, by CPU time.

    python benchmarks/bench_settle_visit_ab.py ROUNDS NAME=PATH.lua [NAME=PATH.lua ...]

For bisecting a change to one op (the first file is the reference; give the
same file twice for an A/A run). Each round builds, for each script on its
own keys in one ``redis-server`` (AOF on), the frontier of
``bench_redis_script.py`` (10,000 injected URLs over 5,000 hosts, 10,000
registered, 3,000 leases), then settles the leases with a visit of 10 links
(5 new, 5 known) in blocks of 25 pipelined calls, the scripts taking turns
block by block (so a burst of load on the shared machine falls on all of
them), the order rotated each round. Per script it prints the time the
server's main thread was on a CPU per call (Linux ``schedstat``) and the
``INFO commandstats`` time, with the median and range of the
round-by-round ratios to the reference.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import redis  # noqa: E402

import bench_redis_script as bench  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

BLOCK = 25
SIZES = {"inject": 10_000, "register": 10_000, "pop": 3_000}


def _script(argument: str) -> tuple[str, Path]:
    """``NAME=PATH.lua`` -> (name, path)."""
    name, sep, path = argument.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{argument!r} is not NAME=PATH.lua")
    return name, Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rounds", type=int, metavar="ROUNDS", help="rounds, the order of the scripts rotated each round")
    parser.add_argument("scripts", type=_script, nargs="+", metavar="NAME=PATH.lua",
                        help="the frontier.lua files to compare; the first is the reference")
    args = parser.parse_args()
    missing = [str(path) for _, path in args.scripts if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    rounds, sources = args.rounds, {name: path.read_text() for name, path in args.scripts}
    cpu: dict[str, list[float]] = {name: [] for name in sources}
    clock: dict[str, list[float]] = {name: [] for name in sources}
    known_end = SIZES["inject"] + SIZES["register"]
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir)).start()
        pid = server.process.pid
        try:
            client = redis.Redis.from_url(server.url)
            client.config_set("auto-aof-rewrite-percentage", 0)  # (see bench_redis_script.py)
            for round_ in range(rounds):
                frontiers = {}
                for name, source in sources.items():
                    frontier = bench.Frontier(client, source, f"bench-ab:{round_}:{name}")
                    for _, run in bench.phases(SIZES)[:4]:  # inject, register x2, pop
                        run(frontier)
                    frontiers[name] = frontier
                names = list(frontiers)
                names = names[round_ % len(names):] + names[:round_ % len(names)]
                ns = dict.fromkeys(names, 0)
                usec = dict.fromkeys(names, 0)
                calls = dict.fromkeys(names, 0)
                state = {name: (random.Random(1), known_end + frontiers[name].token * 10) for name in names}
                for start in range(0, len(frontiers[names[0]].leases), BLOCK):
                    for name in names:
                        f = frontiers[name]
                        rng, new_from = state[name]
                        pipe = client.pipeline(transaction=False)
                        for lease in f.leases[start:start + BLOCK]:
                            args = f.visit_args(lease, rng, known_end, new_from)
                            new_from += 5
                            pipe.evalsha(f.sha, len(f.keys), *f.keys, f.tag, "settle_visit", "0",
                                         *args[:4], "0", *args[4:])
                        state[name] = (rng, new_from)
                        client.config_resetstat()
                        before = bench.on_cpu_ns(pid)
                        pipe.execute()
                        ns[name] += bench.on_cpu_ns(pid) - before
                        stats = client.info("commandstats")["cmdstat_evalsha"]
                        usec[name] += stats["usec"]
                        calls[name] += stats["calls"]
                for name in names:
                    cpu[name].append(ns[name] / 1000 / calls[name])
                    clock[name].append(usec[name] / calls[name])
                client.flushall()
        finally:
            server.kill()
    reference = next(iter(sources))
    print(f"settle_visit (10 links), {rounds} rounds, blocks of {BLOCK} calls taking turns; ratios to {reference}")
    for label, figures in (("µs of the server's main thread on a CPU per call (schedstat)", cpu),
                           ("µs per call, INFO commandstats (clock time)", clock)):
        print(label)
        for name in sources:
            ratios = sorted(a / b for a, b in zip(figures[name], figures[reference]))
            print(f"  {name:16s} median {statistics.median(figures[name]):7.1f}   ratio median "
                  f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")


if __name__ == "__main__":
    main()
