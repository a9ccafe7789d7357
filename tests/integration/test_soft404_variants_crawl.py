"""A crawl of the trap site with the other soft-404 generators and an API
reference of template pages (issue 16, item 3).

The spaces (``template``: "not found" in the articles' own template;
``pathquery``: a random token in the path and a query, one directory per
URL; ``dates``: ``/archive/?day=``) are stopped after a few fetches each,
and the API reference's pages of one template (functions that differ only in
their name, as rustdoc's ``fn.vcopy_lane_*``) are fetched and never refused:
on main, every one after the second was refused as a soft 404."""

from __future__ import annotations

import pytest

from tests.support.trapsite import SiteServer, TrapSite, fetch_figures, real_refused, run_crawl

VARIANTS = ("template", "pathquery", "dates")
API = (8, 24)  # distinct function pages, template ones


@pytest.fixture(scope="module")
def variants_crawl():
    site = TrapSite(articles=300, soft404=VARIANTS, api=API)
    with SiteServer(site) as server:
        # Without near-duplicate folding: the template pages' text is the
        # same but for their names, and folding them is the duplicate
        # detector's call (issue 16, item 2), not the soft-404 rules'.
        settings = {"ADDONS": {"scrapy_aopic.Addon": 0}, "CLOSESPIDER_PAGECOUNT": 600,
                    "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "AOPIC_SIMHASH_ENABLED": False}
        report = run_crawl([server.base + "/"], settings)
        log = server.take_log()
        base = server.base
    return site, base, report, log


def test_template_pages_of_real_directories_are_not_refused(variants_crawl):
    site, base, report, log = variants_crawl
    api = {p for p in site.real_pages() if p.startswith("/api/")}
    fetched = {target for _, target, kind, _ in log if kind == "real"}
    assert api <= fetched, sorted(api - fetched)
    assert real_refused(report, site, base) == []
    # The template pages pass by sparing (read: an error shape in a directory
    # of real pages) or unread (once /api/ holds four distinct shapes), which
    # of the two depends on the order answers arrive in.
    stats = report["stats"]
    assert stats.get("aopic/trap/soft404_spared", 0) + stats.get("aopic/trap/soft404_unread", 0) >= API[1] - 2


def test_other_soft404_spaces_are_stopped(variants_crawl):
    site, _, report, log = variants_crawl
    figures = fetch_figures(log, site.real_pages(), site.broken_link_paths())
    assert figures["fetches"] >= 400
    for variant in VARIANTS:
        # Three to learn the shape, what was in flight, and (template) a page
        # whose random title words occur in the template's text.
        assert figures["by_kind"].get(f"trap:soft404-{variant}", 0) <= 10, figures["by_kind"]
    spaces = sum(n for kind, n in figures["by_kind"].items() if kind.startswith("trap:soft404-"))
    assert spaces / figures["fetches"] < 0.05, figures["by_kind"]
    stats = report["stats"]
    assert stats["aopic/refused/trap/soft404_dir"] > 50
    assert stats["aopic/conservation_error"] <= 1e-9 * stats["aopic/cash_injected_total"]
