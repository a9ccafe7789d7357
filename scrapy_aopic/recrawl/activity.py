"""Hosts at work: a change found on a host makes more changes there soon.

Sites change in spells (a release being written, a translation sprint):
on the Rust book trace of ``benchmarks/recrawl_traces.py`` 69 % of the
changes fall on 12 % of the days, and a page is 15.9 times as likely to
change on a day after another page of the site changed
(``python benchmarks/recrawl_cochange.py --activity``). The co-change hints
(:mod:`.cochange`) say *which* pages a change touched when they learnt it;
this says *when* the whole host is worth watching more closely.

A revisit that finds a page changed makes its host *active* for ``window``
seconds (one day), extended by each further change found; otherwise the
host is *quiet*. Per host the model learns

* the share ``p`` of the time the host has been active, and
* ``lift``: its pages' change rate per second while active over the same
  while quiet. Each revisit's interval is split into its active and quiet
  seconds by the host's spells, and a change found in it is split the same
  way; ``pseudo`` changes at the host's mean rate on either side shrink the
  ratio to 1 while little is known.

The planner then revisits the host's pages :meth:`HostActivity.multiplier`
times as often as the budget's split says: ``M_a`` while active, ``M_q``
while quiet, with ``M_a = R M_q`` and ``p M_a + (1 - p) M_q = 1`` (in the
long run the host gets its share of the budget, only at other times) and
``R = sqrt(lift)`` within ``[min_ratio, max_ratio]``: for changes of rate
``r`` the frequency that minimises the delay under a budget goes as
``sqrt(r)``. A host whose changes do not come in spells (``lift`` near 1)
is revisited as before; one whose changes come while it looks quiet
(``lift`` below 1) a little less while active.

Memory per host: a few numbers and the spells of the last ``horizon``
seconds (at most ``max_spells``); per page, its URL in its host's set (for
the revisits brought forward when the host turns active).
"""

from __future__ import annotations

import math

from . import checks

DAY = 86400.0


class HostState:
    """What :class:`HostActivity` knows of one host."""

    __slots__ = ("spells", "since", "active_time", "exposure", "changes")

    def __init__(self, since: float):
        #: recent active spells ``[start, end]``, oldest first (the last is
        #: always kept: its end is when the host stops being active)
        self.spells: list[list[float]] = []
        self.since = since  #: first seen
        self.active_time = 0.0  #: seconds active in spells already pruned
        #: page-seconds watched while active and while quiet
        self.exposure = [0.0, 0.0]
        #: changes found, split the same way
        self.changes = [0.0, 0.0]

    @property
    def until(self) -> float | None:
        """Active until then (``None``: never active)."""
        return self.spells[-1][1] if self.spells else None

    def active(self, now: float) -> bool:
        return bool(self.spells) and now < self.spells[-1][1]

    def overlap(self, start: float, end: float) -> float:
        """Seconds of ``(start, end]`` the host was active."""
        total = 0.0
        for s0, s1 in reversed(self.spells):
            if s1 <= start:
                break
            total += max(0.0, min(end, s1) - max(start, s0))
        return total


class HostActivity:
    """Active and quiet spells of hosts, and how much more often to revisit
    a host's pages in each (see the module docstring).

    :param window: seconds a host stays active after a change found on it.
    :param min_ratio: the least ``M_a / M_q``.
    :param max_ratio: the most.
    :param pseudo: changes at the host's mean rate added to either side of
        ``lift`` (shrinks it to 1 while little is known).
    :param horizon: seconds of spells kept (older ones only count in the
        host's active time): revisit intervals longer than that see them
        as quiet.
    :param max_spells: spells kept per host at most.
    """

    #: seconds a host must have been watched before its share of active
    #: time is used (before: one half)
    MIN_WATCHED = 7 * DAY
    #: the least share of active time used (a host active once in a long
    #: while would otherwise spend its whole share in its rare spells)
    MIN_SHARE = 0.02

    def __init__(
        self,
        window: float = DAY,
        min_ratio: float = 0.5,
        max_ratio: float = 4.0,
        pseudo: float = 2.0,
        horizon: float = 8 * DAY,
        max_spells: int = 64,
    ):
        if not window > 0:
            raise ValueError(f"activity window must be > 0, got {window!r}")
        if not 0 < min_ratio <= 1 <= max_ratio:
            raise ValueError(f"need 0 < min_ratio <= 1 <= max_ratio, got {min_ratio!r}, {max_ratio!r}")
        self.window = float(window)
        self.min_ratio = float(min_ratio)
        self.max_ratio = float(max_ratio)
        self.pseudo = float(pseudo)
        self.horizon = float(horizon)
        self.max_spells = int(max_spells)
        self.hosts: dict[str, HostState] = {}
        #: host -> URLs of its pages (the planner's), for :meth:`pages_of`
        self._pages: dict[str, set[str]] = {}
        self.spells_started = 0  #: times a host turned active

    def add_page(self, host: str, url: str) -> None:
        """``url`` is a page of ``host`` the planner plans."""
        pages = self._pages.get(host)
        if pages is None:
            pages = self._pages[host] = set()
        pages.add(url)

    def forget_page(self, host: str, url: str) -> None:
        pages = self._pages.get(host)
        if pages is not None:
            pages.discard(url)
            if not pages:
                del self._pages[host]

    def pages_of(self, host: str) -> set[str]:
        return self._pages.get(host, set())

    def observe(self, host: str, previous: float | None, now: float, changed: bool | None) -> bool:
        """A visit at ``now`` of a page of ``host`` last visited at
        ``previous`` (``None``: a first visit) found it ``changed`` (or
        not, or ``None``: unknown). Returns whether the host turned active."""
        state = self.hosts.get(host)
        if state is None:
            state = self.hosts[host] = HostState(now if previous is None else min(previous, now))
        if previous is not None and now > previous:
            span = now - previous
            active = state.overlap(previous, now)
            state.exposure[0] += active
            state.exposure[1] += span - active
            if changed:
                state.changes[0] += active / span
                state.changes[1] += (span - active) / span
        if not changed:
            return False
        until = now + self.window
        if state.active(now):
            state.spells[-1][1] = max(until, state.spells[-1][1])
            return False
        state.spells.append([now, until])
        self._prune(state, now)
        self.spells_started += 1
        return True

    def _prune(self, state: HostState, now: float) -> None:
        spells = state.spells
        drop = 0
        while drop < len(spells) - 1 and (spells[drop][1] < now - self.horizon or len(spells) - drop > self.max_spells):
            state.active_time += spells[drop][1] - spells[drop][0]
            drop += 1
        if drop:
            del spells[:drop]

    def ratio(self, host: str) -> float:
        """``M_a / M_q`` of ``host``: ``sqrt(lift)`` within the bounds."""
        state = self.hosts.get(host)
        return 1.0 if state is None else self._ratio(state)

    def _ratio(self, state: HostState) -> float:
        (active, quiet), (changed_active, changed_quiet) = state.exposure, state.changes
        if active <= 0 or quiet <= 0:
            return 1.0
        mean = (changed_active + changed_quiet) / (active + quiet)
        if mean <= 0:
            return 1.0
        k = self.pseudo
        lift = ((changed_active + k) / (active + k / mean)) / ((changed_quiet + k) / (quiet + k / mean))
        return min(self.max_ratio, max(self.min_ratio, math.sqrt(lift)))

    def share_active(self, host: str, now: float) -> float:
        """The share of the time ``host`` has been active (one half until
        it has been watched ``MIN_WATCHED``)."""
        state = self.hosts.get(host)
        return 0.5 if state is None else self._share(state, now)

    def _share(self, state: HostState, now: float) -> float:
        watched = now - state.since
        if watched <= self.MIN_WATCHED:
            return 0.5
        active = state.active_time + sum(min(s1, now) - s0 for s0, s1 in state.spells if s0 < now)
        return min(max(active / watched, self.MIN_SHARE), 1.0)

    def multiplier(self, host: str, now: float) -> float:
        """How many times as often as the budget's split says to revisit
        a page of ``host`` planned at ``now``."""
        state = self.hosts.get(host)
        if state is None or not state.spells:
            return 1.0
        ratio = self._ratio(state)
        if ratio == 1.0:
            return 1.0
        share = self._share(state, now)
        quiet = 1.0 / (share * ratio + 1.0 - share)
        return ratio * quiet if state.active(now) else quiet

    # -- persistence -------------------------------------------------------------------

    def to_state(self) -> dict:
        return {
            "hosts": {
                host: [s.spells, s.since, s.active_time, s.exposure, s.changes]
                for host, s in self.hosts.items()
            },
            "spells_started": self.spells_started,
        }

    def load_state(self, state: dict) -> None:
        """Restore :meth:`to_state`, each value checked first
        (:mod:`.checks`); nothing changes when one is bad. The pages'
        index is the planner's to rebuild (:meth:`add_page`)."""
        state = checks.mapping(state, "host activity")
        hosts = {}
        for host, f in checks.mapping(state.get("hosts"), "host activity").items():
            if not isinstance(f, list) or len(f) != 5:
                raise ValueError(f"recrawl state: activity of {host!r} is not a host record"[:200])
            s = HostState(checks.number(f[1], f"activity of {host}: since", -checks.TIME, checks.TIME))
            if not isinstance(f[0], list):
                raise ValueError(f"recrawl state: spells of {host!r} are not a list"[:200])
            for spell in f[0][-self.max_spells :]:
                start, end = checks.numbers(spell, f"activity of {host}: spell", 2, -checks.TIME, checks.TIME)
                if end < start or (s.spells and start < s.spells[-1][1] - 1e-6):
                    raise ValueError(f"recrawl state: spells of {host!r} are not in order"[:200])
                s.spells.append([start, end])
            s.active_time = checks.number(f[2], f"activity of {host}: active time")
            s.exposure = checks.numbers(f[3], f"activity of {host}: exposure", 2)
            s.changes = checks.numbers(f[4], f"activity of {host}: changes", 2)
            hosts[host] = s
        started = checks.count(state.get("spells_started"), "activity spells started")
        self.hosts, self.spells_started = hosts, started
