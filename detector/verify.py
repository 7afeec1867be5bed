"""The literal second pass: exact word-shingle Jaccard between two normalized texts, or
the exact cosine of two stored vectors.

A fingerprint within distance k only makes a suspect; this decides. Shingles are hashed
from the tokenizer's 64-bit token keys, so a document's shingle set costs a few numpy
operations; sets are compared exactly (up to 64-bit hash collisions).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .errors import ConfigError
from .hashing import combine
from .sketch import Estimate, SketchShape, estimate
from .tokenize import tokenize

SHINGLE_BITS = 48  # leaves 16 bits for the text's number when a batch is sorted at once
_SHIFT = np.uint64(64 - SHINGLE_BITS)


def shingle_set(token_keys: np.ndarray, n: int) -> np.ndarray:
    """Sorted distinct 48-bit hashes of the word n-shingles; a shorter text is one shingle."""
    if len(token_keys) == 0:
        return np.zeros(0, np.uint64)
    if len(token_keys) < n:
        return combine(*token_keys[:, None]).reshape(1) >> _SHIFT
    m = len(token_keys) - n + 1
    return np.unique(combine(*(token_keys[j : j + m] for j in range(n))) >> _SHIFT)


def shingle_sets(keys: np.ndarray, bounds: np.ndarray, n: int) -> list[np.ndarray]:
    """shingle_set of every text of a batch at once (bounds as TokenBatch.bounds())."""
    docs = len(bounds) - 1
    most = 1 << (64 - SHINGLE_BITS)  # texts that fit in the tag bits
    if docs > most:
        cut = bounds[most]
        return shingle_sets(keys[:cut], bounds[: most + 1], n) + shingle_sets(
            keys[cut:], bounds[most:] - cut, n
        )
    doc = np.repeat(np.arange(docs, dtype=np.uint64), np.diff(bounds))
    m = max(len(keys) - n + 1, 0)
    start = np.flatnonzero(doc[:m] == doc[n - 1 :][:m]) if m else np.zeros(0, np.intp)
    # One sort orders the whole batch by (text, shingle): the text number is the high bits.
    tagged = np.sort(
        (doc[start] << np.uint64(SHINGLE_BITS))
        | (combine(*(keys[start + j] for j in range(n))) >> _SHIFT)
    )
    distinct = (
        tagged[np.concatenate(([True], tagged[1:] != tagged[:-1]))] if len(tagged) else tagged
    )
    cut = np.searchsorted(distinct >> np.uint64(SHINGLE_BITS), np.arange(docs + 1, dtype=np.uint64))
    low = distinct & np.uint64((1 << SHINGLE_BITS) - 1)
    out = [low[cut[d] : cut[d + 1]] for d in range(docs)]
    sizes = np.diff(bounds)
    for d in np.flatnonzero((sizes > 0) & (sizes < n)):
        out[d] = shingle_set(keys[bounds[d] : bounds[d + 1]], n)
    return out


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


# Bytes of shingle sets the cache may hold. A set costs 8 bytes a shingle, so a hostile
# feed of 200,000-token records would otherwise make 16,384 entries weigh 26 GB.
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Of two vectors of length 1 (vectors.units, vectors.unpack)."""
    return float(np.dot(a, b))


class Shingler(Protocol):
    """What the literal pass needs of the kernels (detector.kernels)."""

    def shingle_sets(self, texts: list[str]) -> list[np.ndarray]: ...

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> float: ...

    def jaccards(self, a: np.ndarray, others: list[np.ndarray]) -> list[float]: ...


class ReferenceShingler:
    """The numpy reference of the literal pass's kernels."""

    def __init__(self, n: int) -> None:
        self.n = n

    def shingle_sets(self, texts: list[str]) -> list[np.ndarray]:
        tb = tokenize(texts)
        return shingle_sets(tb.key, tb.bounds(), self.n)

    @staticmethod
    def jaccard(a: np.ndarray, b: np.ndarray) -> float:
        return jaccard(a, b)

    @staticmethod
    def jaccards(a: np.ndarray, others: list[np.ndarray]) -> list[float]:
        return [jaccard(a, b) for b in others]


# How far from the threshold a sketch's estimate must be for its verdict to stand: a
# pair on the other side of the threshold lands beyond Z standard deviations about once
# in 10,000 (one-sided normal tail 1e-4).
Z = 3.72
# Where the estimate falls within Z standard deviations of the threshold (the band), a
# declared rule decides: "estimate" (a duplicate when the estimate reaches the threshold),
# "unique" (not a duplicate), "duplicate", or "distance": a duplicate when its fingerprint
# is within `band_distance` of the candidate's.
BAND_RULES = ("estimate", "unique", "duplicate", "distance")


@dataclass(frozen=True)
class SketchJudgment:
    duplicate: bool
    estimate: Estimate
    banded: bool  # decided by the band rule, not by the estimate alone


class LiteralCheck:
    """Similarity of a new text to indexed texts (or of a vector to indexed vectors), with
    a cache of indexed shingle sets and vectors, bounded by entries and by bytes (the
    least recently used go first); and, where an indexed text is no longer kept, the
    judgment of its shingle sketch (`sketch`: None when the index keeps every text)."""

    def __init__(
        self,
        threshold: float = 0.8,
        n: int = 5,
        cache_size: int = 16384,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        cosine: float = 0.9,
        kernels: Shingler | None = None,
        sketch: SketchShape | None = None,
        band_rule: str = "estimate",
        band_distance: int = 3,
        window: int | None = None,
    ) -> None:
        if band_rule not in BAND_RULES:
            raise ConfigError(f"unknown sketch band rule {band_rule!r}: one of {BAND_RULES}")
        self.threshold = threshold
        self.sketch = sketch
        self.band_rule = band_rule
        self.band_distance = band_distance
        self._sketches: OrderedDict[str, bytes] = OrderedDict()
        self.kernels: Shingler = kernels or ReferenceShingler(n)
        self.cosine = cosine  # for vectors
        self.n = n
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # With a window of texts (`window`, the index's), the cache keeps the newest
        # `window` sets this process indexed, oldest out first however often they are
        # read, so a process alone on its index judges on texts exactly where the index
        # keeps them (with other consumers, it may still hold some of its own newest that
        # the index trimmed: exact evidence all the same). Sets and vectors read from the
        # index serve the batch that read them (`_loaded`).
        self.window = window
        self._loaded: dict[str, np.ndarray] = {}
        self._sketch_cache = cache_size  # sketches: 135 bytes each
        if window is not None:
            cache_size = min(cache_size, window)
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self.cached_bytes = 0

    def new_batch(self) -> None:
        self._loaded.clear()

    def remember(self, doc_id: str, shingles: np.ndarray) -> None:
        if self._cache_size == 0:
            return
        old = self._cache.pop(doc_id, None)
        if old is not None:
            self.cached_bytes -= old.nbytes
        self._cache[doc_id] = shingles
        self.cached_bytes += shingles.nbytes
        while len(self._cache) > self._cache_size or self.cached_bytes > self._cache_bytes:
            self.cached_bytes -= self._cache.popitem(last=False)[1].nbytes

    def cached_ids(self, ids: set[str]) -> set[str]:
        return {i for i in ids if i in self._cache or i in self._loaded}

    def load(self, texts: dict[str, str]) -> None:
        """Tokenize many indexed texts at once and cache their shingle sets."""
        if not texts:
            return
        sets = self.kernels.shingle_sets(list(texts.values()))
        for doc_id, shingles in zip(texts, sets, strict=True):
            if self.window is None:
                self.remember(doc_id, shingles)
            else:
                self._loaded[doc_id] = shingles

    def load_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        for doc_id, v in vectors.items():
            if self.window is None:
                self.remember(doc_id, v)
            else:
                self._loaded[doc_id] = v

    def remember_sketch(self, doc_id: str, sketch: bytes) -> None:
        self._sketches[doc_id] = sketch
        self._sketches.move_to_end(doc_id)
        while len(self._sketches) > self._sketch_cache:
            self._sketches.popitem(last=False)

    def sketch_of(self, doc_id: str) -> bytes | None:
        return self._sketches.get(doc_id)

    def judge(self, mine: bytes, theirs: bytes, distance: int) -> SketchJudgment:
        """A candidate whose text is gone, judged on sketches: sure outside the band of Z
        standard deviations around the threshold, else by the band rule."""
        e = estimate(mine, theirs, self.threshold)
        margin = Z * e.sigma
        if e.bound < self.threshold or e.jaccard < self.threshold - margin:
            return SketchJudgment(False, e, False)
        if e.jaccard >= self.threshold + margin:
            return SketchJudgment(True, e, False)
        if self.band_rule == "estimate":
            return SketchJudgment(e.jaccard >= self.threshold, e, True)
        if self.band_rule == "distance":
            return SketchJudgment(distance <= self.band_distance, e, True)
        return SketchJudgment(self.band_rule == "duplicate", e, True)

    def get(self, doc_id: str) -> np.ndarray | None:
        found = self._loaded.get(doc_id)
        if found is not None:
            return found
        found = self._cache.get(doc_id)
        if found is not None and self.window is None:
            self._cache.move_to_end(doc_id)
        return found
