"""The literal second pass: exact word-shingle Jaccard between two normalized texts, or
the exact cosine of two stored vectors.

A fingerprint within distance k only makes a suspect; this decides. Shingles are hashed
from the tokenizer's 64-bit token keys, so a document's shingle set costs a few numpy
operations; sets are compared exactly (up to 64-bit hash collisions).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import numpy as np

from .hashing import combine
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


class LiteralCheck:
    """Similarity of a new text to indexed texts (or of a vector to indexed vectors), with
    a cache of indexed shingle sets and vectors, bounded by entries and by bytes (the
    least recently used go first)."""

    def __init__(
        self,
        threshold: float = 0.8,
        n: int = 5,
        cache_size: int = 16384,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        cosine: float = 0.9,
        kernels: Shingler | None = None,
    ) -> None:
        self.threshold = threshold
        self.kernels: Shingler = kernels or ReferenceShingler(n)
        self.cosine = cosine  # for vectors
        self.n = n
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self.cached_bytes = 0

    def remember(self, doc_id: str, shingles: np.ndarray) -> None:
        old = self._cache.pop(doc_id, None)
        if old is not None:
            self.cached_bytes -= old.nbytes
        self._cache[doc_id] = shingles
        self.cached_bytes += shingles.nbytes
        while len(self._cache) > self._cache_size or self.cached_bytes > self._cache_bytes:
            self.cached_bytes -= self._cache.popitem(last=False)[1].nbytes

    def cached_ids(self, ids: set[str]) -> set[str]:
        return {i for i in ids if i in self._cache}

    def load(self, texts: dict[str, str]) -> None:
        """Tokenize many indexed texts at once and cache their shingle sets."""
        if not texts:
            return
        sets = self.kernels.shingle_sets(list(texts.values()))
        for doc_id, shingles in zip(texts, sets, strict=True):
            self.remember(doc_id, shingles)

    def load_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        for doc_id, v in vectors.items():
            self.remember(doc_id, v)

    def get(self, doc_id: str) -> np.ndarray | None:
        found = self._cache.get(doc_id)
        if found is not None:
            self._cache.move_to_end(doc_id)
        return found
