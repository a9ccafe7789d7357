"""Offline crawl-ordering simulator: which pages does each policy fetch first?

Crawls a link graph (a Debian documentation site, a synthetic web with traps
and link farms, or a graph recorded from your own ``scrapy crawl`` with
``AOPIC_EXPORT_GRAPH``) one fetch per step with every ordering policy of
``docs/benchmarks.rst`` (OPIC/AOPIC through the real
:class:`~scrapy_aopic.engine.AopicEngine`) and measures the share of true PageRank each captures per page fetched.

Needs numpy, scipy and matplotlib (``pip install scrapy-aopic[bench]``).
Command line: ``python -m scrapy_aopic.sim --help``.
"""

from .graph import FARM, NORMAL, TRAP, Graph
from .pagerank import pagerank, pagerank_csr
from .recorded import graph_from_records, read_recorded_graph, write_recorded_graph
from .runner import FRACTIONS, Comparison, Run, compare, default_policies, simulate

__all__ = [
    "FARM",
    "FRACTIONS",
    "NORMAL",
    "TRAP",
    "Comparison",
    "Graph",
    "Run",
    "compare",
    "default_policies",
    "graph_from_records",
    "pagerank",
    "pagerank_csr",
    "read_recorded_graph",
    "simulate",
    "write_recorded_graph",
]
