"""How the Redis store calls its Lua scripts, and why.

The store sends ``EVALSHA`` packed by hand on its own connection
(:mod:`scrapy_aopic.store.redis.scripts`). This benchmark measures that path
against redis-py's two standard ways, ``Script.__call__`` and
``Redis.evalsha``, on the real ``frontier.lua`` and its real arguments: a
``peek`` (read only, the script's fixed cost) and a ``register`` of a known
URL (what every extracted link costs). Side by side in one run; the figure
to read is the ratio.

    python benchmarks/bench_redis_calls.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.redis_server import RedisServer  # noqa: E402
from scrapy_aopic.store.base import Link  # noqa: E402
from scrapy_aopic.store.redis import RedisStore  # noqa: E402
from scrapy_aopic.store.redis.scripts import FRONTIER  # noqa: E402


def per_call(call, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir)).start()
        try:
            store = RedisStore.from_url(server.url, key_prefix="bench-calls")
            for i in range(1000):
                store.inject(Link(f"http://h{i % 50}.test/{i}", f"h{i % 50}.test", 0), 1.0)
            script = store.server.register_script(FRONTIER.source)
            keys = list(store.keys.script_keys)
            for op, op_args, head in (("peek", (), 2), ("register", ("http://h1.test/1", "h1.test", 0, ""), 0)):
                argv = [store.keys.tag, op, "0", *op_args]
                ways = {
                    "store (packed, own connection)": lambda: store._run(op, *op_args, head=head),
                    "redis-py Script": lambda: script(keys=keys, args=argv),
                    "redis-py evalsha": lambda: store.server.evalsha(FRONTIER.sha, len(keys), *keys, *argv),
                }
                for call in ways.values():
                    call()  # loaded, warm
                timings = {name: [] for name in ways}
                for _ in range(args.rounds):
                    for name, call in ways.items():
                        timings[name].append(per_call(call, args.calls))
                base = statistics.median(timings["store (packed, own connection)"])
                print(f"\n{op}: {args.calls} calls x {args.rounds} rounds, median µs per call")
                for name, values in timings.items():
                    median = statistics.median(values)
                    print(f"  {name:32s} {median:8.1f} µs   {median / base:5.2f}x the store's path")
            store.clear()
            store.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
