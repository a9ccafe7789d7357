"""Issue 16 item 2: false merges on a boilerplate-heavy site and recall of
small edits, this add-on against the ``simhash`` package on the same texts.

Run::

    .venv/bin/python benchmarks/boilerplate_site.py [--articles 3000]

The site: distinct short articles (60-160 words) in one template with a
header, a 40-link nav, a sidebar, a footer and a 50-word editors' box that
boilerplate removal keeps. Every article is distinct, so every flag among
them is a false merge. Then each kind of small edit (one word changed,
inserted, deleted, a sentence added, a date changed, a number changed) is
applied to each article and looked up: a flag on its own article is a hit.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_simhash import synthetic_text, synthetic_vocabulary  # noqa: E402
from scrapy_aopic.hygiene.simhash import Fingerprinter  # noqa: E402
from scrapy_aopic.hygiene.simhash_index import NearDuplicateIndex  # noqa: E402
from scrapy_aopic.hygiene.visibletext import visible_text  # noqa: E402

EDITS = ("word_changed", "word_inserted", "word_deleted", "sentence_added", "date_changed", "number_changed")


def site_template(rng: random.Random, vocabulary: list[str]):
    nav = "".join(f'<li><a href="/s/{i}">{rng.choice(vocabulary)}</a></li>' for i in range(40))
    box = synthetic_text(rng, vocabulary, 50)
    side = "".join(f'<li><a href="/t/{i}">{rng.choice(vocabulary)}</a></li>' for i in range(12))

    def render(title: str, body: str, date: str, number: int) -> str:
        return (
            f"<html><head><title>{title}</title></head><body>"
            f"<header><h1>The Daily Site</h1></header><nav><ul>{nav}</ul></nav>"
            f'<div class="article"><h2>{title}</h2><p class="meta">Published {date}, {number} readers</p>'
            f"<p>{body}</p></div>"
            f'<div class="editors"><h3>From the editors</h3><p>{box}</p></div>'
            f'<aside class="sidebar"><ul>{side}</ul></aside>'
            f"<footer>Copyright The Daily Site. All rights reserved.</footer></body></html>"
        )

    return render


def edit(rng: random.Random, kind: str, body: str, date: str, number: int, vocabulary):
    words = body.split()
    i = rng.randrange(len(words))
    if kind == "word_changed":
        words[i] = rng.choice(vocabulary)
    elif kind == "word_inserted":
        words.insert(i, rng.choice(vocabulary))
    elif kind == "word_deleted":
        del words[i]
    elif kind == "sentence_added":
        words += synthetic_text(rng, vocabulary, 12).split()
    elif kind == "date_changed":
        date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    elif kind == "number_changed":
        number += rng.randint(1, 500)
    return " ".join(words), date, number


def run(articles: int, seed: int, confirm: float = 0.55, ratio: float = 1.4, k: int = 3, far_k: int = 4, far_confirm: float = 0.8) -> dict:
    import logging

    # The package logs every "Big bucket": its own logger is quietened while
    # this runs, and only it (run() is also called from the test suite, where
    # a root logger left at ERROR hid every later test's warnings).
    quiet = logging.getLogger("simhash")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _run(articles, seed, confirm, ratio, k, far_k, far_confirm)
    finally:
        quiet.setLevel(level)


def _run(articles: int, seed: int, confirm: float, ratio: float, k: int, far_k: int, far_confirm: float) -> dict:
    import simhash as reference

    rng = random.Random(seed)
    vocabulary = synthetic_vocabulary(rng)
    render = site_template(rng, vocabulary)
    pages = []
    for n in range(articles):
        body = synthetic_text(rng, vocabulary, rng.randint(60, 160))
        pages.append((f"Article {n} {rng.choice(vocabulary)}", body, f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", rng.randint(10, 9999)))
    fingerprinter = Fingerprinter()
    results = {}
    for label, (min_similarity, max_ratio, far) in (
        ("add-on before (0.4, no guard)", (0.4, 0.0, 0)),
        (f"add-on ({confirm}, {ratio})", (confirm, ratio, 0)),
        (f"add-on ({confirm}, {ratio}, far {far_k}/{far_confirm})", (confirm, ratio, far_k)),
    ):
        index = NearDuplicateIndex(k=k, min_similarity=min_similarity, max_length_ratio=max_ratio,
                                   far_k=far, far_similarity=far_confirm)  # fmt: skip
        false, spent = 0, 0.0
        signatures = []
        for title, body, date, number in pages:
            html_text = render(title, body, date, number)
            start = time.perf_counter()
            signature = fingerprinter.signature(visible_text(html_text))
            match = index.find(signature.fingerprint, signature.sketch, signature.chars)
            spent += time.perf_counter() - start
            if match is not None:
                false += 1
                signatures.append(None)
            else:
                signatures.append(index.add(signature.fingerprint, signature.sketch, signature.chars))
        recall = {}
        for kind in EDITS:
            hits = tried = 0
            for n, (title, body, date, number) in enumerate(pages):
                if signatures[n] is None:
                    continue
                text = visible_text(render(title, *edit(rng, kind, body, date, number, vocabulary)))
                signature = fingerprinter.signature(text)
                match = index.find(signature.fingerprint, signature.sketch, signature.chars)
                tried += 1
                hits += match is not None and match[0] == signatures[n]
            recall[kind] = hits / max(tried, 1)
        results[label] = (false / articles, recall, 1e6 * spent / articles)
    # the package, k = 3, same visible texts
    objects, ids, false, spent = [], {}, 0, 0.0
    index = reference.SimhashIndex([], k=3)
    texts = [visible_text(render(*page)) for page in pages]
    for n, text in enumerate(texts):
        start = time.perf_counter()
        value = reference.Simhash(text)
        near = index.get_near_dups(value)
        spent += time.perf_counter() - start
        if near:
            false += 1
        else:
            index.add(str(n), value)
            ids[n] = str(n)
    recall = {}
    for kind in EDITS:
        hits = tried = 0
        for n, (title, body, date, number) in enumerate(pages):
            if n not in ids:
                continue
            text = visible_text(render(title, *edit(rng, kind, body, date, number, vocabulary)))
            tried += 1
            hits += ids[n] in index.get_near_dups(reference.Simhash(text))
        recall[kind] = hits / max(tried, 1)
    results["simhash package"] = (false / articles, recall, 1e6 * spent / articles)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--confirm", type=float, default=0.55, help="AOPIC_SIMHASH_CONFIRM to compare")
    parser.add_argument("--ratio", type=float, default=1.4, help="AOPIC_SIMHASH_MAX_LENGTH_RATIO to compare")
    parser.add_argument("-k", type=int, default=3, help="AOPIC_SIMHASH_DISTANCE of the add-on (the package: 3)")
    parser.add_argument("--far-k", type=int, default=4, help="AOPIC_SIMHASH_FAR_DISTANCE")
    parser.add_argument("--far-confirm", type=float, default=0.8, help="AOPIC_SIMHASH_FAR_CONFIRM")
    args = parser.parse_args(argv)
    results = run(args.articles, args.seed, args.confirm, args.ratio, args.k, args.far_k, args.far_confirm)
    print(f"boilerplate-heavy site, {args.articles} distinct articles, add-on k = {args.k}, package k = 3")
    print(f"{'':36s} {'false merges':>12s} " + " ".join(f"{k:>14s}" for k in EDITS) + "  us/page")
    for label, (false, recall, us) in results.items():
        print(f"{label:36s} {100 * false:11.2f}% " + " ".join(f"{recall[k]:14.3f}" for k in EDITS) + f"  {us:7.0f}")


if __name__ == "__main__":
    main()
