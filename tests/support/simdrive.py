"""Driving the simulator's crawl policies by hand, for the tests of the
prototypes kept in ``benchmarks/`` (files, not a package)."""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """The module ``benchmarks/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def crawl(policy, graph, steps: int) -> Iterator[int]:
    """Drive ``policy`` as the simulator does; yield after every fetch."""
    discovered = set(graph.seeds.tolist())
    policy.start(graph, sorted(discovered), random.Random(0))
    for _ in range(steps):
        node = policy.select()
        if node < 0:
            return
        links = graph.out(node).tolist()
        new = [v for v in links if v not in discovered]
        discovered.update(new)
        policy.fetched(node, links, new)
        yield node
