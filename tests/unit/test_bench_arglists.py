"""``benchmarks/arglists.py``: the benchmarks' ``--set NAME=VALUE`` lists."""

from __future__ import annotations

import argparse

import pytest

from tests.support.simdrive import load_benchmark


@pytest.fixture(scope="module")
def arglists():
    return load_benchmark("arglists")


def test_settings_of_reads_values_as_json_else_as_text(arglists):
    items = ["AOPIC_RECRAWL_BURST=true", "AOPIC_RECRAWL_BUDGET=3", "DOWNLOAD_DELAY=[1, 2]", "USER_AGENT=bot=1"]
    assert arglists.settings_of(items) == {
        "AOPIC_RECRAWL_BURST": True,
        "AOPIC_RECRAWL_BUDGET": 3,
        "DOWNLOAD_DELAY": [1, 2],
        "USER_AGENT": "bot=1",  # only the first "=" splits
    }


def test_settings_of_expands_the_short_prefix_as_the_type_checks_it(arglists):
    parse = arglists.setting("AOPIC_RECRAWL_")
    items = [parse("BURST=false"), parse("AOPIC_RECRAWL_TIMETABLE=true")]
    assert arglists.settings_of(items, "AOPIC_RECRAWL_") == {
        "AOPIC_RECRAWL_BURST": False,
        "AOPIC_RECRAWL_TIMETABLE": True,
    }
    with pytest.raises(argparse.ArgumentTypeError, match="AOPIC_RECRAWL_BURTS"):
        parse("BURTS=true")


def test_words_split_at_commas_and_drop_blanks(arglists):
    assert arglists.words("127.0.0.1, localhost,,") == ["127.0.0.1", "localhost"]
    assert arglists.words("") == []
