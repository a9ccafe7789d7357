"""Does a change keep every near-duplicate result the same? (issue 18, item 4)

    python benchmarks/check_page_results.py --base CHECKOUT [--root DIR ...] [--random 3000]

Runs, in one child process per checkout (this one and ``--base``, e.g.
``git archive main | tar -x -C /tmp/base``), what the near-duplicate
middleware computes on **every** page of each documentation tree (default:
the PostgreSQL 15 and Python 3.11 manuals under /usr/share/doc), in crawl
order by file name: the body checksum, the visible text (asked whether the
page is marked, and walked as marked: both boilerplate modes), the
signature in the three fingerprint modes (fingerprint, sketch, word
characters) and the index's answer for each page before it is added (the
middleware's defaults: distance 3, far distance 4, confirmations 0.55 and
0.8); then the same signatures of ``--random`` random texts (words, digits,
punctuation, non-BMP characters) and of ``--random`` texts of ASCII words
between separators beyond ASCII (no-break spaces, dashes, lone surrogates,
emoji), some with one word beyond ASCII (accented, Greek, Cyrillic, CJK,
astral, non-ASCII digits), digit-heavy, empty or upper-cased. It prints a
digest per tree and part for each checkout and whether they are equal: a
speed-up must change none.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITES = ["/usr/share/doc/postgresql-doc-15/html", "/usr/share/doc/python3.11/html"]


def results(roots: list[str], random_texts: int) -> dict:
    from scrapy.http import HtmlResponse

    from scrapy_aopic.hygiene.simhash import FINGERPRINT_MODES, Fingerprinter, body_checksum
    from scrapy_aopic.hygiene.simhash_index import NearDuplicateIndex
    from scrapy_aopic.hygiene.visibletext import tree_text

    digests: dict[str, str] = {}
    fingerprinters = {mode: Fingerprinter(mode) for mode in FINGERPRINT_MODES}

    def signatures(digest, text: str) -> None:
        for mode, fingerprinter in fingerprinters.items():
            signature = fingerprinter.signature(text)
            digest.update(f"{mode} {signature.fingerprint} {signature.chars} ".encode())
            digest.update(signature.sketch.tobytes())

    for root in roots:
        files = sorted(Path(root).rglob("*.html"))
        parts = {name: hashlib.sha256() for name in ("checksum", "text", "signatures", "index answers")}
        index = NearDuplicateIndex(k=3, min_similarity=0.55, max_length_ratio=2.0, far_k=4, far_similarity=0.8)
        words = Fingerprinter("words")
        for path in files:
            body = path.read_bytes()
            response = HtmlResponse(f"http://127.0.0.1/{path.relative_to(root)}", body=body, encoding="utf-8")
            parts["checksum"].update(f"{body_checksum(body)} ".encode())
            root_node = response.selector.root
            texts = [tree_text(root_node, boilerplate=b, max_chars=200_000, marked=m)
                     for b in (True, False) for m in (None, True)]
            for text in texts:
                parts["text"].update(text.encode("utf-8", "surrogatepass") + b"\0")
            signatures(parts["signatures"], texts[0])
            signature = words.signature(texts[0])
            answer = index.find(signature.fingerprint, signature.sketch, signature.chars)
            parts["index answers"].update(f"{answer} {index.rejected} ".encode())
            if answer is None:
                index.add(signature.fingerprint, signature.sketch, signature.chars)
        digests.update({f"{Path(root).parts[-2]} ({len(files)} pages): {name}": h.hexdigest()[:16]
                        for name, h in parts.items()})
    rng = random.Random(7)
    alphabet = "abcdefghij klmnop 0123456789 .,;-–é߀𝔘😀\n"
    vocabulary = ["".join(rng.choice(alphabet[:16]) for _ in range(rng.randint(1, 9))) for _ in range(400)]
    digest = hashlib.sha256()
    for n in range(random_texts):
        if n % 2:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3000)))
        else:  # words from a small vocabulary: repeats, ties, near-equal pages
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 1500)))
        signatures(digest, text)
    digests[f"{random_texts} random texts: signatures"] = digest.hexdigest()[:16]
    # Shapes the ASCII path and its fall-back must agree on: ASCII words
    # between non-ASCII separators, one non-ASCII word or digit among them
    # (Latin, Cyrillic, CJK, astral, Arabic-Indic and full-width digits),
    # digit-heavy, empty and separator-only texts, lone surrogates, long.
    separators = [" ", "\xa0", " – ", "’", "\u2003", "\x00", "\ud800", "«»", "\U0001f600", "\u200b", ".\n"]
    others = ["café", "ǅungla", "ΣΟΦΙΑ", "русский", "中文字", "𝔘𝔫𝔦", "٣٤٥", "１２３", "x٣", "߀߁", "ａｂｃ", "ß", "İi"]
    words = [w for w in vocabulary if w.strip()] + ["2024", "07", "a1", "_", "__init__", "x_1", "1_000"]
    digest = hashlib.sha256()
    for n in range(random_texts):
        count = rng.choice([0, 1, 2, 5, 50, 400, 3000])
        parts = []
        for _ in range(count):
            parts.append(rng.choice(words) if rng.random() < 0.8 else str(rng.randint(0, 10**rng.randint(1, 9))))
            parts.append(rng.choice(separators) if rng.random() < 0.3 else " ")
        if n % 3 == 0 and parts:  # one word beyond ASCII: the code-point path
            parts.insert(rng.randrange(len(parts)), rng.choice(others))
        text = "".join(parts)
        if n % 7 == 0:
            text = text.upper()
        signatures(digest, text)
    digests[f"{random_texts} ASCII-word texts with other separators: signatures"] = digest.hexdigest()[:16]
    return digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--root", action="append", help="documentation tree (repeat)")
    parser.add_argument("--random", type=int, default=3000, help="random texts")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    roots = args.root or [site for site in SITES if Path(site).is_dir()]
    if args.child:
        print(json.dumps(results(roots, args.random)))
        return
    found = {}
    for name, tree in (("this", ROOT), ("base", args.base.resolve())):
        command = [sys.executable, __file__, "--child", "--base", str(args.base), "--random", str(args.random)]
        command += [x for root in roots for x in ("--root", root)]
        # The child imports the add-on from ``tree`` (first on its path).
        out = subprocess.run(command, check=True, capture_output=True, text=True,
                             env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, cwd=tree)
        found[name] = json.loads(out.stdout)
    for part, digest in found["this"].items():
        same = "same" if found["base"].get(part) == digest else "DIFFERENT"
        print(f"{part:58s} this {digest}  base {found['base'].get(part)}  {same}")
    print("all the same:", "yes" if found["this"] == found["base"] else "NO")


if __name__ == "__main__":
    main()
