"""The docs: they build with warnings as errors (as in CI), the settings
reference is generated from the code, every stat and setting the code uses
is documented, and the worked example's numbers are the engine's."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scrapy_aopic.store.base import Link

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "scrapy_aopic"

needs_sphinx = pytest.mark.skipif(
    importlib.util.find_spec("sphinx") is None, reason="sphinx is not installed (pip install '.[docs]')"
)

_PLACEHOLDER = re.compile(r"<[^<>]*>")
# Calls whose string argument becomes a stat name: (function name, argument
# position, prefix). The frontier builds these names from a reason or a stat.
_STAT_ARGUMENTS = {
    "_settle": (2, "aopic/"),
    "transfer": (2, "aopic/"),
    "fail": (1, "aopic/failed/"),
    "_count_refusal": (0, "aopic/refused/"),
    "refuse_url": (2, "aopic/refused/"),
}


def sphinx_build(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), *extra, str(source), str(out / "html")],
        capture_output=True, text=True, timeout=300,
    )


# -- what the code uses ------------------------------------------------------------------------


def _text_of(node: ast.AST) -> str | None:
    """A string literal, or an f-string with ``<...>`` for its fields."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else f"<{ast.unparse(part.value)}>"
            for part in node.values
        )
    return None


def stats_in_source() -> dict[str, set[str]]:
    """Every ``aopic/...`` stat name (or ``<...>`` pattern) the package's source
    spells out, with the files it appears in."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            text = _text_of(node)
            if text is not None and text.startswith("aopic/"):
                names.append(text)
            if isinstance(node, ast.Call):
                function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if function in _STAT_ARGUMENTS:
                    position, prefix = _STAT_ARGUMENTS[function]
                    arguments = list(node.args) + [k.value for k in node.keywords if k.arg in ("stat", "reason")]
                    if len(node.args) > position:
                        arguments = [node.args[position]]
                    for argument in arguments:
                        value = _text_of(argument)
                        if value and re.fullmatch(r"[\w/<>.\[\]()'\" ]+", value) and not value.startswith("aopic/"):
                            names.append(prefix + value)
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def documented_stats() -> set[str]:
    """Names and ``<...>`` patterns declared with ``.. stat::`` in docs/stats.rst."""
    text = (DOCS / "stats.rst").read_text(encoding="utf-8")
    return set(re.findall(r"^\.\. stat:: (\S+)\s*$", text, flags=re.M))


def _as_regex(pattern: str) -> re.Pattern:
    parts = _PLACEHOLDER.split(pattern)
    return re.compile(".+".join(re.escape(part) for part in parts))


def undocumented_stats(names) -> list[str]:
    """The names (or patterns) of ``names`` that docs/stats.rst does not cover.

    A name is covered by an identical entry or by a documented pattern that
    matches it (``aopic/failed/<reason>`` covers ``aopic/failed/http_404``).
    A pattern from the code is covered by the same pattern, by a documented
    name it matches, or by a documented pattern that matches it
    (``aopic/failed/<reason>`` covers ``aopic/failed/http_<status>``). A literal ending in ``/`` is a prefix (``startswith``):
    covered by a documented pattern that starts with it.
    """
    documented = documented_stats()
    documented_regexes = [_as_regex(d) for d in documented if _PLACEHOLDER.search(d)]
    normalized = {_PLACEHOLDER.sub("<>", d) for d in documented}
    missing = []
    for name in sorted(names):
        if name in documented:
            continue
        if name.endswith("/"):
            if name == "aopic/" or any(d.startswith(name) and _PLACEHOLDER.search(d) for d in documented):
                continue
        elif _PLACEHOLDER.search(name):
            if _PLACEHOLDER.sub("<>", name) in normalized:
                continue
            regex = _as_regex(name)
            if any(regex.fullmatch(d) for d in documented):
                continue  # a family whose members are documented one by one
            if any(documented_regex.fullmatch(name) for documented_regex in documented_regexes):
                continue  # a sub-family of a documented family (http_<status> in <reason>)
        elif any(regex.fullmatch(name) for regex in documented_regexes):
            continue
        missing.append(name)
    return missing


def settings_mentioned(text: str) -> set[str]:
    """``AOPIC_*`` names in ``text`` (a trailing ``_`` marks a prefix: skipped)."""
    return {name for name in re.findall(r"\bAOPIC_[A-Z0-9_]*[A-Z0-9]\b", text)}


# -- tests ------------------------------------------------------------------------------------------


def test_every_stat_in_the_source_is_documented():
    found = stats_in_source()
    assert len(found) > 15  # the scan sees the frontier's stats
    missing = undocumented_stats(found)
    assert missing == [], "document these in docs/stats.rst: " + ", ".join(
        f"{name} ({', '.join(sorted(found[name]))})" for name in missing
    )


def test_stats_documentation_check_can_fail():
    assert undocumented_stats(
        ["aopic/pages_visited", "aopic/failed/http_404", "aopic/failed/<code>", "aopic/failed/http_<code>"]
    ) == []
    assert undocumented_stats(["aopic/no_such_stat", "aopic/nothing/<x>", "aopic/nope/"]) == [
        "aopic/no_such_stat", "aopic/nope/", "aopic/nothing/<x>",
    ]


def test_every_setting_used_is_declared():
    from scrapy_aopic.settings import SETTINGS

    used: dict[str, set[str]] = {}
    for path in list(PACKAGE.rglob("*.py")) + list(DOCS.glob("*.rst")):
        for name in settings_mentioned(path.read_text(encoding="utf-8")):
            used.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert "AOPIC_SEED_CASH" in used
    undeclared = {name: sorted(files) for name, files in used.items() if name not in SETTINGS}
    assert undeclared == {}, "declare these with define() in scrapy_aopic/settings.py (or fix the name)"


def test_worked_example_numbers_come_from_the_engine():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import worked_example
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    numbers = worked_example.compute()
    assert numbers["nutch"] == {"A": 1.0, "B": 1.25, "C": 0.5, "D": 0.25, "E": 0.75}  # SPEC 2
    assert sum(numbers["nutch"].values()) == 3.75
    for step in numbers["five"]:
        assert step["total"] == pytest.approx(1.0, abs=1e-12)
    last = numbers["five"][-1]
    assert last["cash"]["D"] == 0.0 and last["history"]["D"] == pytest.approx(1 / 9)  # D's cash went to lambda
    errors = [row["max_error"] for row in numbers["greedy"]]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-3
    assert numbers["greedy"][-1]["order"] == sorted(numbers["pagerank"], key=lambda p: -numbers["pagerank"][p])
    assert all(row["conservation_error"] < 1e-9 for row in numbers["greedy"])


def test_committed_figures_are_pngs():
    for path in [DOCS / "_static" / "worked_example.png", *sorted((DOCS / "_static" / "report").glob("*.png"))]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(list((DOCS / "_static" / "report").glob("*.png"))) == 4


@needs_sphinx
def test_docs_build_with_warnings_as_errors(tmp_path):
    from scrapy_aopic.settings import SETTINGS

    result = sphinx_build(DOCS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    html = tmp_path / "html"
    settings_page = (html / "settings.html").read_text(encoding="utf-8")
    for name in SETTINGS:  # generated from the code: every setting, linkable
        assert f'id="std-setting-{name}"' in settings_page, name
    concepts = (html / "concepts.html").read_text(encoding="utf-8")
    assert "3.75" in concepts and "worked_example.png" in concepts
    assert (html / "_images" / "worked_example.png").exists()
    quickstart = (html / "quickstart.html").read_text(encoding="utf-8")
    assert "scrapy_aopic.scheduler.AopicScheduler" in quickstart  # found by running the add-on
    stats_page = (html / "stats.html").read_text(encoding="utf-8")
    assert 'id="std-stat-aopic-conservation_error"' in stats_page


@needs_sphinx
def test_extension_tolerates_missing_pages_and_rejects_dangling_references(tmp_path):
    def project(name: str, index: str, pages: dict[str, str]) -> Path:
        source = tmp_path / name
        source.mkdir()
        (source / "conf.py").write_text(
            f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\nsys.path.insert(0, {str(ROOT)!r})\n"
            "extensions = ['aopic_docs']\nexclude_patterns = ['_build']\n"
        )
        (source / "index.rst").write_text(index)
        for page, text in pages.items():
            (source / f"{page}.rst").write_text(text)
        return source

    index = (
        "Index\n=====\n\nSee :optional-doc:`the missing page <missing>` and :setting:`AOPIC_SEED_CASH`.\n\n"
        ".. optional-toctree::\n   :others:\n\n   present\n   missing\n"
    )
    pages = {
        "present": "Present\n=======\n\n.. aopic-settings-table::\n   :group: core\n",
        "extra": "Extra\n=====\n\nNot listed anywhere: :others: picks it up.\n",
        "settings": "Settings\n========\n\n.. aopic-settings::\n",
    }
    dangling = index.replace("AOPIC_SEED_CASH", "AOPIC_NO_SUCH_SETTING")
    sources = [project("good", index, pages), project("bad", dangling, pages)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two independent builds
        good, bad = pool.map(lambda source: sphinx_build(source, tmp_path / f"{source.name}_out"), sources)
    assert good.returncode == 0, good.stdout + good.stderr
    built = (tmp_path / "good_out" / "html" / "index.html").read_text(encoding="utf-8")
    assert "extra.html" in built and "present.html" in built and "missing.html" not in built
    assert bad.returncode != 0
    assert "AOPIC_NO_SUCH_SETTING" in bad.stderr


def _shape(line: str) -> str:
    """A log line with its URLs and numbers blanked out."""
    line = re.sub(r"https?://\S+", "URL", line)
    line = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    return " ".join(line.split())


def test_documented_live_line_matches_the_real_one():
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_aopic.extensions.logstats import AopicLogStats
    from scrapy_aopic.frontier import Frontier

    crawler = get_crawler(Spider, {})
    frontier = Frontier.from_crawler(crawler)
    frontier.open(Spider("live"))
    frontier.engine.add_seed(Link("https://example.org/news/", "example.org", 0))
    real = AopicLogStats(crawler, 60.0).progress_line()
    for page in ("quickstart.rst", "report.rst"):
        text = (DOCS / page).read_text(encoding="utf-8")
        block = re.search(r"INFO: (aopic: .*?)\n\n", text, flags=re.S)
        assert block, f"{page} shows the live line"
        assert _shape(block.group(1)) == _shape(real), f"update the live line shown in docs/{page}"


def test_the_settings_page_in_the_repository_is_up_to_date():
    from scrapy_aopic.settings import markdown_reference

    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == markdown_reference(), (
        "docs/settings.md is stale: python -m scrapy_aopic.settings > docs/settings.md"
    )
