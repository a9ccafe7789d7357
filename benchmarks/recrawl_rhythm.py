"""How much clock rhythm each real change trace has, and how much of it the
planner's profiles can see (issue 17).

Per trace, from the true change times (UTC): the share of changes in the
busiest 8 hours of the day and at weekends (Saturday and Sunday, UTC), and
Pearson's X2 of the changes against a flat rate with its p-value, for 24
hour-of-day bins (23 df), 7 weekday bins (6 df) and the 168 hours of the
week (167 df). The exposure of every bin is taken as equal (whole days and
weeks of a three-year window: off by at most a week in 156).

X2 grows with the number of changes, so it says whether there is a rhythm,
not how much: ``phi2 = (X2 - df) / N`` (N changes) estimates the rhythm's
size (the relative variance of the bins' true rates: 0 when flat), the same
for any N. What a profile of ``n`` events can believe of it, by the
positive-part James-Stein factor the planner uses, is about
``w = n phi2 / (df + n phi2)`` (``E[X2] = df + n phi2``); ``n half`` is the
``n`` at which ``w`` reaches one half (``df / phi2``). The planner's profiles
are per section (``host/first-path-segment``, else the host) and, with a
budget, forget with a time constant of 180 days: "n in 180 d" is the changes
of the trace's busiest section in 180 days on average, roughly what its
profile holds (fewer in fact: changes found by revisits are only known to
lie in an interval, which blurs them)::

    .venv/bin/python benchmarks/recrawl_rhythm.py   # a few seconds

The output: ``docs/_static/bench/recrawl-rhythm.txt``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recrawl_traces import EXTRA, FIXTURE, YEAR, load  # noqa: E402

from scrapy_aopic.recrawl.profile import hour_of_week, profile_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_static" / "bench" / "recrawl-rhythm.txt"
WINDOW = 180 * 86400.0  # the profiles' forgetting time constant with a budget


def chi2(counts: list[int]) -> tuple[float, float]:
    """Pearson's X2 of ``counts`` against equal bins, and its p-value."""
    from scipy.stats import chi2 as distribution

    n, k = sum(counts), len(counts)
    expected = n / k
    x2 = sum((c - expected) ** 2 / expected for c in counts)
    return x2, float(distribution.sf(x2, k - 1))


def _correlation(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = sum((x - ma) ** 2 for x in a), sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else 0.0


def rhythm(trace) -> dict:
    times = [t for page in trace.pages for t in page.changes]
    n = len(times)
    week = Counter(hour_of_week(t) for t in times)
    bins = {
        24: [sum(week[d * 24 + h] for d in range(7)) for h in range(24)],
        7: [sum(week[d * 24 + h] for h in range(24)) for d in range(7)],
        168: [week[b] for b in range(168)],
    }
    # Changes of one commit (or upload) to several pages share a time: as
    # Poisson counts they overstate the evidence. The hour-of-day test again
    # on the distinct times:
    distinct = sorted(set(times))
    hours_distinct = Counter(int(t // 3600) % 24 for t in distinct)
    x2_distinct, _ = chi2([hours_distinct[h] for h in range(24)])
    # Is the rhythm of the history the rhythm of the future? The hour-of-day
    # shares of the first half year (what the planner learns from first)
    # against those of the 2.5 scored years (Pearson correlation).
    split = trace.start + YEAR / 2
    before = Counter(int(t // 3600) % 24 for t in times if t < split)
    after = Counter(int(t // 3600) % 24 for t in times if t >= split)
    # The same between each half year and the next (what a profile forgetting
    # in 180 days learns, against what comes after it): the mean.
    halves = [Counter(int(t // 3600) % 24 for t in times if 0 <= (t - trace.start) // (YEAR / 2) == i)
              for i in range(int((trace.end - trace.start) // (YEAR / 2)))]  # fmt: skip
    pairs = [_correlation([a[h] for h in range(24)], [b[h] for h in range(24)]) for a, b in zip(halves, halves[1:])]
    row = {
        "changes": n,
        "corr_next": sum(pairs) / len(pairs) if pairs else float("nan"),
        "distinct": len(distinct),
        "phi2_24_distinct": max(0.0, (x2_distinct - 23) / len(distinct)),
        "corr": _correlation([before[h] for h in range(24)], [after[h] for h in range(24)]),
        "busiest_8h": sum(sorted(bins[24])[-8:]) / n,
        "weekend": sum(bins[7][5:]) / n,
    }
    sections = Counter()
    for page in trace.pages:
        sections[profile_key(page.url)[0]] += len(page.changes)
    section, events = sections.most_common(1)[0]
    row["section"] = section
    row["n180"] = events / ((trace.end - trace.start) / YEAR) * WINDOW / YEAR
    for k, counts in bins.items():
        x2, p = chi2(counts)
        phi2 = max(0.0, (x2 - (k - 1)) / n)
        row[k] = {"x2": x2, "p": p, "phi2": phi2,
                  "n_half": (k - 1) / phi2 if phi2 > 0 else float("inf"),
                  "w180": row["n180"] * phi2 / (k - 1 + row["n180"] * phi2)}  # fmt: skip
    return row


def _two_level(share: float, busy: int, k: int) -> float:
    """phi2 of ``k`` bins, ``busy`` of them holding ``share`` alike, the
    others the rest alike (a lower bound for any bins with those shares)."""
    a, b = share / busy, (1 - share) / (k - busy)
    return k * (busy * a * a + (k - busy) * b * b) - 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lines = []

    def say(text=""):
        print(text)
        lines.append(text)

    say(f"rhythm of the true change times (UTC) of each trace in {FIXTURE.name} (and {EXTRA.name}: the traces judged apart); "
        "flat: busiest 8 h 0.333, weekend 0.286")  # fmt: skip
    say("held-out trace of the issue: busiest 8 h 0.58, weekend 0.11 (705 pages, 3 years)")
    say(f"{'trace':<16}{'changes':>8}{'busy 8h':>8}{'weekend':>8}   "
        + "".join(f"{f'{k} bins: X2 (p), phi2, n half, w at n180':>44}" for k in (24, 7, 168))
        + f"{'busiest section, n180':>36}")  # fmt: skip
    rows = []
    for trace in load() + (load(EXTRA) if EXTRA.exists() else []):
        r = rhythm(trace)
        rows.append((trace.name, r))
        cells = "".join(
            f"{r[k]['x2']:>10.0f} ({r[k]['p']:7.1e}) {r[k]['phi2']:6.3f} {r[k]['n_half']:>7.0f} {r[k]['w180']:5.2f}"
            for k in (24, 7, 168)
        )
        say(f"{trace.name:<16}{r['changes']:>8}{r['busiest_8h']:>8.3f}{r['weekend']:>8.3f}   {cells}"
            f"   {r['section']:>24} {r['n180']:6.0f}")  # fmt: skip
    say()
    say("the same changes, their distinct times only (one commit or upload to several pages counts once), "
        "and the hour of day of the history half-year against the scored 2.5 years")  # fmt: skip
    say(f"{'trace':<16}{'changes':>8}{'distinct':>9}{'phi2 24 (all)':>15}{'phi2 24 (distinct)':>20}"
        f"{'hour-of-day corr history / scored':>36}{'each half year / the next (mean)':>34}")  # fmt: skip
    for trace, r in rows:
        say(f"{trace:<16}{r['changes']:>8}{r['distinct']:>9}{r[24]['phi2']:>15.3f}"
            f"{r['phi2_24_distinct']:>20.3f}{r['corr']:>36.2f}{r['corr_next']:>34.2f}")  # fmt: skip
    say()
    say("the held-out trace, from its two shares alone (busiest 8 hours alike, the 16 others alike; five "
        "weekdays alike, the weekend alike): phi2 24 >= "
        f"{_two_level(0.58, 8, 24):.3f}, phi2 7 >= {_two_level(0.89, 5, 7):.3f} (n half {23 / _two_level(0.58, 8, 24):.0f}"
        f" and {6 / _two_level(0.89, 5, 7):.0f} events)")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
