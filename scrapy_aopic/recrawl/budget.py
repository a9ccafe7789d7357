"""Splitting a revisit budget across pages for the most freshness.

Cho & Garcia-Molina ("Synchronizing a database to improve freshness",
SIGMOD 2000; "Effective page refresh policies", ICDE 2003): a page changing
as a Poisson process of rate ``l`` and revisited every ``1/f`` seconds is
fresh (the copy equals the page) a share ``F(l, f) = (f / l)(1 - exp(-l / f))``
of the time. Maximising ``sum w_i F(l_i, f_i)`` under ``sum f_i = B``
(``w_i``: the page's importance, Kolobov et al. 2019) gives, with a
Lagrange multiplier ``mu``::

    (w_i / l_i) * g(l_i / f_i) = mu,    g(x) = 1 - (1 + x) exp(-x)

so ``f_i = l_i / g^-1(mu l_i / w_i)``; a page with ``w_i / l_i < mu``
changes too fast to be worth any budget (it gets the floor
``1 / max_interval``). The optimum is not proportional to the rate: it
rises, then falls, with it.

:class:`FreshnessAllocator` keeps ``mu``: :meth:`FreshnessAllocator.solve`
finds it for a whole set of pages (numpy, O(pages) per step of a bisection;
the planner calls it now and then), :meth:`FreshnessAllocator.frequency`
answers for one page in O(log 512) (between two solves, with the last
``mu``). A per-host cap (a politeness gap between two fetches of a host)
scales a host's pages down and hands what it frees to the other pages.

:class:`SpendCheck` keeps what is spent at the budget when revisits are
planned at other times than the split's (host activity).
"""

from __future__ import annotations

import math
from bisect import bisect_left

from . import checks


def _g(x: float) -> float:
    return -math.expm1(-x) - x * math.exp(-x)


# g is increasing from 0 (like x^2 / 2) to 1: a table of x on a log grid
# inverts it by interpolation.
_XS = [10.0 ** (-4 + 6.5 * i / 511) for i in range(512)]
_GS = [_g(x) for x in _XS]


def g_inverse(y: float) -> float:
    """``x`` with ``g(x) = y`` (``inf`` for ``y >= 1``)."""
    if y <= 0.0:
        return 0.0
    if y >= _GS[-1]:
        return math.inf
    if y <= _GS[0]:
        return math.sqrt(2.0 * y)
    i = bisect_left(_GS, y)
    g0, g1 = _GS[i - 1], _GS[i]
    return _XS[i - 1] + (_XS[i] - _XS[i - 1]) * (y - g0) / (g1 - g0)


def freshness(rate: float, frequency: float) -> float:
    """Expected share of time a page of change ``rate`` revisited
    periodically at ``frequency`` is fresh."""
    if rate <= 0:
        return 1.0
    if frequency <= 0:
        return 0.0
    x = rate / frequency
    return -math.expm1(-x) / x


class FreshnessAllocator:
    """Revisit frequencies (per second) that maximise importance-weighted
    freshness for a budget of ``budget`` revisits per second.

    :param f_min: the least frequency of any page (``1 / max_interval``).
    :param f_max: the most (``1 / min_interval``).
    """

    #: half-width (in log mu) of the bracket probed around the last solution
    PROBE = 0.01

    def __init__(self, f_min: float, f_max: float):
        self.f_min = f_min
        self.f_max = f_max
        self.mu: float | None = None  #: the multiplier; ``None`` until solved

    def frequency(self, rate: float, weight: float = 1.0) -> float:
        """The frequency of one page at the current multiplier."""
        if self.mu is None or rate <= 0 or weight <= 0:
            return self.f_min if rate <= 0 else self.f_max
        y = self.mu * rate / weight
        if _GS[0] < y < _GS[-1]:  # g_inverse(y), inlined (once per visit)
            i = bisect_left(_GS, y)
            g0 = _GS[i - 1]
            x = _XS[i - 1] + (_XS[i] - _XS[i - 1]) * (y - g0) / (_GS[i] - g0)
        else:
            x = g_inverse(y)
        f = rate / x if x > 0 else self.f_max
        return min(max(f, self.f_min), self.f_max)

    def solve(self, rates, weights, budget: float, hosts=None, host_cap: float | None = None) -> float:
        """Set (and return) the multiplier that spends ``budget`` over the
        pages of ``rates`` (changes per second) and ``weights``; ``hosts``
        (small integers) and ``host_cap`` (fetches per second of one host)
        add politeness. Spending less than the floors cost is impossible:
        then every page gets the floor."""
        import numpy as np

        rates = np.asarray(rates, dtype=float)
        weights = np.maximum(np.asarray(weights, dtype=float), 1e-12)
        if rates.size == 0:
            return self.mu or 1.0
        xs, gs = np.asarray(_XS), np.asarray(_GS)
        positive = rates > 0
        ratio = np.where(positive, rates / weights, 0.0)
        host_index = None
        if hosts is not None and host_cap:
            host_index = np.asarray(hosts, dtype=np.int64)

        def spend(mu: float):
            y = mu * ratio
            x = np.interp(y, gs, xs)
            x = np.where(y < gs[0], np.sqrt(2.0 * y), x)
            with np.errstate(divide="ignore", invalid="ignore"):
                f = np.where(positive & (y < gs[-1]) & (x > 0), rates / x, self.f_min)
            f = np.where(positive & (y > 0) & (x == 0), self.f_max, f)
            f = np.clip(f, self.f_min, self.f_max)
            if host_index is not None:
                per_host = np.bincount(host_index, weights=f)
                factor = np.minimum(1.0, host_cap / np.maximum(per_host, 1e-300))
                f = np.maximum(f * factor[host_index], np.minimum(self.f_min, factor[host_index] * f))
            return f.sum()

        if not positive.any():
            self.mu = 1.0
            return self.mu
        # spend(mu) decreases with mu: bisection on log(mu).
        lo, hi = -80.0, 80.0
        ref = 1.0 / float(np.median(ratio[positive]))
        most = spend(ref * math.exp(lo))
        if budget >= most:
            # More than the host caps let through: the least multiplier
            # that fills them (not one that asks every page for f_max).
            budget = 0.99 * most
        # The multiplier moves little between two solves: two probes around
        # the last one bound the answer, and since spend() is monotone every
        # midpoint at or below a probe that overspent overspends too (at or
        # above one that fit, fits). The bisection below then evaluates only
        # the midpoints between the probes (about 10 instead of 21) and ends
        # exactly where the plain bisection does.
        overspent, fits = -math.inf, math.inf
        if self.mu is not None and self.mu > 0:
            centre = math.log(self.mu / ref)
            for probe in (centre - self.PROBE, centre + self.PROBE):
                if lo < probe < hi:
                    if spend(ref * math.exp(probe)) > budget:
                        overspent = max(overspent, probe)
                    else:
                        fits = min(fits, probe)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if mid <= overspent:
                over = True
            elif mid >= fits:
                over = False
            else:
                over = spend(ref * math.exp(mid)) > budget
            if over:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-4:
                break
        self.mu = ref * math.exp(hi)
        return self.mu


class SpendCheck:
    """Keeps what is spent at the budget when revisits are planned at
    other times than the split's (host activity: hosts switching between
    two frequencies spend neither what the split meant nor when).

    It counts revisits over about a week (each weighted ``exp(-age /
    window)``) and, once a day after two weeks, moves :attr:`factor` (on
    every planned frequency) by ``1 + gain * (1 - spent / budget)``: the
    error itself, not a power of the ratio budget / spent, which balances
    the *geometric* mean of a spend that swings with the hosts' spells
    (1-3 % over on the real traces, the factor swinging 0.25 to 2.6). The
    gain is small as the spend is measured over a week: a loop that lags a
    week, checked daily, settles without swinging at about 1/28 to 1/20 a
    day.
    """

    DAY = 86400.0
    WEEK = 7 * DAY

    def __init__(self, gain: float = 0.05, bounds: tuple[float, float] = (0.25, 4.0)):
        self.gain = gain
        self.bounds = bounds  #: the least and the most factor
        self.weight = 0.0  #: revisits, each weighted exp(-age / WEEK)
        self.at: float | None = None  #: when ``weight`` was last brought up to date
        self.factor = 1.0  #: on every planned frequency
        self.checked: float | None = None  #: the last daily check
        self.since: float | None = None  #: the first revisit counted

    def count(self, now: float, budget: float | None) -> None:
        """One revisit at ``now``; ``budget``: revisits per second."""
        if self.at is not None:
            self.weight *= math.exp(-max(0.0, now - self.at) / self.WEEK)
        self.weight += 1.0
        self.at = now
        if self.since is None:
            self.checked = self.since = now
        elif now - self.checked >= self.DAY:
            self.checked = now
            if now - self.since > 2 * self.WEEK and budget:
                low, high = self.bounds
                error = 1.0 - self.weight / (budget * self.WEEK)
                self.factor = min(high, max(low, self.factor * max(0.5, 1.0 + self.gain * error)))

    def to_state(self) -> list:
        return [self.weight, self.at, self.factor, self.checked, self.since]

    def load_state(self, state) -> None:
        """Restore :meth:`to_state`, each value checked first
        (:mod:`.checks`); nothing changes when one is bad."""
        if not isinstance(state, list) or len(state) != 5:
            raise ValueError(f"recrawl state: spend {state!r} is not [count, time, factor, checked, since]"[:200])
        low, high = self.bounds
        weight = checks.number(state[0], "revisits spent")
        at = checks.time(state[1], "revisits spent: time")
        factor = checks.number(state[2], "spend factor", low, high)
        checked = checks.time(state[3], "spend checked")
        since = checks.time(state[4], "spend counted since")
        if (checked is None) != (since is None) or (since is not None and at is None):
            raise ValueError(f"recrawl state: spend {state!r}: checked, counted since and time go together"[:200])
        self.weight, self.at, self.factor, self.checked, self.since = weight, at, factor, checked, since
