"""Near-duplicate recall on a mirrored tree: the same page under two prefixes.

    python benchmarks/bench_mirror_pairs.py [--root DIR] [--prefixes std,core] [--sample 400]

Rust's documentation publishes most of ``core`` again under ``std``
(re-exports): ``std/iter/struct.Cycle.html`` is ``core/iter/struct.Cycle.html``
with ``std::`` for ``core::`` in its paths. For a random sample of the
relative paths both prefixes hold (redirect stubs left out), this feeds the
first prefix's page and then the second's through the add-on's near-duplicate
detection (its fingerprint and index, default settings; a fresh index per
pair, so nothing else can match) and counts the pairs folded and, by the
guard that kept them apart, the pairs missed: a page under
``AOPIC_SIMHASH_MIN_CHARS`` of text (too short to compare), amounts of text
further apart than ``AOPIC_SIMHASH_MAX_LENGTH_RATIO``, a sketch similarity
under ``AOPIC_SIMHASH_CONFIRM`` within ``AOPIC_SIMHASH_DISTANCE`` bits or
under ``AOPIC_SIMHASH_FAR_CONFIRM`` within ``AOPIC_SIMHASH_FAR_DISTANCE``,
or a SimHash distance beyond both. Module index pages are counted apart
(they list what each prefix holds, and differ).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_crawl_order import fold_detector  # noqa: E402

from scrapy_aopic.sim.docgraph import DOC_TREES, is_redirect_stub  # noqa: E402


def mirrored_paths(root: Path, first: str, second: str) -> list[str]:
    """Relative paths of the HTML pages (not redirect stubs) under both prefixes, sorted."""
    def pages(prefix: str) -> set[str]:
        base = root / prefix
        return {path.relative_to(base).as_posix() for path in base.rglob("*.html") if not is_redirect_stub(path)}
    return sorted(pages(first) & pages(second))


def why_apart(detector, a, b) -> str:
    """The guard that kept signatures ``a`` and ``b`` from being folded."""
    from scrapy_aopic.hygiene.simhash import hamming, sketch_similarity

    if min(a.chars, b.chars) < detector.min_chars:
        return "too short"
    if max(a.chars, b.chars) > detector.max_length_ratio * min(a.chars, b.chars):
        return "length ratio"
    distance, similarity = hamming(a.fingerprint, b.fingerprint), sketch_similarity(a.sketch, b.sketch)
    if distance <= detector.distance:
        return "sketch, near" if similarity < detector.min_similarity else "other"
    if distance <= detector.far_distance:
        return "sketch, far" if similarity < detector.far_similarity else "other"
    return "distance"


def compare(root: Path, first: str, second: str, paths: list[str]) -> tuple[Counter, list[tuple[str, str, int, float]]]:
    """Pairs per outcome (folded, a module index, or the guard that kept
    them apart), and (path, guard, distance, similarity) of the pairs missed."""
    from scrapy.http import HtmlResponse, Request

    from scrapy_aopic.hygiene.simhash import hamming, sketch_similarity
    from scrapy_aopic.meta import DUPLICATE_OF

    counts: Counter = Counter()
    missed = []
    for path in paths:
        detector = fold_detector()  # a fresh index per pair
        signatures = []
        for prefix in (first, second):
            url = f"http://127.0.0.1/{prefix}/{path}"
            request = Request(url)
            response = HtmlResponse(url, body=(root / prefix / path).read_bytes(), request=request)
            detector.process_response(request, response)
            text = detector._visible_text(response, [0, 0, 0])
            signatures.append(detector.fingerprinter.signature(text, sketch=True))
        if DUPLICATE_OF in request.meta:
            counts["folded"] += 1
        elif path.endswith("index.html"):
            counts["module index, not folded"] += 1
        else:
            a, b = signatures
            reason = why_apart(detector, a, b)
            counts[f"missed: {reason}"] += 1
            missed.append((path, reason, hamming(a.fingerprint, b.fingerprint),
                           float(sketch_similarity(a.sketch, b.sketch))))
    return counts, missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=DOC_TREES["rust-doc"], help="the HTML tree (default: rust-doc's)")
    parser.add_argument("--prefixes", default="std,core", help="the two top directories, comma-separated")
    parser.add_argument("--sample", type=int, default=400, help="pairs compared (a random sample, seed 1)")
    args = parser.parse_args()
    first, second = args.prefixes.split(",")
    root = Path(args.root)
    paths = mirrored_paths(root, first, second)
    sample = random.Random(1).sample(paths, min(args.sample, len(paths)))
    counts, missed = compare(root, first, second, sample)
    print(f"{root}: {len(paths)} pages under both {first}/ and {second}/; {len(sample)} compared")
    for kind, count in counts.most_common():
        print(f"  {kind:<26} {count:5d}  ({100 * count / len(sample):.1f} %)")
    far = [(distance, similarity) for _, reason, distance, similarity in missed if reason == "distance"]
    if far:
        distances = [distance for distance, _ in far]
        similarities = [similarity for _, similarity in far]
        print(f"  missed by distance: median {statistics.median(distances):g} bits "
              f"(range {min(distances)}-{max(distances)}), sketch similarity median "
              f"{statistics.median(similarities):.2f} (range {min(similarities):.2f}-{max(similarities):.2f}); "
              f"within 8 bits at a similarity of 0.8 or more: {sum(d <= 8 and s >= 0.8 for d, s in far)}")
    for path, reason, distance, similarity in sorted(missed, key=lambda m: (m[2], -m[3]))[:10]:
        print(f"    {path:<50} {reason:<13} {distance:3d} bits  {similarity:.3f}")


if __name__ == "__main__":
    main()
