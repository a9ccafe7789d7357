"""Bursts: a detected change makes another change soon more likely.

Edits come in bursts (a document revised twice in an afternoon, a package
uploaded again the next day to fix the first upload): on the real traces of
``benchmarks/recrawl_traces.py`` 24 % (Rust book), 33 % (packaging guide)
and 7 % (CPython developer's guide) of the changes come within a day of the
previous one, far more than a Poisson process of the page's mean rate
gives. The model here is a two-state one, learnt from change events only:

* a page is *hot* for ``window`` seconds after a revisit that found it
  changed (again after each further change found), *quiet* otherwise;
* quiet, it changes at its own rate (the planner's interval-censored
  estimate, fed only with quiet intervals);
* hot, at a rate of its own, estimated the same way (Cho & Garcia-Molina's
  interval-censored likelihood, :class:`~scrapy_aopic.recrawl.estimators.
  TimedChangeHistory`) from the intervals it was revisited in while hot,
  shrunk towards ``M * quiet rate``: ``M`` is the burst multiplier of its
  section, changes seen in hot intervals over the changes its quiet rate
  expected there, pooled over ``host/first-path-segment``, each level shrunk
  to the next (the host, then every page, then 1: no burst).

The planner spends the budget on a hot page as on any page of the hot rate
(the same Lagrange multiplier, :mod:`~scrapy_aopic.recrawl.budget`): its
next revisit comes sooner only as far as the learnt rate pays for it, and
the budget's solve counts what hot pages spend. ``M < 1`` (changes rarely
follow each other) makes the revisit after a change come *later*.

A page costs three more numbers, plus a change history once it has been
revisited while hot; a section one pair of sums per level.
"""

from __future__ import annotations

import math

from .estimators import TimedChangeHistory
from .pooled import PooledMultiplier

DAY = 86400.0


class BurstModel(PooledMultiplier):
    """Section burst multipliers and per-page hot rates.

    :param window: seconds a page stays hot after a revisit found it changed.
    :param change_window: time constant of the forgetting (like the
        planner's change histories).
    :param prior_expected: pseudo-changes (expected ones) each pooled
        multiplier is shrunk to its parent's by.
    :param prior_changes: pseudo-changes a page's hot rate is shrunk to its
        section's ``M * quiet rate`` by.
    """

    def __init__(
        self,
        window: float = 3 * DAY,
        change_window: float = 180 * DAY,
        prior_expected: float = 1.0,
        prior_changes: float = 1.0,
    ):
        if not window > 0:
            raise ValueError(f"AOPIC_RECRAWL_BURST_WINDOW must be > 0, got {window!r}")
        super().__init__(change_window, prior_expected)
        self.window = float(window)
        self.prior_changes = prior_changes
        self.hot_intervals = 0  #: hot intervals observed
        self.hot_changes = 0  #: of which found a change

    # -- learning --------------------------------------------------------------------

    def observe(self, record, now: float, span: float, changed: bool) -> None:
        """``record`` (a hot page, quiet rate ``record.base_rate``) was
        revisited at ``now`` after ``span`` seconds and found ``changed``."""
        self.hot_intervals += 1
        self.hot_changes += changed
        if record.burst is None:
            record.burst = TimedChangeHistory(self.change_window)
        record.burst.add(now, span, changed)
        # What the quiet rate expected of this interval: P(a change in span).
        self._pool(record, now, changed, -math.expm1(-max(record.base_rate, 0.0) * span))

    # -- planning --------------------------------------------------------------------

    def hot_rate(self, record, now: float) -> float:
        """Changes per second expected of ``record`` while it is hot."""
        prior = self.multiplier(record, now) * record.base_rate
        if record.burst is None or not len(record.burst) or prior <= 0:
            return prior
        return record.burst.rate(now, prior, self.prior_changes)

    # -- persistence -------------------------------------------------------------------

    def to_state(self) -> dict:
        return {**self._pools_state(), "counters": [self.hot_intervals, self.hot_changes]}

    def load_state(self, state: dict) -> None:
        """Restore :meth:`to_state`, each value checked first
        (:mod:`.checks`); nothing changes when one is bad."""
        self.pools, self._base, (self.hot_intervals, self.hot_changes) = self._read_state(state, "burst", 2)
