"""Every command the README and the docs quote (and ``make bench`` runs) parses on this tree.

The docs quote many ``python benchmarks/...`` lines with their flags; a flag
renamed or dropped in a script leaves a newcomer with a usage error (as
``bench_redis_script.py`` once did). This collects each quoted command of a
script (README.md, example_project/README.md, docs/*.rst and *.md, and the
scripts' own docstrings), checks the script exists, and parses its quoted
arguments with the script's own argparse parser: the parser is caught when
the script calls ``parse_args``, in a subprocess, before the script does any
work. ``scrapy aopic`` lines are parsed by the command's parser, ``make``
lines must name a Makefile target.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import itertools
import json
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# Where a newcomer reads commands.
DOC_FILES = [ROOT / "README.md", ROOT / "example_project" / "README.md",
             *sorted((ROOT / "docs").glob("*.rst")), *sorted((ROOT / "docs").glob("*.md"))]

# A script line: `python [-m module | path.py] args`, `.venv/bin/python ...`,
# or a bare `bench_x.py args` naming a script of benchmarks/.
_PYTHON = re.compile(r"(?:^|\s)(?:\S*/)?python3?\s+(-m\s+\S+|\S+\.py)\b(.*)")
_BARE = re.compile(r"^(?:\S*/)?(\w+\.py)(\s+.*\s-.*|\s+-.*)")
_SCRAPY_AOPIC = re.compile(r"^scrapy aopic\s+(\w.*)")
_MAKE = re.compile(r"^\s*make\s+([\w.-]+)")

# Modules a doc runs with `python -m` whose arguments are checked here, and
# the directory the doc runs them from (demosite: example_project/README.md).
CHECKED_MODULES = {"scrapy_aopic.sim": ROOT, "demosite": ROOT / "example_project"}


def _docstring_sources() -> list[tuple[str, str]]:
    """The module docstrings of benchmarks/*.py and example_project/run_demo.py."""
    found = []
    for path in [*sorted(BENCHMARKS.glob("*.py")), ROOT / "example_project" / "run_demo.py"]:
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if docstring:
            found.append((str(path.relative_to(ROOT)), docstring))
    return found


def _pieces(text: str, markdown: bool) -> list[str]:
    """Inline literals (rst ````...````, markdown ```...```) with their line
    breaks joined, then the other lines (literal blocks) with ``\\``
    continuations joined."""
    if markdown:
        text = text.replace("```", "\n")  # a fence is a block of lines
    inline = []
    for pattern in [r"``(.+?)``", *([r"`([^`\n]+)`"] if markdown else [])]:
        inline += [" ".join(m.split()) for m in re.findall(pattern, text, flags=re.S)]
        text = re.sub(pattern, " ", text, flags=re.S)
    lines = re.sub(r"\\\n\s*", " ", text).splitlines()
    return inline + [line.strip() for line in lines]


def _clean(arguments: str) -> list[list[str]]:
    """The argument lists a quoted tail stands for.

    A shell comment, pipe, ``&``, ``;`` or redirection ends it; ``[...]``
    optional parts count as given; ``<...>`` and upper-case metavariables
    (``N``, ``DIR``) stand for a value, ``1``, that any type accepts;
    ``a|b`` alternatives give one list each.
    """
    arguments = re.split(r"\s#|\s\|\s|\s&|;|\s>\s|`|\)\s*$|\)[,;.]", arguments)[0]
    arguments = re.sub(r"<[^<>]*>", "X", arguments).replace("[", " ").replace("]", " ")
    try:
        tokens = shlex.split(arguments)
    except ValueError:
        tokens = arguments.split()
    tokens = ["1" if re.fullmatch(r"[A-Z][A-Z_]*", token) else token for token in tokens if token not in ("...", "…")]
    choices = [token.split("|") if "|" in token and not token.startswith("|") else [token] for token in tokens]
    return [list(combination) for combination in itertools.product(*choices)]


def quoted_commands() -> dict[tuple[str, str], dict[tuple[str, ...], set[str]]]:
    """``{(kind, target): {argv: {where quoted}}}`` for every quoted command.

    kind is ``script`` (target: a path relative to the root), ``module``
    (target: a module name), ``scrapy-aopic`` or ``make``.
    """
    benchmark_names = {path.name for path in BENCHMARKS.glob("*.py")}
    found: dict[tuple[str, str], dict[tuple[str, ...], set[str]]] = {}

    def add(kind: str, target: str, tail: str, where: str) -> None:
        for argv in _clean(tail):
            found.setdefault((kind, target), {}).setdefault(tuple(argv), set()).add(where)
            # bench_recrawl_budgets.py --side NAME=ARGS runs bench_recrawl_traces.py ARGS (with
            # the code of another checkout if --checkout NAME=PATH: its settings may differ)
            if target.endswith("bench_recrawl_budgets.py"):
                options = list(zip(argv, argv[1:]))
                elsewhere = {value.partition("=")[0] for flag, value in options if flag == "--checkout"}
                for flag, value in options:
                    name, _, extra = value.partition("=")
                    if flag == "--side" and extra and name not in elsewhere:
                        add(kind, "benchmarks/bench_recrawl_traces.py", extra, f"{where} (--side)")

    sources = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")) for path in DOC_FILES]
    for where, text in sources + _docstring_sources():
        for piece in _pieces(text, where.endswith(".md")):
            piece = piece.removeprefix("$ ")
            if m := _PYTHON.search(piece):
                program, tail = m.group(1), m.group(2)
                if program.startswith("-m"):
                    module = program.split()[1]
                    if module in CHECKED_MODULES:
                        add("module", module, tail, where)
                elif "benchmarks/" in program or program.startswith("example_project/"):
                    script = program[program.index("benchmarks/"):] if "benchmarks/" in program else program
                    add("script", script, tail, where)
            elif (m := _BARE.match(piece)) and m.group(1) in benchmark_names:
                add("script", f"benchmarks/{m.group(1)}", m.group(2), where)
            if m := _SCRAPY_AOPIC.search(piece):
                add("scrapy-aopic", "", m.group(1), where)
            if (m := _MAKE.match(piece)) and where.endswith((".md", ".rst")):
                add("make", m.group(1), "", where)
    # every script of benchmarks/, quoted or not, has a --help that exits 0
    for path in BENCHMARKS.glob("*.py"):
        if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
            found.setdefault(("script", f"benchmarks/{path.name}"), {})
    # what `make bench` and the README's `run_all.py --quick` run
    for script, full, quick in _run_all_table().values():
        for argv in (full, quick):
            found.setdefault(("script", f"benchmarks/{script}"), {}).setdefault(tuple(argv), set()).add(
                "benchmarks/run_all.py")
    return found


def _run_all_table() -> dict[str, tuple[str, list[str], list[str]]]:
    spec = importlib.util.spec_from_file_location("run_all", BENCHMARKS / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a table and functions: nothing runs
    return module.BENCHMARKS


# Run in a subprocess per script: replaces ArgumentParser.parse_args so the
# script's first call parses each quoted argv instead of sys.argv, reports
# the outcome as JSON and stops the script before it does any work.
_DRIVER = r"""
import argparse, contextlib, io, json, runpy, sys
kind, target, argvs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
class Parsed(BaseException):
    pass
def parse_args(self, args=None, namespace=None):
    results = []
    for argv in argvs:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                _original(self, argv)
            results.append([argv, 0, ""])
        except SystemExit as stop:
            results.append([argv, stop.code or 0, err.getvalue().strip().splitlines()[-1:]])
    print("PARSED " + json.dumps(results))
    raise Parsed
_original = argparse.ArgumentParser.parse_args
argparse.ArgumentParser.parse_args = parse_args
sys.argv = [target]
try:
    if kind == "module":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, str(__import__("pathlib").Path(target).resolve().parent))
        runpy.run_path(target, run_name="__main__")
except Parsed:
    sys.exit(0)
print("NO PARSER: the script ran to its end without calling ArgumentParser.parse_args")
sys.exit(3)
"""


def parse_with_script(kind: str, target: str, argvs: list[list[str]]) -> dict[tuple[str, ...], str]:
    """``{argv: error}`` for the quoted argvs ``target``'s parser rejects
    (``""`` when it accepts them); ``--help`` is always tried and must exit 0."""
    argvs = [["--help"], *argvs]
    if kind == "script" and "ArgumentParser(" not in (ROOT / target).read_text(encoding="utf-8"):
        # run under the driver it would do its work: it has no parser to stop at
        return {("--help",): "no argparse parser: --help is not a help"}
    result = subprocess.run([sys.executable, "-c", _DRIVER, kind, target, json.dumps(argvs)],
                            cwd=CHECKED_MODULES.get(target, ROOT), capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("PARSED ")]
    if not lines:
        tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
        return {("<script>",): f"exit {result.returncode}: " + " | ".join(tail)}
    return {tuple(argv): (f"exit {code}: {' '.join(error)}" if code else "")
            for argv, code, error in json.loads(lines[0][len("PARSED "):])}


def scrapy_aopic_rejects(argv: list[str]) -> str:
    """Why ``scrapy aopic`` would refuse ``argv`` as a usage error (``""``:
    it accepts it). Scrapy parses the command's options with
    ``parse_known_args`` and hands the rest to the command, which takes a
    subcommand and at most a spider name (replay: the simulator's arguments)."""
    import argparse

    from scrapy.settings import Settings

    from scrapy_aopic.commands import SUBCOMMANDS, AopicCommand

    parser = argparse.ArgumentParser(prog="scrapy aopic")
    command = AopicCommand()
    command.settings = Settings()
    command.add_options(parser)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            _, rest = parser.parse_known_args(argv)
    except SystemExit:
        return err.getvalue().strip().splitlines()[-1]
    if not rest or rest[0] not in SUBCOMMANDS:
        return f"no subcommand of {SUBCOMMANDS}: {rest[:1]}"
    if rest[0] == "replay":
        return ""
    if unknown := [a for a in rest[1:] if a.startswith("-")]:
        return f"unknown option {unknown[0]}"
    return f"too many arguments: {rest[1:]}" if len(rest) > 2 else ""


def test_the_collector_sees_the_quoted_commands():
    commands = quoted_commands()
    quoted = commands[("script", "benchmarks/bench_ordering_push.py")]
    assert ("--graphs", "synthetic-1M", "--teleports", "none", "--shares", "0,0.01") in quoted
    assert ("script", "benchmarks/bench_redis_script.py") in commands
    assert any("--side" in argv for argv in commands[("script", "benchmarks/bench_recrawl_budgets.py")])
    assert ("top", "-n", "5", "--jobdir", "crawls/run1") in commands[("scrapy-aopic", "")]
    assert ("make", "demo") in commands
    assert ("--rounds", "1", "--pops", "1000") in commands[("script", "benchmarks/bench_redis_script.py")]  # run_all
    assert ("--burst",) in commands[("script", "benchmarks/bench_recrawl_traces.py")]  # a --side's ARGS
    assert len([key for key in commands if key[0] == "script"]) > 30


def test_every_quoted_script_exists_and_accepts_its_quoted_arguments():
    scripts = {key: argvs for key, argvs in quoted_commands().items() if key[0] in ("script", "module")}
    missing = sorted(target for kind, target in scripts if kind == "script" and not (ROOT / target).is_file())
    assert missing == [], f"quoted scripts that do not exist: {missing}"

    def check(item):
        (kind, target), argvs = item
        rejected = parse_with_script(kind, target, [list(argv) for argv in argvs])
        return [(target, " ".join(argv), error, sorted(argvs.get(argv, ["(--help)"])))
                for argv, error in rejected.items() if error]

    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [failure for result in pool.map(check, sorted(scripts.items())) for failure in result]
    assert failures == [], "quoted commands the scripts reject:\n" + "\n".join(
        f"  python {target} {argv}  ->  {error}  (quoted in {', '.join(where)})"
        for target, argv, error, where in failures
    )


def test_every_quoted_scrapy_aopic_command_parses():
    commands = quoted_commands()
    failures = [f"scrapy aopic {' '.join(argv)}: {error} (quoted in {', '.join(sorted(where))})"
                for argv, where in commands[("scrapy-aopic", "")].items()
                if (error := scrapy_aopic_rejects(list(argv)))]
    assert failures == []


def test_every_quoted_make_target_exists():
    commands = quoted_commands()
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", makefile, flags=re.M))
    missing = sorted(target for kind, target in commands if kind == "make" and target not in targets)
    assert missing == []


def test_the_check_fails_on_a_flag_or_value_the_script_does_not_have():
    rejected = parse_with_script("script", "benchmarks/bench_ordering_push.py",
                                 [["--graphs", "rust-doc"], ["--no-such-flag", "1"], ["--graphs", "rust-dco"]])
    assert rejected[("--help",)] == ""
    assert rejected[("--graphs", "rust-doc")] == ""
    assert "unrecognized arguments: --no-such-flag" in rejected[("--no-such-flag", "1")]
    assert "unknown 'rust-dco'" in rejected[("--graphs", "rust-dco")]
    rejected = parse_with_script("script", "benchmarks/bench_recrawl_traces.py",
                                 [["--set", "KEY_MIN_EVENTS=1e18"], ["--set", "KEY_MIN_EVENT=1e18"]])
    assert rejected[("--set", "KEY_MIN_EVENTS=1e18")] == ""
    assert "no setting AOPIC_RECRAWL_KEY_MIN_EVENT " in rejected[("--set", "KEY_MIN_EVENT=1e18")]
    assert scrapy_aopic_rejects(["top", "-n", "5", "--jobdir", "crawls/run1"]) == ""
    assert "unknown option --no-such-flag" in scrapy_aopic_rejects(["top", "--no-such-flag"])
    assert "invalid choice" in scrapy_aopic_rejects(["top", "--by", "size"])
