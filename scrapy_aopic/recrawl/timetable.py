"""Weekly timetables: *when* in the week to spend a page's revisits.

The budget (:mod:`~scrapy_aopic.recrawl.budget`) decides how many revisits
a page gets a week; a timetable decides when. A page whose changes follow
its section's hour-of-week profile ``s`` (``rate(t) = l s(t)``) and which is
fetched at the times ``t_1 < ... < t_k`` of every week waits, for a change
at ``t``, until the next fetch: the expected total delay over a week is::

    l * sum over i of  integral from t_(i-1) to t_i of (t_i - t) s(t) dt

(cyclic), and for a page that changes less than once between two fetches
(most pages under a budget) its stale time is the same integral. The page's
own rate only scales it: the best times depend on the profile and ``k``
alone, so one timetable serves every page of a section with the same number
of revisits a week. A fetch should come just after the busy hours: the
changes of a working day wait a few hours, not the night.

:func:`place` solves it on the hour boundaries of the week: the best single
fetch (``k = 1``) by trying all 168, then coordinate descent from ``k``
evenly spaced fetches placed from there (each fetch moved to the best hour
between its neighbours, whose optimum solves ``mass since the previous
fetch = s(t_i) (t_(i+1) - t_i)``), a few sweeps until nothing moves.
O(168 x sweeps) per timetable, about a millisecond.

Pure Python: no Scrapy, no numpy.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from .profile import BINS, HOUR, WEEK, _WEEK_SHIFT

#: revisits a week for which timetables are built; a page's frequency is
#: dithered between the two levels around it (so its mean is kept)
LEVELS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 21, 25, 30, 36, 42, 50, 60, 72, 84)


#: largest k that also gets the greedy start (O(k x 168) per added fetch)
GREEDY_MAX = 21


def _prefix(rates: Sequence[float]) -> tuple[list[float], list[float]]:
    """Prefix sums over two weeks of the rates and of rate x mid-hour."""
    p1, p2 = [0.0], [0.0]
    for h in range(2 * BINS):
        r = rates[h % BINS]
        p1.append(p1[-1] + r)
        p2.append(p2[-1] + r * (h + 0.5))
    return p1, p2


def waiting(rates: Sequence[float], slots: Sequence[int]) -> float:
    """Expected total delay (rate-hours x hours) over a week of fetching at
    the hour boundaries ``slots`` (sorted, in ``[0, 168)``) a process of
    hourly ``rates``; divided by the week's total it is the mean delay of a
    change, in hours."""
    p1, p2 = _prefix(rates)
    total = 0.0
    for i, b in enumerate(slots):
        a = slots[i - 1] if i else slots[-1] - BINS
        if a < 0:
            a, b = a + BINS, b + BINS
        total += b * (p1[b] - p1[a]) - (p2[b] - p2[a])
    return total


def place(rates: Sequence[float], k: int, sweeps: int = 12) -> list[int]:
    """``k`` hour boundaries of the week (sorted, bin ``b`` = ``b`` hours
    after Monday 00:00 UTC) that minimise the expected delay of changes
    arriving at hourly ``rates`` (168 of them), ``k`` in ``[1, 168]``."""
    if not 1 <= k <= BINS:
        raise ValueError(f"k must be in [1, {BINS}], got {k!r}")
    if k == BINS:
        return list(range(BINS))
    p1, p2 = _prefix(rates)

    def cost(a: int, b: int) -> float:  # changes in [a, b) wait until b (a < b <= a + 168)
        shift = (a // BINS) * BINS
        a -= shift
        b -= shift
        return b * (p1[b] - p1[a]) - (p2[b] - p2[a])

    # The best single fetch: each boundary, a whole week of waiting before it.
    best = min(range(BINS), key=lambda a: (cost(a, a + BINS), a))
    if k == 1:
        return [best]
    def descend(slots: list[int]) -> tuple[float, list[int]]:
        # Unrolled positions, increasing, spanning less than a week.
        for _ in range(sweeps):
            moved = False
            for i in range(k):
                prev = slots[i - 1] if i else slots[-1] - BINS
                nxt = slots[i + 1] if i + 1 < k else slots[0] + BINS
                here = slots[i]
                top = cost(prev, here) + cost(here, nxt)
                # cost(prev, b) + cost(b, nxt) for every b between, inlined
                # (the same arithmetic; a timetable build is mostly this loop)
                shift = (prev // BINS) * BINS
                a = prev - shift
                pa, qa = p1[a], p2[a]
                for b in range(prev + 1, nxt):
                    u = b - shift
                    split = (b // BINS) * BINS
                    v, w = b - split, nxt - split
                    c = (u * (p1[u] - pa) - (p2[u] - qa)) + (w * (p1[w] - p1[v]) - (p2[w] - p2[v]))
                    if c < top - 1e-12:
                        top, here = c, b
                if here != slots[i]:
                    slots[i] = here
                    moved = True
            if not moved:
                break
        return sum(cost(slots[i - 1] if i else slots[-1] - BINS, slots[i]) for i in range(k)), slots

    # Two starts (descent finds local optima: a fetch does not jump over its
    # neighbours): k evenly spaced fetches from the best single one, and,
    # for small k, fetches added one at a time where each saves the most.
    found = descend([best + (i * BINS) // k for i in range(k)])
    if k <= GREEDY_MAX:
        greedy = [best]
        while len(greedy) < k:
            ring = sorted(greedy)
            gain, pick = -1.0, None
            for j, a in enumerate(ring):
                b = ring[j + 1] if j + 1 < len(ring) else ring[0] + BINS
                whole = cost(a, b)
                shift = (a // BINS) * BINS
                u0 = a - shift
                pa, qa = p1[u0], p2[u0]
                for c in range(a + 1, b):
                    # whole - cost(a, c) - cost(c, b), inlined (the same arithmetic)
                    u = c - shift
                    split = (c // BINS) * BINS
                    v, w = c - split, b - split
                    saved = whole - (u * (p1[u] - pa) - (p2[u] - qa)) - (w * (p1[w] - p1[v]) - (p2[w] - p2[v]))
                    if saved > gain:
                        gain, pick = saved, c % BINS
            greedy.append(pick)
        ring = sorted(greedy)
        found = min(found, descend([b if b >= ring[0] else b + BINS for b in ring]))
    slots = found[1]
    return sorted(b % BINS for b in slots)


class Timetable:
    """Fetch times of every week (the hour boundaries of :func:`place`).

    :meth:`next_after` answers "the first fetch time after ``t``" in
    O(log k)."""

    __slots__ = ("slots", "offsets", "guard")

    def __init__(self, slots: Sequence[int]):
        self.slots = sorted(slots)
        self.offsets = [b * HOUR for b in self.slots]  #: seconds after Monday 00:00 UTC
        gaps = [
            (self.slots[i] - self.slots[i - 1]) % BINS or BINS for i in range(len(self.slots))
        ]
        # Half the shortest gap: a page fetched late (its host was busy) or
        # off the timetable (its first visit) skips a fetch time that comes
        # too soon after, rather than spending a revisit an hour later.
        self.guard = 0.5 * min(gaps) * HOUR

    def next_after(self, t: float, guard: float | None = None) -> float:
        """The first fetch time strictly after ``t + guard`` (default: this
        timetable's guard)."""
        t = t + (self.guard if guard is None else guard)
        shifted = t + _WEEK_SHIFT
        weeks = shifted // WEEK
        into = shifted - weeks * WEEK
        i = bisect_right(self.offsets, into)
        if i == len(self.offsets):
            weeks += 1
            i = 0
        return weeks * WEEK + self.offsets[i] - _WEEK_SHIFT
