"""``benchmarks/recrawl_creations.py`` (issue 17): which changes of a git
trace are its pages' creations, on a repository made here."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.simdrive import load_benchmark

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(scope="module")
def creations():
    return load_benchmark("recrawl_creations")


def commit(repo, when: int, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {**os.environ, "GIT_AUTHOR_DATE": f"{when} +0000", "GIT_COMMITTER_DATE": f"{when} +0000",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "c"], cwd=repo, check=True, env=env)


def test_a_files_first_commit_is_its_creation_and_later_ones_are_changes(creations, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    day = 86400
    commit(repo, 1_600_000_000, {"text/a.md": "a", "text/b.md": "b", "other/x.md": "x"})
    commit(repo, 1_600_000_000 + day, {"text/a.md": "a2"})
    commit(repo, 1_600_000_000 + 2 * day, {"text/c.md": "c", "text/a.md": "a3"})
    commit(repo, 1_600_000_000 + 3 * day, {"text/b.md": "b2", "text/notes.txt": "n"})
    gitdir = str(repo / ".git")
    trace = load_benchmark("recrawl_traces").git_trace("t", gitdir, "text/", ".md", "t.example")
    added = creations.created(gitdir, "text/", ".md", "t.example")
    assert added == {
        "http://t.example/text/a.md": {1_600_000_000.0},
        "http://t.example/text/b.md": {1_600_000_000.0},
        "http://t.example/text/c.md": {1_600_000_000.0 + 2 * day},
    }
    # a: created, changed twice; b: created, changed once; c: created only
    assert creations.creations(trace, added) == {"pages": 3, "changes": 6, "creations": 3, "only_creations": 1}
    # with births: each page born at its creation, which is no longer a change
    born = creations.with_births(trace, added)
    assert [(p.url.rsplit("/", 1)[1], p.born, len(p.changes)) for p in born.pages] == [
        ("a.md", 1_600_000_000.0, 2), ("b.md", 1_600_000_000.0, 1), ("c.md", 1_600_000_000.0 + 2 * day, 0)
    ]
