"""Random-forest regression of new-link counts on hour-of-day and weekday.

The seed paper's model: for each key (``host/first-path-segment``, falling
back to the host when the key has too little data), hourly counts of new
links become training rows ``(hour, weekday) -> links per hour``, a random
forest regression (Breiman 2001) is fitted on them, and its predictions for
the 168 hours of the week drive the revisit schedule. Here the predictions
become a :class:`~scrapy_aopic.recrawl.profile.WeeklyRates` *shape* that the
planner uses exactly like the estimator's profile, so the two models are
compared on equal terms.

Where a visit only tells how many links appeared between two visits, the
count is spread evenly over the hours in between (the seed paper puts each
article at the middle of the interval when it is shorter than an hour).

scikit-learn is optional (``pip install scrapy-aopic[ml]``):
:func:`forest_available` says whether it can be used, and constructing a
:class:`ForestModel` without it raises :class:`ImportError` with that hint.
"""

from __future__ import annotations

import importlib.util
import math

from .profile import BINS, DAY, HOUR, WeeklyRates

INSTALL_HINT = (
    "AOPIC_RECRAWL_MODEL = 'forest' needs scikit-learn: pip install 'scrapy-aopic[ml]'"
)


def forest_available() -> bool:
    """Whether scikit-learn can be imported."""
    return importlib.util.find_spec("sklearn") is not None


class ForestModel:
    """Per-key random-forest models of the weekly new-link rate.

    :param min_events: a key needs this many counted links before it gets its
        own model (else its host's, else none: the caller falls back).
    :param retrain_every: seconds between two fits (fitting is the costly
        part: tens of milliseconds per key).
    :param window: only the last ``window`` seconds of hourly data are kept.
    :param n_estimators: trees per forest.
    :param random_state: seed of the forests (reproducible schedules).
    """

    def __init__(
        self,
        *,
        min_events: float = 100,
        retrain_every: float = DAY,
        window: float = 28 * DAY,
        n_estimators: int = 30,
        min_samples_leaf: int = 3,
        random_state: int = 0,
    ):
        try:
            from sklearn.ensemble import RandomForestRegressor
        except ImportError as exc:  # pragma: no cover - exercised by monkeypatching
            raise ImportError(INSTALL_HINT) from exc
        self._regressor = RandomForestRegressor
        self.min_events = min_events
        self.retrain_every = retrain_every
        self.window = window
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        #: key -> {absolute hour index: [links, seconds watched]}
        self.hours: dict[str, dict[int, list[float]]] = {}
        self.events: dict[str, float] = {}
        self.shapes: dict[str, WeeklyRates] = {}
        self.trained_at: float | None = None
        self.fits = 0

    def observe(self, key: str, host: str, t0: float, t1: float, count: float) -> None:
        """A visit at ``t1`` counted ``count`` new links since ``t0``."""
        if t1 <= t0:
            return
        span = t1 - t0
        for name in (key, host) if key != host else (key,):
            table = self.hours.setdefault(name, {})
            t = t0
            while t < t1:
                index = math.floor(t / HOUR)
                end = min((index + 1) * HOUR, t1)
                seconds = end - t
                cell = table.get(index)
                if cell is None:
                    cell = table[index] = [0.0, 0.0]
                cell[0] += count * seconds / span
                cell[1] += seconds
                t = end
            self.events[name] = self.events.get(name, 0.0) + count

    def due_for_training(self, now: float) -> bool:
        """Whether :meth:`train` should run at ``now``."""
        return self.trained_at is None or now - self.trained_at >= self.retrain_every

    def train(self, now: float) -> int:
        """Fit one forest per key with enough data; returns how many."""
        self.trained_at = now
        horizon = math.floor((now - self.window) / HOUR)
        # A host's model is only a fallback: fit it only when one of its
        # keys is still too thin for a model of its own.
        thin_hosts = {
            name.split("/", 1)[0]
            for name in self.hours
            if "/" in name and self.events.get(name, 0.0) < self.min_events
        }
        fitted = 0
        for name, table in self.hours.items():
            for index in [i for i in table if i < horizon]:
                del table[index]
            if self.events.get(name, 0.0) < self.min_events:
                continue
            if "/" not in name and name not in thin_hosts:
                continue
            shape = self._fit(table)
            if shape is not None:
                self.shapes[name] = shape
                fitted += 1
        self.fits += fitted
        return fitted

    def _fit(self, table: dict[int, list[float]]) -> WeeklyRates | None:
        features, targets, weights = [], [], []
        for index, (links, seconds) in table.items():
            if seconds < 0.25 * HOUR:
                continue  # too little of that hour was watched to say anything
            start = index * HOUR
            # Unix hour 0 was Thursday 00:00 UTC: weekday 3 (Monday = 0).
            weekday = (math.floor(start / DAY) + 3) % 7
            hour = index % 24
            features.append([hour, weekday])
            targets.append(links * HOUR / seconds)
            weights.append(seconds / HOUR)
        if len(features) < 24:
            return None
        model = self._regressor(
            n_estimators=self.n_estimators,
            min_samples_leaf=self.min_samples_leaf,
            random_state=self.random_state,
            n_jobs=1,
        )
        model.fit(features, targets, sample_weight=weights)
        grid = [[b % 24, b // 24] for b in range(BINS)]
        predicted = model.predict(grid)
        rates = WeeklyRates([max(0.0, float(p)) / HOUR for p in predicted])
        if rates.mean <= 0:
            return None
        return rates.shape()

    def shape(self, key: str, host: str) -> tuple[str, WeeklyRates] | None:
        """``(name, shape)`` of the model for ``key``, else its host's."""
        for name in (key, host):
            shape = self.shapes.get(name)
            if shape is not None:
                return name, shape
        return None
