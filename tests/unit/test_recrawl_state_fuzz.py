"""Hostile input to the re-crawl planner's state loader
(:meth:`RecrawlPlanner.load_state`, what the re-crawl hook reads from
``JOBDIR``): a real state with one value changed anywhere in it (every
field the loader reads: each page's 22 fields, its change and burst
histories, each profile's counts, exposure, observations, reference, last
and periods, the day profiles' cells, dated counts and day, the pools and
their base, the burst and new-page models' pools, base and counters, the allocator's
mu, the counters, the version). Each case is either refused with a
``ValueError`` (the hook then starts afresh, logged) leaving the planner
as it was (all or nothing), or accepted, and the planner then plans 30
more visits with finite intervals in its bounds and saves a state that is
JSON again. The file is read with :func:`json.loads`, which takes NaN and
Infinity: so does the fuzz. Seeded: the same cases every run. The re-crawl
hook's page versions, checked before the planner's state, get hostile
values by name (wrong types and shapes, NaN, out of 64 bits): refused,
the hook starts afresh, counted."""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import random

import pytest

from scrapy_aopic.recrawl.planner import RecrawlPlanner

CASES = int(os.environ.get("AOPIC_FUZZ_CASES", 120))
SEED = os.environ.get("AOPIC_FUZZ_SEED", "")
T0 = 1.7e9
SETUPS = {
    "budget": dict(budget=50.0, timetable=True, burst=True),
    "plain": dict(),
    "cochange": dict(budget=50.0, timetable=True, cochange=True),
    "activity": dict(budget=50.0, timetable=True, cochange=True, activity=True, new_pages=True),
}


def hostile(rng: random.Random, old):
    choices = ["str", None, True, False, [], {}, -1, -1.5, 1e308, 10**400, 2**63, 0, 0.0, 1e-300, "1.5",
               math.nan, math.inf, -math.inf, [0.0], {"0": [1.0, 1.0]}]
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        choices += [-old, old * 2 + 1, old + 1e12, old - 1e12, old * 1e200 if old else 1e200]
    if isinstance(old, list):
        choices += [old[:-1], old + old[-1:], [old]]
    if isinstance(old, dict):
        choices += [list(old.values()), {k + "x": v for k, v in old.items()}]
    return copy.deepcopy(rng.choice(choices))


def _paths(value, path=()):
    """Every place in the state (containers too)."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, path + (i,))


def _kind(path: tuple) -> tuple:
    """The field a path names, whichever page, profile, bin or bucket."""
    kind = []
    for depth, key in enumerate(path):
        parent = path[depth - 1] if depth else None
        if parent in ("pages", "profiles", "day_profiles", "pools", "cells") or (
                isinstance(key, int) and len(kind) > 1 and kind[-1] in (17, "counts", "exposure", "dated", "day")):
            key = "*"
        elif depth > 0 and path[0] == "burst" and parent == "pools":
            key = "*"
        elif path[0] == "cochange" and (depth == 2 or (depth == 3 and path[1] in ("recent", "partners"))):
            key = "*"  # a host's windows, a page's partners or count; a window, a partner
        elif path[0] == "activity" and (depth == 2 or (depth == 4 and path[3] == 0)):
            key = "*"  # a host's record; one of its spells
        kind.append(key)
    return tuple(kind)


def _set(state, path, value):
    for key in path[:-1]:
        state = state[key]
    state[path[-1]] = value


def _get(state, path):
    for key in path:
        state = state[key]
    return state


def trained(setup: str) -> RecrawlPlanner:
    planner = RecrawlPlanner(**SETUPS[setup])
    rng = random.Random(5)
    for i in range(400):
        page = rng.randrange(25)
        now = T0 + i * 1800.0
        url = f"https://h{page % 3}.example/s{page % 2}/p{page}"
        if i % 37 == 5:
            planner.on_failure(url, f"h{page % 3}.example", now)
            continue
        planner.on_visit(url, f"h{page % 3}.example", now, changed=rng.random() < 0.4,
                         new_links=rng.randrange(3) if page % 4 else None, depth=1,
                         last_modified=now - 600.0 if i % 5 == 0 else None, importance=rng.random())
    planner.due(T0 + 400 * 1800.0)
    return planner


@functools.lru_cache(maxsize=None)
def saved(setup: str) -> str:
    """The trained planner's state as the file holds it."""
    return json.dumps(trained(setup).to_state())


def goes_on(planner: RecrawlPlanner, rng: random.Random) -> None:
    """30 more visits (known pages and new ones), each planned within bounds."""
    urls = list(planner.pages)[:20] + [f"https://new{i}.example/a/p" for i in range(5)]
    now = T0 + 401 * 1800.0
    for step in range(30):
        url = rng.choice(urls)
        now += 900.0
        if step % 7 == 3:  # a failed revisit backs off from the page's failures
            assert planner.min_interval <= planner.on_failure(url, url.split("/")[2], now) - now
            continue
        interval = planner.on_visit(url, url.split("/")[2], now, changed=rng.random() < 0.5,
                                    new_links=rng.randrange(3), depth=1)
        assert math.isfinite(interval) and interval >= 0, (url, interval)
        planned = planner.plan_interval(url, now)
        assert planner.min_interval <= planned <= planner.max_interval, (url, planned)
        planner.due(now + step * 3600.0)
        planner.estimate(url)
    planner.top_hubs(5)
    json.dumps(planner.to_state(), allow_nan=False)


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_a_planner_state_with_one_hostile_value_is_refused_whole_or_planned_from(setup):
    state0 = json.loads(saved(setup))
    # One place per kind (a page's field, a profile's counts...), so the
    # 168 bins of each page do not drown the rest: every field is changed.
    kinds: dict[tuple, list[tuple]] = {}
    for path in _paths(state0):
        if path:
            kinds.setdefault(_kind(path), []).append(path)
    assert len(kinds) > 60, sorted(kinds)
    rng = random.Random(f"fuzz-planner-state-{setup}{SEED}")
    refused = 0
    failures = []
    for case in range(CASES):
        state = copy.deepcopy(state0)
        path = rng.choice(kinds[rng.choice(sorted(kinds, key=repr))])
        _set(state, path, hostile(rng, _get(state, path)))
        where = f"{'/'.join(map(str, path))}={_get(state, path)!r}"[:200]
        planner = RecrawlPlanner(**SETUPS[setup])
        planner.load_state(json.loads(json.dumps(state0)))  # what a refused load must leave
        try:
            planner.load_state(state)
        except ValueError:
            refused += 1
            try:
                assert json.dumps(planner.to_state(), sort_keys=True) == json.dumps(state0, sort_keys=True)
            except Exception as exc:  # noqa: BLE001
                failures.append(f"case {case}: {where}: refused, but the planner changed: {exc}"[:400])
            continue
        except Exception as exc:  # noqa: BLE001 - every case is named in the failure
            failures.append(f"case {case}: {where}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        try:
            goes_on(planner, random.Random(case))
        except Exception as exc:  # noqa: BLE001
            failures.append(f"case {case}: {where}: accepted, then {type(exc).__name__}: {str(exc)[:200]}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)
    assert refused > CASES // 4


# -- each crash the fuzz found, named (each failed on main as said) -------------------------------------

PAGE = "https://h1.example/s1/p13"


@pytest.mark.parametrize("path, value, failed_on_main", [
    (("profiles", "h1.example", "counts", 0), None, "TypeError: float() argument must be ... not 'NoneType'"),
    (("profiles", "h1.example", "counts", 0), 10**400, "OverflowError: int too large to convert to float"),
    (("profiles", "h1.example", "counts"), [0.0], "accepted, then IndexError: list index out of range"),
    (("profiles", "h1.example", "last"), 2**63, "accepted, then OverflowError: math range error"),
    (("profiles", "h1.example", "reference"), math.inf, "accepted, then ZeroDivisionError"),
    (("profiles", "h1.example", "exposure", 3), math.nan, "accepted, then a state json.dumps refuses (NaN)"),
    (("day_profiles", "h1.example", "last"), "str", "accepted, then TypeError: '>' float and str"),
    (("day_profiles", "h1.example", "cells"), 1e-300, "AttributeError: 'float' object has no attribute 'items'"),
    (("pages", PAGE, 7), None, "accepted, then TypeError: unsupported operand NoneType * float"),
    (("pages", PAGE, 15), math.nan, "accepted, then a state json.dumps refuses (NaN)"),
    (("pages", PAGE, 17, 0), "str", "TypeError: must be real number, not str"),
    (("pages", PAGE, 10, 3), 1e-300, "accepted, then ZeroDivisionError (Newton from the hint)"),
    (("pages", PAGE, 10), 1e308, "TypeError: 'float' object is not subscriptable"),
    (("counters", 0), [], "accepted, then TypeError: 'int' object is not iterable"),
    (("burst", "counters"), [1], "ValueError: not enough values to unpack (refused, but the pages were loaded)"),
])
def test_a_hostile_value_the_planner_fuzz_found_is_refused_whole(path, value, failed_on_main):
    state0 = json.loads(saved("budget"))
    state = copy.deepcopy(state0)
    _set(state, path, value)
    planner = RecrawlPlanner(**SETUPS["budget"])
    with pytest.raises(ValueError, match="recrawl state"):
        planner.load_state(state)
    assert planner.pages == {} and planner.profiles == {} and planner.revisits == 0  # nothing installed


def test_a_page_that_failed_1024_times_backs_off_to_max_interval():
    """A count the state may hold (a page failing every day for three
    years): on main ``2.0 ** 1025`` raised OverflowError in on_failure."""
    state = json.loads(saved("plain"))
    state["pages"][PAGE][14] = 1024
    planner = RecrawlPlanner()
    planner.load_state(state)
    assert planner.on_failure(PAGE, "h1.example", T0) == T0 + planner.max_interval


def test_a_refused_state_leaves_the_planner_as_it_was():
    """All or nothing: on main the pages before the bad one were kept (and
    the re-crawl hook said it started afresh)."""
    state0 = json.loads(saved("plain"))
    last = list(state0["pages"])[-1]
    state = copy.deepcopy(state0)
    state["pages"][last][10] = [{"29x": [1.0, 1.0]}, 0.0, None, 0.0, 0]  # the last page's history is bad
    planner = RecrawlPlanner()
    planner.load_state(copy.deepcopy(state0))
    before = json.dumps(planner.to_state(), sort_keys=True)
    with pytest.raises(ValueError, match="change history bucket"):
        planner.load_state(state)
    assert json.dumps(planner.to_state(), sort_keys=True) == before
    fresh = RecrawlPlanner()
    with pytest.raises(ValueError):
        fresh.load_state(state)
    assert fresh.pages == {}


class _Stats:
    def __init__(self):
        self.values = {}

    def set_value(self, key, value):
        self.values[key] = value

    def inc_value(self, key, count=1, start=0):
        self.values[key] = self.values.get(key, start) + count


def test_the_hook_starts_afresh_from_a_refused_state_and_counts_it(tmp_path, caplog):
    """Nothing of a refused state is loaded (on main the page versions and
    the pages before the bad value stayed), counted and logged once."""
    import types

    from scrapy_aopic.recrawl.change import PageVersion, Validators
    from scrapy_aopic.recrawl.hook import RecrawlHook
    from scrapy_aopic.store import MemoryStore

    path = tmp_path / "recrawl.json"
    hook = RecrawlHook(None, trained("plain"), state_path=path, clock=lambda: T0 + 401 * 1800.0)
    hook.versions = {url: PageVersion("c", 5, Validators(None, None)) for url in hook.planner.pages}
    hook.save_state(path)
    state = json.loads(path.read_text())
    last = list(state["planner"]["pages"])[-1]
    state["planner"]["pages"][last][3] = -1  # visits below zero
    path.write_text(json.dumps(state))
    again = RecrawlHook(None, RecrawlPlanner(), state_path=path, clock=lambda: T0 + 401 * 1800.0)
    crawler = types.SimpleNamespace(stats=_Stats())
    again.stats = crawler.stats
    with caplog.at_level("WARNING"):
        again.open(MemoryStore("pending"))
    assert again.planner.pages == {} and again.versions == {}
    assert crawler.stats.values["aopic/recrawl/state_refused"] == 1
    assert [r.message for r in caplog.records].count(next(
        r.message for r in caplog.records if "unreadable" in r.message)) == 1
    assert "visits -1" in caplog.text


_GOOD_VERSION = ["c" * 32, 5, '"e1"', "Wed, 21 Oct 2026 07:28:00 GMT"]
_HOSTILE_VERSIONS = {
    "not a list": "c,5,,",
    "null": None,
    "a mapping": {"checksum": "c", "fingerprint": 5},
    "empty": [],
    "three long": _GOOD_VERSION[:3],
    "five long": _GOOD_VERSION + [None],
    "nested": [_GOOD_VERSION],
    "checksum a number": [5, 5, None, None],
    "checksum a list": [["c"], 5, None, None],
    "fingerprint a float": ["c", 5.0, None, None],
    "fingerprint NaN": ["c", math.nan, None, None],
    "fingerprint inf": ["c", math.inf, None, None],
    "fingerprint a bool": ["c", True, None, None],
    "fingerprint a string": ["c", "5", None, None],
    "fingerprint 2**64": ["c", 2**64, None, None],
    "fingerprint -(2**64)": ["c", -(2**64), None, None],
    "fingerprint -1": ["c", -1, None, None],
    "fingerprint 10**400": ["c", 10**400, None, None],
    "etag a number": ["c", 5, 1, None],
    "last-modified a list": ["c", 5, None, ["Wed"]],
    "last-modified NaN": ["c", 5, None, math.nan],
}


def _hook_on(path, planner=None):
    from scrapy_aopic.recrawl.hook import RecrawlHook

    hook = RecrawlHook(None, planner or RecrawlPlanner(), state_path=path, clock=lambda: T0 + 401 * 1800.0)
    hook.stats = _Stats()
    return hook


def _opened_refused(path, caplog) -> list[str]:
    """Open a hook on the state at ``path``: it must refuse the whole state
    (no planner page, no page version kept, the refusal counted); the
    warnings that say so."""
    from scrapy_aopic.store import MemoryStore

    hook = _hook_on(path)
    with caplog.at_level("WARNING"):
        hook.open(MemoryStore("pending"))
    assert hook.planner.pages == {} and hook.versions == {}
    assert hook.stats.values.get("aopic/recrawl/state_refused") == 1
    return [r.message for r in caplog.records if "unreadable" in r.message]


@pytest.mark.parametrize("value", list(_HOSTILE_VERSIONS.values()), ids=list(_HOSTILE_VERSIONS))
def test_a_hostile_page_version_is_refused_and_the_hook_starts_afresh(tmp_path, caplog, value):
    """The page versions are checked before the planner's state: one bad
    version (read back through json, NaN and 10**400 included) refuses the
    whole state: no page version and no planner page is kept, the refusal is
    counted and logged once, and nothing but that ValueError surfaces."""
    path = tmp_path / "recrawl.json"
    saver = _hook_on(path, trained("plain"))
    saver.versions = {}
    saver.save_state(path)
    state = json.loads(path.read_text())
    assert state["planner"]["pages"]  # a planner state that loads by itself
    state["versions"] = {url: list(_GOOD_VERSION) for url in list(state["planner"]["pages"])[:3]}
    state["versions"]["https://h1.example/bad"] = value
    path.write_text(json.dumps(state))
    refused = _opened_refused(path, caplog)
    assert len(refused) == 1 and "the page version of https://h1.example/bad" in refused[0], caplog.text


@pytest.mark.parametrize("versions", [None, [], "x", 5, [["https://h1.example/a", _GOOD_VERSION]]])
def test_page_versions_of_the_wrong_shape_are_refused_whole(tmp_path, caplog, versions):
    path = tmp_path / "recrawl.json"
    saver = _hook_on(path, trained("plain"))
    saver.save_state(path)
    state = json.loads(path.read_text())
    state["versions"] = versions
    path.write_text(json.dumps(state))
    assert len(_opened_refused(path, caplog)) == 1


@pytest.mark.parametrize("value", [
    ["c", 2**64 - 1, None, None], ["c", 0, None, None], [None, None, None, None],
    ["c", 0, "e" * 100_000, None],  # above AOPIC_RECRAWL_VALIDATOR_MAX_BYTES: dropped, counted
], ids=["fingerprint 2**64-1", "fingerprint 0", "all null", "huge etag"])
def test_an_edge_page_version_is_loaded_and_compares(tmp_path, value):
    """At the bounds the check accepts: loaded, and the next response of the
    page is compared with it without an exception."""
    from scrapy.http import HtmlResponse

    from scrapy_aopic.store import MemoryStore

    path = tmp_path / "recrawl.json"
    url = "https://h1.example/edge"
    saver = _hook_on(path, trained("plain"))
    saver.save_state(path)
    state = json.loads(path.read_text())
    state["versions"] = {url: value}
    path.write_text(json.dumps(state))
    hook = _hook_on(path)
    hook.open(MemoryStore("pending"))
    assert "aopic/recrawl/state_refused" not in hook.stats.values
    assert hook.planner.pages and url in hook.versions
    if len(value[2] or "") > hook.validator_max_bytes:
        assert hook.versions[url].validators.etag is None
        assert hook.stats.values["aopic/recrawl/validators_dropped"] == 1
    hook.request_headers(url)
    response = HtmlResponse(url, body=b"<html><body><p>" + b"words here " * 50 + b"</p></body></html>")
    # (no checksum saved: whether it changed is unknown, None)
    assert hook.observe_response(url, response) is (None if value[0] is None else True)
