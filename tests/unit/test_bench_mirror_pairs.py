"""``benchmarks/bench_mirror_pairs.py``: pages under two prefixes are paired
by relative path (redirect stubs left out), a copy is folded, a page with
other text is missed by distance, a page with much more text by its length."""

from __future__ import annotations

import random

from tests.support.simdrive import load_benchmark


def _page(text: str) -> str:
    return f"<html><body><main><p>{text}</p></main></body></html>"


def test_pairs_are_folded_or_missed_by_the_guard_that_kept_them_apart(tmp_path):
    bench = load_benchmark("bench_mirror_pairs")
    rng = random.Random(2)
    words = [f"w{rng.randrange(5000)}" for _ in range(6000)]
    text = " ".join(words[:400])
    for prefix in ("std", "core"):
        (tmp_path / prefix).mkdir()
    (tmp_path / "std/copy.html").write_text(_page(text))
    (tmp_path / "core/copy.html").write_text(_page(text.replace(words[5], "changed", 1)))
    (tmp_path / "std/other.html").write_text(_page(" ".join(words[1000:1400])))
    (tmp_path / "core/other.html").write_text(_page(" ".join(words[2000:2400])))
    (tmp_path / "std/longer.html").write_text(_page(" ".join(words[3000:3900])))
    (tmp_path / "core/longer.html").write_text(_page(" ".join(words[3000:3400])))
    (tmp_path / "std/only.html").write_text(_page(text))
    stub = '<html><head><meta http-equiv="refresh" content="0;URL=copy.html"></head></html>'
    (tmp_path / "std/stub.html").write_text(stub)
    (tmp_path / "core/stub.html").write_text(stub)
    paths = bench.mirrored_paths(tmp_path, "std", "core")
    assert paths == ["copy.html", "longer.html", "other.html"]
    counts, missed = bench.compare(tmp_path, "std", "core", paths)
    assert counts == {"folded": 1, "missed: distance": 1, "missed: length ratio": 1}
    assert sorted((path, reason) for path, reason, _, _ in missed) == [
        ("longer.html", "length ratio"), ("other.html", "distance")]
