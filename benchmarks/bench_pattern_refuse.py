"""Queued URLs of a learned duplicate pattern: refused while leased (this
tree) vs one by one at download time (another tree, e.g. main).

A real crawl of tests/support/dupcrawl.py's site with NEWS=/news?ts=<n>
pages all linked from the front page: three duplicates teach the pattern,
the rest are already queued. Runs A (OTHER tree) and B (this tree)
interleaved, REPEAT times each, and prints wall time, CPU time, fetches,
refusals and refusals/s per run and the B/A ratios of the medians.

    python benchmarks/bench_pattern_refuse.py [OTHER_TREE] [NEWS] [REPEAT]    # default: /work/main 3000 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
RUN = """
import sys, json, resource
sys.path.insert(0, {support!r})
import dupcrawl
dupcrawl.NEWS = {news}
dupcrawl.main({out!r})
import scrapy_aopic
r = json.loads(open({out!r}).read()); r['package'] = scrapy_aopic.__file__
ru = resource.getrusage(resource.RUSAGE_SELF); r['cpu'] = ru.ru_utime + ru.ru_stime
open({out!r}, 'w').write(json.dumps(r))
"""


def run(tree: Path, news: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        # Each tree's own venv (an editable install wins over PYTHONPATH).
        python = tree / ".venv/bin/python"
        start = time.perf_counter()
        subprocess.run([str(python) if python.exists() else sys.executable, "-c", RUN.format(support=str(tree / "tests/support"), news=news, out=out)],
                       check=True, capture_output=True, cwd=tmp)  # not this tree's package via ''/cwd
        wall = time.perf_counter() - start
        report = json.loads(Path(out).read_text())
    stats = report["stats"]
    refused = stats.get("aopic/failed/duplicate_pattern", 0)
    return {"tree": report["package"].rsplit("/scrapy_aopic", 1)[0], "wall": wall, "cpu": report["cpu"],
            "fetches": stats.get("downloader/response_count", 0), "refused": refused,
            "refused_per_s": refused / wall,
            # Requests that went through Scrapy's downloader middlewares
            # (refused there or fetched).
            "to_downloader": stats.get("downloader/request_count", 0) + stats.get(
                "downloader/exception_type_count/scrapy.exceptions.IgnoreRequest", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", nargs="?", type=Path, default=Path("/work/main"), metavar="OTHER_TREE",
                        help="checkout run as A, with its own .venv if it has one (default /work/main)")
    parser.add_argument("news", nargs="?", type=int, default=3000, metavar="NEWS",
                        help="/news?ts=<n> pages linked from the front page (default 3000)")
    parser.add_argument("repeat", nargs="?", type=int, default=2, metavar="REPEAT",
                        help="runs of each tree, interleaved (default 2)")
    args = parser.parse_args()
    if not (args.other / "tests/support/dupcrawl.py").is_file():
        parser.error(f"{args.other} is not a checkout of scrapy-aopic (no tests/support/dupcrawl.py)")
    other, news, repeat = args.other, args.news, args.repeat
    results: dict[str, list[dict]] = {"A": [], "B": []}
    for _ in range(repeat):
        for name, tree in (("A", other), ("B", HERE)):
            r = run(tree, news)
            results[name].append(r)
            print(name, json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    for key in ("wall", "cpu", "fetches", "refused", "refused_per_s"):
        a = statistics.median(r[key] for r in results["A"])
        b = statistics.median(r[key] for r in results["B"])
        print(f"{key}: A {a:.3f}  B {b:.3f}  B/A {b / a if a else float('nan'):.3f}")


if __name__ == "__main__":
    main()
