"""argparse types for the benchmarks' comma-separated lists.

A misspelt name or number in ``--graphs rust-dco`` or ``--eps 0.1,O.01``
is a usage error naming what is accepted, before any work is done (instead
of a traceback minutes in, or a graph silently skipped); and
``tests/unit/test_doc_commands.py``, which parses every command the docs
quote with the script's own parser, then checks the quoted values too.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path


def words(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``: a comma-separated list of free names
    (domains, hosts), blanks dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def names(choices: Iterable[str], *, none: bool = True) -> Callable[[str], list[str]]:
    """``"a,b"`` -> ``["a", "b"]``, each one of ``choices``; ``"none"`` (if
    allowed) -> ``[]``."""
    allowed = list(choices)

    def parse(text: str) -> list[str]:
        if none and text == "none":
            return []
        items = words(text)
        unknown = [item for item in items if item not in allowed]
        if unknown:
            accepted = ", ".join(allowed + (["none"] if none else []))
            raise argparse.ArgumentTypeError(f"unknown {', '.join(map(repr, unknown))} (accepted: {accepted})")
        return items

    return parse


def numbers(text: str) -> list[float]:
    """``"0,0.01,inf"`` -> ``[0.0, 0.01, inf]``; ``"none"`` or ``""`` -> ``[]``."""
    if text == "none":
        return []
    try:
        return [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None


def declared_settings() -> set[str]:
    """The ``AOPIC_*`` names ``scrapy_aopic/settings.py`` of this tree declares,
    read from its source: importing scrapy_aopic while arguments are parsed
    would pin this tree's package in a process that then runs another
    checkout's (``--code``, ``--checkout``)."""
    source = (Path(__file__).resolve().parents[1] / "scrapy_aopic" / "settings.py").read_text(encoding="utf-8")
    return set(re.findall(r"^define\(\s*\"(AOPIC_\w+)\"", source, flags=re.M))


def setting(short_prefix: str | None = None) -> Callable[[str], str]:
    """``NAME=VALUE``, returned as given, once its ``AOPIC_*`` name is checked
    against :func:`declared_settings` (a misspelt name would otherwise be
    ignored by the crawl or the planner, and the run would measure the
    defaults). A name without ``AOPIC_`` is a Scrapy setting, or, with
    ``short_prefix``, short for ``short_prefix + NAME``."""

    def parse(text: str) -> str:
        name, sep, _ = text.partition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
        if short_prefix and not name.startswith("AOPIC_"):
            name = short_prefix + name
        if name.startswith("AOPIC_") and name not in declared_settings():
            raise argparse.ArgumentTypeError(f"no setting {name} in scrapy_aopic/settings.py")
        return text

    return parse


def settings_of(items: list[str], short_prefix: str | None = None) -> dict:
    """The ``NAME=VALUE`` items of :func:`setting` as a settings dict, each
    VALUE read as JSON if it parses (``true``, ``3``, ``[1, 2]``), else kept
    as a string; ``short_prefix`` as there."""
    settings = {}
    for item in items:
        key, _, value = item.partition("=")
        if short_prefix and not key.startswith("AOPIC_"):
            key = short_prefix + key
        try:
            settings[key] = json.loads(value)
        except ValueError:
            settings[key] = value
    return settings
