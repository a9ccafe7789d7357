"""Hour-of-day x day-of-week rate profiles (168 hourly bins of a week).

Pages edited by people follow the clock: busy working hours, quiet nights
and weekends (the seed paper's observation). A :class:`RateProfile` learns
the rate of new links of one key (``host/first-path-segment``, or a host)
for each of the 168 hours of the week from what visits counted, and answers
the questions the planner asks: the rate at a time, the expected number of
events over an interval of the non-homogeneous process, and when a given
number of events will have accumulated.

Estimation. A visit counts ``N`` events over ``[t0, t1]``, which may span
several hourly bins. The count is spread over them in proportion to the
current rate times the overlap (one EM step for aggregated Poisson data),
and each bin keeps its counts and exposure (seconds watched), both
forgotten exponentially with time constant ``forget``. Thin bins borrow
strength: each bin's rate is shrunk towards a product model
``hour-of-day rate x day-of-week rate / flat rate`` (which needs only a few
days of data), and that towards the flat rate; then the week is smoothed
with a small circular kernel. With no data the profile is flat. The
shape revisits are placed on is believed only as far as the profile's
hour-of-day rhythm lasted from one period (half the forgetting horizon)
to the next (:meth:`RateProfile._believed`).

Times are Unix seconds (UTC). The week is periodic, so a site's time zone
only shifts its profile; it needs no configuration.

No Scrapy; pure Python but for :meth:`DayProfile.fit` (numpy, as the
budget's solve), the hour-of-day profile the weekly timetables are placed
on, and the screening of weekday boundaries in a refit (numpy, then the
exact sums in Python).
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

from . import checks

HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY
BINS = 168

# Unix time 0 was a Thursday: shift so that bin 0 is Monday 00:00-01:00 UTC.
_WEEK_SHIFT = 3 * DAY


def growing_weight(reference: float | None, t: float, horizon: float, rescale) -> tuple[float, float]:
    """Exponential forgetting by growing weights: an observation at ``t``
    weighs ``exp((t - reference) / horizon)``, so sums already stored never
    need decaying one by one. Returns ``(weight, reference)``; once the
    weight would pass e^30, ``rescale(factor)`` scales the stored sums down
    once and the reference moves to ``t`` (weight 1)."""
    if reference is None:
        reference = t
    exponent = (t - reference) / horizon
    if exponent > 30.0:
        rescale(math.exp(-exponent))
        return 1.0, t
    return math.exp(exponent), reference


def hour_of_week(t: float) -> int:
    """Bin of time ``t``: ``weekday * 24 + hour`` (Monday 0h = 0, UTC)."""
    return int(((t + _WEEK_SHIFT) % WEEK) // HOUR)


def week_start(t: float) -> float:
    """The Monday 00:00 UTC at or before ``t``."""
    return t - ((t + _WEEK_SHIFT) % WEEK)


def iter_segments(t0: float, t1: float) -> Iterator[tuple[int, float]]:
    """``(bin, seconds)`` pieces of ``[t0, t1]`` cut at hour boundaries.

    Whole weeks inside the interval come first as one piece per bin, so a
    long interval costs at most 2 x 168 pieces.
    """
    if t1 <= t0:
        return
    span = t1 - t0
    if span >= WEEK:
        weeks = math.floor(span / WEEK)
        for b in range(BINS):
            yield b, weeks * HOUR
        t0 += weeks * WEEK
    t = t0
    while t < t1:
        b = hour_of_week(t)
        boundary = (math.floor((t + _WEEK_SHIFT) / HOUR) + 1) * HOUR - _WEEK_SHIFT
        end = min(boundary, t1)
        if end > t:
            yield b, end - t
        t = end if end > t else math.nextafter(t, math.inf)


def profile_key(url: str) -> tuple[str, str]:
    """``(key, host)`` of ``url`` as the seed paper groups pages:
    ``host/first-path-segment`` (``host/`` for the root), and the host
    alone as the fallback when the key has too little data."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    segments = [s for s in parts.path.split("/") if s]
    # A last segment with a dot is a file (index.html), not a section.
    first = segments[0] if segments and (len(segments) > 1 or "." not in segments[0]) else ""
    return f"{host}/{first}", host


#: hour of the day of each bin, and for each weekday boundary (0-23 hours
#: after UTC midnight) the weekday of each bin (RateProfile._product_model)
_HOUR_OF_BIN = [b % 24 for b in range(BINS)]
_DAY_OF_BIN = [[((b + shift) // 24) % 7 for b in range(BINS)] for shift in range(24)]


def _likelihood(hour_rate, day_rate, days, flat, counts, exposure) -> float:
    """The Poisson log-likelihood (up to a constant) of the bins' counts
    under the product model (:meth:`RateProfile._product_model`), summed bin
    after bin (no log() where nothing was counted: ``0 * log(m) - m`` is
    exactly ``-m``)."""
    log = math.log
    likelihood = 0.0
    for h, d, c, e in zip(_HOUR_OF_BIN, days, counts, exposure):
        mean = hour_rate[h] * day_rate[d] / flat * e
        if mean > 0:
            if c:
                likelihood += c * log(mean) - mean
            else:
                likelihood -= mean
    return likelihood


@functools.lru_cache(maxsize=None)
def _index_tables():
    """``_HOUR_OF_BIN`` and ``_DAY_OF_BIN`` as numpy arrays (made once, when
    first needed: numpy is only imported by the fits)."""
    import numpy as np

    return np.array(_HOUR_OF_BIN), np.array(_DAY_OF_BIN)


class WeeklyRates:
    """A fixed 168-bin piecewise-constant rate (events per second) with
    fast integrals; what the planner integrates over.

    :param rates: 168 non-negative rates, bin 0 = Monday 00:00-01:00 UTC.
    """

    __slots__ = ("rates", "_cumulative", "_cumulative2", "week_total", "mean", "_boundaries")

    def __init__(self, rates: Sequence[float]):
        if len(rates) != BINS:
            raise ValueError(f"a weekly profile has {BINS} bins, got {len(rates)}")
        self.rates = [max(0.0, float(r)) for r in rates]
        cumulative = [0.0]
        for r in self.rates:
            cumulative.append(cumulative[-1] + r * HOUR)
        self._cumulative = cumulative
        # Integral of the cumulative within a week, at each hour boundary:
        # the expected waiting (event-seconds) in closed form.
        cumulative2 = [0.0]
        for b, r in enumerate(self.rates):
            cumulative2.append(cumulative2[-1] + cumulative[b] * HOUR + 0.5 * r * HOUR * HOUR)
        self._cumulative2 = cumulative2
        self.week_total = cumulative[-1]  #: expected events in one week
        self.mean = self.week_total / WEEK  #: mean rate over the week
        self._boundaries: list[float] | None = None  # see _boundary

    @classmethod
    def flat(cls, rate: float) -> WeeklyRates:
        """The constant profile ``rate``."""
        return cls([rate] * BINS)

    def scaled(self, factor: float) -> WeeklyRates:
        """This profile times ``factor``."""
        return WeeklyRates([r * factor for r in self.rates])

    def shape(self) -> WeeklyRates:
        """This profile divided by its mean (mean 1); flat when all zero."""
        if self.mean <= 0:
            return WeeklyRates.flat(1.0)
        return self.scaled(1.0 / self.mean)

    def rate_at(self, t: float) -> float:
        """Rate at time ``t``."""
        return self.rates[hour_of_week(t)]

    def cumulative(self, t: float) -> float:
        """Expected events from the Monday 00:00 UTC before ``t`` to ``t``,
        plus whole weeks since Unix time 0: an increasing function whose
        differences are integrals of the rate."""
        shifted = t + _WEEK_SHIFT
        weeks = math.floor(shifted / WEEK)
        offset = shifted - weeks * WEEK
        b = min(int(offset // HOUR), BINS - 1)
        return weeks * self.week_total + self._cumulative[b] + self.rates[b] * (offset - b * HOUR)

    def integral(self, t0: float, t1: float) -> float:
        """Expected events in ``[t0, t1]`` of the non-homogeneous process."""
        if t1 <= t0:
            return 0.0
        return max(0.0, self.cumulative(t1) - self.cumulative(t0))

    def time_to_yield(self, t0: float, target: float, horizon: float) -> float:
        """Smallest ``t`` in ``[t0, t0 + horizon]`` with
        ``integral(t0, t) >= target`` (``t0 + horizon`` if never)."""
        if target <= 0:
            return t0
        if self.week_total <= 0:
            return t0 + horizon
        goal = self.cumulative(t0) + target
        if goal >= self.cumulative(t0 + horizon):
            return t0 + horizon
        weeks = math.floor(goal / self.week_total)
        within = goal - weeks * self.week_total
        b = bisect_right(self._cumulative, within) - 1
        b = min(max(b, 0), BINS - 1)
        # Skip empty bins: the goal is reached inside the first bin with rate.
        while self.rates[b] <= 0 and b < BINS - 1:
            b += 1
        seconds = b * HOUR + (within - self._cumulative[b]) / self.rates[b] if self.rates[b] else b * HOUR
        t = weeks * WEEK + seconds - _WEEK_SHIFT
        return min(max(t, t0), t0 + horizon)

    def _waiting(self, x: float) -> tuple[float, float]:
        """``(L(x), C(x))`` for ``x`` seconds after a Monday 00:00 UTC: the
        expected events since then and their integral over time."""
        weeks = math.floor(x / WEEK)
        offset = x - weeks * WEEK
        b = min(int(offset // HOUR), BINS - 1)
        into = offset - b * HOUR
        total = self.week_total
        within = self._cumulative[b] + self.rates[b] * into
        within2 = self._cumulative2[b] + self._cumulative[b] * into + 0.5 * self.rates[b] * into * into
        events = weeks * total + within
        integral = total * WEEK * weeks * (weeks - 1) / 2 + weeks * self._cumulative2[-1]
        return events, integral + weeks * total * offset + within2

    def _boundary(self, k: int) -> float:
        """``C(k * HOUR)``: :meth:`_waiting`'s integral at an hour boundary,
        where its terms of the partial hour vanish (the same arithmetic)."""
        weeks, b = divmod(k, BINS)
        total = self.week_total
        integral = total * WEEK * weeks * (weeks - 1) / 2 + weeks * self._cumulative2[-1]
        return integral + weeks * total * (b * HOUR) + self._cumulative2[b]

    def _two_weeks(self) -> list[float]:
        """``[_boundary(k) for k in range(2 * BINS)]``, bit for bit, in a
        tenth of the time: with ``weeks`` 0 or 1 the products by it are
        exact (0 or the factor itself) and adding 0.0 changes nothing."""
        cumulative2 = self._cumulative2
        week2, total = cumulative2[-1], self.week_total
        return cumulative2[:BINS] + [week2 + total * (b * HOUR) + cumulative2[b] for b in range(BINS)]

    def time_to_delay(self, t0: float, target: float, horizon: float) -> float:
        """Smallest ``t`` in ``[t0, t0 + horizon]`` where the expected total
        waiting time of the events since ``t0`` (event-seconds,
        ``integral over s of (t - s) rate(s)``) reaches ``target``.

        Closed form per hour (the waiting is ``C(t) - C(t0) - L(t0)(t - t0)``
        with ``L``, ``C`` the cumulative and its integral) and a bisection
        over the hours: O(log(horizon / 1 h)), whatever the horizon."""
        if target <= 0:
            return t0
        base = week_start(t0)
        x0 = t0 - base
        # self._waiting(x0), inlined with the same arithmetic (once per visit)
        weeks = math.floor(x0 / WEEK)
        offset = x0 - weeks * WEEK
        b = min(int(offset // HOUR), BINS - 1)
        into = offset - b * HOUR
        total = self.week_total
        cumulative, cumulative2, rate = self._cumulative, self._cumulative2, self.rates[b]
        events0 = weeks * total + (cumulative[b] + rate * into)
        integral0 = total * WEEK * weeks * (weeks - 1) / 2 + weeks * cumulative2[-1]
        integral0 = integral0 + weeks * total * offset + (
            cumulative2[b] + cumulative[b] * into + 0.5 * rate * into * into
        )
        end = x0 + horizon
        events, integral = self._waiting(end)
        if integral - integral0 - events0 * (end - x0) < target:
            return t0 + horizon
        # First hour boundary k * HOUR (k in [lo, hi]) where the waiting
        # reaches the target; the answer is inside the hour before it. The
        # planner's hottest loop: the boundaries' integrals of two weeks
        # (all a horizon of up to a week needs) are a table, built once per
        # profile (its rates never change).
        lo = math.floor(x0 / HOUR) + 1
        hi = math.ceil(end / HOUR)
        boundaries = self._boundaries
        if boundaries is None:
            boundaries = self._boundaries = self._two_weeks()
        while lo < hi:
            mid = (lo + hi) // 2
            x = mid * HOUR
            if x < end:
                integral = boundaries[mid] if mid < 2 * BINS else self._boundary(mid)
            else:
                x = end
                _, integral = self._waiting(x)
            if integral - integral0 - events0 * (x - x0) >= target:
                hi = mid
            else:
                lo = mid + 1
        start = max(x0, (lo - 1) * HOUR)
        events, integral = self._waiting(start)
        need = target - (integral - integral0 - events0 * (start - x0))
        count = events - events0
        r = self.rates[min(int((start - math.floor(start / WEEK) * WEEK) // HOUR), BINS - 1)]
        # owed(start + d) = owed(start) + count d + r d^2 / 2
        if r > 0:
            d = (-count + math.sqrt(count * count + 2.0 * r * need)) / r
        else:
            d = need / count if count > 0 else horizon
        return min(base + start + d, t0 + horizon)


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's correlation of ``x`` and ``y`` (None when either is
    constant: no rhythm to compare)."""
    n = len(x)
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    # A spread over whole days adds the same to every hour: a "variance"
    # of rounding errors is no rhythm.
    if sxx <= 1e-12 * math.fsum(a * a for a in x) or syy <= 1e-12 * math.fsum(b * b for b in y):
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


class RateProfile:
    """Learns a 168-bin rate profile from counted events over intervals.

    :param forget: time constant in seconds of the exponential forgetting
        (``None``: keep everything).
    :param prior_seconds: how many seconds of exposure a bin needs before its
        own data outweighs the product model it is shrunk towards.
    :param prior_events: pseudo-events (at the flat rate) each hour-of-day
        and weekday level is shrunk with.
    :param smoothing: weight of each neighbouring hour in the circular
        smoothing of the week (0 = none; 0.25 = kernel 1/4, 1/2, 1/4).
    """

    __slots__ = (
        "counts",
        "exposure",
        "forget",
        "prior_seconds",
        "prior_events",
        "smoothing",
        "observations",
        "_reference",
        "_last",
        "_now",
        "_events",
        "_weekly",
        "_shape",
        "_fitted_at",
        "_count_total",
        "_exposure_total",
        "_diff",
        "_all_bins",
        "_pending",
        "_period_start",
        "_previous",
        "_current",
        "_belief",
    )

    def __init__(
        self,
        *,
        forget: float | None = 28 * DAY,
        prior_seconds: float = 2 * HOUR,
        prior_events: float = 0.5,
        smoothing: float = 0.2,
    ):
        self.counts = [0.0] * BINS
        self.exposure = [0.0] * BINS
        self.forget = forget
        self.prior_seconds = prior_seconds
        self.prior_events = prior_events
        self.smoothing = smoothing
        self.observations = 0
        # Forgetting without touching every bin on every update: what is
        # stored is weighted by exp((t - reference) / forget), so newer data
        # weighs more; everything is rebased before that weight overflows.
        self._reference: float | None = None
        self._last: float | None = None
        self._now: float | None = None  # _now_weight(), until the next observation
        self._events: float | None = None  # events, likewise
        self._weekly: WeeklyRates | None = None
        self._shape: WeeklyRates | None = None
        self._fitted_at = -1
        self._count_total = 0.0  # sum of counts, kept up to date (stored units)
        self._exposure_total = 0.0
        # Exposure not yet in the bins (see _add_exposure).
        self._diff = [0.0] * (BINS + 1)
        self._all_bins = 0.0
        self._pending = False
        # Persistence of the hour-of-day rhythm (see _believed): the changes'
        # hour-of-day counts of the last complete period and of the one in
        # progress (a period is half the forgetting horizon), and how far
        # the learnt shape is believed (None: no verdict yet, all of it).
        self._period_start: float | None = None
        self._previous: list[float] | None = None
        self._current = [0.0] * 24
        self._belief: float | None = None

    # -- learning -----------------------------------------------------------

    def _rescale(self, factor: float) -> None:
        self._flush()
        self.counts = [c * factor for c in self.counts]
        self.exposure = [e * factor for e in self.exposure]
        self._count_total *= factor
        self._exposure_total *= factor

    def _now_weight(self) -> float:
        """Weight of the newest observation: dividing stored sums by it gives
        forgotten ("effective") events and seconds as of that time."""
        weight = self._now
        if weight is None:
            # Asked several times per visit (the planner's shape_of reads
            # ``events``), changed only by observe(): kept until then.
            if self.forget is None or self._reference is None or self._last is None:
                weight = 1.0
            else:
                weight = math.exp((self._last - self._reference) / self.forget)
            self._now = weight
        return weight

    def observe(self, t0: float, t1: float, count: float, at: float | None = None) -> None:
        """A visit at ``t1`` counted ``count`` events since the visit at
        ``t0``; ``at``, if known, is when they happened (a
        ``Last-Modified``)."""
        if t1 <= t0:
            return
        forget = self.forget
        if forget is None:
            weight = 1.0
        else:  # growing_weight(...), inlined with its arithmetic: observe runs twice per visit
            reference = self._reference
            if reference is None:
                reference = t1
            exponent = (t1 - reference) / forget
            if exponent > 30.0:
                self._rescale(math.exp(-exponent))
                weight, self._reference = 1.0, t1
            else:
                weight, self._reference = math.exp(exponent), reference
            self._now = self._events = None  # the reference may have moved
            start = self._period_start
            if start is None:
                self._period_start = t1
            elif t1 - start >= 0.5 * forget:
                self._next_period(t1)
        self._count_total += weight * count
        self._exposure_total += weight * (t1 - t0)
        self._add_exposure(t0, t1, weight)
        if count > 0:
            current = self._current
            if at is not None and t0 <= at <= t1:
                b = hour_of_week(at)
                self.counts[b] += weight * count
                current[b % 24] += count
            elif t1 - t0 <= HOUR - ((t0 + _WEEK_SHIFT) % HOUR):
                b = hour_of_week(t0)
                self.counts[b] += weight * count  # one bin
                current[b % 24] += count
            else:
                # Spread the count like the current estimate says it arrived.
                pieces = list(iter_segments(t0, t1))
                rates = self.weekly().rates
                masses = [rates[b] * seconds for b, seconds in pieces]
                total = math.fsum(masses)
                if total <= 0:
                    masses = [seconds for _, seconds in pieces]
                    total = math.fsum(masses)
                for (b, _), mass in zip(pieces, masses):
                    self.counts[b] += weight * count * mass / total
                # The period's counts are spread by time alone: spread by
                # the learnt rates, they would carry the learnt shape into
                # both periods and make any rhythm look persistent. (A
                # spread over whole days adds the same to every hour, which
                # leaves the correlation as it was.)
                span = t1 - t0
                for b, seconds in pieces:
                    current[b % 24] += count * seconds / span
        self._last = max(t1, self._last or t1)
        self._now = self._events = None
        self.observations += 1

    def _next_period(self, t: float) -> None:
        """Close the periods that ended by ``t``: each closed period's
        hour-of-day counts are compared with the period before it, and the
        correlation decides how far the learnt shape is believed until the
        next one closes."""
        period = 0.5 * self.forget
        while t - self._period_start >= period:
            previous, current = self._previous, self._current
            if previous is not None:
                r = _pearson(previous, current)
                if r is not None:  # else (a period with no changes, or flat): no new verdict
                    belief = max(0.0, r)
                    if belief != self._belief:
                        self._belief = belief
                        self._shape = None
            self._previous = current
            self._current = [0.0] * 24
            self._period_start += period

    def _add_exposure(self, t0: float, t1: float, weight: float) -> None:
        """Add ``[t0, t1]`` to the bins' exposure in O(1): whole weeks to
        every bin at once, whole hours as a range of a difference array
        (summed when read), the two partial hours directly."""
        span = t1 - t0
        if span >= WEEK:
            weeks = math.floor(span / WEEK)
            self._all_bins += weight * weeks * HOUR
            t0 += weeks * WEEK
        if t1 <= t0:
            return
        first_end = (math.floor((t0 + _WEEK_SHIFT) / HOUR) + 1) * HOUR - _WEEK_SHIFT
        b0 = int(((t0 + _WEEK_SHIFT) % WEEK) // HOUR)  # hour_of_week(t0), inlined: hot
        if t1 <= first_end:
            self.exposure[b0] += weight * (t1 - t0)
            return
        self.exposure[b0] += weight * (first_end - t0)
        last_start = math.floor((t1 + _WEEK_SHIFT) / HOUR) * HOUR - _WEEK_SHIFT
        if t1 > last_start:
            self.exposure[int(((t1 + _WEEK_SHIFT) % WEEK) // HOUR)] += weight * (t1 - last_start)
        full = int(round((last_start - first_end) / HOUR))
        if full > 0:
            diff = self._diff
            start = (b0 + 1) % BINS
            stop = start + full
            diff[start] += weight * HOUR
            if stop <= BINS:
                diff[stop] -= weight * HOUR
            else:  # wraps past Sunday 24:00
                diff[BINS] -= weight * HOUR
                diff[0] += weight * HOUR
                diff[stop - BINS] -= weight * HOUR
            self._pending = True

    def _flush(self) -> None:
        """Fold the pending range additions into ``exposure``."""
        if not self._pending and not self._all_bins:
            return
        running, every = 0.0, self._all_bins
        diff, exposure = self._diff, self.exposure
        for b in range(BINS):
            running += diff[b]
            exposure[b] += running + every
            diff[b] = 0.0
        diff[BINS] = 0.0
        self._all_bins = 0.0
        self._pending = False

    # -- reading ---------------------------------------------------------------

    @property
    def events(self) -> float:
        """Events recorded, after forgetting."""
        events = self._events
        if events is None:  # read at every visit (shape_of), changed by observe()
            events = self._events = self._count_total / self._now_weight()
        return events

    @property
    def watched(self) -> float:
        """Seconds watched, after forgetting."""
        return self._exposure_total / self._now_weight()

    def flat_rate(self) -> float:
        """Events per second over everything watched (0 with no data)."""
        self._flush()
        exposure = math.fsum(self.exposure)
        return math.fsum(self.counts) / exposure if exposure > 0 else 0.0

    def weekly(self) -> WeeklyRates:
        """The current estimate as :class:`WeeklyRates` (refitted lazily:
        after about every 2 % new observations, and at least 8, since one
        visit barely moves 168 bins)."""
        if self._weekly is not None and (
            self.observations - self._fitted_at <= max(8, self._fitted_at // 50)
        ):
            return self._weekly
        self._weekly = WeeklyRates(self._fit())
        self._shape = None
        self._fitted_at = self.observations
        return self._weekly

    def shape(self) -> WeeklyRates:
        """:meth:`weekly` divided by its mean (flat when there is no data)."""
        shape = self._shape
        if shape is not None and self.observations - self._fitted_at <= max(8, self._fitted_at // 50):
            return shape  # weekly()'s test, without the call (asked twice per visit)
        weekly = self.weekly()
        if self._shape is None:
            self._shape = self._believed(weekly.shape())
        return self._shape

    def _believed(self, shape: WeeklyRates) -> WeeklyRates:
        """``shape`` believed as far as the profile's hour-of-day rhythm
        predicted the last period: ``1 + w (x - 1)`` for each level ``x``,
        with ``w = max(0, r)`` and ``r`` the Pearson correlation of the
        changes' hour-of-day counts in the last complete period with those
        in the period before (a period is half the forgetting horizon). A
        rhythm that lasts (a team's working hours) is kept; one that moves
        from period to period (contributors coming and going) would place
        revisits after hours that are no longer busy, so it fades to flat.
        Until two periods have been seen (and had changes), ``w = 1``: the
        learnt shape as before, so young profiles plan as they did."""
        w = self._belief
        if w is None or w >= 1.0:
            return shape
        return WeeklyRates([1.0 + w * (x - 1.0) for x in shape.rates])

    def _fit(self) -> list[float]:
        self._flush()
        counts, exposure = self.counts, self.exposure
        total_exposure = math.fsum(exposure)
        if total_exposure <= 0:
            return [0.0] * BINS
        flat = math.fsum(counts) / total_exposure
        # Hour-of-day and weekday levels have plenty of data (every day feeds
        # them): a weak prior worth ``prior_events`` events at the flat rate,
        # so that quiet hours are not pulled up towards the mean.
        events = self.prior_events
        beta = events / flat if flat > 0 else 0.0
        hour_counts = [0.0] * 24
        hour_exposure = [0.0] * 24
        for b in range(BINS):
            hour_counts[b % 24] += counts[b]
            hour_exposure[b % 24] += exposure[b]
        hour_rate = [
            (hour_counts[h] + events) / (hour_exposure[h] + beta)
            if hour_exposure[h] + beta > 0 else flat
            for h in range(24)
        ]  # fmt: skip
        model = self._product_model(hour_rate, flat, beta) if flat > 0 else [0.0] * BINS
        # Bins are shrunk towards the product model (the prior in the stored,
        # forgetting-weighted units).
        alpha = self.prior_seconds * self._now_weight()
        rates = [(counts[b] + alpha * model[b]) / (exposure[b] + alpha) for b in range(BINS)]
        if self.smoothing > 0:
            s = self.smoothing
            rates = [
                (1 - 2 * s) * rates[b] + s * (rates[b - 1] + rates[(b + 1) % BINS])
                for b in range(BINS)
            ]
        return rates

    def _product_model(self, hour_rate: list[float], flat: float, beta: float) -> list[float]:
        """``hour-of-day rate x weekday rate / flat`` for every bin, with the
        weekday boundary where it fits best.

        A site's days start at its local midnight, not at UTC midnight: for a
        site at UTC+8 the UTC hours 16-24 of a Friday are its Saturday. The
        product is separable only with the right boundary, so each of the 24
        possible ones is tried and the one with the highest Poisson
        likelihood is kept (the hour-of-day factor is the same for all).
        """
        counts, exposure = self.counts, self.exposure
        best = None
        # Every boundary's likelihood in numpy first (a few ulps off the
        # exact sums below: another order of summation and another log),
        # then only the boundaries that could be the best are summed
        # exactly, in their order, so the kept one (the first with the
        # highest likelihood) and the fit are bit for bit those of the
        # plain loop over all 24 (which cost a twelfth of the planner's time).
        for shift in self._candidate_shifts(hour_rate, flat, beta):
            days = _DAY_OF_BIN[shift]
            day_rate = self._day_rate(days, flat, beta)
            likelihood = _likelihood(hour_rate, day_rate, days, flat, counts, exposure)
            if best is None or likelihood > best[0]:
                best = (likelihood, day_rate, days)
        _, day_rate, days = best
        return [hour_rate[h] * day_rate[d] / flat for h, d in zip(_HOUR_OF_BIN, days)]

    def _day_rate(self, days: list[int], flat: float, beta: float) -> list[float]:
        """The weekday rates with the boundary of ``days`` (shrunk like the
        hours: ``prior_events`` at the flat rate)."""
        events = self.prior_events
        day_counts = [0.0] * 7
        day_exposure = [0.0] * 7
        for d, c, e in zip(days, self.counts, self.exposure):
            day_counts[d] += c
            day_exposure[d] += e
        return [
            (day_counts[d] + events) / (day_exposure[d] + beta)
            if day_exposure[d] + beta > 0 else flat
            for d in range(7)
        ]  # fmt: skip

    #: relative error allowed for the approximate likelihoods (what numpy's
    #: order of summation and log can be off is about 1e-13 of the sum of
    #: the terms' magnitudes at most; this is a margin of 10,000)
    _SLACK = 1e-9

    def _candidate_shifts(self, hour_rate: list[float], flat: float, beta: float) -> list[int]:
        """The weekday boundaries whose likelihood may be the highest, in
        order: the others are below the best by more than both errors."""
        import numpy as np

        hour_index, day_index = _index_tables()
        counts = np.asarray(self.counts)
        exposure = np.asarray(self.exposure)
        index = day_index + 7 * np.arange(24)[:, None]
        day_counts = np.bincount(index.ravel(), np.tile(counts, 24), 168).reshape(24, 7)
        day_exposure = np.bincount(index.ravel(), np.tile(exposure, 24), 168).reshape(24, 7)
        denominator = day_exposure + beta
        with np.errstate(divide="ignore", invalid="ignore"):
            day_rate = np.where(denominator > 0, (day_counts + self.prior_events) / denominator, flat)
            model = np.asarray(hour_rate)[hour_index] * np.take_along_axis(day_rate, day_index, 1) / flat
            mean = model * exposure
            terms = np.where(mean > 0, counts * np.log(mean) - mean, 0.0)
        approx = terms.sum(axis=1)
        error = self._SLACK * (np.abs(terms).sum(axis=1) + (np.where(mean > 0, mean, 0.0) + counts).sum(axis=1))
        if not (np.isfinite(approx).all() and np.isfinite(error).all()):
            return list(range(24))  # nothing to bound with: all, exactly
        best = int(np.argmax(approx))
        floor = approx[best] - error[best]
        return [s for s in range(24) if approx[s] + error[s] >= floor]

    # -- persistence -------------------------------------------------------------

    def to_state(self) -> dict:
        """JSON-able state (the fit is redone from it, here too, so a
        restored profile plans exactly like this one)."""
        self._flush()
        self._weekly = self._shape = None
        return {
            "counts": self.counts,
            "exposure": self.exposure,
            "observations": self.observations,
            "reference": self._reference,
            "last": self._last,
            "periods": [self._period_start, self._previous, self._current, self._belief],
        }

    @classmethod
    def from_state(cls, state: dict, **kwargs) -> RateProfile:
        """A profile from :meth:`to_state`, each value checked
        (:mod:`.checks`: a bad one is a :class:`ValueError` naming it)."""
        state = checks.mapping(state, "profile")
        profile = cls(**kwargs)
        profile.counts = checks.numbers(state.get("counts"), "profile counts", BINS)
        # (exposure is summed through a difference array: a bin no range
        # covers can hold a rounding residue just below zero)
        profile.exposure = checks.numbers(state.get("exposure"), "profile exposure", BINS, -checks.AMOUNT)
        profile.observations = checks.count(state.get("observations"), "profile observations")
        profile._reference = checks.time(state.get("reference"), "profile reference")
        profile._last = checks.time(state.get("last"), "profile last visit")
        checks.since(profile._reference, profile._last, "profile")
        profile._count_total = math.fsum(profile.counts)
        profile._exposure_total = math.fsum(profile.exposure)
        periods = state.get("periods")  # absent from states saved before it: a young profile's
        if periods is not None:
            profile._load_periods(periods)
        _rebase(profile, profile.forget)
        return profile

    def _load_periods(self, periods) -> None:
        def number(value, what: str) -> float:
            # (an int beyond a float's range is refused here too: float() of it is an OverflowError)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1e300 < value < 1e300:
                raise ValueError(f"recrawl profile state: {what} {value!r} is not a number")
            return float(value)

        def hours(value, what: str) -> list[float]:
            if not isinstance(value, list) or len(value) != 24:
                raise ValueError(f"recrawl profile state: {what} is not 24 hour-of-day counts")
            counts = [number(c, what) for c in value]
            if not all(c >= 0 and math.isfinite(c) for c in counts):
                raise ValueError(f"recrawl profile state: bad {what} {value!r}")
            return counts

        if not isinstance(periods, list) or len(periods) != 4:
            raise ValueError(f"recrawl profile state: bad periods {periods!r}")
        start, previous, current, belief = periods
        if start is not None:
            start = number(start, "period start")
            if not math.isfinite(start):
                raise ValueError(f"recrawl profile state: bad period start {start!r}")
        if belief is not None:
            belief = number(belief, "belief")
            if not 0.0 <= belief <= 1.0:
                raise ValueError(f"recrawl profile state: belief {belief!r} outside [0, 1]")
        self._period_start = start
        self._previous = None if previous is None else hours(previous, "previous period")
        self._current = hours(current, "current period")
        self._belief = belief


class DayProfile:
    """The hour-of-day profile of a section's changes, estimated by maximum
    likelihood from interval-censored revisits (what the weekly timetables
    are placed on).

    A revisit that found a change only says the change lies since the
    previous revisit. :class:`RateProfile` spreads it over that interval
    like its current estimate says, once, and keeps it there: an interval
    of a whole day then teaches the profile its own shape back, and once
    every revisit of a section comes at the same hour a wrong hour stays
    wrong. Here each interval is kept, reduced to what matters for the
    hour of day — its starting hour, its whole days and the hours left
    over (so at most 24 x 25 x 8 kinds) — with its forgotten counts of
    visits and events, and the profile is the maximum of the Poisson
    likelihood of all of them, found by EM started from the last fit
    (:meth:`fit`, a few milliseconds, done when a timetable is rebuilt).
    Whole days weigh every hour the same and so, as they should, leave the
    shape to the intervals that start or end at varied hours (revisits
    several times a day, late revisits, explored ones). A change dated by
    ``Last-Modified`` counts in its hour.

    :param forget: time constant (seconds) of the exponential forgetting.
    :param prior_events: pseudo-events per hour at the flat rate (keeps
        hours never watched beyond whole days at the mean).
    :param smoothing: weight of each neighbouring hour in the smoothing
        step after every EM step.
    """

    __slots__ = ("forget", "prior_events", "smoothing", "cells", "dated", "_reference", "_last", "_day")

    #: whole days an interval is reduced to at most (longer ones weigh
    #: every hour alike all the more: they are counted as this many)
    MAX_DAYS = 7

    def __init__(self, forget: float | None = 180 * DAY, prior_events: float = 1.0, smoothing: float = 0.25):
        self.forget = forget
        self.prior_events = prior_events
        self.smoothing = smoothing
        #: (start hour, hours left over, whole days) -> [visits, events], weighted
        self.cells: dict[int, list[float]] = {}
        self.dated = [0.0] * 24  #: events dated by Last-Modified, per hour, weighted
        self._reference: float | None = None
        self._last: float | None = None  #: the newest visit
        self._day: list[float] | None = None

    def _weight(self, t: float) -> float:
        if self._last is None or t > self._last:
            self._last = t
        if self.forget is None:
            return 1.0
        weight, self._reference = growing_weight(self._reference, t, self.forget, self._rescale)
        return weight

    def _rescale(self, factor: float) -> None:
        for cell in self.cells.values():
            cell[0] *= factor
            cell[1] *= factor
        self.dated = [x * factor for x in self.dated]

    def observe(self, t0: float, t1: float, count: float, at: float | None = None) -> None:
        """A visit at ``t1`` counted ``count`` events since the visit at
        ``t0`` (``at``: when they happened, if known)."""
        if t1 <= t0:
            return
        w = self._weight(t1)
        hours = round((t1 - t0) / HOUR)
        days, rest = divmod(hours, 24)
        start = int((t0 % DAY) // HOUR)
        key = (start * 25 + rest) * 8 + min(days, self.MAX_DAYS)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = [0.0, 0.0]
        cell[0] += w
        if count > 0:
            if at is not None and t0 <= at <= t1:
                self.dated[int((at % DAY) // HOUR)] += w * count
            else:
                cell[1] += w * count

    def fit(self, iterations: int = 30) -> list[float]:
        """The 24 hourly rates, summing to 1 (flat with no data): EM on the
        stored intervals, from the last fit. O(kinds + 24) per iteration
        (numpy): a window's hours are a circular range, summed by prefix
        sums and shared by counting its ends (a difference array)."""
        import numpy as np

        if not self.cells:
            return [1.0 / 24] * 24
        keys = np.fromiter(self.cells.keys(), dtype=np.int64, count=len(self.cells))
        values = np.array(list(self.cells.values()), dtype=float)
        visits, events = values[:, 0], values[:, 1]
        rest_key, days = np.divmod(keys, 8)
        start, rest = np.divmod(rest_key, 25)
        end = start + rest
        # Hours watched: whole days to every hour, the rest as a range of
        # a difference array over two days, folded onto one.
        diff = np.bincount(start, visits, 49) - np.bincount(end, visits, 49)
        running = np.cumsum(diff[:48])
        exposure = float(visits @ days) + running[:24] + running[24:]
        dated = np.array(self.dated)
        events_total = float(events.sum() + dated.sum())
        watched = float(exposure.sum())
        if watched <= 0 or events_total <= 0:
            return [1.0 / 24] * 24
        used = events > 0
        events, days, start, end = events[used], days[used], start[used], end[used]
        # The prior in the stored units (newer data are stored heavier).
        prior = self.prior_events * (
            math.exp((self._last - self._reference) / self.forget)
            if self.forget is not None and self._reference is not None
            else 1.0
        )
        beta = prior * watched / events_total  # the prior's hours, at the flat rate
        rates = np.array(self._day if self._day is not None else [1.0 / 24] * 24)
        s = self.smoothing
        for _ in range(iterations):
            # E: each window's events shared over the hours it watched by
            # the current rates (whole days watch every hour once a day).
            prefix = np.concatenate(([0.0], np.cumsum(np.concatenate((rates, rates)))))
            mass = days * prefix[24] + prefix[end] - prefix[start]
            share = np.divide(events, mass, out=np.zeros_like(events), where=mass > 0)
            spread = np.cumsum(np.bincount(start, share, 49) - np.bincount(end, share, 49))[:48]
            counts = dated + rates * (float(share @ days) + spread[:24] + spread[24:])
            # M: events over hours watched, each hour shrunk to the flat rate.
            rates = (counts + prior) / (exposure + beta)
            # S: smoothed over neighbouring hours (EMS): the plain maximum
            # of interval-censored data piles the mass on a few hours.
            rates = (1 - 2 * s) * rates + s * (np.roll(rates, 1) + np.roll(rates, -1))
        self._day = (rates / rates.sum()).tolist()
        return self._day

    def to_state(self) -> dict:
        return {"cells": {str(k): v for k, v in self.cells.items()}, "dated": self.dated,
                "reference": self._reference, "last": self._last, "day": self._day}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict, **kwargs) -> DayProfile:
        """A day profile from :meth:`to_state`, each value checked
        (:mod:`.checks`): a cell's key is one :meth:`observe` makes (its
        start hour, hours and days decode within a day's two-day window)."""
        state = checks.mapping(state, "day profile")
        profile = cls(**kwargs)
        cells = {}
        for key, cell in checks.mapping(state.get("cells"), "day profile cells").items():
            try:
                k = int(key)
            except (TypeError, ValueError):
                k = -1
            if not (0 <= k < 24 * 25 * 8 and k % 8 <= cls.MAX_DAYS):
                raise ValueError(f"recrawl state: day profile cell {key!r} is not a window of hours")
            cells[k] = checks.numbers(cell, f"day profile cell {key}", 2)
        profile.cells = cells
        profile.dated = checks.numbers(state.get("dated"), "day profile dated counts", 24)
        profile._reference = checks.time(state.get("reference"), "day profile reference")
        profile._last = checks.time(state.get("last"), "day profile last visit")
        checks.since(profile._reference, profile._last, "day profile")
        day = state.get("day")
        if day is not None:
            day = checks.numbers(day, "day profile fit", 24, 0.0, 1.0)
            if not math.fsum(day) > 0:  # the fit is where the next one starts: all zero divides by zero
                raise ValueError("recrawl state: day profile fit is all zero")
        profile._day = day
        _rebase(profile, profile.forget)
        return profile


def _rebase(profile: RateProfile | DayProfile, forget: float | None) -> None:
    """Stored sums weigh ``exp((t - reference) / forget)``, rebased before
    that passes e^30; a state saved under a longer ``forget`` (or edited)
    can be past it under this one: rebased now, as the next observation
    would, before a weight overflows."""
    reference, last = profile._reference, profile._last
    if forget is not None and reference is not None and last is not None and (last - reference) / forget > 30.0:
        profile._rescale(math.exp(-(last - reference) / forget))
        profile._reference = last
