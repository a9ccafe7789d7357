"""``benchmarks/bench_recrawl_traces.py --timetable / --no-timetable``
(issue 17): the timetables are on by default, so the flag is explicit both
ways and neither means the code's own default (what "main" means in a
judgement by ``bench_recrawl_budgets.py``)."""

from __future__ import annotations

import json
import random

from tests.support.simdrive import load_benchmark

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
MONDAY = 4 * DAY  # 1970-01-05 00:00 UTC


def test_no_flag_runs_the_default_timetables_and_no_timetable_the_waiting_rule(tmp_path):
    bench = load_benchmark("bench_recrawl_traces")
    from recrawl_traces import Page, Trace, save  # on sys.path once the benchmark is loaded

    # Twenty pages of one section changing on weekday afternoons for 80
    # weeks: a rhythm the timetables place revisits after.
    rng = random.Random(5)
    pages = [Page(f"http://h.example/s/{i}", "h.example",
                  sorted(MONDAY + rng.randrange(80) * WEEK + rng.randrange(5) * DAY + (13 + 3 * rng.random()) * HOUR
                         for _ in range(10 + 5 * i)))
             for i in range(20)]  # fmt: skip
    fixture = tmp_path / "traces.json.gz"
    save([Trace("t", MONDAY, MONDAY + 80 * WEEK, pages)], fixture)
    planner = {}
    for flags, suffix in (([], ""), (["--timetable"], "-timetable"), (["--no-timetable"], "-no-timetable")):
        out = tmp_path / (suffix or "default")
        assert bench.main(["--fixture", str(fixture), "--no-last-modified", "--json", "--out", str(out), *flags]) == 0
        planner[suffix] = json.loads((out / f"recrawl-traces{suffix}.json").read_text())["t"]["planner"]
    assert planner[""] == planner["-timetable"]
    # The waiting rule drifts to the night: about twice the delay here.
    assert planner[""]["delay"] < 0.8 * planner["-no-timetable"]["delay"], planner


def test_a_run_of_some_traces_leaves_the_committed_tables_alone(tmp_path, monkeypatch, capsys):
    # The tables under docs/_static/bench hold every trace of the default
    # fixture; a run of one trace (or of another fixture) wrote its one row
    # over them. Without --out it now writes nothing; with --out, there.
    bench = load_benchmark("bench_recrawl_traces")
    from recrawl_traces import Page, Trace, save

    rng = random.Random(7)
    pages = [Page(f"http://h.example/s/{i}", "h.example",
                  sorted(MONDAY + rng.randrange(60) * WEEK + rng.random() * WEEK for _ in range(8)))
             for i in range(6)]  # fmt: skip
    fixture = tmp_path / "traces.json.gz"
    save([Trace("t", MONDAY, MONDAY + 60 * WEEK, pages)], fixture)
    docs = tmp_path / "docs-bench"
    monkeypatch.setattr(bench, "OUT", docs)
    assert bench.main(["--fixture", str(fixture), "--no-last-modified", "--json"]) == 0
    assert not docs.exists()
    assert "not written" in capsys.readouterr().out
    out = tmp_path / "out"
    assert bench.main(["--fixture", str(fixture), "--no-last-modified", "--json", "--out", str(out)]) == 0
    assert json.loads((out / "recrawl-traces.json").read_text())["t"]["planner"]["fetches"] > 0
