"""Recall and precision on the bench_simhash quality corpus (pythonbible KJV+ASV) at confirmation thresholds 0.4 / 0.5 / 0.55 / 0.6 and distances k = 3 and 4, and the far tier (issue 16).

    .venv/bin/python benchmarks/confirm_threshold.py
"""
import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks")); sys.path.insert(0, str(ROOT))


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # no options: --help
    import bench_simhash as b
    from scrapy_aopic.hygiene.simhash import Fingerprinter
    from scrapy_aopic.hygiene.visibletext import visible_text
    rng = random.Random(1)
    ch = b.bible_chapters(b.BIBLE_VERSIONS[:2])
    texts = [(f"{t} ({v})", x) for v, t, x in ch] if ch else None
    if not texts:
        voc = b.synthetic_vocabulary(rng); texts = [(f"T{i}", b.synthetic_text(rng, voc, rng.randint(200, 1200))) for i in range(800)]
    texts = rng.sample(texts, min(600, len(texts)))
    pages = b.build_corpus(texts, rng); same = b.same_text(texts)
    f = Fingerprinter(); cache = {}
    def sig(h):
        if id(h) not in cache:
            s = f.signature(visible_text(h)); cache[id(h)] = (s.fingerprint, s.sketch)
        return cache[id(h)]
    for k in (3, 4):
        for m in (0.4, 0.5, 0.55, 0.6):
            print(f"k={k} confirm={m}", b.stream_quality(pages, sig, same, k=k, min_similarity=m))
    # k = 3 at the confirmation above, and distance 4-5 only with a sketch of 0.7 / 0.8
    # (AOPIC_SIMHASH_FAR_DISTANCE, AOPIC_SIMHASH_FAR_CONFIRM)
    for far_k in (4, 5):
        for far in (0.7, 0.8):
            print(f"k=3 confirm=0.55 far_k={far_k} far_confirm={far}",
                  b.stream_quality(pages, sig, same, k=3, min_similarity=0.55, far_k=far_k, far_similarity=far))


if __name__ == "__main__":
    main()
