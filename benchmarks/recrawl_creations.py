"""How many of a git trace's changes are pages being created (issue 17).

A diagnostic, not a judgement. ``recrawl_traces.git_trace`` counts every
first-parent commit touching a file as a change of that page, and the
simulator watches every page from the trace's start. The commit that
*adds* a file is counted too, but before it the page does not exist: a
crawler finds a new page through the links of others, not by revisiting
it, so a trace of pages mostly created inside its window (a repository of
proposals, each merged once) measures revisits waiting for pages that are
not there yet. This prints, per trace, the changes that are a file's
creation (``git log --diff-filter=A`` on the same first-parent history)
and the pages whose only changes are their creation::

    .venv/bin/python benchmarks/recrawl_creations.py \\
        --fixture benchmarks/data/recrawl_traces_heldout2.json.gz \\
        --git rust-rfcs=/work/.mirror/rust-lang+rfcs/repo --git httpx-docs=/work/.mirror/encode+httpx/repo

(seconds; needs the ``fetch`` snapshots the traces were built from.) Its
output on the held-out traces: ``docs/_static/bench/recrawl-creations.txt``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recrawl_traces import FIXTURE, GIT_SOURCES, Trace, load  # noqa: E402


def created(gitdir: str, prefix: str, suffix: str, host: str) -> dict[str, set[float]]:
    """URL -> the commit times (first parent) that added the file."""
    out = subprocess.run(
        ["git", f"--git-dir={gitdir}", "log", "--first-parent", "-m", "--format=@%ct", "--diff-filter=A",
         "--no-renames", "--name-only", "--", prefix or "."],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    added: dict[str, set[float]] = {}
    when = None
    for line in out.splitlines():
        if line.startswith("@"):
            when = float(line[1:])
        elif when is not None and line.startswith(prefix) and line.endswith(suffix):
            added.setdefault(f"http://{host}/{line}", set()).add(when)
    return added


def creations(trace: Trace, added: dict[str, set[float]]) -> dict:
    """The trace's changes, those that are a creation, and the pages whose
    every change is one."""
    changes = creating = only = 0
    for page in trace.pages:
        births = added.get(page.url, ())
        mine = sum(1 for t in page.changes if t in births)
        changes += len(page.changes)
        creating += mine
        only += bool(page.changes) and mine == len(page.changes)
    return {"pages": len(trace.pages), "changes": changes, "creations": creating, "only_creations": only}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--git", action="append", required=True, metavar="NAME=GITDIR")
    args = parser.parse_args(argv)
    gitdirs = dict(spec.partition("=")[::2] for spec in args.git)
    print(f"{'trace':<16}{'pages':>7}{'changes':>9}{'creations':>16}  pages changed only by their creation")
    for trace in load(args.fixture, list(gitdirs)):
        prefix, suffix, host = GIT_SOURCES[trace.name]
        c = creations(trace, created(gitdirs[trace.name], prefix, suffix, host))
        share = 100.0 * c["creations"] / c["changes"] if c["changes"] else 0.0
        print(f"{trace.name:<16}{c['pages']:>7}{c['changes']:>9}{c['creations']:>9} {share:4.1f} %  {c['only_creations']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
