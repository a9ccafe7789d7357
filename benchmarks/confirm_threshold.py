"""Recall and precision on the bench_simhash quality corpus (pythonbible KJV+ASV) at confirmation thresholds 0.4 / 0.5 / 0.55 / 0.6 (issue 16).

Run from the repository root: .venv/bin/python benchmarks/confirm_threshold.py
"""
import random, sys
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
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
for m in (0.4, 0.5, 0.55, 0.6):
    print(m, b.stream_quality(pages, sig, same, k=3, min_similarity=m))
