"""The demo (``make demo``): crawl the bundled local site with scrapy-aopic.

1. generates the demo site (``demosite``) and serves it on 127.0.0.2..9;
2. runs a real ``scrapy crawl broad`` of this project (scrapy-aopic switched
   on by ``ADDONS`` in settings.py) with a page budget smaller than the site,
   so the order of fetching decides what gets fetched;
3. prints the top pages by importance from the export
   (``AOPIC_EXPORT_IMPORTANCE``), where the export went, and the share of
   the site's true PageRank the fetched pages hold;
4. runs the same crawl with plain Scrapy (``-s ADDONS={}``) as the baseline
   and prints both figures side by side (``--no-baseline`` skips it).

Run from the repository root: ``.venv/bin/python example_project/run_demo.py``.
Outputs go to ``example_project/.demo/``. Exit status 0 when the crawl
worked, 1 (with the reason) when it did not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent
REPO_ROOT = PROJECT_DIR.parent
sys.path.insert(0, str(PROJECT_DIR))

from demosite import ServedSite, generate, reference_crawl, serve  # noqa: E402

CRAWL_TIMEOUT = 180  # seconds before a crawl subprocess counts as hung
_STAT_LINE = re.compile(r"'([\w/]+)': ([-+\d.e]+|'[^']*')")


class CrawlFailed(Exception):
    """The crawl subprocess did not finish a crawl."""


def read_stats(log_path: Path) -> dict[str, object]:
    """Numbers and strings of the last stats dump in a Scrapy log file."""
    text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
    start = text.rfind("Dumping Scrapy stats:")
    stats: dict[str, object] = {}
    if start < 0:
        return stats
    for key, value in _STAT_LINE.findall(text[start:]):
        if value.startswith("'"):
            stats[key] = value.strip("'")
        else:
            stats[key] = float(value) if any(c in value for c in ".e") else int(value)
    return stats


def read_export(path: Path) -> list[dict]:
    """The importance export: one JSON object per line."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_crawl(served: ServedSite, label: str, out_dir: Path, budget: int, *, aopic: bool,
              jobdir: str | None, extra: list[str]) -> dict:
    """Run ``scrapy crawl broad`` against the served site; return what the
    server saw and what the crawl reported. Raises CrawlFailed."""
    served.reset_counts()
    log_path = out_dir / f"crawl-{label}.log"
    items_path = out_dir / f"items-{label}.jsonl"
    export_path = out_dir / "importance.jsonl"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "broad",
        "-a", "seeds=" + ",".join(served.seeds),
        "-s", f"CLOSESPIDER_PAGECOUNT={budget}",
        "-s", f"LOG_FILE={log_path}",
        "-s", "LOG_FILE_APPEND=False",
        "-O", str(items_path),
    ]
    if aopic:
        export_path.unlink(missing_ok=True)
        command += ["-s", f"AOPIC_EXPORT_IMPORTANCE={export_path}"]
        if jobdir:
            command += ["-s", f"JOBDIR={jobdir}"]
    else:
        command += ["-s", "ADDONS={}"]
    command += extra
    env = dict(os.environ)
    # The package is importable from the checkout even when not installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    started = time.monotonic()
    try:
        process = subprocess.run(command, cwd=PROJECT_DIR, env=env, timeout=CRAWL_TIMEOUT,
                                 capture_output=True, text=True)
    except subprocess.TimeoutExpired as exc:
        raise CrawlFailed(f"the {label} crawl did not finish within {CRAWL_TIMEOUT} s (log: {log_path})") from exc
    seconds = time.monotonic() - started
    stats = read_stats(log_path)
    if process.returncode != 0 or stats.get("finish_reason") not in ("finished", "closespider_pagecount"):
        tail = (process.stderr or "").strip().splitlines()[-15:]
        if log_path.exists():
            tail += log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise CrawlFailed(
            f"the {label} crawl failed (exit status {process.returncode}, "
            f"finish reason {stats.get('finish_reason')!r}); log: {log_path}\n  " + "\n  ".join(tail))
    fetches = sum(1 for f in served.log if f.kind not in ("robots", "redirect"))
    if fetches == 0:
        raise CrawlFailed(f"the {label} crawl fetched nothing from the demo site; log: {log_path}")
    kinds = served.kind_counts()
    page_counts = served.page_fetch_counts()
    return {
        "label": label,
        "seconds": seconds,
        "stats": stats,
        "fetches": fetches,
        "real_pages": len(page_counts),
        "refetched": sum(n - 1 for n in page_counts.values()),
        "trap_fetches": sum(n for kind, n in kinds.items() if kind.startswith("trap:")),
        "duplicate_fetches": sum(kinds[k] for k in ("print", "syndicated", "mirror")),
        "captured": served.captured_pagerank(),
        "log": log_path,
        "items": items_path,
        "export": export_path if aopic else None,
    }


def print_top(export_path: Path, served: ServedSite, count: int = 10) -> None:
    """The top of the importance export, with each page's true PageRank rank."""
    if not export_path.exists():
        raise CrawlFailed(
            f"no importance export at {export_path}: is the scrapy-aopic add-on enabled in "
            "example_project/settings.py (ADDONS) and AOPIC_EXPORT_IMPORTANCE supported?")
    rows = read_export(export_path)
    ranks = served.pagerank()
    true_order = {url: i + 1 for i, url in enumerate(sorted(ranks, key=ranks.get, reverse=True))}
    print(f"Top {min(count, len(rows))} pages by importance (of {len(rows)} known URLs):")
    print("        importance     cash  history  visits  true PR rank  url")
    for i, row in enumerate(rows[:count], 1):
        canonical = served.canonical(row["url"])
        rank = true_order.get(canonical) if canonical else None
        print(f"  {i:>3}.  {row['importance']:9.4f}  {row['cash']:7.4f}  {row['history']:7.4f}  "
              f"{row['visits']:>6}  {rank if rank else '-':>12}  {row['url']}")
    print(f"Importance export: {export_path}")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300, help="articles on the demo site (default 300)")
    parser.add_argument("--hosts", type=int, default=8, help="hosts of the demo site (default 8)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the generated site (default 42)")
    parser.add_argument("--budget", type=float, default=0.6,
                        help="page budget as a share of the real pages (default 0.6)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the plain-Scrapy baseline crawl")
    parser.add_argument("--jobdir", help="JOBDIR for the scrapy-aopic crawl (resumable)")
    parser.add_argument("--out", default=str(PROJECT_DIR / ".demo"), help="output directory")
    parser.add_argument("scrapy_args", nargs="*", help="extra arguments for scrapy crawl (after --)")
    args = parser.parse_args(argv)

    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    site = generate(pages=args.pages, hosts=args.hosts, seed=args.seed)
    real = len(site.real_pages())
    budget = max(1, int(args.budget * real))
    # The slow page must outlast DOWNLOAD_TIMEOUT (5 s in settings.py) to time out.
    with serve(site, slow_seconds=8.0) as served:
        ips = [h.ip for h in site.hosts]
        print(f"Demo site: {len(site.hosts)} hosts ({ips[0]} .. {ips[-1]}, port {served.port}), {real} real pages "
              f"plus traps, near-duplicates, dead links, redirects, binary files.")
        print(f"Seeds: {' '.join(served.seeds)}")
        print(f"Budget: CLOSESPIDER_PAGECOUNT={budget} ({args.budget:.0%} of the real pages)\n")
        try:
            print("[1] scrapy crawl broad, with scrapy-aopic (ADDONS in example_project/settings.py) ...", flush=True)
            main_run = run_crawl(served, "aopic", out_dir, budget, aopic=True, jobdir=args.jobdir,
                                 extra=args.scrapy_args)
            stats = main_run["stats"]
            print(f"    done in {main_run['seconds']:.1f} s: {main_run['fetches']} responses, "
                  f"finish reason {stats.get('finish_reason')}")
            if "aopic/conservation_error" in stats:
                seeds, total = stats.get("aopic/cash_injected", 0.0), stats.get("aopic/cash_injected_total", 0.0)
                parts = f" (seeds {seeds:.6g}, URLs discovered {total - seeds:.6g})" if total > seeds else ""
                print(f"    books: cash injected {total:.6g}{parts}, conservation error "
                      f"{stats['aopic/conservation_error']:.2g}, lambda visits {stats.get('aopic/lambda_visits')}, "
                      f"sum of history {stats.get('aopic/history_sum', 0):.3f}")
            print()
            print_top(main_run["export"], served)
            print(f"Items: {main_run['items']}   Log: {main_run['log']}\n")
            baseline = None
            if not args.no_baseline:
                print("[2] baseline: the same crawl with plain Scrapy (-s ADDONS={}) ...", flush=True)
                baseline = run_crawl(served, "plain", out_dir, budget, aopic=False, jobdir=None,
                                     extra=args.scrapy_args)
                print(f"    done in {baseline['seconds']:.1f} s: {baseline['fetches']} responses\n")
        except CrawlFailed as exc:
            print(f"\nDEMO FAILED: {exc}", file=sys.stderr)
            return 1

    def line(run: dict) -> str:
        return (f"{run['captured']:.1%} ({run['real_pages']} of {real} real pages, "
                f"{run['trap_fetches']} fetches in traps, {run['duplicate_fetches']} near-duplicates, "
                f"{run['refetched']} pages fetched again)")

    fetches = main_run["fetches"]
    references = {order: reference_crawl(site, order, fetches).captured_pagerank for order in ("bfs", "omniscient")}
    print(f"Share of the site's true PageRank captured with about {fetches} responses:")
    print(f"  scrapy-aopic   {line(main_run)}")
    if baseline:
        print(f"  plain Scrapy   {line(baseline)}")
    print(f"  (simulated on the same site and budget: breadth-first {references['bfs']:.1%}, "
          f"omniscient ceiling {references['omniscient']:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
