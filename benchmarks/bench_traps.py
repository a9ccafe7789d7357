"""Trap waste and real-page reach with a fixed fetch budget (issue 3, SPEC 8).

Serves the trap site of ``tests/support/trapsite.py`` on 127.0.0.1 (real content next
to an endless calendar, per-page session ids, a relative-link loop, a
counter parameter, a link farm on a second host, soft 404s) and runs real
``scrapy crawl``s, one process each, side by side in the same run:

* ``aopic``: ``ADDONS = {"scrapy_aopic.Addon": 0}``, everything default
  (discovery cash 0.01 with ``--allowed-domains``, a site crawl; none
  without, an open crawl);
* ``aopic-pending``: the same with ``AOPIC_LAMBDA_TARGETS = "pending"``
  (lambda's equal dividend, the default before issue 16; the default
  ``"pending-cash"`` pays in proportion to cash);
* ``aopic-no-discovery``: the same with ``AOPIC_DISCOVERY_CASH = 0`` (no
  cash brought in by discovered URLs, the default on an open crawl);
* ``aopic-discovery``: the same with ``AOPIC_DISCOVERY_CASH = 0.01`` (the
  simulator's share, whatever the default);
* ``scrapy-default``: Scrapy's own order (LIFO: depth-first);
* ``scrapy-bfs``: breadth-first (``DEPTH_PRIORITY=1`` + FIFO queues);
* ``reference``: breadth-first on the same site with the traps switched off.

Every crawl obeys robots.txt and stops at ``CLOSESPIDER_PAGECOUNT`` =
budget. Figures are counted server-side: fetches, fetches inside traps,
repeated fetches of a real page (duplicates), distinct real pages reached.
The first fetch of each broken link of a real page (the trap site answers it
with a soft 404) is also counted apart (``broken``): any crawler pays it, as
it pays a link answering 404, which is not counted as waste here; ``waste-b``
is waste without those fetches. Both are printed.
Targets: waste (traps + duplicates) < 2 % of fetches; real pages reached >=
99 % of the trap-free breadth-first crawl's. For the AOPIC orders it also
prints the share of lambda's payouts that landed in pending trap URLs
(``lambda->trap``, measured in the crawl's process at each lambda visit).

Two concurrency settings are measured: Scrapy's defaults (16 requests, 8
per host) and 16 per host. With 8 per host, the frontier hands the free
half of the concurrency to the only other ready host, the link farm (see
the printed note).

    .venv/bin/python benchmarks/bench_traps.py [--budget 1500] [--articles 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from arglists import names, numbers, words  # noqa: E402

from tests.support.trapsite import SOFT404_VARIANTS, SiteServer, TrapSite, fetch_figures, real_refused, run_crawl  # noqa: E402

from scrapy_aopic.hygiene.canonical import Canonicalizer  # noqa: E402
from scrapy_aopic.hygiene.traps import TrapGuard  # noqa: E402
from scrapy_aopic.sim.policies import SCRAPY_BREADTH_FIRST  # noqa: E402

ORDERS = {
    "aopic": {"ADDONS": {"scrapy_aopic.Addon": 0}},
    # lambda's equal dividend (the default before issue 16 pays in proportion to cash)
    "aopic-pending": {"ADDONS": {"scrapy_aopic.Addon": 0}, "AOPIC_LAMBDA_TARGETS": "pending"},
    # no cash brought in by discovered URLs (the default before issue 18)
    "aopic-no-discovery": {"ADDONS": {"scrapy_aopic.Addon": 0}, "AOPIC_DISCOVERY_CASH": 0},
    # discovery cash on at the simulator's share (issue 18), whatever the default
    "aopic-discovery": {"ADDONS": {"scrapy_aopic.Addon": 0}, "AOPIC_DISCOVERY_CASH": 0.01},
    "scrapy-default": {},
    "scrapy-bfs": SCRAPY_BREADTH_FIRST,
}


def bench_canonical(n: int = 20000) -> None:
    """Microseconds per canonicalization, cold (no cache) and memoized."""
    rng = random.Random(3)
    urls = []
    for i in range(n):
        urls.append(
            f"http://WWW.Site{rng.randrange(500)}.example.co.uk:80/news/{rng.randrange(10**6)}/"
            f"some-article-title-{i}.html;jsessionid={rng.randrange(10**9)}"
            f"?b={rng.randrange(9)}&a=1&utm_source=x#frag"
        )
    cold = Canonicalizer(cache_size=0)
    t = timeit.timeit(lambda: [cold(u) for u in urls], number=1)
    print(f"canonical_url, cold (every URL new):      {t / n * 1e6:6.1f} us/URL")
    warm = Canonicalizer()
    nav = urls[:200]  # a site's navigation links, repeated on every page
    for u in nav:
        warm(u)
    t = timeit.timeit(lambda: [warm(u) for u in nav], number=50)
    print(f"canonical_url, memoized (repeated links): {t / (50 * len(nav)) * 1e6:6.2f} us/URL")
    guard = TrapGuard()
    keys = [cold(u) for u in urls]
    t = timeit.timeit(lambda: [guard.rule(u, k, 3) for u, k in zip(urls, keys)], number=1)
    print(f"trap rules (all, per link):               {t / n * 1e6:6.1f} us/URL")
    from w3lib.url import canonicalize_url

    t = timeit.timeit(lambda: [canonicalize_url(u) for u in urls], number=1)
    print(f"w3lib canonicalize_url alone, same URLs:  {t / n * 1e6:6.1f} us/URL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--articles", type=int, default=2000)
    parser.add_argument("--orders", type=names(ORDERS, none=False), default=list(ORDERS),
                        help="comma-separated subset of " + ",".join(ORDERS))
    parser.add_argument("--per-host", type=numbers, default=[8, 16], help="CONCURRENT_REQUESTS_PER_DOMAIN values")
    parser.add_argument("--soft404", type=names(SOFT404_VARIANTS, none=False), default=[], help="comma-separated soft-404 variants to add (" + ",".join(SOFT404_VARIANTS) + ")")
    parser.add_argument("--event-days", type=float, default=0.0,
                        help="share of the calendar's days 3/14/25 of 2024-2026 holding a real event page (0: none)")
    parser.add_argument("--farm-share", type=float, default=0.02, help="share of articles linking the link farm")
    parser.add_argument("--allowed-domains", type=words, default=None,
                        help="the spider's allowed_domains, comma-separated (default: none, an open crawl; "
                             "127.0.0.1 keeps the crawl off the link farm's host, a site crawl)")
    parser.add_argument("--no-micro", action="store_true", help="skip the canonicalization timings")
    args = parser.parse_args()
    orders = {name: ORDERS[name] for name in args.orders}
    variants = tuple(args.soft404)

    if not args.no_micro:
        bench_canonical()
        print()
    site_args = {"articles": args.articles, "soft404": variants, "event_days": args.event_days,
                 "farm_share": args.farm_share}
    site, clean = TrapSite(**site_args), TrapSite(args.articles, traps=False)
    real = site.real_pages()
    broken = site.broken_link_paths()
    print(f"site: {len(real)} real pages; budget {args.budget} pages per crawl")
    for per_host in map(int, args.per_host):
        common = {"CLOSESPIDER_PAGECOUNT": args.budget, "CONCURRENT_REQUESTS": 16,
                  "CONCURRENT_REQUESTS_PER_DOMAIN": per_host}
        with SiteServer(clean) as server:
            run_crawl([server.base + "/"], {**ORDERS["scrapy-bfs"], **common}, allowed_domains=args.allowed_domains)
            reference = fetch_figures(server.take_log(), real)
        print(f"\nCONCURRENT_REQUESTS=16, CONCURRENT_REQUESTS_PER_DOMAIN={per_host}")
        print(f"{'order':<22}{'fetches':>8}{'traps':>7}{'dups':>6}{'waste':>8}{'real':>7}{'vs ref':>8}{'secs':>7}"
              f"{'trap fetch':>11}{'lambda->trap':>13}{'broken':>7}{'waste-b':>8}")
        print(f"{'reference (no traps)':<22}{reference['fetches']:>8}{'-':>7}{reference['duplicate_fetches']:>6}"
              f"{'-':>8}{reference['real_reached']:>7}{'100.0%':>8}")
        with SiteServer(site) as server:
            for name, order in orders.items():
                start = time.perf_counter()
                probe = site_args if name.startswith("aopic") else None
                report = run_crawl([server.base + "/"], {**order, **common}, lambda_probe=probe,
                                   allowed_domains=args.allowed_domains)
                secs = time.perf_counter() - start
                server_log = server.take_log()
                fig = fetch_figures(server_log, real, broken)
                if "accounts" in report:
                    fig["real_refused"] = len(real_refused(report, site, server.base))
                reach = fig["real_reached"] / reference["real_reached"]
                lam = report.get("lambda")
                lam_share = f"{lam['to_traps'] / lam['paid']:.1%}" if lam and lam["paid"] else "-"
                trap_share = fig["trap_fetches"] / fig["fetches"] if fig["fetches"] else 0.0
                print(f"{name:<22}{fig['fetches']:>8}{fig['trap_fetches']:>7}{fig['duplicate_fetches']:>6}"
                      f"{fig['waste']:>8.1%}{fig['real_reached']:>7}{reach:>8.1%}{secs:>7.1f}"
                      f"{trap_share:>11.1%}{lam_share:>13}{fig['broken_first']:>7}{fig['waste_beyond_broken']:>8.1%}")
                if name.startswith("aopic"):
                    stats = report["stats"]
                    traps = {k: v for k, v in stats.items() if k.startswith(("aopic/trap/", "aopic/refused/", "aopic/failed/trap/"))}
                    kinds = {k: v for k, v in sorted(fig["by_kind"].items()) if k.startswith("trap")}
                    print(f"{'':<22}trap fetches by kind: {kinds}")
                    print(f"{'':<22}waste by kind: " + ", ".join(
                        f"{k[5:]} {v / fig['fetches']:.1%}" for k, v in kinds.items()))
                    print(f"{'':<22}real pages refused (link or fetch): {fig.get('real_refused', '-')}")
                    events = site.event_pages()
                    if events:
                        served = {target for _, target, kind, _ in server_log if kind == "real"}
                        print(f"{'':<22}calendar days with a real event reached: {len(events & served)} of {len(events)}")
                    print(f"{'':<22}refusals: {traps}")
                    print(f"{'':<22}conservation error {stats.get('aopic/conservation_error')}, "
                          f"private fetched {fig['private_fetches']}")
    print("\nwaste = (trap + duplicate fetches) / fetches; real = distinct real pages served;"
          " vs ref = real / real of the trap-free breadth-first crawl; trap fetch = trap fetches / fetches;"
          " lambda->trap = share of lambda's payouts that landed in pending trap URLs (AOPIC orders);"
          " broken = first fetches of real pages' broken links (soft 404s here; a 404 is not waste);"
          " waste-b = waste without them; secs = the crawl process's wall time, AOPIC orders'"
          " including the lambda->trap probe, which walks every account at every lambda visit"
          " (not the crawl's speed).")


if __name__ == "__main__":
    main()
