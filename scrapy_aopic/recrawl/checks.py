"""Checks of the re-crawl state read back from ``JOBDIR``.

Data read back from disk is checked, never trusted: the state file is
read with :func:`json.loads`, which takes ``NaN`` and ``Infinity``, and a
file can be damaged or edited. Each value is checked to be what the
planner writes (a number in range, a count, a list of so many numbers)
before anything is installed, and a bad one raises :class:`ValueError`
naming it (the re-crawl hook then starts afresh and says so), never a
``TypeError`` or ``OverflowError`` there, nor a crash later in the crawl.

The bounds are far beyond what a crawl writes and small enough that the
planner's arithmetic on them stays finite: stored sums carry forgetting
weights up to e^30 (about 1e13) and are summed over 168 bins, so an amount
is at most 1e100; a time (seconds since the epoch, or a simulation's
clock) at most 1e11 either way (year 5000).
"""

from __future__ import annotations

from typing import Any

#: largest amount (count of events, seconds watched, rate) a state may hold
AMOUNT = 1e100
#: largest time, either way
TIME = 1e11


def number(value: Any, what: str, low: float = 0.0, high: float = AMOUNT) -> float:
    """``value`` as a float if it is a number in ``[low, high]`` (not a
    bool; NaN is in no range; an int beyond a float's is compared exactly,
    never converted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"recrawl state: {what} {value!r} is not a number in [{low:g}, {high:g}]")
    return float(value)


def optional(value: Any, what: str, low: float = 0.0, high: float = AMOUNT) -> float | None:
    return None if value is None else number(value, what, low, high)


def time(value: Any, what: str) -> float | None:
    """A moment (or ``None``)."""
    return optional(value, what, -TIME, TIME)


def count(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value < 2**53:
        raise ValueError(f"recrawl state: {what} {value!r} is not a count")
    return value


def numbers(value: Any, what: str, length: int | None = None, low: float = 0.0, high: float = AMOUNT) -> list[float]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        size = "a list" if length is None else f"{length} numbers"
        raise ValueError(f"recrawl state: {what} is not {size}")
    return [number(x, what, low, high) for x in value]


def mapping(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"recrawl state: {what} is not a mapping")
    return value


def pairs(value: Any, what: str) -> dict[str, list[float]]:
    """``{name: [amount, amount]}`` (pooled counts)."""
    return {name: numbers(pair, f"{what} {name!r}", 2) for name, pair in mapping(value, what).items()}


def since(reference: float | None, last: float | None, what: str) -> None:
    """A growing-weight reference is never after the newest time it weighs."""
    if reference is not None and last is not None and reference > last:
        raise ValueError(f"recrawl state: {what} reference {reference!r} after its last time {last!r}")
