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
output on every git trace: ``docs/_static/bench/recrawl-creations.txt``.
``--births-out FILE`` also writes the traces with each page created
inside them *born* then (its first change, when that is the file's
creation, becomes its birth): the ``*_births.json.gz`` fixtures, which
``bench_recrawl_traces.py`` replays with the pages found at their birth
(the git traces only: Debian's changelogs have no creation to tell)::

    M=/work/.mirror
    .venv/bin/python benchmarks/recrawl_creations.py --births-out benchmarks/data/recrawl_traces_births.json.gz \\
        --git peps=$M/python+peps/repo --git rust-book=$M/rust-lang+book/repo \\
        --git devguide=$M/python+devguide/repo --git packaging-guide=$M/pypa+packaging.python.org/repo \\
        --git scrapy-docs=$M/scrapy+scrapy/repo --git pip-src=$M/pypa+pip/repo --git sphinx-src=$M/sphinx-doc+sphinx/repo
    # and with --fixture benchmarks/data/recrawl_traces_{extra,heldout,heldout2,heldout3}.json.gz (their --git
    # sources as in recrawl_traces.py) -> recrawl_traces_{extra,heldout,heldout2,heldout3}_births.json.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recrawl_traces import FIXTURE, GIT_SOURCES, Page, Trace, git_commits, load, save  # noqa: E402


def created(gitdir: str, prefix: str, suffix: str, host: str) -> dict[str, set[float]]:
    """URL -> the commit times (first parent) that added the file."""
    added: dict[str, set[float]] = {}
    for when, files in git_commits(gitdir, prefix, suffix, renames=False, added=True):
        for path in files:
            added.setdefault(f"http://{host}/{path}", set()).add(when)
    return added


def creations(trace: Trace, added: dict[str, set[float]]) -> dict:
    """The trace's changes, those that are a creation, and the pages whose
    every change is one."""
    changes = creating = only = 0
    for page in trace.pages:
        added_at = added.get(page.url, ())
        mine = sum(1 for t in page.changes if t in added_at)
        changes += len(page.changes)
        creating += mine
        only += bool(page.changes) and mine == len(page.changes)
    return {"pages": len(trace.pages), "changes": changes, "creations": creating, "only_creations": only}


def with_births(trace: Trace, added: dict[str, set[float]]) -> Trace:
    """``trace`` with each page created inside it born then: its first
    change, when it is the file's creation, becomes its birth."""
    pages = []
    for page in trace.pages:
        changes, born = list(page.changes), page.born
        if changes and changes[0] in added.get(page.url, ()):
            born = changes.pop(0)
        pages.append(Page(page.url, page.host, changes, born))
    return Trace(trace.name, trace.start, trace.end, pages)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--git", action="append", required=True, metavar="NAME=GITDIR")
    parser.add_argument("--births-out", type=Path, help="also write the traces with their pages born (a fixture)")
    args = parser.parse_args(argv)
    born_traces = []
    gitdirs = dict(spec.partition("=")[::2] for spec in args.git)
    print(f"{'trace':<16}{'pages':>7}{'changes':>9}{'creations':>16}  pages changed only by their creation")
    for trace in load(args.fixture, list(gitdirs)):
        prefix, suffix, host = GIT_SOURCES[trace.name]
        added = created(gitdirs[trace.name], prefix, suffix, host)
        c = creations(trace, added)
        born_traces.append(with_births(trace, added))
        share = 100.0 * c["creations"] / c["changes"] if c["changes"] else 0.0
        print(f"{trace.name:<16}{c['pages']:>7}{c['changes']:>9}{c['creations']:>9} {share:4.1f} %  {c['only_creations']}")
    if args.births_out:
        save(born_traces, args.births_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
