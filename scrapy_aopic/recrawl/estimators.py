"""Change-rate estimators (Cho & Garcia-Molina, "Estimating frequency of
change", ACM TOIT 2003).

A crawler sees a page only when it visits it. If the page changes as a
Poisson process of rate ``r`` and a visit only tells *whether* it changed
since the previous visit, several changes between two visits count once, so
the naive estimate "changes seen / time watched" is biased low (it can never
exceed one change per visit). The estimators here correct for that:

* :func:`cho_regular_rate` — visits at a regular interval ``I``:
  ``r = -log((n - X + 0.5) / (n + 0.5)) / I`` (the paper's improved
  estimator; the 0.5 terms remove most of the bias of the plain maximum
  likelihood estimate ``-log(1 - X/n) / I`` and keep it finite when every
  visit saw a change);
* :func:`cho_irregular_rate` — visits at irregular intervals: the maximum
  likelihood estimate, the root of
  ``sum_changed t_i / (exp(r t_i) - 1) = sum_unchanged t_j``, solved
  numerically, with the same half-visit correction (half an unchanged
  interval of mean length added on the right), which reduces exactly to
  :func:`cho_regular_rate` when the intervals are equal;
* :func:`poisson_rate` — when each visit tells *how many* events happened
  (new links on a hub page: they can be counted), the count over the time
  watched is already unbiased.

Pure Python: no Scrapy, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from . import checks


def naive_rate(changes: int, watched: float) -> float:
    """``X / T``: changes detected over the time watched (biased low)."""
    if watched <= 0:
        return 0.0
    return changes / watched


def cho_regular_rate(visits: int, changes: int, interval: float) -> float:
    """Cho & Garcia-Molina's improved estimator for visits every ``interval``.

    :param visits: ``n``, the number of intervals watched (visits after the
        first one).
    :param changes: ``X``, how many of them found the page changed.
    :param interval: ``I``, the time between two visits.
    :returns: the estimated change rate (changes per time unit of
        ``interval``); ``0.0`` with no data.
    """
    if visits <= 0 or interval <= 0:
        return 0.0
    if not 0 <= changes <= visits:
        raise ValueError(f"changes must be in [0, {visits}], got {changes}")
    return -math.log((visits - changes + 0.5) / (visits + 0.5)) / interval


def _changed_term(rate: float, interval: float) -> float:
    """``t / (exp(r t) - 1)``, finite as ``r t`` goes to 0 or grows."""
    x = rate * interval
    if x > 700.0:
        return 0.0
    return interval / math.expm1(x)


def cho_irregular_rate(
    changed_intervals: Sequence[float],
    unchanged_intervals: Iterable[float] | float,
    *,
    correction: bool = True,
    tolerance: float = 1e-10,
) -> float:
    """Maximum likelihood change rate from visits at irregular intervals.

    :param changed_intervals: lengths of the intervals after which a change
        was seen.
    :param unchanged_intervals: lengths of the intervals after which none was
        seen (or their sum: only the sum matters).
    :param correction: add half an unchanged interval of mean length, as
        Cho & Garcia-Molina's regular-interval estimator does (it keeps the
        estimate finite when every visit saw a change and removes most of the
        small-sample bias). ``False`` gives the plain MLE (``inf`` when every
        interval saw a change).
    :returns: the rate in changes per time unit; ``0.0`` if no change was
        seen.
    """
    changed = [t for t in changed_intervals if t > 0]
    if isinstance(unchanged_intervals, (int, float)):
        unchanged_sum = float(unchanged_intervals)
        unchanged_count = None
    else:
        unchanged = [t for t in unchanged_intervals if t > 0]
        unchanged_sum = math.fsum(unchanged)
        unchanged_count = len(unchanged)
    if not changed:
        return 0.0
    if correction:
        if unchanged_count is None:
            # Only the sum is known: the mean over the changed intervals.
            mean = math.fsum(changed) / len(changed)
        else:
            mean = (math.fsum(changed) + unchanged_sum) / (len(changed) + unchanged_count)
        unchanged_sum += 0.5 * mean
    if unchanged_sum <= 0:
        return math.inf

    def excess(rate: float) -> float:
        # Decreasing in rate: +inf at 0+, -unchanged_sum at +inf.
        return math.fsum(_changed_term(rate, t) for t in changed) - unchanged_sum

    # Bracket the root: t / (exp(r t) - 1) < 1 / r, so the changed terms sum
    # to less than m / r and the excess is negative at r = m / U; it grows
    # without bound as r goes to 0.
    high = len(changed) / unchanged_sum
    low = high / 2.0
    while excess(low) <= 0:
        high = low
        low /= 2.0
    # Newton's method, kept inside the bracket (bisection when it leaves).
    rate = math.sqrt(low * high)
    for _ in range(100):
        value = excess(rate)
        if value > 0:
            low = rate
        else:
            high = rate
        slope = -math.fsum(_changed_slope(rate, t) for t in changed)
        step = rate - value / slope if slope < 0 else None
        nxt = step if step is not None and low < step < high else math.sqrt(low * high)
        if abs(nxt - rate) <= tolerance * rate:
            return nxt
        rate = nxt
    return rate


def _changed_slope(rate: float, interval: float) -> float:
    """``-d/dr t / (exp(r t) - 1) = t^2 exp(r t) / (exp(r t) - 1)^2``."""
    x = rate * interval
    if x > 700.0:
        return 0.0
    e = math.expm1(x)
    if e * e == 0.0:  # r t so small that e^2 underflows: the limit 1 / r^2
        return 1.0 / (rate * rate) if rate > 0 else math.inf
    return interval * interval * (e + 1.0) / (e * e)


def poisson_rate(
    events: float, watched: float, prior_events: float = 0.0, prior_time: float = 0.0
) -> float:
    """Rate of a counted Poisson process: ``(N + a) / (T + b)``.

    When a visit can count the events since the previous one (new links on a
    hub), nothing is missed and ``N / T`` is unbiased; ``a`` and ``b`` are an
    optional Gamma prior (pseudo-events over pseudo-time) for thin data.
    """
    denominator = watched + prior_time
    if denominator <= 0:
        return 0.0
    return (events + prior_events) / denominator


def poisson_tail(observed: int, expected: float) -> float:
    """``P(N >= observed)`` for ``N ~ Poisson(expected)``: how surprising a
    count is (used to notice bursts)."""
    if observed <= 0:
        return 1.0
    if expected <= 0:
        return 0.0
    # 1 - CDF(observed - 1), summed in log space for stability.
    term = math.exp(-expected)
    cdf = term
    for k in range(1, observed):
        term *= expected / k
        cdf += term
    return max(0.0, 1.0 - cdf)


class ChangeHistory:
    """The recent visits of one page: interval lengths and whether each
    found a change, for :func:`cho_irregular_rate`.

    Keeps at most ``capacity`` intervals (the newest): a page's rate drifts,
    and the estimate should follow it.
    """

    __slots__ = ("intervals", "changed", "capacity")

    def __init__(self, capacity: int = 32):
        self.intervals: list[float] = []
        self.changed: list[bool] = []
        self.capacity = capacity

    def add(self, interval: float, changed: bool) -> None:
        """Record one interval between two visits."""
        if interval <= 0:
            return
        self.intervals.append(float(interval))
        self.changed.append(bool(changed))
        if len(self.intervals) > self.capacity:
            del self.intervals[0]
            del self.changed[0]

    def __len__(self) -> int:
        return len(self.intervals)

    @property
    def changes(self) -> int:
        """How many recorded intervals saw a change."""
        return sum(self.changed)

    def naive(self) -> float:
        """Biased-low ``X / T`` over the recorded intervals."""
        return naive_rate(self.changes, math.fsum(self.intervals))

    def rate(self) -> float:
        """Corrected MLE (:func:`cho_irregular_rate`) over the recorded intervals."""
        changed = [t for t, c in zip(self.intervals, self.changed) if c]
        unchanged = [t for t, c in zip(self.intervals, self.changed) if not c]
        return cho_irregular_rate(changed, unchanged)

    def to_state(self) -> list:
        """JSON-able state."""
        return [self.intervals, [int(c) for c in self.changed]]

    @classmethod
    def from_state(cls, state: list, capacity: int = 32) -> ChangeHistory:
        history = cls(capacity)
        history.intervals = [float(t) for t in state[0]][-capacity:]
        history.changed = [bool(c) for c in state[1]][-capacity:]
        return history


class TimedChangeHistory:
    """Change observations of one page kept in *time*, not in visits.

    :class:`ChangeHistory` keeps the last ``capacity`` visits, so a page's
    own quick revisits (after a change, say) push out the long intervals
    that carried most of what was known. Here every observation is weighted
    by ``exp(-age / window)``: the unchanged seconds are one decayed sum
    (a sufficient statistic of the likelihood), and the intervals that saw a
    change are grouped by length (buckets a factor sqrt(2) wide, each a
    decayed count and mean length): a page costs a few numbers whatever
    its number of visits.

    :meth:`rate` is the maximum of the interval-censored Poisson likelihood
    (Cho & Garcia-Molina's irregular-interval equation, each term weighted),
    shrunk towards a pooled rate ``prior_rate`` by ``prior_changes``
    pseudo-changes seen over ``prior_changes / prior_rate`` seconds (a Gamma
    prior): a page with little history gets its section's rate.
    """

    __slots__ = ("buckets", "unchanged", "base", "hint", "window", "changes")

    def __init__(self, window: float = 180 * 86400.0):
        #: bucket -> [weighted count, weighted sum of lengths]; weights are
        #: stored as ``exp((when - base) / window)`` (no decay pass per visit)
        self.buckets: dict[int, list[float]] = {}
        self.unchanged = 0.0  #: weighted unchanged seconds
        self.base: float | None = None
        self.hint = 0.0  #: the last solution (Newton starts there)
        self.window = window
        self.changes = 0  #: intervals that saw a change, ever

    def __len__(self) -> int:
        return len(self.buckets) + (self.unchanged > 0)

    def _weight(self, now: float) -> float:
        if self.base is None:
            self.base = now
        exponent = (now - self.base) / self.window
        if exponent > 30.0:  # rebase before the weights overflow
            factor = math.exp(-exponent)
            self.unchanged *= factor
            for entry in self.buckets.values():
                entry[0] *= factor
                entry[1] *= factor
            self.base = now
            exponent = 0.0
        return math.exp(exponent)

    def add(self, now: float, interval: float, changed: bool, last_change: float | None = None) -> None:
        """A visit at ``now`` after ``interval`` seconds found the page
        changed or not. ``last_change`` (a ``Last-Modified`` inside the
        interval) says when the last change happened: the interval is then a
        change in ``[now - interval, last_change]`` and no change since."""
        if interval <= 0:
            return
        w = self._weight(now)
        if not changed:
            self.unchanged += w * interval
            return
        self.changes += 1
        start = now - interval
        if last_change is not None and start < last_change <= now:
            self.unchanged += w * (now - last_change)
            interval = max(last_change - start, 1.0)
        b = int(2.0 * math.log2(interval))
        entry = self.buckets.get(b)
        if entry is None:
            self.buckets[b] = [w, w * interval]
        else:
            entry[0] += w
            entry[1] += w * interval

    def rate(self, now: float | None = None, prior_rate: float = 0.0, prior_changes: float = 0.5) -> float:
        """The (shrunk) maximum-likelihood change rate as of ``now``, per second."""
        base = self.base
        if base is None:
            return prior_rate
        scale = math.exp(-(max(now or base, base) - base) / self.window)
        unchanged = self.unchanged * scale
        # (w, t, w * t) per bucket as of ``now``: built once per call (the
        # planner's once per visit), the products not once per Newton step.
        terms = []
        for w, total in self.buckets.values():
            if w > 0:
                t = total / w
                w *= scale
                terms.append((w, t, w * t))
        k0 = prior_changes if prior_rate > 0 else 0.0
        if k0:
            unchanged += k0 / prior_rate
        elif not terms:
            return 0.0
        else:
            # No prior: Cho & Garcia-Molina's half-interval correction.
            weight = sum(w for w, _, _ in terms)
            unchanged += 0.5 * sum(wt for _, _, wt in terms) / weight
        if unchanged <= 0:
            return math.inf
        # Newton on log r (the excess is convex and decreasing in r): a few
        # steps from the last solution, which moves little between visits.
        r = self.hint if self.hint > 0 else (k0 + sum(w for w, _, _ in terms)) / unchanged
        expm1, exp = math.expm1, math.exp
        for _ in range(40):
            q = k0 / r
            v = q - unchanged
            s = -q
            for w, t, wt in terms:
                x = r * t
                if x > 700.0:
                    continue
                e = expm1(x)
                if e < 1e-300:
                    v += w / r
                    s -= w / r
                    continue
                v += wt / e
                s -= wt * x * (e + 1.0) / (e * e)
            # v(r) = 0 sought; s = r * dv/dr < 0
            if s < 0:
                step = v / s
                step = 2.0 if step > 2.0 else -2.0 if step < -2.0 else step
            else:
                step = 0.0
            r *= exp(-step)
            if -1e-7 < step < 1e-7:
                break
        self.hint = r
        return r

    def naive(self, now: float | None = None) -> float:
        """Biased-low changes over decayed time watched (for comparison)."""
        count = sum(w for w, _ in self.buckets.values())
        watched = self.unchanged + sum(total for _, total in self.buckets.values())
        return count / watched if watched > 0 else 0.0

    def to_state(self) -> list:
        return [{str(b): e for b, e in self.buckets.items()}, self.unchanged, self.base, self.hint,
                self.changes]  # fmt: skip

    @classmethod
    def from_state(cls, state: list, window: float = 180 * 86400.0) -> TimedChangeHistory:
        """A history from :meth:`to_state`, each value checked
        (:mod:`.checks`: a bad one is a :class:`ValueError` naming it)."""
        if not isinstance(state, list) or len(state) != 5:
            raise ValueError(f"recrawl state: change history {state!r} is not 5 fields"[:200])
        history = cls(window)
        buckets = {}
        for b, entry in checks.mapping(state[0], "change history buckets").items():
            try:
                key = int(b)
            except (TypeError, ValueError):
                key = None
            if key is None or not -4096 <= key <= 4096:  # twice the log2 of an interval: a float's range
                raise ValueError(f"recrawl state: change history bucket {b!r} is not an interval's")
            buckets[key] = checks.numbers(entry, f"change history bucket {b}", 2)
        history.buckets = buckets
        history.unchanged = checks.number(state[1], "change history unchanged seconds")
        history.base = checks.time(state[2], "change history base")
        history.hint = checks.number(state[3], "change history hint")
        if 0 < history.hint < 1e-200:  # Newton would start there and underflow to 0 (a division by zero)
            raise ValueError(f"recrawl state: change history hint {history.hint!r} is no rate")
        history.changes = checks.count(state[4], "change history changes")
        return history
