"""New pages: a page that appears on a site already crawled changes often
while it is young.

A page found after its host's first revisit is most likely new (the first
crawl found the pages that existed then), and a new page is edited most
just after it appears: on the 19 git change traces of
``benchmarks/recrawl_traces.py`` with pages born inside them
(written by ``benchmarks/recrawl_creations.py``), a page born inside the
trace changes, against the pages there from the start, up to 1,700 times
as often in its first hour, 1.1-190 times from an hour to a day, 0.7-44
times from a day to a week and 0.2-29 times from one to four weeks (about
as ``1 / age``; ``benchmarks/recrawl_page_age.py``, ``docs/recrawl.rst``).
Planned from its section's pooled rate, a new page is revisited as if it
were a settled one, and its first edits wait.

The model, learnt from the crawl's own revisits like the burst model
(:mod:`.burst`):

* a page found late is *young* for ``window`` seconds after its first
  visit;
* young, it is planned at its own young change rate (its young intervals,
  Cho & Garcia-Molina's interval-censored estimate), shrunk towards ``M *``
  its section's pooled rate: ``M`` is the young multiplier, changes seen in
  young intervals over the changes the section's rate expected there,
  pooled over ``host/first-path-segment``, each level shrunk to the next
  (the host, then every page, then 1: new pages like any other);
* young intervals feed neither the section's pooled rate nor, once the
  page is grown up, its own history: that restarts at the end of youth.

The budget is split as for any page of the young rate (the same Lagrange
multiplier, :mod:`.budget`), so a site whose new pages do not change more
(``M`` near 1) loses nothing but the first estimate.
"""

from __future__ import annotations

import math

from .pooled import PooledMultiplier

DAY = 86400.0


class YoungPages(PooledMultiplier):
    """Section young multipliers.

    :param window: seconds a page found late stays young after its first
        visit.
    :param change_window: time constant of the forgetting (like the
        planner's change histories).
    :param prior_expected: pseudo-changes (expected ones) each pooled
        multiplier is shrunk to its parent's by.
    """

    def __init__(self, window: float = 7 * DAY, change_window: float = 180 * DAY, prior_expected: float = 1.0):
        if not window > 0:
            raise ValueError(f"AOPIC_RECRAWL_NEW_PAGE_WINDOW must be > 0, got {window!r}")
        super().__init__(change_window, prior_expected)
        self.window = float(window)
        self.young_pages = 0  #: pages found late, planned young
        self.young_intervals = 0  #: young intervals observed
        self.young_changes = 0  #: of which found a change

    def observe(self, record, now: float, span: float, changed: bool, section_rate: float) -> None:
        """``record`` (a young page, its section's pooled rate
        ``section_rate``) was revisited at ``now`` after ``span`` seconds
        and found ``changed``."""
        self.young_intervals += 1
        self.young_changes += changed
        # What a settled page of the section would have done: P(a change in span).
        self._pool(record, now, changed, -math.expm1(-max(section_rate, 0.0) * span))

    def to_state(self) -> dict:
        return {**self._pools_state(), "counters": [self.young_pages, self.young_intervals, self.young_changes]}

    def load_state(self, state: dict) -> None:
        """Restore :meth:`to_state`, each value checked first
        (:mod:`.checks`); nothing changes when one is bad."""
        self.pools, self._base, counts = self._read_state(state, "new-page", 3)
        self.young_pages, self.young_intervals, self.young_changes = counts
