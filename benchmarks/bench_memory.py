"""Memory growth of a long crawl: resident memory against URLs known.

    python benchmarks/bench_memory.py [--pages 40000] [--hosts 16] [--out docs/_static/bench]

Serves a generated site of ``--site-pages`` pages (default 10^7, far more
than a crawl fetches) over ``--hosts`` loopback addresses (127.0.0.2, ...;
one threaded HTTP/1.1 server each, in this process): page ``i`` has its own
text and links to its 10 children ``10i+1 .. 10i+10`` (new URLs) and to 10
pages skewed towards the first ones (mostly known), so every page fetched
adds up to 10 URLs to the frontier, as on a large real site. The example project's
``broad`` spider crawls it with ``scrapy crawl``, ``CLOSESPIDER_PAGECOUNT =
--pages``, once with the add-on (everything on: frontier accounts and
history, canonical-URL memo, SimHash index, trap and robots memos) and once
as plain Scrapy (``-s ADDONS={}``: its default scheduler, memory queues and
fingerprint dupefilter), one after the other, on the same machine.

A small extension (:class:`MemorySampler`, loaded with ``-s EXTENSIONS=``)
records the crawl's current resident set (``/proc/self/statm``) and the
number of URLs it knows every ``--every`` responses: for the add-on, AOPIC
accounts of every state (``aopic/known_urls``); for plain Scrapy, its
dupefilter's fingerprints (every URL it has scheduled).

Writes ``memory-growth.png`` (both curves) and ``memory-growth.md`` into
``--out`` and prints the table: resident memory at each tenth of the crawl,
and the slope (bytes per URL known, least squares over the second half of the
crawl, where start-up allocations no longer blur it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopback import LoopbackSite

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
FAN_OUT = 10  #: new URLs per page (its children)
BACK_LINKS = 10  #: links per page to older pages


class MemorySampler:
    """Scrapy extension: every ``MEMORY_SAMPLE_EVERY`` responses, append
    ``{"responses", "rss", "known"}`` as a JSON line to ``MEMORY_SAMPLE_FILE``."""

    def __init__(self, crawler, path: str, every: int):
        self.crawler = crawler
        self.path = path
        self.every = every
        self.responses = 0
        self.page_size = os.sysconf("SC_PAGE_SIZE")
        from scrapy import signals

        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        return cls(crawler, settings["MEMORY_SAMPLE_FILE"], settings.getint("MEMORY_SAMPLE_EVERY", 1000))

    def known(self) -> int:
        scheduler = self.crawler.engine.scheduler
        frontier = getattr(scheduler, "frontier", None)
        if frontier is not None:  # scrapy-aopic: accounts of every state
            return frontier.engine.totals().known
        return len(scheduler.df.fingerprints)

    def rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self.page_size

    def sample(self) -> None:
        with open(self.path, "a") as out:
            out.write(json.dumps({"responses": self.responses, "rss": self.rss(), "known": self.known()}) + "\n")

    def response_received(self, response, request, spider):
        self.responses += 1
        if self.responses % self.every == 0:
            self.sample()

    def spider_closed(self, spider, reason):
        self.sample()


class GeneratedSite(LoopbackSite):
    """``size`` generated pages over loopback hosts 127.0.0.2 .. 127.0.0.(hosts+1)."""

    def __init__(self, size: int, hosts: int):
        super().__init__(hosts)
        self.size = size
        rng = random.Random(1)
        self.words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                      for _ in range(5000)]

    def url(self, i: int) -> str:
        return f"http://{self.host(i)}:{self.port}/page/{i}.html"

    def page(self, path: str) -> bytes | None:
        name = path.rsplit("/", 1)[-1]
        if not (path.startswith("/page/") and name.endswith(".html") and name[:-5].isdigit()):
            return None
        i = int(name[:-5])
        if i >= self.size:
            return None
        rng = random.Random(i)
        # Distinct text per page: near-identical pages would (rightly) be
        # dropped by the add-on's SimHash filter and stop the crawl growing.
        text = " ".join(rng.choices(self.words, k=200))
        # Bounded page numbers keep URLs of one length whatever the order
        # (depth-first would otherwise reach page 10^depth).
        older = {int(self.size ** rng.random()) - 1 for _ in range(BACK_LINKS)}
        children = range(FAN_OUT * i + 1, min(FAN_OUT * i + FAN_OUT + 1, self.size))
        anchors = "".join(f'<li><a href="{self.url(j)}">page {j}</a></li>' for j in [*children, *sorted(older)])
        return (f"<html><head><title>page {i}</title></head><body><h1>page {i}</h1>"
                f"<p>{text}</p><ul>{anchors}</ul></body></html>").encode()


def crawl(site: GeneratedSite, pages: int, every: int, aopic: bool, workdir: Path) -> list[dict]:
    name = "aopic" if aopic else "plain"
    samples = workdir / f"samples-{name}.jsonl"
    seeds = ",".join(site.url(i) for i in range(site.hosts))
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seeds}",
        "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "CONCURRENT_REQUESTS=16",
        "-s", "ROBOTSTXT_OBEY=False", "-s", "LOG_LEVEL=INFO", "-s", f"LOG_FILE={workdir / name}.log",
        "-s", "EXTENSIONS=" + json.dumps({"bench_memory.MemorySampler": 0}),
        "-s", f"MEMORY_SAMPLE_FILE={samples}", "-s", f"MEMORY_SAMPLE_EVERY={every}",
        # Items are not kept (no feed): the memory measured is the crawler's.
    ]
    if not aopic:
        command += ["-s", "ADDONS={}"]
    subprocess.run(command, cwd=ROOT / "example_project", check=True, stdout=subprocess.DEVNULL,
                   env={"PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}", "PATH": "/usr/bin:/bin"})
    return [json.loads(line) for line in samples.read_text().splitlines()]


def slope(samples: list[dict]) -> float:
    """Least-squares bytes per URL known over the second half of the crawl."""
    half = [s for s in samples if s["responses"] >= samples[-1]["responses"] / 2]
    xs, ys = [s["known"] for s in half], [s["rss"] for s in half]
    return statistics.linear_regression(xs, ys).slope if len(set(xs)) > 1 else float("nan")


def report(runs: dict[str, list[dict]], pages: int, hosts: int) -> str:
    lines = [f"Memory growth over a crawl of {pages:,} pages on {hosts} hosts "
             f"(about {FAN_OUT} new URLs per page)", "",
             "| responses | plain Scrapy: URLs known | RSS | scrapy-aopic: URLs known | RSS |",
             "|---:|---:|---:|---:|---:|"]
    plain, aopic = runs["plain Scrapy"], runs["scrapy-aopic"]
    for k in range(1, 11):
        target = pages * k // 10
        p = min(plain, key=lambda s: abs(s["responses"] - target))
        a = min(aopic, key=lambda s: abs(s["responses"] - target))
        lines.append(f"| {target:,} | {p['known']:,} | {p['rss'] / 2**20:.0f} MB "
                     f"| {a['known']:,} | {a['rss'] / 2**20:.0f} MB |")
    sp, sa = slope(plain), slope(aopic)
    lines += ["", f"Slope over the second half, bytes of resident memory per URL known: plain Scrapy "
                  f"{sp:.0f} B, scrapy-aopic {sa:.0f} B (ratio {sa / sp:.2f}).",
              f"At the end: plain Scrapy {plain[-1]['rss'] / 2**20:.0f} MB for {plain[-1]['known']:,} URLs, "
              f"scrapy-aopic {aopic[-1]['rss'] / 2**20:.0f} MB for {aopic[-1]['known']:,} URLs "
              f"(ratio {aopic[-1]['rss'] / plain[-1]['rss']:.2f})."]
    return "\n".join(lines) + "\n"


def plot(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, samples in runs.items():
        ax.plot([s["known"] / 1000 for s in samples], [s["rss"] / 2**20 for s in samples], label=label)
    ax.set_xlabel("URLs known (thousands)")
    ax.set_ylabel("resident memory (MB)")
    ax.set_title("Memory growth of a long crawl")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40_000, help="responses per crawl")
    parser.add_argument("--hosts", type=int, default=16, help="loopback hosts (127.0.0.2, ...)")
    parser.add_argument("--site-pages", type=int, default=10_000_000, help="pages of the generated site")
    parser.add_argument("--every", type=int, default=500, help="responses between samples")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_static" / "bench")
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {}
    with GeneratedSite(args.site_pages, args.hosts) as site, tempfile.TemporaryDirectory() as tmp:
        for label, aopic in (("plain Scrapy", False), ("scrapy-aopic", True)):
            start = time.monotonic()
            runs[label] = crawl(site, args.pages, args.every, aopic, Path(tmp))
            last = runs[label][-1]
            print(f"{label}: {last['responses']:,} responses, {last['known']:,} URLs known, "
                  f"{last['rss'] / 2**20:.0f} MB resident, {time.monotonic() - start:.0f} s", flush=True)
    text = report(runs, args.pages, args.hosts)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory-growth.md").write_text(text)
    plot(runs, args.out / "memory-growth.png")
    print(f"wrote {args.out / 'memory-growth.md'} and {args.out / 'memory-growth.png'}")


if __name__ == "__main__":
    main()
