"""Learned duplicate URL patterns (SPEC 5)."""

from __future__ import annotations

import pytest

from scrapy_aopic.hygiene.url_patterns import DuplicatePatterns, url_signatures


def test_signatures_wildcard_one_query_value_or_the_path_numbers():
    assert url_signatures("http://h.example/a/2024/05?id=7&print=1") == [
        "p:http://h.example/a/{n}/{n}?id=7&print=1",
        "q:http://h.example/a/2024/05?id={*}&print=1",
        "q:http://h.example/a/2024/05?id=7&print={*}",
    ]
    assert url_signatures("http://h.example/about") == []
    assert url_signatures("http://h.example/?x") == ["q:http://h.example/?x={*}"]


def test_timestamped_copies_become_a_pattern_after_enough_duplicates():
    patterns = DuplicatePatterns(min_duplicates=4, min_share=0.8)
    patterns.record_original("http://n.example/news?ts=0")
    learned = []
    for ts in range(1, 5):
        learned += patterns.record_duplicate(f"http://n.example/news?ts={ts}", "http://n.example/news?ts=0")
    assert learned == ["q:http://n.example/news?ts={*}"]  # 4 duplicates, 1 original: 0.8
    assert patterns.match("http://n.example/news?ts=77") == "q:http://n.example/news?ts={*}"
    # The original is exempt; other paths, hosts and parameter names are not matched.
    assert patterns.match("http://n.example/news?ts=0") is None
    assert patterns.match("http://n.example/news?page=2") is None
    assert patterns.match("http://m.example/news?ts=5") is None
    assert patterns.link_filter("", "http://n.example/news?ts=9", None, 3) == "duplicate_pattern"


def test_print_versions_across_articles_become_a_pattern():
    patterns = DuplicatePatterns(min_duplicates=3, min_share=0.8)
    for i in range(10):
        patterns.record_original(f"http://s.example/article?id={i}")
    for i in range(3):
        patterns.record_duplicate(f"http://s.example/article?id={i}&print=1", f"http://s.example/article?id={i}")
    assert patterns.learned == ["q:http://s.example/article?id={*}&print=1"]
    assert patterns.match("http://s.example/article?id=8&print=1")
    assert patterns.match("http://s.example/article?id=8") is None


def test_patterns_with_many_originals_are_not_learned():
    patterns = DuplicatePatterns(min_duplicates=3, min_share=0.8)
    for i in range(50):
        patterns.record_original(f"http://c.example/item/{i}")
    for i in range(50, 56):  # a few items happen to be near-duplicates
        assert patterns.record_duplicate(f"http://c.example/item/{i}", "http://c.example/item/1") == []
    assert patterns.match("http://c.example/item/999") is None
    assert patterns.originals_under("p:http://c.example/item/{n}") >= 50
    assert patterns.duplicates_under("p:http://c.example/item/{n}") == 6


def test_calendar_dates_in_the_path():
    patterns = DuplicatePatterns(min_duplicates=5, min_share=0.9)
    patterns.record_original("http://cal.example/day/2024-01-01")
    for day in range(2, 30):
        patterns.record_duplicate(f"http://cal.example/day/2024-01-{day:02d}", "http://cal.example/day/2024-01-01")
    assert patterns.match("http://cal.example/day/2031-12-31") == "p:http://cal.example/day/{n}-{n}-{n}"


def test_state_round_trip():
    patterns = DuplicatePatterns(min_duplicates=1, min_share=0.5)
    patterns.record_original("http://a.example/x?v=1")
    patterns.record_duplicate("http://a.example/x?v=2", "http://a.example/x?v=1")
    copy = DuplicatePatterns(min_duplicates=1, min_share=0.5)
    copy.loads(patterns.dumps(), patterns.state()["sketch"])
    assert copy.learned == patterns.learned
    assert copy.match("http://a.example/x?v=3") and copy.match("http://a.example/x?v=1") is None
    assert copy.originals_under("q:http://a.example/x?v={*}") == 1


def test_bad_thresholds_are_rejected():
    with pytest.raises(ValueError):
        DuplicatePatterns(min_duplicates=0)
    with pytest.raises(ValueError):
        DuplicatePatterns(min_share=0)
