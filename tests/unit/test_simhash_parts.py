"""The SimHash signature's numpy steps, rewritten with fewer calls (issue 18,
item 4), give the same values bit for bit as the steps they replace, kept
here as references: ``np.unique``'s counts, SplitMix64 in place, the
sketch's bin selection with its masks, and the weighted majority they feed
(exact ties included). One bit, or one sketch bin, would change a
near-duplicate decision."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_aopic.hygiene.simhash import (
    _BYTE_BITS,
    _EMPTY_BIN,
    _majority,
    SMALL_MAJORITY,
    _splitmix64,
    _words_simhash,
    SKETCH_BINS,
    WORD_WEIGHT_EXPONENT,
    word_pair_sketch,
)

_BIN_SHIFT = np.uint64(64 - 5)


def reference_majority(hashes, weights, total):
    byte_values = hashes.view(np.uint8).reshape(-1, 8)
    counts = np.empty((8, 256), dtype=np.float64)
    for j in range(8):
        counts[j] = np.bincount(byte_values[:, j], weights=weights, minlength=256)
    bits = (counts @ _BYTE_BITS).ravel() > total / 2
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def reference_splitmix64(x):
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def reference_sketch(word_hashes):
    if len(word_hashes) >= 2:
        features = reference_splitmix64(word_hashes[:-1] * np.uint64(31) + word_hashes[1:])
    else:
        features = word_hashes
    sketch = np.full(SKETCH_BINS, _EMPTY_BIN, dtype=np.uint16)
    if not len(features):
        return sketch
    ordered = np.sort(features)
    first = np.searchsorted(ordered, np.arange(SKETCH_BINS, dtype=np.uint64) << _BIN_SHIFT)
    present = first < len(ordered)
    first = first[present]
    values = ordered[first]
    same_bin = (values >> _BIN_SHIFT) == np.flatnonzero(present).astype(np.uint64)
    bins = np.flatnonzero(present)[same_bin]
    sketch[bins] = (values[same_bin] & np.uint64(0x7FFF)).astype(np.uint16)
    return sketch


def reference_words_simhash(word_hashes):
    if not len(word_hashes):
        return 0
    distinct, counts = np.unique(word_hashes, return_counts=True)
    weights = counts.astype(np.float64) ** WORD_WEIGHT_EXPONENT
    return reference_majority(distinct, weights, float(weights.sum()))


def _hashes(rng: random.Random, n: int, bits: int = 64) -> np.ndarray:
    # Few distinct values (bits < 64) make repeated words and exact ties.
    return np.array([rng.getrandbits(bits) for _ in range(n)], dtype=np.uint64)


@pytest.mark.parametrize("seed", range(3))
def test_majority_is_the_per_position_bincounts(seed):
    rng = random.Random(seed)
    # Both ways of counting: one bincount up to SMALL_MAJORITY hashes, one per
    # byte position beyond.
    for n in (1, 2, 3, 7, 50, SMALL_MAJORITY - 1, SMALL_MAJORITY, SMALL_MAJORITY + 1, 1000):
        for bits in (2, 8, 64):
            hashes = _hashes(rng, n, bits)
            # Exact ties: equal integer weights, half of them on each side.
            # Weights far apart in size: a sum in another order rounds
            # otherwise (1e16 + 1 + 1 is not 1 + 1 + 1e16).
            for weights in (None, np.ones(n), np.array([rng.random() * 3 for _ in range(n)]),
                            np.array([rng.choice((0.5, 1.0, 2.0 ** 1.5)) for _ in range(n)]),
                            np.array([rng.choice((1e16, 1.0, 3.0 ** 1.5)) for _ in range(n)])):
                total = float(n if weights is None else weights.sum())
                assert _majority(hashes, weights, total) == reference_majority(hashes, weights, total)


@pytest.mark.parametrize("seed", range(3))
def test_sketch_and_weighted_simhash_are_the_reference(seed):
    rng = random.Random(seed)
    for n in (0, 1, 2, 3, 5, 40, 33, 64, 500, 3000):
        for bits in (3, 10, 64):
            words = _hashes(rng, n, bits)
            assert word_pair_sketch(words).tolist() == reference_sketch(words).tolist()
            assert word_pair_sketch(words).dtype == np.uint16
            assert _words_simhash(words) == reference_words_simhash(words)
    # Features crowded in a few bins: the others stay empty.
    words = np.array([rng.getrandbits(3) << 61 for _ in range(20)], dtype=np.uint64)
    assert word_pair_sketch(words).tolist() == reference_sketch(words).tolist()


def test_splitmix64_in_place_is_the_same_and_copies_otherwise():
    rng = random.Random(1)
    x = _hashes(rng, 100)
    before = x.copy()
    assert _splitmix64(x).tolist() == reference_splitmix64(before).tolist()
    assert x.tolist() == before.tolist()  # not in place: the input is kept
    assert _splitmix64(x, in_place=True).tolist() == reference_splitmix64(before).tolist()
