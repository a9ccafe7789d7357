"""Section multipliers: how much more often pages change in some state
(hot after a change, young after they appear) than their quiet rate
expects, pooled over the pages' sections.

One pair of sums per section name, ``[changes seen, changes expected]``,
for the page's ``host/first-path-segment`` key, its host and every page
(``"*"``); the multiplier of a page is every page's, its host's, its key's,
each shrunk to the one before by ``prior_expected`` pseudo-changes, the
first to 1. Sums forget with ``change_window`` (weights that grow with
time, rescaled before they overflow, as the planner's pools do).
"""

from __future__ import annotations

import math

from . import checks
from .profile import growing_weight


class PooledMultiplier:
    """Changes seen over changes expected, per section, shrunk up the chain.

    :param change_window: time constant of the forgetting (like the
        planner's change histories).
    :param prior_expected: pseudo-changes (expected ones) each pooled
        multiplier is shrunk to its parent's by.
    """

    def __init__(self, change_window: float, prior_expected: float = 1.0):
        self.change_window = float(change_window)
        self.prior_expected = prior_expected
        #: name -> [changes seen, changes expected], stored with growing
        #: weights from ``_base``
        self.pools: dict[str, list[float]] = {}
        self._base: float | None = None

    def _rescale(self, factor: float) -> None:
        for pool in self.pools.values():
            pool[0] *= factor
            pool[1] *= factor

    def _pool(self, record, now: float, changed: bool, expected: float) -> None:
        """Count one interval of ``record`` ending at ``now`` in its sections."""
        w, self._base = growing_weight(self._base, now, self.change_window, self._rescale)
        for name in (record.key, record.site, "*") if record.site != record.key else (record.key, "*"):
            pool = self.pools.get(name)
            if pool is None:
                pool = self.pools[name] = [0.0, 0.0]
            if changed:
                pool[0] += w
            pool[1] += w * expected

    def multiplier(self, record, now: float) -> float:
        """The multiplier of ``record``'s section as of ``now``."""
        if self._base is None:
            return 1.0
        # Stored sums grow with time: effective ones are stored / unit.
        k = self.prior_expected * math.exp(max(0.0, now - self._base) / self.change_window)
        m = 1.0
        names = ("*", record.site, record.key) if record.site != record.key else ("*", record.key)
        for name in names:
            pool = self.pools.get(name)
            if pool is not None:
                m = (pool[0] + k * m) / (pool[1] + k)
        return m

    def _pools_state(self) -> dict:
        return {"pools": self.pools, "base": self._base}

    @staticmethod
    def _read_state(state: dict, what: str, counters: int) -> tuple[dict[str, list[float]], float | None, list[int]]:
        """The pools, base and ``counters`` counts of a saved model,
        checked (not installed)."""
        state = checks.mapping(state, f"{what} model")
        pools = checks.pairs(state.get("pools"), f"{what} pool")
        base = checks.time(state.get("base"), f"{what} base")
        counts = state.get("counters")
        if not isinstance(counts, list) or len(counts) != counters:
            raise ValueError(f"recrawl state: {what} counters {counts!r} are not {counters} counts"[:200])
        return pools, base, [checks.count(x, f"{what} counter") for x in counts]
