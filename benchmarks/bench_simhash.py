"""Near-duplicate detection: quality, fingerprint speed and index figures.

Run::

    .venv/bin/python benchmarks/bench_simhash.py            # everything
    .venv/bin/python benchmarks/bench_simhash.py --quick    # smaller sizes

It prints, each side by side with the ``simhash`` package in the same run:

1. quality at ``k = 3`` on a corpus of HTML pages: Bible chapters (the
   ``pythonbible`` version packages; generated text when they are missing)
   wrapped in different page templates with timestamps, ads, navigation and
   1-5 % token edits. Pages are streamed through the index as in a crawl;
   a page flagged as a near-duplicate of a page of the same chapter is a
   true positive, of another chapter a false positive; a copy of an already
   seen chapter that is not flagged is a false negative. Debian's
   ``rust-doc`` HTML is used too when it is installed;
2. fingerprint speed of 30 KB HTML pages (text extraction included);
3. index query time and memory per fingerprint at 10^6 fingerprints.

The corpus builders are also used by ``tests/unit/test_simhash.py``.
"""

from __future__ import annotations

import argparse
import gc
import html
import random
import re
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# --------------------------------------------------------------------------
# texts

#: Bible versions used when their ``pythonbible-*`` packages are installed.
BIBLE_VERSIONS = ("kjv", "asv", "bbe", "web", "ylt")

_SYLLABLES = (
    "ka ri to mi sa na lo ve de ul an or el ith tha mon gar bel qui zen pro "
    "dus ter wil fan hol ost rim cal nep jor vak ser tum ble ing est"
).split()


def synthetic_vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    """``size`` distinct made-up words of 1-4 syllables."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def synthetic_text(rng: random.Random, vocabulary: list[str], words: int) -> str:
    """Prose-like text of ``words`` words drawn Zipf-like from ``vocabulary``
    (frequent function-like words, long tail), in sentences."""
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    chosen = rng.choices(vocabulary, weights=weights, k=words)
    sentences, start = [], 0
    while start < words:
        length = rng.randint(6, 22)
        sentence = chosen[start : start + length]
        sentences.append(sentence[0].capitalize() + " " + " ".join(sentence[1:]) + ".")
        start += length
    return " ".join(sentences)


def bible_chapters(versions=BIBLE_VERSIONS, min_words: int = 0) -> list[tuple[str, str, str]]:
    """``(version, "Book chapter", text)`` of every chapter of the installed
    ``pythonbible`` versions; ``[]`` when none is installed."""
    try:
        import pythonbible as bible
    except ImportError:
        return []
    chapters = []
    for code in versions:
        try:
            module = __import__(f"pythonbible_{code}.plain_text_bible", fromlist=["bible"])
        except ImportError:
            continue
        text_bible = module.bible
        for book in bible.Book:
            try:
                count = bible.get_number_of_chapters(book)
            except Exception:  # books some versions lack
                continue
            for chapter in range(1, count + 1):
                try:
                    first = bible.get_verse_id(book, chapter, 1)
                    last = bible.get_verse_id(book, chapter, bible.get_number_of_verses(book, chapter))
                    text = text_bible.get_scripture(first, last)
                except Exception:
                    continue
                if text and len(text.split()) >= min_words:
                    chapters.append((code, f"{book.title} {chapter}", text))
    return chapters


# --------------------------------------------------------------------------
# page variants: edits and templates

_AD_COPY = (
    "Buy cheap flights to {city} now and save {n} percent",
    "Limited offer: {product} only ${n}.99 today",
    "Sponsored: the best {product} of {year} reviewed",
    "Click here to win a free {product}",
    "Hot singles in {city} want to meet you",
)
_CITIES = "Paris Lagos Lima Oslo Tokyo Denver Cairo Perth Quito Hanoi".split()
_PRODUCTS = "laptop phone mattress blender drone watch bicycle headphones".split()


def edit_tokens(rng: random.Random, text: str, fraction: float, vocabulary: list[str]) -> str:
    """``text`` with ``fraction`` of its words replaced, deleted or with a
    word inserted (a third each), at random positions."""
    words = text.split()
    edits = max(1, round(len(words) * fraction))
    for _ in range(edits):
        if not words:
            break
        i = rng.randrange(len(words))
        kind = rng.random()
        if kind < 1 / 3:
            words[i] = rng.choice(vocabulary)
        elif kind < 2 / 3:
            del words[i]
        else:
            words.insert(i, rng.choice(vocabulary))
    return " ".join(words)


def _timestamp(rng: random.Random) -> str:
    year, month, day = rng.randint(2001, 2025), rng.randint(1, 12), rng.randint(1, 28)
    hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    return rng.choice(
        (
            f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z",
            f"{day}/{month}/{year} {hour}:{minute:02d}",
            f"generated {year}{month:02d}{day:02d}{hour:02d}{minute:02d}",
        )
    )


def _ad(rng: random.Random) -> str:
    return rng.choice(_AD_COPY).format(
        city=rng.choice(_CITIES), product=rng.choice(_PRODUCTS), n=rng.randint(5, 99),
        year=rng.randint(2010, 2025),
    )  # fmt: skip


def _paragraphs(text: str, rng: random.Random, size: int) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)] or [""]


def _nav_links(rng: random.Random, site: str, count: int) -> str:
    names = ["Home", "Books", "Search", "About", "Contact", "Daily verse", "Plans", "Audio", "Blog", "Donate"]
    picked = rng.sample(names, min(count, len(names)))
    return "".join(f'<li><a href="https://{site}/{n.lower().replace(" ", "-")}">{n}</a></li>' for n in picked)


def _script(rng: random.Random) -> str:
    payload = " ".join(f"v{rng.randint(0, 999)}={rng.random():.6f};" for _ in range(rng.randint(20, 200)))
    return f"<script>var cfg={{'t':'{_timestamp(rng)}'}}; {payload} document.write('hello world');</script>"


def _style(rng: random.Random) -> str:
    return "<style>" + " ".join(
        f".c{i}{{margin:{rng.randint(0, 9)}px;color:#{rng.randint(0, 0xFFFFFF):06x}}}" for i in range(rng.randint(10, 60))
    ) + "</style>"


def template_semantic(title: str, paragraphs: list[str], rng: random.Random) -> str:
    """HTML5 page: header/nav, article with an ad block, aside, footer."""
    body = []
    for i, p in enumerate(paragraphs):
        body.append(f"<p>{html.escape(p)}</p>")
        if i % 4 == 3:
            body.append(f'<div class="ad">{_ad(rng)}</div>')
    related = "".join(f'<li><a href="/r/{rng.randint(1, 999)}">Related chapter {rng.randint(1, 150)}</a></li>' for _ in range(8))
    return (
        f"<!DOCTYPE html><html><head><title>{html.escape(title)} | Scripture Online</title>"
        f'<meta charset="utf-8">{_style(rng)}{_script(rng)}</head><body>'
        f'<header><div class="logo">Scripture Online</div><nav><ul>{_nav_links(rng, "scripture.example", 7)}</ul></nav></header>'
        f"<main><article><h1>{html.escape(title)}</h1><p class=\"meta\">Updated {_timestamp(rng)}</p>"
        + "".join(body)
        + f'</article><aside class="sidebar"><h3>Related</h3><ul>{related}</ul></aside></main>'
        f"<footer>Copyright {rng.randint(2000, 2025)} Scripture Online. All rights reserved. Page built {_timestamp(rng)}</footer>"
        f"{_script(rng)}</body></html>"
    )


def template_table(title: str, paragraphs: list[str], rng: random.Random) -> str:
    """Old table layout: a link-only menu cell, a print line, no semantic tags."""
    menu = "<br>".join(f'<a href="/m/{i}">Section {i}</a>' for i in range(rng.randint(8, 20)))
    body = "".join(f"<font size=2>{html.escape(p)}</font><br><br>" for p in paragraphs)
    return (
        f"<html><head><title>{html.escape(title)}</title>{_script(rng)}</head><body bgcolor=white>"
        f'<table width="100%"><tr><td width="20%" valign=top>{menu}</td><td>'
        f"<b>{html.escape(title)}</b><br>Printed on {_timestamp(rng)}<br>{body}"
        f"</td></tr></table><center><a href='/'>Home</a> | <a href='/print'>Print</a></center></body></html>"
    )


def template_blog(title: str, paragraphs: list[str], rng: random.Random) -> str:
    """Blog: unmarked banner text, inline unmarked ads, comments, cookie box."""
    body = []
    for i, p in enumerate(paragraphs):
        body.append(f"<div class=\"entry-p\">{html.escape(p)}</div>")
        if i == 1:
            body.append(f'<div class="sponsored-box"><span>{_ad(rng)}</span></div>')
    comments = "".join(
        f'<div class="comment"><b>user{rng.randint(1, 9999)}</b> said on {_timestamp(rng)}: Amen, great passage!</div>'
        for _ in range(rng.randint(0, 4))
    )
    return (
        f"<html><head><title>{html.escape(title)}</title>{_style(rng)}</head><body>"
        f'<div id="top">Daily Bread Blog</div>'
        f'<div id="cookie-banner">We use cookies to improve your experience. <a href="/ok">OK</a></div>'
        f'<div id="content"><h2>{html.escape(title)}</h2><div class="posted">Posted {_timestamp(rng)}</div>'
        + "".join(body)
        + f'</div><div id="comments">{comments}</div>'
        f'<div class="widget"><a href="/tag/a">faith</a> <a href="/tag/b">hope</a> <a href="/tag/c">love</a></div>'
        f"{_script(rng)}</body></html>"
    )


def template_plain(title: str, paragraphs: list[str], rng: random.Random) -> str:
    """Bare page: text in <pre>-like paragraphs and a visitor counter."""
    return (
        f"<html><body><h3>{html.escape(title)}</h3>"
        + "\n".join(f"<p>{html.escape(p)}" for p in paragraphs)  # unclosed <p>: malformed on purpose
        + f"<hr><small>Visitors: {rng.randint(1000, 99999)}</small></body></html>"
    )


TEMPLATES = (template_semantic, template_table, template_blog, template_plain)


@dataclass
class Page:
    """One generated HTML page and what it is a copy of."""

    doc: int  #: index of the source text: pages of one doc are near-duplicates
    html: str


def render_variant(
    rng: random.Random, title: str, text: str, vocabulary: list[str], max_edit: float = 0.05
) -> str:
    """``text`` edited by 1 % to ``max_edit`` of its tokens, in a random template."""
    edited = edit_tokens(rng, text, rng.uniform(0.01, max_edit), vocabulary)
    template = rng.choice(TEMPLATES)
    return template(title, _paragraphs(edited, rng, rng.randint(40, 90)), rng)


def build_corpus(
    texts: list[tuple[str, str]],
    rng: random.Random,
    copies: tuple[int, int] = (1, 4),
    max_edit: float = 0.05,
) -> list[Page]:
    """Pages for ``texts`` (``(title, text)``): each text gets a random number
    of variants in ``copies`` (inclusive), all shuffled together."""
    vocabulary = sorted({w for _, t in texts[:200] for w in t.split()}) or ["word"]
    pages = []
    for doc, (title, text) in enumerate(texts):
        for _ in range(rng.randint(*copies)):
            pages.append(Page(doc, render_variant(rng, title, text, vocabulary, max_edit)))
    rng.shuffle(pages)
    return pages


# --------------------------------------------------------------------------
# quality


@dataclass
class Quality:
    """Outcome of streaming a corpus through a near-duplicate index."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    pages: int = 0

    @property
    def precision(self) -> float:
        flagged = self.true_positives + self.false_positives
        return self.true_positives / flagged if flagged else 1.0

    @property
    def recall(self) -> float:
        copies = self.true_positives + self.false_negatives
        return self.true_positives / copies if copies else 1.0


def word_triples(text: str) -> set[tuple[str, ...]]:
    """Consecutive word triples of ``text``: the ground-truth similarity."""
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + 3]) for i in range(max(len(words) - 2, 1))}


def same_text(texts: list[tuple[str, str]], threshold: float = 0.3):
    """``same(i, j)``: texts ``i`` and ``j`` are the same, or near-duplicates
    themselves (Jaccard of word triples >= ``threshold``: the Bible's
    parallel passages, e.g. 2 Kings 19 and Isaiah 37)."""
    cache: dict[int, set] = {}

    def triples(i: int) -> set:
        if i not in cache:
            cache[i] = word_triples(texts[i][1])
        return cache[i]

    def same(i: int, j: int) -> bool:
        if i == j:
            return True
        a, b = triples(i), triples(j)
        return len(a & b) / max(1, len(a | b)) >= threshold

    return same


def stream_quality(pages: list[Page], signature, same, k: int = 3, min_similarity: float = 0.4, **options) -> Quality:
    """Stream ``pages`` as a crawl would: each page is compared with the
    originals seen before it, and becomes an original itself unless flagged.
    ``signature(html) -> (fingerprint, sketch)``; ``same(doc, doc)`` is the
    ground truth; ``options`` go to :class:`NearDuplicateIndex` (``far_k``...)."""
    from scrapy_aopic.hygiene.simhash_index import NearDuplicateIndex

    index = NearDuplicateIndex(k=k, min_similarity=min_similarity, **options)
    doc_of: list[int] = []
    seen_docs: set[int] = set()
    quality = Quality()
    for page in pages:
        quality.pages += 1
        fingerprint, sketch = signature(page.html)
        match = index.find(fingerprint, sketch)
        if match is not None:
            if same(doc_of[match[0]], page.doc):
                quality.true_positives += 1
            else:
                quality.false_positives += 1
        else:
            if page.doc in seen_docs:
                quality.false_negatives += 1
            index.add(fingerprint, sketch)
            doc_of.append(page.doc)
        seen_docs.add(page.doc)
    return quality


def rust_doc_pages(limit: int) -> list[tuple[str, str]]:
    """``(path, html)`` of up to ``limit`` pages of Debian's rust-doc, if installed."""
    root = Path("/usr/share/doc/rust-doc/html")
    if not root.is_dir():
        return []
    pages = []
    for path in sorted(root.rglob("*.html")):
        try:
            pages.append((str(path.relative_to(root)), path.read_text("utf-8", "replace")))
        except OSError:
            continue
        if len(pages) >= limit:
            break
    return pages


# --------------------------------------------------------------------------
# figures


def _best_time(function, repeat: int) -> float:
    """Best CPU time of ``repeat`` runs (CPU, not wall clock: the figure
    per core, steadier on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def _thirty_kb_pages(rng: random.Random, texts: list[str], count: int) -> list[str]:
    """``count`` HTML pages of about 30 KB (about half of it text)."""
    pages = []
    vocabulary = sorted({w for t in texts[:50] for w in t.split()})
    for i in range(count):
        text, j = "", i
        while len(text) < 15000:
            text += " " + texts[j % len(texts)]
            j += 7
        page = render_variant(rng, f"Page {i}", text[:15000], vocabulary)
        while len(page.encode()) < 29000:
            page = page.replace("</body>", _script(rng) + "</body>", 1)
        pages.append(page)
    return pages


def bench_quality(texts, rng, k, label) -> None:
    import simhash as reference

    from scrapy_aopic.hygiene.simhash import Fingerprinter
    from scrapy_aopic.hygiene.visibletext import visible_text

    pages = build_corpus(texts, rng)
    same = same_text(texts)
    extracted = {}

    def text_of(page_html: str, boilerplate: bool = True) -> str:
        key = (id(page_html), boilerplate)
        if key not in extracted:
            extracted[key] = visible_text(page_html, boilerplate=boilerplate)
        return extracted[key]

    fingerprinters = {mode: Fingerprinter(mode) for mode in ("words", "fast", "compat")}

    def ours(mode, boilerplate=True):
        def signature(page_html):
            s = fingerprinters[mode].signature(text_of(page_html, boilerplate))
            return s.fingerprint, s.sketch
        return signature

    def package(page_html):
        text = text_of(page_html)
        return reference.Simhash(text).value, fingerprinters["words"].signature(text).sketch

    rows = [
        ("words (default), confirmed by sketch", ours("words"), 0.4),
        ("words, SimHash alone", ours("words"), 0.0),
        ("fast (package features), confirmed", ours("fast"), 0.4),
        ("compat (= package bits), SimHash alone", ours("compat"), 0.0),
        ("simhash.Simhash(text), SimHash alone", package, 0.0),
        ("words, confirmed, no boilerplate removal", ours("words", False), 0.4),
    ]
    print(f"\n== quality, k={k}: {label}: {len(texts)} texts, {len(pages)} pages "
          f"(1-5 % token edits per page, {len(TEMPLATES)} templates)")  # fmt: skip
    print(f"   {'fingerprint':42s} {'precision':>9s} {'recall':>7s}  TP/FP/FN")
    for name, signature, min_similarity in rows:
        q = stream_quality(pages, signature, same, k, min_similarity)
        print(f"   {name:42s} {q.precision:9.4f} {q.recall:7.4f}  "
              f"{q.true_positives}/{q.false_positives}/{q.false_negatives}")  # fmt: skip


def bench_rust_doc(limit: int, k: int) -> None:
    from scrapy_aopic.hygiene.simhash import Fingerprinter
    from scrapy_aopic.hygiene.visibletext import visible_text
    from scrapy_aopic.hygiene.simhash_index import NearDuplicateIndex

    pages = rust_doc_pages(limit)
    if not pages:
        print("\n== rust-doc: not installed (apt-get install rust-doc), skipped")
        return
    fingerprinter = Fingerprinter()
    index = NearDuplicateIndex(k=k)
    paths: list[str] = []
    flagged: list[tuple[str, str, int]] = []
    for path, page in pages:
        signature = fingerprinter.signature(visible_text(page))
        if signature.chars < 100:
            continue
        match = index.find(signature.fingerprint, signature.sketch)
        if match is None:
            index.add(signature.fingerprint, signature.sketch)
            paths.append(path)
        else:
            flagged.append((path, paths[match[0]], match[1]))
    redirects = sum(1 for _, page in pages if "Redirecting to" in page)
    print(f"\n== rust-doc: {len(pages)} pages, {redirects} 'Redirecting...' stubs; "
          f"{len(flagged)} flagged as near-duplicates at k={k}")  # fmt: skip
    for path, original, distance in flagged[:: max(1, len(flagged) // 8)][:8]:
        print(f"   {path}  ~{distance}~  {original}")


def bench_fingerprint_speed(texts, rng, pages_count: int) -> None:
    import simhash as reference

    from scrapy_aopic.hygiene.simhash import Fingerprinter
    from scrapy_aopic.hygiene.visibletext import visible_text

    pages = _thirty_kb_pages(rng, texts, pages_count)
    size = sum(len(p.encode()) for p in pages) / len(pages)
    extracted = [visible_text(p) for p in pages]
    text_size = sum(len(t) for t in extracted) / len(extracted)
    words, fast, compat = Fingerprinter("words"), Fingerprinter("fast"), Fingerprinter("compat")
    compat_cold = Fingerprinter("compat", cache_size=0)
    repeat = 3
    extract_time = _best_time(lambda: [visible_text(p) for p in pages], repeat)
    rows = [
        ("words + sketch (middleware default)", _best_time(lambda: [words.signature(t) for t in extracted], repeat)),
        ("words", _best_time(lambda: [words(t) for t in extracted], repeat)),
        ("fast (package features)", _best_time(lambda: [fast(t) for t in extracted], repeat)),
        ("compat (warm MD5 cache)", _best_time(lambda: [compat(t) for t in extracted], repeat)),
        ("compat (no cache)", _best_time(lambda: [compat_cold(t) for t in extracted], 1)),
        ("simhash.Simhash(text) (reference)", _best_time(lambda: [reference.Simhash(t).value for t in extracted], 1)),
    ]
    n = len(pages)
    print(f"\n== fingerprint speed: {n} HTML pages of {size / 1024:.1f} KB ({text_size / 1024:.1f} KB visible text), one core")
    print(f"   text extraction alone (lxml, boilerplate removal): {extract_time / n * 1e3:.3f} ms/page")
    print(f"   {'fingerprint':38s} {'ms/text':>8s} {'pages/s incl. extraction':>26s} {'vs package':>10s}")
    reference_time = rows[-1][1]
    for name, seconds in rows:
        per_page = (seconds + extract_time) / n
        print(f"   {name:38s} {seconds / n * 1e3:8.3f} {1 / per_page:26.0f} {reference_time / seconds:9.1f}x")


def bench_index(size: int, queries: int, rng: random.Random, k: int, reference_size: int) -> None:
    import numpy as np
    import simhash as reference

    from scrapy_aopic.hygiene.simhash_index import SimhashIndex

    generator = np.random.default_rng(7)
    fingerprints = generator.integers(0, 2**63, size=size, dtype=np.int64).astype(np.uint64) * np.uint64(2) + (
        generator.integers(0, 2, size=size).astype(np.uint64)
    )

    def near(fp: int, bits: int) -> int:
        for b in rng.sample(range(64), bits):
            fp ^= 1 << b
        return fp

    fp_list = fingerprints.tolist()
    probes = [near(rng.choice(fp_list), rng.randint(0, k)) for _ in range(queries // 2)]
    probes += [rng.getrandbits(64) for _ in range(queries - len(probes))]

    print(f"\n== index, k={k}")
    # ours, at `size`
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    index = SimhashIndex(k=k)
    index.add_many(fingerprints)
    build = time.perf_counter() - start
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    start = time.perf_counter()
    found = sum(1 for p in probes if index.nearest(p) is not None)
    query = (time.perf_counter() - start) / len(probes)
    # single inserts with the buffer, as a crawl does
    extra = generator.integers(0, 2**63, size=20000, dtype=np.int64).astype(np.uint64).tolist()
    start = time.perf_counter()
    for fp in extra:
        index.add(fp)
    insert = (time.perf_counter() - start) / len(extra)
    print(f"   scrapy_aopic SimhashIndex  n={size:>9,}: query {query * 1e6:7.1f} us, "
          f"{memory / size:6.1f} B/fingerprint (traced; index.nbytes {index.nbytes / size:.1f}), "
          f"build {build:.1f} s, single add {insert * 1e6:.1f} us, {found}/{len(probes)} probes matched")  # fmt: skip
    del index
    gc.collect()

    # the package, at `reference_size` (it is slow to build at 10^6)
    ids = [str(i) for i in range(reference_size)]
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    ref_index = reference.SimhashIndex([], k=k)
    for i in range(reference_size):
        ref_index.add(ids[i], reference.Simhash(fp_list[i]))
    build = time.perf_counter() - start
    memory_ref = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    ref_probes = [near(rng.choice(fp_list[:reference_size]), rng.randint(0, k)) for _ in range(queries // 2)]
    ref_probes += [rng.getrandbits(64) for _ in range(queries - len(ref_probes))]
    start = time.perf_counter()
    ref_found = sum(1 for p in ref_probes if ref_index.get_near_dups(reference.Simhash(p)))
    ref_query = (time.perf_counter() - start) / len(ref_probes)
    print(f"   simhash.SimhashIndex       n={reference_size:>9,}: query {ref_query * 1e6:7.1f} us, "
          f"{memory_ref / reference_size:6.1f} B/fingerprint (traced; ids are short str), build {build:.1f} s, "
          f"{ref_found}/{len(ref_probes)} probes matched")  # fmt: skip
    print(f"   ratio: queries {ref_query / query:.1f}x faster, "
          f"{(memory_ref / reference_size) / (memory / size):.1f}x less memory per fingerprint")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller corpus and index")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)

    chapters = bible_chapters(BIBLE_VERSIONS[:2] if args.quick else BIBLE_VERSIONS)
    if chapters:
        texts = [(f"{title} ({version.upper()})", text) for version, title, text in chapters]
        label = f"pythonbible chapters ({', '.join(sorted({v for v, _, _ in chapters}))})"
    else:
        vocabulary = synthetic_vocabulary(rng)
        texts = [(f"Text {i}", synthetic_text(rng, vocabulary, rng.randint(200, 1200))) for i in range(800)]
        label = "generated text (pythonbible not installed)"
    if args.quick:
        texts = rng.sample(texts, min(600, len(texts)))
    bench_quality(texts, rng, args.k, label)
    bench_rust_doc(2000 if args.quick else 20000, args.k)
    bench_fingerprint_speed([t for _, t in texts], rng, 60 if args.quick else 200)
    bench_index(10**5 if args.quick else 10**6, 2000, rng, args.k, 10**4 if args.quick else 10**6)


if __name__ == "__main__":
    main()
