"""Synthetic multi-site webs with traps and link farms, reproducible from a seed.

The model keeps the shapes that decide how crawl orderings compare:

- **sites** of power-law sizes (a few big sites, many small ones);
- inside a site, a **directory tree** (every page linked from its parent), a
  **home page** and a few **menu** pages linked from every page of the site
  (templates), and **content links** to pages chosen in proportion to a
  heavy-tailed "fitness" that fades with depth: in-degrees are scale-free and
  important pages tend to sit near the top, as on real sites;
- **cross-site links** (a share of content links) to other sites' home pages
  (by site popularity) or to popular pages anywhere;
- **crawler traps**: calendar-like subtrees hanging off a normal page of a
  normal site (same host), each page linking to a few new trap pages, back
  to the trap's entry and to the site's home, large and poorly linked from
  outside;
- **link farms**: dense clusters of spam pages on their own hosts, reached
  by a few spam links from normal pages, linking to each other and to a few
  "client" pages they promote.

Every array comes from one ``numpy.random.Generator(seed)``: the same
arguments give the same graph, bit for bit.
"""

from __future__ import annotations

import numpy as np

from .graph import FARM, NORMAL, TRAP, Graph


def _site_sizes(rng, n_pages: int, n_sites: int, exponent: float, min_size: int) -> np.ndarray:
    """Power-law site sizes (Zipf over ranks) summing to ``n_pages``."""
    weights = (np.arange(1, n_sites + 1, dtype=np.float64)) ** -exponent
    rng.shuffle(weights)
    sizes = np.maximum(min_size, np.floor(weights / weights.sum() * n_pages)).astype(np.int64)
    # Fix the rounding so the sizes sum exactly to n_pages (adjust the biggest).
    sizes[np.argmax(sizes)] += n_pages - sizes.sum()
    return sizes


def _tree_depth(local: np.ndarray, branching: int) -> np.ndarray:
    """Depth of node ``local`` in a complete ``branching``-ary tree (root 0)."""
    depth = np.zeros(len(local), dtype=np.int64)
    x = local.copy()
    while True:
        moving = x > 0
        if not moving.any():
            return depth
        x[moving] = (x[moving] - 1) // branching
        depth[moving] += 1


def scale_free_web(
    n_pages: int = 100_000,
    *,
    seed: int = 0,
    pages_per_site: float = 100.0,
    site_exponent: float = 1.0,
    branching: int = 8,
    menu_size: int = 4,
    content_links: float = 8.0,
    cross_site: float = 0.15,
    fitness_alpha: float = 1.3,
    depth_decay: float = 0.5,
    trap_share: float = 0.10,
    pages_per_trap: int = 2_000,
    trap_fanout: int = 3,
    trap_linkers: int = 5,
    farm_share: float = 0.02,
    pages_per_farm: int = 100,
    farm_links: int = 20,
    n_seeds: int = 10,
    name: str | None = None,
) -> Graph:
    """A scale-free multi-site web of ``n_pages`` pages (see module doc).

    :param pages_per_site: mean site size; sizes follow Zipf(``site_exponent``).
    :param branching: fan-out of each site's directory tree.
    :param menu_size: pages below the home linked from every page of a site.
    :param content_links: mean number of content links per page (geometric).
    :param cross_site: share of content links that leave the site.
    :param fitness_alpha: Pareto tail of page fitness (smaller = more skew).
    :param depth_decay: fitness is divided by ``(1 + depth) ** depth_decay``.
    :param trap_share: share of pages inside crawler traps.
    :param pages_per_trap: size of one trap.
    :param trap_fanout: new trap pages each trap page links to.
    :param trap_linkers: pages of the trap's site that link to its entry;
        0: every page (a calendar widget in the site's template).
    :param farm_share: share of pages inside link farms.
    :param pages_per_farm: size of one link farm.
    :param farm_links: links from each farm page to other pages of its farm.
    :param n_seeds: seeds: home pages of that many sites, drawn by popularity.
    """
    rng = np.random.default_rng(seed)
    n_traps = int(round(n_pages * trap_share / pages_per_trap)) if trap_share > 0 else 0
    n_farms = int(round(n_pages * farm_share / pages_per_farm)) if farm_share > 0 else 0
    n_normal = n_pages - n_traps * pages_per_trap - n_farms * pages_per_farm
    if n_normal < 10:
        raise ValueError("too many trap/farm pages for the graph size")
    n_sites = max(1, int(round(n_normal / pages_per_site)))

    # -- normal sites: pages [start[k], start[k] + size[k]) -----------------------
    sizes = _site_sizes(rng, n_normal, n_sites, site_exponent, min_size=2)
    start = np.zeros(n_sites + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    site = np.repeat(np.arange(n_sites), sizes)
    local = np.arange(n_normal) - start[site]
    depth = _tree_depth(local, branching)
    fitness = (rng.pareto(fitness_alpha, n_normal) + 1.0) / (1.0 + depth) ** depth_decay
    cum_fitness = np.concatenate(([0.0], np.cumsum(fitness)))
    # Popular sites are the big ones, with noise.
    site_pop = sizes.astype(np.float64) * rng.lognormal(0.0, 1.0, n_sites)
    cum_site_pop = np.cumsum(site_pop)

    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    ranks: list[np.ndarray] = []  # position on the page: smaller = earlier

    def add(src, dst, rank):
        srcs.append(np.asarray(src, dtype=np.int64))
        dsts.append(np.asarray(dst, dtype=np.int64))
        ranks.append(np.broadcast_to(np.asarray(rank, dtype=np.float64), len(srcs[-1])).copy())

    home = start[site]
    # Header: home and menu (the first children of the home).
    add(np.arange(n_normal), home, 0.0)
    for j in range(1, menu_size + 1):
        has = sizes[site] > j
        add(np.flatnonzero(has), home[has] + j, float(j))
    # Directory tree: parent -> child, after the menu.
    child = np.flatnonzero(local > 0)
    add(home[child] + (local[child] - 1) // branching, child, 10.0 + local[child] % branching)
    # Content links: geometric count, targets by fitness.
    counts = rng.geometric(1.0 / (1.0 + content_links), n_normal) - 1
    src = np.repeat(np.arange(n_normal), counts)
    position = 100.0 + rng.random(len(src))
    leaving = rng.random(len(src)) < cross_site
    inside = ~leaving
    s_in = src[inside]
    lo, hi = cum_fitness[start[site[s_in]]], cum_fitness[start[site[s_in]] + sizes[site[s_in]]]
    dst_in = np.searchsorted(cum_fitness, lo + rng.random(len(s_in)) * (hi - lo), side="right") - 1
    add(s_in, np.clip(dst_in, start[site[s_in]], start[site[s_in]] + sizes[site[s_in]] - 1), position[inside])
    s_out = src[leaving]
    to_home = rng.random(len(s_out)) < 0.5
    target_site = np.searchsorted(cum_site_pop, rng.random(to_home.sum()) * cum_site_pop[-1], side="right")
    add(s_out[to_home], start[np.minimum(target_site, n_sites - 1)], position[leaving][to_home])
    anywhere = np.searchsorted(
        cum_fitness, rng.random((~to_home).sum()) * cum_fitness[-1], side="right"
    ) - 1
    add(s_out[~to_home], np.clip(anywhere, 0, n_normal - 1), position[leaving][~to_home])

    labels = [np.full(n_normal, NORMAL, dtype=np.int8)]
    host = [site.astype(np.int32)]
    host_names = [f"site{k}.example" for k in range(n_sites)]
    next_node = n_normal

    # -- traps: subtrees on the host of a normal page --------------------------------
    for _ in range(n_traps):
        nodes = np.arange(next_node, next_node + pages_per_trap)
        next_node += pages_per_trap
        # The entry hangs off a page of a site drawn by popularity, and is
        # linked from a few pages of that site (a calendar widget).
        k = min(int(np.searchsorted(cum_site_pop, rng.random() * cum_site_pop[-1], side="right")), n_sites - 1)
        if trap_linkers:
            linkers = start[k] + rng.integers(0, sizes[k], size=min(trap_linkers, int(sizes[k])))
        else:
            linkers = start[k] + np.arange(sizes[k])
        add(linkers, np.full(len(linkers), nodes[0]), 50.0)
        idx = np.arange(pages_per_trap)
        # Every trap page links to trap_fanout "next" pages and back to the entry.
        for f in range(1, trap_fanout + 1):
            nxt = idx * trap_fanout + f
            ok = nxt < pages_per_trap
            add(nodes[idx[ok]], nodes[nxt[ok]], float(f))
        add(nodes[1:], np.full(pages_per_trap - 1, nodes[0]), 0.0)
        # The site's template: trap pages link to the home like any page.
        add(nodes, np.full(pages_per_trap, start[k]), -1.0)
        labels.append(np.full(pages_per_trap, TRAP, dtype=np.int8))
        host.append(np.full(pages_per_trap, k, dtype=np.int32))

    # -- link farms: dense clusters on their own hosts ---------------------------------
    for f in range(n_farms):
        nodes = np.arange(next_node, next_node + pages_per_farm)
        next_node += pages_per_farm
        entry_from = rng.integers(0, n_normal, size=3)
        add(entry_from, rng.choice(nodes, size=3), 200.0)
        src = np.repeat(nodes, farm_links)
        add(src, rng.choice(nodes, size=len(src)), rng.random(len(src)))
        clients = np.searchsorted(cum_fitness, rng.random(3) * cum_fitness[-1], side="right") - 1
        add(np.repeat(nodes, 3), np.tile(np.clip(clients, 0, n_normal - 1), pages_per_farm), 5.0)
        farm_hosts = len(host_names) + np.arange(pages_per_farm) % 10
        host_names += [f"farm{f}-{j}.example" for j in range(10)]
        labels.append(np.full(pages_per_farm, FARM, dtype=np.int8))
        host.append(farm_hosts.astype(np.int32))

    src = np.concatenate(srcs)
    dst = np.concatenate(dsts)
    rank = np.concatenate(ranks)
    order = np.lexsort((rank, src))  # page order: by source, then position
    seeds = np.unique(
        start[np.minimum(np.searchsorted(cum_site_pop, rng.random(n_seeds) * cum_site_pop[-1], side="right"), n_sites - 1)]
    )
    return Graph.from_edges(
        n_pages,
        src[order],
        dst[order],
        host=np.concatenate(host),
        host_names=host_names,
        seeds=seeds,
        labels=np.concatenate(labels),
        name=name or f"synthetic-{_short(n_pages)}",
        meta={
            "generator": "scale_free_web",
            "seed": seed,
            "n_pages": n_pages,
            "sites": n_sites,
            "traps": n_traps,
            "farms": n_farms,
        },
    )


def _short(n: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)
