"""Find 64-bit fingerprints within Hamming distance ``k``: permuted tables.

Manku, Jain, Das Sarma, "Detecting near-duplicates for web crawling"
(WWW 2007): split the 64 bits into ``b > k`` blocks. Two fingerprints at
distance ``<= k`` differ in at most ``k`` blocks, so they agree exactly on at
least ``b - k`` of them. One table per choice of ``b - k`` blocks, keyed by
those blocks' bits, turns the search into ``C(b, k)`` exact-match lookups
whose few candidates are checked with a popcount.

The default ``b = k + 1`` gives ``k + 1`` tables keyed by 16 bits (``k = 3``):
at 10^6 fingerprints a lookup returns about 15 candidates per table. Storage
is numpy arrays, not Python objects: the fingerprints in insertion order
(8 bytes each; a fingerprint's position is its id) and, per table, the ids
sorted by key (4 bytes each) with either a bucket-offset array (keys of up
to 16 bits) or the sorted keys (wider keys). New fingerprints go to an
insert buffer that queries scan directly (one vectorised popcount), merged
into the tables when it fills.
"""

from __future__ import annotations

import itertools
import os
from array import array
from collections.abc import Iterable

import numpy as np

from .simhash import _EMPTY_BIN

__all__ = ["SimhashIndex"]

_BITS = 64
if hasattr(np, "bitwise_count"):  # numpy >= 2.0
    _popcount = np.bitwise_count
else:  # pragma: no cover - older numpy
    _BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _popcount(values: np.ndarray) -> np.ndarray:
        """Set bits of each uint64 (byte table; numpy < 2 has no popcount)."""
        return _BYTE_POPCOUNT[values.view(np.uint8)].reshape(-1, 8).sum(axis=1)


#: Keys of at most this many bits use a bucket-offset array (2**bits + 1
#: entries); wider keys a sorted key array and binary search.
_MAX_OFFSET_BITS = 16


class _Table:
    """One permutation: ids sorted by the concatenated bits of some blocks."""

    __slots__ = ("blocks", "key_bits", "positions", "offsets", "keys")

    def __init__(self, blocks: list[tuple[int, int]]):
        self.blocks = blocks  # (shift, width) from the most significant
        self.key_bits = sum(width for _, width in blocks)
        self.positions = np.empty(0, dtype=np.uint32)
        if self.key_bits <= _MAX_OFFSET_BITS:
            self.offsets = np.zeros((1 << self.key_bits) + 1, dtype=np.uint32)
            self.keys = None
        else:
            self.offsets = None
            self.keys = np.empty(0, dtype=np.uint64 if self.key_bits > 32 else np.uint32)

    def key_of(self, fp: int) -> int:
        key = 0
        for shift, width in self.blocks:
            key = (key << width) | ((fp >> shift) & ((1 << width) - 1))
        return key

    def keys_of(self, fps: np.ndarray) -> np.ndarray:
        key = np.zeros(len(fps), dtype=np.uint64)
        for shift, width in self.blocks:
            key = (key << np.uint64(width)) | ((fps >> np.uint64(shift)) & np.uint64((1 << width) - 1))
        if self.offsets is not None:
            return key.astype(np.intp)
        return key.astype(self.keys.dtype)

    def candidates(self, fp: int) -> np.ndarray:
        key = self.key_of(fp)
        if self.offsets is not None:
            lo, hi = self.offsets[key : key + 2].tolist()
        else:
            if key + 1 < (1 << self.key_bits):
                lo, hi = np.searchsorted(self.keys, np.array((key, key + 1), dtype=self.keys.dtype)).tolist()
            else:
                lo, hi = int(np.searchsorted(self.keys, self.keys.dtype.type(key))), len(self.keys)
        return self.positions[lo:hi]

    def merge(self, fps: np.ndarray, first_id: int) -> None:
        """Add ids ``first_id, first_id+1, ...`` of fingerprints ``fps``."""
        new_keys = self.keys_of(fps)
        order = np.argsort(new_keys, kind="stable")
        new_keys = new_keys[order]
        new_positions = (order + first_id).astype(np.uint32)
        if self.offsets is not None:
            # Insert each id at the end of its key's bucket, then shift the
            # bucket offsets by the number of ids inserted before them.
            where = self.offsets[new_keys + 1].astype(np.intp)
            self.positions = np.insert(self.positions, where, new_positions)
            counts = np.bincount(new_keys, minlength=len(self.offsets) - 1)
            self.offsets[1:] += np.cumsum(counts, dtype=np.uint64).astype(np.uint32)
        else:
            where = np.searchsorted(self.keys, new_keys, side="right")
            self.positions = np.insert(self.positions, where, new_positions)
            self.keys = np.insert(self.keys, where, new_keys)

    @property
    def nbytes(self) -> int:
        extra = self.offsets.nbytes if self.offsets is not None else self.keys.nbytes
        return self.positions.nbytes + extra


def _split_blocks(blocks: int) -> list[tuple[int, int]]:
    """``blocks`` contiguous blocks of the 64 bits as ``(shift, width)``,
    most significant first; the first ones are one bit wider if needed."""
    base, extra = divmod(_BITS, blocks)
    widths = [base + 1 if i < extra else base for i in range(blocks)]
    result, shift = [], _BITS
    for width in widths:
        shift -= width
        result.append((shift, width))
    return result


class SimhashIndex:
    """Fingerprints (64-bit ints) and their near neighbours within ``k`` bits.

    Ids are insertion positions: the ``i``-th fingerprint added has id ``i``.

    :param k: the largest Hamming distance a query reports (0 to 63).
    :param blocks: how many blocks the fingerprint is split into (``> k``);
        default ``k + 1``, the most compact choice. More blocks mean more
        tables (``C(blocks, k)``) with longer keys: fewer candidates per
        query at the cost of memory.
    :param buffer_size: fingerprints held in the insert buffer before it is
        merged into the tables.
    """

    def __init__(self, k: int = 3, blocks: int | None = None, buffer_size: int = 4096):
        if not 0 <= k < _BITS:
            raise ValueError(f"k must be in [0, 63], got {k!r}")
        blocks = k + 1 if blocks is None else blocks
        if not k < blocks <= _BITS:
            raise ValueError(f"blocks must be in ({k}, 64], got {blocks!r}")
        self.k = k
        self.blocks = blocks
        self.buffer_size = max(1, buffer_size)
        split = _split_blocks(blocks)
        self._tables = [
            _Table([split[i] for i in chosen])
            for chosen in itertools.combinations(range(blocks), blocks - k)
        ]
        self._fps = np.empty(1024, dtype=np.uint64)
        self._size = 0
        self._merged = 0  # ids below this are in the tables, the rest buffered

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays (capacity included)."""
        return self._fps.nbytes + sum(table.nbytes for table in self._tables)

    def fingerprint(self, fp_id: int) -> int:
        """The fingerprint of id ``fp_id``."""
        if not 0 <= fp_id < self._size:
            raise IndexError(fp_id)
        return int(self._fps[fp_id])

    def fingerprints(self) -> np.ndarray:
        """All fingerprints, by id (a read-only view)."""
        view = self._fps[: self._size]
        view.flags.writeable = False
        return view

    # -- adding -----------------------------------------------------------

    def _reserve(self, extra: int) -> None:
        need = self._size + extra
        if need > len(self._fps):
            grown = np.empty(max(need, 2 * len(self._fps)), dtype=np.uint64)
            grown[: self._size] = self._fps[: self._size]
            self._fps = grown

    def add(self, fp: int) -> int:
        """Add fingerprint ``fp``; returns its id."""
        self._reserve(1)
        fp_id = self._size
        self._fps[fp_id] = fp & 0xFFFFFFFFFFFFFFFF
        self._size += 1
        if self._size - self._merged >= self.buffer_size:
            self.flush()
        return fp_id

    def add_many(self, fps: Iterable[int] | np.ndarray) -> range:
        """Add many fingerprints at once (one merge); returns their ids."""
        array = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=np.uint64)
        self._reserve(len(array))
        first = self._size
        self._fps[first : first + len(array)] = array
        self._size += len(array)
        self.flush()
        return range(first, self._size)

    def flush(self) -> None:
        """Merge the insert buffer into the tables."""
        if self._merged == self._size:
            return
        if self._size >= 1 << 32:
            raise OverflowError("SimhashIndex holds at most 2**32 fingerprints")
        pending = self._fps[self._merged : self._size]
        for table in self._tables:
            table.merge(pending, self._merged)
        self._merged = self._size

    # -- querying -----------------------------------------------------------

    def _distances(self, fp: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate ids (with repeats) and their distances to ``fp``.
        Until the first merge the tables are empty and the ids are the
        buffer's, each once and ascending (a crawl's first ``buffer_size``
        pages: 5 table probes a page saved)."""
        parts = [table.candidates(fp) for table in self._tables] if self._merged else []
        if self._merged < self._size:
            parts.append(np.arange(self._merged, self._size, dtype=np.uint32))
        ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint32)
        if not len(ids):
            return ids, ids
        distances = _popcount(self._fps[ids] ^ np.uint64(fp & 0xFFFFFFFFFFFFFFFF))
        return ids, distances

    def nearest(self, fp: int) -> tuple[int, int] | None:
        """``(id, distance)`` of the closest fingerprint within ``k`` (the
        earliest added among equals), or ``None``."""
        ids, distances = self._distances(fp)
        if not len(ids):
            return None
        best = int(distances.min())
        if best > self.k:
            return None
        return int(ids[distances == best].min()), best

    def within(self, fp: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids (ascending, each once) and distances of every fingerprint
        within ``k`` of ``fp``, as arrays."""
        ids, distances = self._distances(fp)
        close = distances <= self.k
        if not self._merged:  # the buffer's ids alone: each once, ascending already
            return ids[close], distances[close]
        ids, first = np.unique(ids[close], return_index=True)
        return ids, distances[close][first]

    def query(self, fp: int) -> list[tuple[int, int]]:
        """Every ``(id, distance)`` within ``k`` of ``fp``, closest first."""
        ids, distances = self._distances(fp)
        close = distances <= self.k
        found = {int(i): int(d) for i, d in zip(ids[close], distances[close])}
        return sorted(found.items(), key=lambda item: (item[1], item[0]))

    # -- persistence --------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the fingerprints to ``path`` (``.npy``; atomically replaced)."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "wb") as out:
            np.save(out, self._fps[: self._size])
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs) -> SimhashIndex:
        """An index of the fingerprints saved at ``path`` (same ids)."""
        index = cls(**kwargs)
        index.add_many(np.load(path, allow_pickle=False))
        return index


class NearDuplicateIndex:
    """A :class:`SimhashIndex` whose matches are confirmed by a sketch.

    SimHash at ``k = 3`` over 64 bits has to tolerate the edits between two
    copies of a page, so unrelated pages sharing much of their vocabulary
    (one language, one site's phrasing) sometimes come within ``k`` too.
    Each original also keeps a small MinHash sketch of its word pairs
    (:func:`scrapy_aopic.hygiene.simhash.word_pair_sketch`, 64 bytes): a candidate
    within ``k`` counts only if the sketches estimate a Jaccard similarity of
    at least ``min_similarity`` (0 = SimHash alone decides).

    :param k: Hamming distance of a near-duplicate.
    :param min_similarity: smallest estimated Jaccard similarity of word
        pairs that confirms a candidate; 0 switches confirmation off.
    :param far_k: a larger Hamming distance (``> k``) searched too, where a
        candidate counts only if its sketch estimates at least
        ``far_similarity``: a short page with a sentence added flips 4-9 of
        its 64 bits, more than ``k = 3``, yet its sketch stays close (0.8-0.95),
        while unrelated pages that far apart rarely reach it. ``far_k <= k``
        (default) searches ``k`` only.
    :param far_similarity: the sketch similarity needed beyond ``k``.
    :param max_length_ratio: a candidate whose amount of text (word
        characters) is more than this many times the page's, or less than
        its inverse, is refused before its sketch is read: two texts whose
        lengths differ by a factor ``r`` have a Jaccard similarity of at most
        ``1 / r`` whatever the sketch estimates (issue 16: ``LongStream``,
        5,504 words, was merged with ``Stream``, 8,688). 0 switches the
        guard off; pages added or queried with ``chars = 0`` (unknown) are
        never refused by it. Costs 4 bytes per original.
    """

    def __init__(
        self,
        k: int = 3,
        min_similarity: float = 0.55,
        max_length_ratio: float = 1.4,
        far_k: int = 0,
        far_similarity: float = 0.7,
        **index_options,
    ):
        from .simhash import SKETCH_BINS

        self.k = k
        self.far_k = far_k if far_k > k else k
        self.far_similarity = far_similarity
        self.index = SimhashIndex(k=self.far_k, **index_options)
        self.min_similarity = min_similarity
        self._bins = SKETCH_BINS
        self._sketches = bytearray()
        self.max_length_ratio = max_length_ratio
        self._chars = array("I")  # word characters of each original (0 = unknown)
        self.rejected = 0  #: candidates within k refused by their sketch or length
        self.rejected_length = 0  #: of which refused by the length-ratio guard

    def __len__(self) -> int:
        return len(self.index)

    @property
    def nbytes(self) -> int:
        return self.index.nbytes + len(self._sketches) + self._chars.itemsize * len(self._chars)

    def sketch(self, fp_id: int) -> np.ndarray:
        """The sketch stored for id ``fp_id``."""
        return np.frombuffer(self._sketches, dtype=np.uint16, count=self._bins, offset=2 * self._bins * fp_id)

    def add(self, fingerprint: int, sketch: np.ndarray, chars: int = 0) -> int:
        """Index an original (``chars``: its word characters, 0 if unknown);
        returns its id."""
        self._sketches += np.asarray(sketch, dtype=np.uint16).tobytes()
        self._chars.append(min(max(int(chars), 0), 0xFFFFFFFF))
        return self.index.add(fingerprint)

    def find(self, fingerprint: int, sketch: np.ndarray, chars: int = 0) -> tuple[int, int] | None:
        """``(id, distance)`` of the closest confirmed original (the earliest
        among equals), or ``None``. ``chars``: the page's word characters
        (0 = unknown: no length guard)."""
        ids, distances = self.index.within(fingerprint)
        if not len(ids):
            return None
        if self.max_length_ratio > 0 and chars > 0:
            lengths = np.frombuffer(self._chars, dtype=np.uint32)[ids].astype(np.float64)
            ratio = self.max_length_ratio
            fits = (lengths == 0) | ((lengths <= chars * ratio) & (lengths * ratio >= chars))
            refused = int(len(ids) - fits.sum())
            if refused:
                self.rejected += refused
                self.rejected_length += refused
                ids, distances = ids[fits], distances[fits]
                if not len(ids):
                    return None
        if self.min_similarity > 0 or self.far_k > self.k:
            # All candidates' sketches at once: pages of one site or one
            # language can crowd a SimHash neighbourhood.
            stored = np.frombuffer(self._sketches, dtype=np.uint16).reshape(-1, self._bins)[ids]
            sketch = np.asarray(sketch, dtype=np.uint16)
            used = (stored != _EMPTY_BIN) | (sketch != _EMPTY_BIN)
            equal = ((stored == sketch) & used).sum(axis=1)
            counts = used.sum(axis=1)
            needed = np.where(distances > self.k, self.far_similarity, self.min_similarity)
            similar = np.where(counts > 0, equal / np.maximum(counts, 1), 1.0) >= needed
            self.rejected += int(len(ids) - similar.sum())
            ids, distances = ids[similar], distances[similar]
            if not len(ids):
                return None
        best = int(distances.min())
        return int(ids[distances == best].min()), best

    def arrays(self) -> dict[str, np.ndarray]:
        """The state to save (see :meth:`from_arrays`)."""
        return {
            "fingerprints": self.index.fingerprints(),
            "sketches": np.frombuffer(bytes(self._sketches), dtype=np.uint16),
            "chars": np.frombuffer(bytes(self._chars), dtype=np.uint32),
        }

    def load_arrays(self, fingerprints: np.ndarray, sketches: np.ndarray, chars: np.ndarray | None = None) -> None:
        """Replace the content with saved :meth:`arrays` (``chars`` missing
        in files of older versions: lengths unknown, no guard for them)."""
        if len(sketches) != len(fingerprints) * self._bins:
            raise ValueError("fingerprints and sketches do not match")
        if chars is None or len(chars) != len(fingerprints):
            chars = np.zeros(len(fingerprints), dtype=np.uint32)
        self._chars = array("I", np.asarray(chars, dtype=np.uint32).tobytes())
        self.index = SimhashIndex(k=self.far_k, blocks=self.index.blocks, buffer_size=self.index.buffer_size)
        self.index.add_many(fingerprints)
        self._sketches = bytearray(np.asarray(sketches, dtype=np.uint16).tobytes())
