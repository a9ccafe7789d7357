"""The chain of rules that refuse a link before it gets cash.

Hygiene components (offsite, trap guard, robots.txt, learned duplicate
patterns) register a rule with the frontier's :class:`LinkFilterChain`; the
frontier asks the chain once per link, and a refused link gets no account:
its share of the page's cash goes to the page's other links and lambda.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request

#: ``(url, canonical_url, request, depth) -> reason or None``: a rule that
#: refuses a URL before it gets cash or enters the frontier.
LinkFilter = Callable[[str, str, "Request", int], "str | None"]


class LinkFilterChain:
    """Rules asked in order; the first reason given refuses the link."""

    def __init__(self) -> None:
        self._rules: list[LinkFilter] = []

    def register(self, rule: LinkFilter, *, first: bool = False) -> None:
        """Add ``rule`` at the end (or at the front: the cheapest, most
        common refusals go first)."""
        if first:
            self._rules.insert(0, rule)
        else:
            self._rules.append(rule)

    def refusal(self, url: str, canonical_url: str, request: Request, depth: int) -> str | None:
        """The reason ``url`` is refused, or ``None``."""
        for rule in self._rules:
            reason = rule(url, canonical_url, request, depth)
            if reason:
                return reason
        return None

    def __iter__(self) -> Iterator[LinkFilter]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)
