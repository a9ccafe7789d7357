"""Sphinx extension of the scrapy-aopic docs.

* ``.. setting:: NAME`` / ``:setting:`NAME``` and ``.. stat:: NAME`` /
  ``:stat:`NAME```: cross-referenceable settings and stats, as in Scrapy's
  own docs; a reference to an undeclared one is a warning (so ``-W`` fails).
* ``.. aopic-settings::``: the settings reference, generated from
  :data:`scrapy_aopic.settings.SETTINGS` (name, default, meaning, grouped) —
  the code's own definitions, so the docs cannot drift.
* ``.. aopic-settings-table::`` with ``:group: NAME``: a summary table of one
  group, linking to the reference (for feature pages).
* ``.. aopic-worked-example:: nutch|steps|convergence``: tables of the SPEC 2
  worked example, computed by running the engine at build time.
* ``.. aopic-addon-components::``: what ``ADDONS = {"scrapy_aopic.Addon": 0}``
  switches on, found by running the add-on at build time.
* ``:optional-doc:`Title <page>```: a link to a page another engineer may
  not have written yet; plain text until the page exists.
* ``.. optional-toctree::``: a toctree that leaves out pages that do not exist
  (yet); with ``:others:`` it also lists every other top-level page, so a new
  page never breaks the build for not being in a toctree.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.directives.other import TocTree
from sphinx.roles import XRefRole
from sphinx.util import docname_join
from sphinx.util.nodes import nested_parse_with_titles

#: Titles and introductions of the setting groups (``define(..., group, ...)``).
#: A group not listed here still appears, titled after its name.
GROUPS = {
    "core": ("Core: cash, lambda, history, storage", "The AOPIC engine and the scheduler (see :optional-doc:`the concepts <concepts>`)."),
    "hygiene": ("URL hygiene, near-duplicates, traps, robots.txt", "Which URLs get an account, and which never get cash."),
    "traps": ("Crawler traps", "Limits checked before a URL gets cash; ``0`` switches a rule off."),
    "duplicates": ("Near-duplicates", "SimHash near-duplicate detection."),
    "redis": ("Redis backend", "The shared frontier of a distributed crawl (``AOPIC_BACKEND = \"redis\"``)."),
    "recrawl": ("Re-crawl and freshness", "Continuous crawls that revisit pages."),
    "users": ("Exports", "What a crawl writes for later analysis (see :optional-doc:`the command <command>`)."),
    "report": ("Crawl report", "The report written at close (see :optional-doc:`the report <report>`)."),
}

_TITLE_ENTRY = re.compile(r"^(.*?)\s*<(.+)>$")


def _python(value) -> str:
    """``value`` as it would be written in ``settings.py``."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _default_text(value) -> str:
    return f"``{_python(value)}``"


def _default_lines(value) -> list[str]:
    """The "Default:" paragraph; long lists become a literal block."""
    text = _python(value)
    if len(text) <= 60 or not isinstance(value, (list, tuple, dict, set)):
        return [f"Default: ``{text}``", ""]
    import pprint

    block = pprint.pformat(value, width=72, compact=True)
    return ["Default::", "", *["    " + line for line in block.splitlines()], ""]


def _first_sentence(text: str) -> str:
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def _parse(directive: Directive, lines: list[str], titles: bool = False) -> list[nodes.Node]:
    source = directive.state_machine.get_source_and_line(directive.lineno)[0] or "<aopic_docs>"
    content = StringList(lines, source=source)
    container = nodes.section() if titles else nodes.container()
    container.document = directive.state.document
    if titles:
        nested_parse_with_titles(directive.state, content, container)
    else:
        directive.state.nested_parse(content, directive.content_offset, container)
    return container.children


def _groups():
    from scrapy_aopic.settings import SETTINGS

    groups: OrderedDict[str, list] = OrderedDict()
    for setting in SETTINGS.values():
        groups.setdefault(setting.group, []).append(setting)
    return groups


class SettingsReference(Directive):
    """Every ``AOPIC_*`` setting, grouped, with its default and meaning."""

    has_content = False

    def run(self):
        lines: list[str] = []
        for group, settings in _groups().items():
            title, intro = GROUPS.get(group, (group.replace("_", " ").capitalize(), ""))
            lines += [title, "-" * len(title), ""]
            if intro:
                lines += [intro, ""]
            for setting in settings:
                lines += [
                    f".. setting:: {setting.name}",
                    "",
                    setting.name,
                    "~" * len(setting.name),
                    "",
                    *_default_lines(setting.default),
                    setting.doc,
                    "",
                ]
        return _parse(self, lines, titles=True)


class SettingsTable(Directive):
    """A summary table of one group of settings, linking to the reference."""

    has_content = False
    option_spec = {"group": directives.unchanged_required}

    def run(self):
        group = self.options.get("group")
        settings = _groups().get(group)
        if not settings:
            error = self.state_machine.reporter.warning(
                f"aopic-settings-table: no settings in group {group!r} (groups: {', '.join(_groups())})",
                line=self.lineno,
            )
            return [error]
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 15 55", "",
                 "   * - Setting", "     - Default", "     - Meaning"]
        for setting in settings:
            lines += [
                f"   * - :setting:`{setting.name}`",
                f"     - {_default_text(setting.default) if len(_python(setting.default)) <= 40 else '(see reference)'}",
                f"     - {_first_sentence(setting.doc)}",
            ]
        return _parse(self, lines)


class WorkedExample(Directive):
    """Tables of the SPEC 2 worked example, computed now by our engine."""

    required_arguments = 1
    has_content = False

    def run(self):
        import worked_example as example

        numbers = example.compute()
        part = self.arguments[0]
        if part == "nutch":
            lines = self._nutch(example, numbers)
        elif part == "steps":
            lines = self._steps(example, numbers)
        elif part == "convergence":
            lines = self._convergence(example, numbers)
        else:
            return [self.state_machine.reporter.warning(f"aopic-worked-example: unknown part {part!r}", line=self.lineno)]
        return _parse(self, lines)

    @staticmethod
    def _nutch(example, numbers):
        nutch = numbers["nutch"]
        last = numbers["five"][-1]
        lines = [".. list-table:: After visiting A, B, C, E, D (1.0 injected at A)", "   :header-rows: 1", "",
                 "   * - Page", "     - Nutch 0.9 score", "     - scrapy-aopic cash", "     - scrapy-aopic history"]
        for page in example.PAGES:
            lines += [f"   * - {page}", f"     - {nutch[page]:.4g}", f"     - {last['cash'][page]:.4g}",
                      f"     - {last['history'][page]:.4g}"]
        lines += ["   * - λ (lambda)", "     - (none)", f"     - {last['lambda']:.4g}", "     -"]
        lines += ["   * - **total cash**", f"     - **{sum(nutch.values()):.4g}**",
                  f"     - **{last['total']:.4g}**", "     -"]
        return lines

    @staticmethod
    def _steps(example, numbers):
        lines = [".. list-table:: scrapy-aopic, visit by visit (cash held after each visit)", "   :header-rows: 1", "",
                 "   * - Visit", *[f"     - {p}" for p in example.PAGES], "     - λ", "     - total"]
        for step in numbers["five"]:
            lines += [f"   * - {step['visited']}", *[f"     - {step['cash'][p]:.4g}" for p in example.PAGES],
                      f"     - {step['lambda']:.4g}", f"     - {step['total']:.4g}"]
        return lines

    @staticmethod
    def _convergence(example, numbers):
        truth = numbers["pagerank"]
        lines = [".. list-table:: Importance (share among the five pages) with greedy selection, pages re-crawled",
                 "   :header-rows: 1", "",
                 "   * - Visits", *[f"     - {p}" for p in example.PAGES], "     - sum of history",
                 "     - largest error", "     - error × sum of history"]
        for row in numbers["greedy"]:
            lines += [f"   * - {row['visits']}", *[f"     - {row['share'][p]:.4f}" for p in example.PAGES],
                      f"     - {row['history_sum']:.4g}", f"     - {row['max_error']:.2g}",
                      f"     - {row['max_error'] * row['history_sum']:.2f}"]
        lines += ["   * - PageRank with λ", *[f"     - {truth[p]:.4f}" for p in example.PAGES], "     -", "     -", "     -"]
        return lines


def _object_path(value) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


class AddonComponents(Directive):
    """The settings ``scrapy_aopic.Addon`` sets, as ``settings.py`` lines,
    found by running the add-on on fresh settings (so they cannot drift)."""

    has_content = False

    def run(self):
        from scrapy.settings import Settings

        from scrapy_aopic import Addon

        default, settings = Settings(), Settings()
        Addon().update_settings(settings)
        lines = [".. code-block:: python", ""]
        for name in sorted(settings):
            value, before = settings[name], default[name]
            if hasattr(value, "attributes"):  # a component priority dict
                old = set(before) if before is not None else set()
                added = {_object_path(k): value[k] for k in value if k not in old}
                if added:
                    lines.append(f"    {name} = {{")
                    for path, order in sorted(added.items(), key=lambda item: (item[1] is None, item[1] or 0)):
                        lines.append(f"        {path!r}: {order!r},")
                    lines.append("    }")
            elif value != before:
                shown = _object_path(value) if isinstance(value, type) else value
                lines.append(f"    {name} = {shown!r}")
        return _parse(self, lines)


class OptionalTocTree(TocTree):
    """A toctree that skips entries whose page does not exist; ``:others:``
    appends every other top-level page (sorted) not listed."""

    option_spec = dict(TocTree.option_spec, others=directives.flag)

    def run(self):
        env = self.state.document.settings.env
        found = env.found_docs
        current = env.docname
        kept = StringList()
        listed = set()
        for offset, line in zip(self.content.items, self.content.data):
            entry = line.strip()
            if not entry:
                continue
            match = _TITLE_ENTRY.match(entry)
            target = match.group(2) if match else entry
            if target in found or "://" in target:
                kept.append(line, *offset)
                listed.add(target)
        if "others" in self.options:
            for docname in sorted(found):
                if "/" not in docname and docname not in listed and docname != current:
                    kept.append(docname, "<optional-toctree>", 0)
        self.content = kept
        self.options.pop("others", None)
        return super().run()


def optional_doc_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:optional-doc:`Title <page>```: a link to ``page`` if it exists,
    else just the title (pages other people are still writing)."""
    env = inliner.document.settings.env
    match = _TITLE_ENTRY.match(text)
    title, target = (match.group(1), match.group(2)) if match else (None, text)
    docname = docname_join(env.docname, target)
    if docname not in env.found_docs:
        return [nodes.inline(rawtext, title or target)], []
    node = addnodes.pending_xref(
        rawtext, refdomain="std", reftype="doc", reftarget=target,
        refexplicit=title is not None, refwarn=True, refdoc=env.docname,
    )
    node += nodes.inline(rawtext, title or target, classes=["xref", "std", "std-doc"])
    return [node], []


def setup(app):
    app.add_crossref_type("setting", "setting", indextemplate="pair: %s; setting")
    app.add_crossref_type("stat", "stat", indextemplate="pair: %s; stat")
    # Dangling :setting: / :stat: references must warn (and fail a -W build).
    app.add_role_to_domain("std", "setting", XRefRole(warn_dangling=True), override=True)
    app.add_role_to_domain("std", "stat", XRefRole(warn_dangling=True), override=True)
    app.add_directive("aopic-settings", SettingsReference)
    app.add_directive("aopic-settings-table", SettingsTable)
    app.add_directive("aopic-worked-example", WorkedExample)
    app.add_role("optional-doc", optional_doc_role)
    app.add_directive("aopic-addon-components", AddonComponents)
    app.add_directive("optional-toctree", OptionalTocTree)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
