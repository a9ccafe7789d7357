r"""Page fingerprints: a 64-bit SimHash and an exact checksum.

SimHash (Charikar 2002) maps a document to 64 bits such that similar
documents get fingerprints a few bits apart: every feature is hashed to 64
bits, and bit ``b`` of the fingerprint is set when the (weighted) features
whose hash has bit ``b`` set outweigh the others.

:class:`Fingerprinter` has three modes:

``"words"`` (default)
    Features are the words of the text (lower-cased runs of word characters
    that hold a non-digit: numbers, dates and counters, which differ between
    copies, are left out), each weighted by its count to the power
    :data:`WORD_WEIGHT_EXPONENT`. A word edit changes one feature, not the
    four or more shingles it touches, and the words a page repeats outweigh
    the ones an edit adds: copies with a few percent of their words edited
    stay within 3 bits far more often than with shingles. The price: pages
    that share most of their vocabulary come close too, hence the sketch
    (:func:`word_pair_sketch`) that confirms a match.
``"fast"``
    The features of the reference implementation, the ``simhash`` package:
    lower-cased word characters (``[\w\u4e00-\u9fcc]``) concatenated without
    spaces, every window of 4 characters, weighted by count; hashed with
    SplitMix64 in numpy. Same statistics as the package, different bits.
``"compat"``
    The package's features and hash (MD5, last 8 bytes): bit-for-bit
    ``simhash.Simhash(text).value``. Faster than the package (shingles
    packed, counted and their bits summed with numpy; each distinct
    shingle's MD5 cached), but MD5 still costs a Python call per new shingle.

Fingerprints of different modes must not be compared with each other.
Everything per character or per word is done with numpy on the text's code
points; the bits are counted with one ``bincount`` per byte position.

The text that is fingerprinted comes from :mod:`scrapy_aopic.hygiene.visibletext`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

__all__ = [
    "FINGERPRINT_MODES",
    "SKETCH_BINS",
    "Fingerprinter",
    "Signature",
    "sketch_similarity",
    "word_pair_sketch",
    "body_checksum",
    "hamming",
    "simhash_text",
]

#: The feature hashes :class:`Fingerprinter` knows (see the module docstring).
FINGERPRINT_MODES = ("words", "fast", "compat")

#: The reference implementation's notion of a word character.
_WORD = re.compile(r"[\w\u4e00-\u9fcc]+")
_SHINGLE = 4
_MASK64 = (1 << 64) - 1

# bit t of byte value v, as a (256, 8) matrix: byte counts @ this = bit counts.
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float64)


def hamming(a: int, b: int) -> int:
    """Number of bits in which fingerprints ``a`` and ``b`` differ."""
    return ((a ^ b) & _MASK64).bit_count()


def body_checksum(body: bytes) -> int:
    """A 64-bit checksum of ``body`` (BLAKE2b): the cheap exact-duplicate test."""
    return int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little")


# --------------------------------------------------------------------------
# features and hashes


def _word_chars(text: str) -> str:
    """The reference tokenizer's input: lower-cased word characters only."""
    return "".join(_WORD.findall(text.lower()))


_tables: tuple[np.ndarray, np.ndarray] | None = None


def _bmp_tables() -> tuple[np.ndarray, np.ndarray]:
    """``(word, digit)``: whether BMP code point ``c`` is a word character
    of the reference tokenizer, and whether it is a decimal digit (built
    once, from the same regular expressions)."""
    global _tables
    if _tables is None:
        # One regex pass over all BMP characters per table (not one match
        # call per character: this runs at every crawl's first page).
        chars = "".join(map(chr, range(0x10000)))

        def table(pattern: str) -> np.ndarray:
            marked = re.sub(pattern, "\x00", chars)  # one character for one
            points = np.frombuffer(marked.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            found = points == 0
            found[0] = re.match(pattern, "\x00") is not None
            return found

        _tables = (table(_WORD.pattern[:-1]), table(r"\d"))
    return _tables


def _classify(points: np.ndarray, table_index: int, pattern: str) -> np.ndarray:
    """Per code point: in the table (BMP) or matching ``pattern`` (others)."""
    table = _bmp_tables()[table_index]
    if not len(points) or int(points.max()) < 0x10000:
        return table[points]
    bmp = points < 0x10000
    result = np.zeros(len(points), dtype=bool)
    result[bmp] = table[points[bmp]]
    one = re.compile(pattern)
    for c in np.unique(points[~bmp]).tolist():
        if one.match(chr(c)):
            result |= points == c
    return result


_class_table: np.ndarray | None = None


def _classes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(word, letter)`` per code point: a word character (as
    ``_classify(points, 0, ...)``), and a word character that is not a
    digit; for BMP text with one table look-up (two tables, combined once),
    not one per table: the fixed numpy cost of every page."""
    global _class_table
    if len(points) and int(points.max()) >= 0x10000:
        word = _classify(points, 0, _WORD.pattern[:-1])
        return word, word & ~_classify(points, 1, r"\d")
    if _class_table is None:
        word_table, digit_table = _bmp_tables()
        # 1: a word character, 2: a digit (3: both, as every digit is)
        _class_table = word_table.astype(np.uint8) | (digit_table.astype(np.uint8) << 1)
    classes = _class_table[points]
    return (classes & 1).view(np.bool_), classes == 1


def _lower_points(text: str) -> np.ndarray:
    return np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _word_points(text: str) -> np.ndarray:
    """Code points of ``_word_chars(text)`` (uint32), computed with numpy."""
    points = _lower_points(text)
    return points[_classify(points, 0, _WORD.pattern[:-1])]


_P = np.uint64(0x100000001B3)  # odd: invertible modulo 2**64
_P_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))
_powers = np.ones(1, dtype=np.uint64)
_inverse_powers = np.ones(1, dtype=np.uint64)


def _power_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``P**i`` and ``P**-i`` modulo 2**64 for ``i < n`` (grown on demand)."""
    global _powers, _inverse_powers
    if len(_powers) < n:
        size = max(n, 2 * len(_powers))
        _powers = np.concatenate(([np.uint64(1)], np.cumprod(np.full(size - 1, _P, dtype=np.uint64))))
        _inverse_powers = np.concatenate(
            ([np.uint64(1)], np.cumprod(np.full(size - 1, _P_INVERSE, dtype=np.uint64)))
        )
    return _powers[:n], _inverse_powers[:n]


def _word_hashes(text: str, points: np.ndarray | None = None, word: np.ndarray | None = None,
                 letter: np.ndarray | None = None) -> np.ndarray:
    """64-bit hashes of the words of ``text`` in order: lower-cased runs of
    word characters holding at least one non-digit (numbers, dates and
    counters are left out: they are what changes between copies).

    Computed for all words at once: a polynomial hash over code points via
    prefix sums, normalised by the word's start, then SplitMix64.
    ``points``, ``word`` and ``letter`` (the lower-cased code points and
    :func:`_classes` of them) may be passed when already computed.
    """
    if points is None:
        points = _lower_points(text)
    n = len(points)
    if not n:
        return np.empty(0, dtype=np.uint64)
    if word is None or letter is None:
        word, letter = _classes(points)
    # Where the mask changes: a word's start, then its end, and so on (the
    # padding is no word character).
    padded = np.zeros(n + 2, dtype=np.bool_)
    padded[1:-1] = word
    changes = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = changes[::2], changes[1::2]
    if not len(starts):
        return np.empty(0, dtype=np.uint64)
    # Whether each word holds a non-digit: from its start to the next
    # word's (the characters between are no letters), in one pass.
    keep = np.logical_or.reduceat(letter, starts)
    starts, ends = starts[keep], ends[keep]
    powers, inverse = _power_tables(n + 1)
    # The prefix sums in place, after a leading 0 (the same uint64 values as
    # summing a widened copy: each numpy call costs more than its work on a
    # page of a few thousand characters).
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    np.multiply(points, powers[:n], out=prefix[1:])
    np.cumsum(prefix[1:], out=prefix[1:])
    keys = prefix[ends]
    keys -= prefix[starts]
    keys *= inverse[starts]
    lengths = (ends - starts).astype(np.uint64)
    lengths *= np.uint64(0x9E3779B97F4A7C15)
    keys += lengths
    return _splitmix64(keys, in_place=True)


def _packed_shingles(points: np.ndarray) -> np.ndarray:
    """Each window of 4 code points below 2**16 packed in one uint64
    (injective: the shingle can be rebuilt from it)."""
    p = points.astype(np.uint64)
    n = len(p) - _SHINGLE + 1
    return (p[:n] << np.uint64(48)) | (p[1 : n + 1] << np.uint64(32)) | (
        p[2 : n + 2] << np.uint64(16)
    ) | p[3 : n + 3]


def _mixed_shingles(points: np.ndarray) -> np.ndarray:
    """Each window of 4 code points (any plane) combined in one uint64."""
    p = points.astype(np.uint64)
    n = len(p) - _SHINGLE + 1
    return (
        p[:n] * np.uint64(0x9E3779B97F4A7C15)
        + p[1 : n + 1] * np.uint64(0xC2B2AE3D27D4EB4F)
        + p[2 : n + 2] * np.uint64(0x165667B19E3779F9)
        + p[3 : n + 3] * np.uint64(0x27D4EB2F165667C5)
    )


_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray, in_place: bool = False) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64 with full avalanche.
    ``in_place``: ``x`` (a uint64 array the caller no longer needs) is
    overwritten, saving the temporaries."""
    if not in_place:
        x = x ^ (x >> _S30)
    else:
        x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _md5_feature(feature: str) -> int:
    """The reference feature hash: the last 8 bytes of MD5, big-endian."""
    return int.from_bytes(hashlib.md5(feature.encode("utf-8")).digest()[-8:], "big")


#: Hashes up to which :func:`_majority` counts with one bincount (measured:
#: 12 against 25 µs at 50 hashes, even at about 400).
SMALL_MAJORITY = 256
_BYTE_OFFSETS = np.arange(0, 2048, 256, dtype=np.intp)


def _majority(hashes: np.ndarray, weights: np.ndarray | None, total: float) -> int:
    """Fingerprint whose bit b is set when the (weighted) count of hashes
    with bit b set exceeds ``total / 2`` (strictly, as the reference)."""
    # Count each byte position's values, then bits: bincounts over bytes
    # beat unpacking n*64 bits. Up to SMALL_MAJORITY hashes (a short page's
    # distinct words) one bincount over all 8n bytes, byte position j's
    # values shifted to bins 256j.., costs less than eight calls; beyond,
    # its 2,048 bins cost more than the calls. The same sums either way:
    # bincount adds each bin's weights in input order, and both orders are
    # hash by hash (row-major).
    byte_values = hashes.view(np.uint8).reshape(-1, 8)
    if len(hashes) <= SMALL_MAJORITY:
        positions = byte_values + _BYTE_OFFSETS
        spread = None if weights is None else np.repeat(weights, 8)
        counts = np.bincount(positions.ravel(), weights=spread, minlength=2048).reshape(8, 256)
        if weights is None:
            counts = counts.astype(np.float64)
    else:
        counts = np.empty((8, 256), dtype=np.float64)
        for j in range(8):  # little-endian byte j holds bits 8j..8j+7
            counts[j] = np.bincount(byte_values[:, j], weights=weights, minlength=256)
    bit_counts = (counts @ _BYTE_BITS).ravel()  # index 8j+t = bit 8j+t
    bits = bit_counts > total / 2
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def _reference_features(chars: str) -> list[str]:
    """The reference's shingles of ``chars`` (short texts are one feature)."""
    return [chars[i : i + _SHINGLE] for i in range(max(len(chars) - _SHINGLE + 1, 1))]


def _fingerprint_features(features: Iterable[str], hash_feature) -> int:
    counts: dict[str, int] = {}
    for feature in features:
        counts[feature] = counts.get(feature, 0) + 1
    hashes = np.array([hash_feature(f) for f in counts], dtype=np.uint64)
    weights = np.array(list(counts.values()), dtype=np.float64)
    return _majority(hashes, weights, float(weights.sum()))


class Signature(NamedTuple):
    """What :meth:`Fingerprinter.signature` computes for one text."""

    fingerprint: int  #: 64-bit SimHash
    sketch: np.ndarray  #: MinHash of word pairs (:data:`SKETCH_BINS` uint16)
    chars: int  #: word characters in the text: how much text this stands for


#: MinHash bins of a :class:`Signature` sketch (one-permutation hashing).
SKETCH_BINS = 32
_EMPTY_BIN = np.uint16(0xFFFF)
_BIN_SHIFT = np.uint64(64 - 5)
assert 1 << 5 == SKETCH_BINS
_BIN_NUMBERS = np.arange(SKETCH_BINS, dtype=np.uint64)
_BIN_STARTS = _BIN_NUMBERS << _BIN_SHIFT


def word_pair_sketch(word_hashes: np.ndarray) -> np.ndarray:
    """MinHash (one permutation, :data:`SKETCH_BINS` bins, 15 bits kept per
    bin) of the set of consecutive word pairs: equal bins estimate the
    Jaccard similarity of two texts' word pairs."""
    if len(word_hashes) >= 2:
        features = word_hashes[:-1] * np.uint64(31)
        features += word_hashes[1:]
        features = _splitmix64(features, in_place=True)
    else:
        features = word_hashes
    if not len(features):
        return np.full(SKETCH_BINS, _EMPTY_BIN, dtype=np.uint16)
    ordered = np.sort(features)
    # Each bin's smallest feature: the first at or after the bin's start,
    # if it is still in the bin (past the end: the last feature, of an
    # earlier bin).
    first = np.searchsorted(ordered, _BIN_STARTS)
    values = ordered[np.minimum(first, len(ordered) - 1)]
    same_bin = (values >> _BIN_SHIFT) == _BIN_NUMBERS
    return np.where(same_bin, values & np.uint64(0x7FFF), np.uint64(_EMPTY_BIN)).astype(np.uint16)


def sketch_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of the word pairs behind two sketches
    (bins empty in both are not counted; two empty sketches are alike)."""
    used = (a != _EMPTY_BIN) | (b != _EMPTY_BIN)
    count = int(used.sum())
    if not count:
        return 1.0
    return int(((a == b) & used).sum()) / count


#: Exponent of a word's count in its SimHash weight in ``"words"`` mode:
#: above 1, words a page repeats (its topic) outweigh the few words an edit
#: adds or removes; much above 1, a handful of words decide every bit.
WORD_WEIGHT_EXPONENT = 1.5


class Fingerprinter:
    """Computes 64-bit SimHash fingerprints (and sketches) of texts.

    :param mode: ``"words"`` (default: word features), ``"fast"`` (the
        package's 4-character shingles, numpy hash) or ``"compat"``
        (bit-for-bit ``simhash.Simhash(text).value``); see the module
        docstring.
    :param cache_size: distinct shingle hashes kept in ``"compat"`` mode
        (the cache is emptied when full; text in one language reuses a few
        tens of thousands of shingles).
    """

    def __init__(self, mode: str = "words", cache_size: int = 1 << 20):
        if mode not in FINGERPRINT_MODES:
            raise ValueError(f"fingerprint mode must be one of {FINGERPRINT_MODES}, got {mode!r}")
        self.mode = mode
        self.cache_size = cache_size
        self._md5_cache: dict[int, int] = {}

    def __call__(self, text: str) -> int:
        return self.fingerprint(text)

    def fingerprint(self, text: str) -> int:
        """The 64-bit SimHash of ``text`` as an ``int``."""
        if self.mode == "words":
            return _words_simhash(_word_hashes(text))
        return self._fingerprint_points(_word_points(text))

    def measure(self, text: str) -> tuple[int, int]:
        """``(fingerprint, number of word characters)`` of ``text``."""
        signature = self.signature(text, sketch=False)
        return signature.fingerprint, signature.chars

    def signature(self, text: str, sketch: bool = True) -> Signature:
        """Fingerprint, word-pair sketch (empty unless ``sketch``) and
        amount of text of ``text``."""
        points = _lower_points(text)
        word, letter = _classes(points)
        words = _word_hashes(text, points, word, letter) if sketch or self.mode == "words" else None
        if self.mode == "words":
            fingerprint = _words_simhash(words)
        else:
            fingerprint = self._fingerprint_points(points[word])
        return Signature(
            fingerprint,
            word_pair_sketch(words) if sketch else np.full(SKETCH_BINS, _EMPTY_BIN, dtype=np.uint16),
            int(np.count_nonzero(word)),
        )

    def _fingerprint_points(self, points: np.ndarray) -> int:
        if len(points) < _SHINGLE:
            # One feature, the whole (possibly empty) string, as the reference.
            return self._hash_short("".join(map(chr, points.tolist())))
        bmp = int(points.max()) < 0x10000
        if self.mode == "fast":
            keys = _packed_shingles(points) if bmp else _mixed_shingles(points)
            return _majority(_splitmix64(keys), None, float(len(keys)))
        if not bmp:
            chars = "".join(map(chr, points.tolist()))
            return _fingerprint_features(_reference_features(chars), _md5_feature)
        keys, counts = np.unique(_packed_shingles(points), return_counts=True)
        return _majority(self._md5_of_keys(keys), counts, float(len(points) - _SHINGLE + 1))

    def _hash_short(self, chars: str) -> int:
        if self.mode == "compat":
            return _md5_feature(chars)
        # The fast mode hashes a short text like a shingle padded with zeros.
        key = 0
        for ch in chars:
            key = (key << 16) | (ord(ch) & 0xFFFF)
        return int(_splitmix64(np.array([key], dtype=np.uint64))[0])

    def _md5_of_keys(self, keys: np.ndarray) -> np.ndarray:
        cache = self._md5_cache
        key_list = keys.tolist()
        hashes = [cache.get(k) for k in key_list]
        if None in hashes:
            if len(cache) + len(key_list) > self.cache_size:
                cache.clear()
            for i, h in enumerate(hashes):
                if h is None:
                    k = key_list[i]
                    feature = (
                        chr(k >> 48) + chr((k >> 32) & 0xFFFF) + chr((k >> 16) & 0xFFFF) + chr(k & 0xFFFF)
                    )
                    hashes[i] = cache[k] = _md5_feature(feature)
        return np.array(hashes, dtype=np.uint64)


def _words_simhash(word_hashes: np.ndarray) -> int:
    """SimHash of words weighted by ``count ** WORD_WEIGHT_EXPONENT``."""
    if not len(word_hashes):
        return 0
    # np.unique(..., return_counts=True), without its checks and copies
    ordered = np.sort(word_hashes)
    new = np.empty(len(ordered), dtype=np.bool_)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    distinct = ordered[new]
    counts = np.diff(np.append(np.flatnonzero(new), len(ordered)))
    weights = counts.astype(np.float64) ** WORD_WEIGHT_EXPONENT
    return _majority(distinct, weights, float(weights.sum()))


_default_fingerprinters: dict[str, Fingerprinter] = {}


def simhash_text(text: str, mode: str = "words") -> int:
    """The 64-bit SimHash of ``text`` (see :class:`Fingerprinter`)."""
    fingerprinter = _default_fingerprinters.get(mode)
    if fingerprinter is None:
        fingerprinter = _default_fingerprinters[mode] = Fingerprinter(mode)
    return fingerprinter.fingerprint(text)
