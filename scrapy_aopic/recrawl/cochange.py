"""Pages that change together: a change found on one hints at its partners.

A site changes by edits that touch several pages at once (a commit, a
release, a rebuilt section): on the real traces of
``benchmarks/recrawl_traces.py`` 22 % (the PEPs) to 93 % of the changes share their
instant with a change of another page of the same trace. A revisit that
finds a page changed therefore says that its usual partners have probably
changed too, long before their own revisits would find out.

What a revisit sees is only that the page changed somewhere in
``(previous visit, now]``. Two pages of one host whose *changed* windows
overlap within ``window`` seconds count one co-change each way; a page ``B``
is a *partner* of ``A`` once it has co-changed with ``A`` at least
``min_count`` times and in at least ``threshold`` of ``A``'s changes seen
(a quarter by default: :setting:`AOPIC_RECRAWL_COCHANGE_SHARE`).
Chance overlaps exist (two pages of a busy host both change most days);
with ``chance`` (:setting:`AOPIC_RECRAWL_COCHANGE_CHANCE`, off) a pair's
share is measured above what the partner's own rate would give by chance.

The planner (:meth:`~scrapy_aopic.recrawl.planner.RecrawlPlanner.on_visit`)
asks for the partners of every page a revisit found changed and brings a
partner's revisit forward to now when its last visit was too early to have
seen that change (before the middle of the changed page's window).

Memory: per page that changed, a count and at most ``max_partners``
partner counts; per host, the changed windows of the last ``window``
seconds (at most ``max_recent``). Learnt from change events only, so it
works without link counts or ``Last-Modified``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from . import checks

DAY = 86400.0


class CoChangeModel:
    """Which pages change together, learnt from overlapping changed windows.

    :param window: seconds a changed window is kept to be matched with
        later ones (and how far apart two overlapping windows may end).
    :param threshold: the share of a page's changes a partner must have
        shared.
    :param min_count: the co-changes a partner must have shared.
    :param max_partners: partner counts kept per page (the smallest is
        dropped for a new one).
    :param max_recent: changed windows kept per host.
    """

    def __init__(
        self,
        window: float = 3 * DAY,
        threshold: float = 0.25,
        min_count: int = 2,
        max_partners: int = 32,
        max_recent: int = 256,
    ):
        self.window = float(window)
        self.threshold = float(threshold)
        self.min_count = int(min_count)
        self.max_partners = int(max_partners)
        self.max_recent = int(max_recent)
        #: host -> changed windows (url, previous visit, visit), oldest first
        self.recent: dict[str, deque[tuple[str, float, float]]] = {}
        #: url -> partner url -> co-changes
        self.partners: dict[str, dict[str, int]] = {}
        #: url -> revisits that found it changed (since it is known here)
        self.changes: dict[str, int] = {}
        self._observed = 0  #: observations since the last sweep of stale hosts

    def observe(
        self, url: str, host: str, previous: float, now: float, chance: Callable[[str], float] | None = None
    ) -> list[str]:
        """A revisit at ``now`` found ``url`` (of ``host``) changed since
        ``previous``: count its co-changes and return its partners.

        :param chance: if given, ``chance(other)`` is the share of ``url``'s
            changes ``other`` would have shared by chance alone (changing
            independently at its own rate); a partner must then share
            ``threshold`` of what is left above that chance level, not of
            all the changes: ``share - chance >= threshold * (1 - chance)``.
        """
        horizon = now - self.window
        self._observed += 1
        if self._observed >= self.SWEEP_EVERY:
            self._sweep(horizon)
        queue = self.recent.get(host)
        if queue is None:
            queue = self.recent[host] = deque()
        while queue and (queue[0][2] < horizon or len(queue) >= self.max_recent):
            queue.popleft()
        for other, start, end in queue:
            if other != url and start < now and previous < end:
                self._count(url, other)
                self._count(other, url)
        queue.append((url, previous, now))
        self.changes[url] = self.changes.get(url, 0) + 1
        return self.partners_of(url, chance)

    def partners_of(
        self, url: str, chance: Callable[[str], float] | None = None, seen: int | None = None
    ) -> list[str]:
        """``url``'s partners now (``chance`` as in :meth:`observe`), or
        as they would be after ``seen`` changes of it, without counting
        anything."""
        if seen is None:
            seen = self.changes.get(url, 0)
        counts = self.partners.get(url)
        if not counts:
            return []
        least = max(self.min_count, self.threshold * seen)
        if chance is None:
            return [other for other, n in counts.items() if n >= least]
        partners = []
        for other, n in counts.items():
            if n >= least:
                level = chance(other)
                if n / seen - level >= self.threshold * (1.0 - level):
                    partners.append(other)
        return partners

    #: observations between two sweeps of the hosts whose windows are all
    #: older than ``window`` (a broad crawl's hosts that stopped changing)
    SWEEP_EVERY = 4096

    def _sweep(self, horizon: float) -> None:
        self._observed = 0
        for host in [h for h, queue in self.recent.items() if not queue or queue[-1][2] < horizon]:
            del self.recent[host]

    def _count(self, url: str, other: str) -> None:
        counts = self.partners.get(url)
        if counts is None:
            counts = self.partners[url] = {}
        n = counts.get(other)
        if n is None and len(counts) >= self.max_partners:
            del counts[min(counts, key=counts.__getitem__)]
        counts[other] = (n or 0) + 1

    def forget_page(self, url: str) -> None:
        """Drop ``url``'s own counts (it stays in others' until they are
        dropped as the smallest; the planner skips pages it no longer has)."""
        self.partners.pop(url, None)
        self.changes.pop(url, None)

    # -- persistence -------------------------------------------------------------------

    def to_state(self) -> dict:
        return {
            "recent": {host: [list(w) for w in queue] for host, queue in self.recent.items()},
            "partners": self.partners,
            "changes": self.changes,
        }

    def load_state(self, state: dict) -> None:
        """Restore :meth:`to_state`, each value checked first
        (:mod:`.checks`); nothing changes when one is bad."""
        state = checks.mapping(state, "co-change model")
        recent = {}
        for host, windows in checks.mapping(state.get("recent"), "co-change windows").items():
            if not isinstance(windows, list):
                raise ValueError(f"recrawl state: co-change windows of {host!r} are not a list"[:200])
            queue = deque()
            for w in windows[-self.max_recent :]:
                if not (isinstance(w, list) and len(w) == 3 and isinstance(w[0], str)):
                    raise ValueError(f"recrawl state: co-change window {w!r} is not [url, start, end]"[:200])
                start, end = (checks.number(t, "co-change window time", -checks.TIME, checks.TIME) for t in w[1:])
                queue.append((w[0], start, end))
            recent[host] = queue
        partners = {}
        for url, counts in checks.mapping(state.get("partners"), "co-change partners").items():
            counts = checks.mapping(counts, f"co-change partners of {url}")
            partners[url] = {other: checks.count(n, f"co-changes of {url}") for other, n in counts.items()}
        changes = {
            url: checks.count(n, f"changes of {url}")
            for url, n in checks.mapping(state.get("changes"), "co-change counts").items()
        }
        self.recent, self.partners, self.changes = recent, partners, changes
