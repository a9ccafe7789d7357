"""Why the weekly timetables lose on a trace: where their fetches land,
how many each page gets, and what their section's fitted hour-of-day profile
says against the hours the changes then come at (issue 17).

A diagnostic, not a judgement. One run of the default planner (``main``:
the waiting rule) and one with :setting:`AOPIC_RECRAWL_TIMETABLE` (``tt``:
the timetables of the code it runs with; the docs' figures for main's
dithered timetables were run from a ``git archive`` of main with
``PYTHONPATH`` set to it), at one budget, driven as
``bench_recrawl_traces.py`` drives them (``run_planner``, no
``Last-Modified``). Over the scored years (after the half year of history)
it prints, per side:

* **per hour of the day** (UTC): the changes, each side's fetches and the
  mean delay of that hour's changes;
* **per class of pages** by true changes a year: fetches a day per page
  and the mean delay of a change, split three ways: ``alloc`` (the page's
  fetches in the scored years evenly spaced: ``T / 2n`` a change, what the
  allocation alone gives), ``gaps`` (its actual gaps, changes at random
  times: ``sum g^2 / 2 sum g``, what the irregular gaps add) and ``actual``
  (the real changes against the real fetches: what the timing adds);
* the same irregularity over short stretches (windows of 8 consecutive
  gaps of a page), which the page's rate moving over the years does not
  inflate;
* **how late** the timetabled fetches come after the time they were
  planned for (the host queue: one host, 60 s a fetch);
* **the sections' fitted profiles against the truth**: at every refit in
  the scored years, the daily timetable (7 a week) placed on the fitted
  ``DayProfile`` is scored on the hours of the section's changes of the
  next 90 days (their expected delay, a timetable fetched on time), against
  7 evenly spaced fetches (0.5 day, the flat placement's) and the timetable
  placed on those 90 days' own hours (the best any profile could do) and on
  the previous 180 days' true hours (a perfect profile of the past: what a
  profile that learnt without noise or censoring would do); changes counted
  once per distinct time (one commit to several pages is one event of the
  rhythm)::

    .venv/bin/python benchmarks/recrawl_timetable_why.py --trace pip-src --trace sphinx-src --trace debian

(about two minutes a trace; ``--fixture benchmarks/data/recrawl_traces_extra.json.gz``
for docs-cn and govuk-dev-docs). ``--dither-flat`` only simulates main's
dither between two timetable levels on a flat day (a few seconds). The
output of the commands in ``docs/recrawl.rst``:
``docs/_static/bench/recrawl-timetable-why.txt``.
"""

from __future__ import annotations

import argparse
import bisect
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_recrawl_traces as brt  # noqa: E402
from recrawl_traces import FIXTURE, YEAR, Trace, load  # noqa: E402

from scrapy_aopic.recrawl.profile import BINS, profile_key  # noqa: E402
from scrapy_aopic.recrawl.timetable import place, waiting  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-timetable-why.txt"
HOUR = 3600.0
DAY = 86400.0
CLASSES = (("<= 1 a year", 1.0), ("1-3 a year", 3.0), ("3-10 a year", 10.0), ("> 10 a year", math.inf))


def instrumented_run(trace: Trace, settings: dict) -> tuple[dict, dict]:
    """``run_planner`` with the planner's timetable choices, its profile
    fits and each fetch's lateness recorded."""
    log = {"plans": Counter(), "fits": [], "late": []}

    def instrument(planner):
        timetable_for, day_profile, on_visit = planner._timetable_for, planner._day_profile, planner.on_visit

        def _timetable_for(*args):  # (url, record,) source, shape, period, now
            table = timetable_for(*args)
            log["plans"][(args[-4], table is not None)] += 1
            return table

        def _day_profile(name, now):
            before = planner._day_fits.get(name)
            day = day_profile(name, now)
            if planner._day_fits.get(name) is not before:
                log["fits"].append((name, now, list(day)))
            return day

        def _on_visit(url, host, now, **kw):
            record = planner.pages.get(url)
            if record is not None and record.deadline is not None:
                log["late"].append((now, now - record.deadline))
            return on_visit(url, host, now, **kw)

        planner._timetable_for, planner._day_profile, planner.on_visit = _timetable_for, _day_profile, _on_visit

    fetches, _, _ = brt.run_planner(trace, settings, last_modified=False, instrument=instrument)
    return fetches, log


def hour_of_day(t: float) -> int:
    return int(t // HOUR) % 24


def delays(trace: Trace, fetches: dict, a: float, b: float) -> dict:
    hours = {h: [0, 0, 0.0] for h in range(24)}  # changes, fetches, summed delay
    classes = {label: defaultdict(float) for label, _ in CLASSES}
    years = (trace.end - trace.start) / YEAR
    span = b - a
    for page in trace.pages:
        times = fetches[page.url]
        rate = len(page.changes) / years
        cls = classes[next(label for label, top in CLASSES if rate <= top)]
        cls["pages"] += 1
        inside = [f for f in times if a <= f < b]
        for f in inside:
            hours[hour_of_day(f)][1] += 1
        n = len(inside)
        cls["fetches"] += n
        # the page's gaps over [a, b): from its last fetch before a to its first after b
        i0 = max(0, bisect.bisect_left(times, a) - 1)
        i1 = bisect.bisect_left(times, b)
        window = times[i0 : i1 + 1]
        gaps = [y - x for x, y in zip(window, window[1:])]
        g1, g2 = sum(gaps), sum(g * g for g in gaps)
        for c in page.changes:
            if not a <= c < b:
                continue
            i = bisect.bisect_left(times, c)
            if i == len(times):
                continue
            d = times[i] - c
            hours[hour_of_day(c)][0] += 1
            hours[hour_of_day(c)][2] += d
            cls["changes"] += 1
            cls["actual"] += d
            cls["alloc"] += span / (2 * max(n, 1))
            cls["gaps"] += g2 / (2 * g1) if g1 else 0.0
    return {"hours": hours, "classes": classes, "days": span / DAY}


def local_excess(trace: Trace, fetches: dict, a: float, b: float, width: int = 8) -> float:
    """What irregular gaps cost over short stretches (seconds a gap): over
    windows of ``width`` consecutive gaps of a page, ``sum g^2 / 2 sum g``
    less half the window's mean gap (0 for regular fetches), averaged."""
    total = n = 0
    for page in trace.pages:
        f = [x for x in fetches[page.url] if a <= x < b]
        g = [y - x for x, y in zip(f, f[1:])]
        for i in range(0, len(g) - width, width):
            w = g[i : i + width]
            total += (sum(x * x for x in w) / (2 * sum(w)) - sum(w) / width / 2) * width
            n += width
    return total / max(n, 1)


def dither_on_flat(weeks: int = 400, pages: int = 5) -> list[str]:
    """Main's dither between the two levels around ``k`` (before this
    branch: a level drawn visit after visit), simulated on a flat day (no
    rhythm: evenly spaced fetches are best): the mean gap against
    ``WEEK / k`` and the mean delay of changes at random times against the
    evenly spaced fetches' ``WEEK / 2k``."""
    import zlib

    from scrapy_aopic.recrawl.timetable import LEVELS, Timetable

    week = 7 * DAY
    lines = [f"{'k a week':>9}{'mean gap h':>11}{'WEEK/k':>8}{'delay h':>9}{'even':>7}{'cost h':>8}"]
    for k in (1.5, 2.5, 3.5, 4.5, 5.3, 6.2, 7.0, 7.5, 8.7, 9.3, 11.0, 13.0, 15.5):
        gaps_mean = delay = 0.0
        for p in range(pages):
            url = f"http://flat.example/p{p}"
            tables: dict[int, Timetable] = {}
            period, now, times, visits = week / k, 0.0, [0.0], 0
            turn = (zlib.crc32(url.encode()) % 7) * DAY
            while now < weeks * week:
                j = bisect.bisect_right(LEVELS, k) - 1
                low, high = LEVELS[j], LEVELS[j + 1]
                u = (zlib.crc32(url.encode()) / 4294967296.0 + 0.6180339887498949 * visits) % 1.0
                level = high if u < (1 / low - 1 / k) / (1 / low - 1 / high) else low
                table = tables.get(level) or tables.setdefault(level, Timetable(place([1.0] * BINS, level)))
                now = table.next_after(now - turn + max(0.0, period - week)) + turn
                times.append(now)
                visits += 1
            g = [y - x for x, y in zip(times, times[1:])]
            gaps_mean += sum(g) / len(g) / pages
            delay += sum(x * x for x in g) / (2 * sum(g)) / pages
        even = week / (2 * k)
        lines.append(f"{k:>9.1f}{gaps_mean / HOUR:>11.1f}{period / HOUR:>8.1f}{delay / HOUR:>9.2f}"
                     f"{even / HOUR:>7.2f}{(delay - even) / HOUR:>+8.2f}")
    return lines


def distinct_hours(times: list[float]) -> list[float]:
    counts = [0.0] * 24
    for t in times:
        counts[hour_of_day(t)] += 1
    return counts


def profile_check(trace: Trace, fits: list, a: float, b: float) -> list[str]:
    """Each refit in [a, b) of a section's profile, its daily timetable
    scored on the section's next 90 days of (distinct) change times."""
    by_section: dict = defaultdict(set)
    for page in trace.pages:
        key, site = profile_key(page.url)
        for c in page.changes:
            by_section[key].add(c)
            by_section[site].add(c)
    by_section = {k: sorted(v) for k, v in by_section.items()}
    rows = defaultdict(lambda: defaultdict(float))
    for name, now, day in fits:
        if not a <= now < b:
            continue
        times = by_section.get(name, [])
        ahead = times[bisect.bisect_right(times, now) : bisect.bisect_right(times, now + 90 * DAY)]
        past = times[bisect.bisect_right(times, now - 180 * DAY) : bisect.bisect_right(times, now)]
        if len(ahead) < 10 or len(past) < 10:
            continue
        truth = distinct_hours(ahead)
        total = sum(truth)
        week = [truth[h % 24] for h in range(BINS)]  # bin 0: Monday 00-01 h UTC

        def score(shares: list[float]) -> float:
            return waiting(week, place([x for _ in range(7) for x in shares], 7)) / (7 * total)

        mean = sum(day) / 24
        fitted_dev = [x - mean for x in day]
        tmean = total / 24
        true_dev = [x - tmean for x in truth]
        num = sum(x * y for x, y in zip(fitted_dev, true_dev))
        den = math.sqrt(sum(x * x for x in fitted_dev) * sum(y * y for y in true_dev)) or 1.0
        row = rows[name]
        row["fits"] += 1
        row["ahead"] += len(ahead)
        row["corr"] += num / den
        row["fitted"] += score(day)
        row["flat"] += sum(waiting(week, list(range(p, BINS, 24))) for p in range(24)) / (24 * 7 * total)
        row["oracle"] += score(truth)
        row["past"] += score(distinct_hours(past))
        row["peak"] += max(day) * 24
    lines = [
        f"{'section':<34}{'fits':>5}{'changes/90d':>12}{'r fit~next':>11}{'peak/mean':>10}"
        f"{'delay h: flat':>14}{'fitted':>8}{'past180':>8}{'next90':>8}"
    ]
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1]["fits"] * kv[1]["ahead"]):
        n = row["fits"]
        lines.append(
            f"{name[:33]:<34}{n:>5.0f}{row['ahead'] / n:>12.0f}{row['corr'] / n:>11.2f}{row['peak'] / n:>10.2f}"
            f"{row['flat'] / n:>14.2f}{row['fitted'] / n:>8.2f}{row['past'] / n:>8.2f}{row['oracle'] / n:>8.2f}"
        )
    return lines[:12]


def report(trace: Trace, runs: dict, a: float, b: float) -> list[str]:
    found = {side: delays(trace, fetches, a, b) for side, (fetches, _) in runs.items()}
    sides = list(runs)
    out = [f"== {trace.name}: {len(trace.pages)} pages, scored {found[sides[0]]['days']:.0f} days"]
    out.append(f"{'hour':>4}{'changes':>8}" + "".join(f"{s + ' fetches':>16}{s + ' delay':>14}" for s in sides))
    for h in range(24):
        row = found[sides[0]]["hours"][h]
        line = f"{h:>4}{row[0]:>8}"
        for s in sides:
            r = found[s]["hours"][h]
            line += f"{r[1]:>16}{(r[2] / r[0] / HOUR if r[0] else float('nan')):>14.1f}"
        out.append(line)
    out.append(f"{'class':<12}{'side':>10}{'pages':>6}{'changes':>8}{'fetch/d/page':>13}{'alloc h':>9}{'gaps h':>8}{'actual h':>9}")
    totals = {s: defaultdict(float) for s in sides}
    for label, _ in CLASSES:
        for s in sides:
            c = found[s]["classes"][label]
            if not c["pages"]:
                continue
            for k in ("pages", "changes", "fetches", "alloc", "gaps", "actual"):
                totals[s][k] += c[k]
            out.append(_class_line(label, s, c, found[s]["days"]))
    for s in sides:
        out.append(_class_line("all", s, totals[s], found[s]["days"]))
    for s in sides:
        out.append(f"{s}: gaps over windows of 8 consecutive gaps of a page, sum g^2 / 2 sum g - mean / 2: "
                   f"{local_excess(trace, runs[s][0], a, b) / HOUR:.3f} h a gap")
    for s in sides:
        _, log = runs[s]
        late = sorted(x for t, x in log["late"] if a <= t < b)
        if late:
            q = lambda p: late[min(len(late) - 1, int(p * len(late)))] / HOUR  # noqa: E731
            out.append(
                f"{s}: lateness after the planned time, h: median {q(0.5):.2f}, 90 % {q(0.9):.2f}, "
                f"99 % {q(0.99):.2f}, mean {sum(late) / len(late) / HOUR:.2f}"
            )
        plans = log["plans"]
        if plans:
            used = sum(v for (_, tt), v in plans.items() if tt)
            out.append(f"{s}: plans on a timetable {used} of {sum(plans.values())} "
                       f"(the rest: waiting rule, no profile or > 84 a week)")
    fits = runs[sides[-1]][1]["fits"]
    if fits:
        out.append("the fitted DayProfile's daily timetable (7 a week, fetched on time) scored on the next 90 days")
        out.append("(mean delay h of a change, distinct change times; r: fitted hour shares against the next 90 days')")
        out += profile_check(trace, fits, a, b)
    return out


def _class_line(label: str, side: str, c: dict, days: float) -> str:
    n = c["changes"] or 1
    return (
        f"{label:<12}{side:>10}{c['pages']:>6.0f}{c['changes']:>8.0f}{c['fetches'] / c['pages'] / days:>13.3f}"
        f"{c['alloc'] / n / HOUR:>9.2f}{c['gaps'] / n / HOUR:>8.2f}{c['actual'] / n / HOUR:>9.2f}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace names (default: all of the file)")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--per-page-per-day", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=None, help="also append the output here")
    parser.add_argument("--dither-flat", action="store_true",
                        help="only simulate main's dither between two levels on a flat day (a few seconds)")
    args = parser.parse_args(argv)
    if args.dither_flat:
        print("main's dither between two timetable levels, on a flat day: a page's gaps and its delay")
        print("\n".join(dither_on_flat()))
        return 0
    lines = []
    for trace in load(args.fixture, args.trace):
        settings = {"AOPIC_RECRAWL_BUDGET": args.per_page_per_day * len(trace.pages)}
        runs = {
            "main": instrumented_run(trace, settings),
            "tt": instrumented_run(trace, {**settings, "AOPIC_RECRAWL_TIMETABLE": True}),
        }
        part = report(trace, runs, trace.start + brt.WARMUP, trace.end)
        print("\n".join(part), flush=True)
        lines += part
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
