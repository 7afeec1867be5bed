"""The literal second pass: exact word-shingle Jaccard between two normalized texts.

A fingerprint within distance k only makes a suspect; this decides. Shingles are hashed
from the tokenizer's 64-bit token keys, so a document's shingle set costs a few numpy
operations; sets are compared exactly (up to 64-bit hash collisions).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .features import combine
from .tokenize import tokenize


def shingle_set(token_keys: np.ndarray, n: int) -> np.ndarray:
    """Sorted distinct hashes of the word n-shingles; a shorter text is one shingle."""
    if len(token_keys) == 0:
        return np.zeros(0, np.uint64)
    if len(token_keys) < n:
        return combine(*token_keys[:, None]).reshape(1)
    m = len(token_keys) - n + 1
    return np.unique(combine(*(token_keys[j : j + m] for j in range(n))))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


class LiteralCheck:
    """Similarity of a new text to indexed texts, with a cache of indexed shingle sets."""

    def __init__(self, threshold: float = 0.8, n: int = 5, cache_size: int = 4096) -> None:
        self.threshold = threshold
        self.n = n
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def remember(self, doc_id: str, shingles: np.ndarray) -> None:
        self._cache[doc_id] = shingles
        self._cache.move_to_end(doc_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def cached_ids(self, ids: set[str]) -> set[str]:
        return {i for i in ids if i in self._cache}

    def load(self, texts: dict[str, str]) -> None:
        """Tokenize many indexed texts at once and cache their shingle sets."""
        if not texts:
            return
        ids = list(texts)
        tb = tokenize([texts[i] for i in ids])
        bounds = tb.bounds()
        for d, doc_id in enumerate(ids):
            self.remember(doc_id, shingle_set(tb.key[bounds[d] : bounds[d + 1]], self.n))

    def get(self, doc_id: str) -> np.ndarray | None:
        found = self._cache.get(doc_id)
        if found is not None:
            self._cache.move_to_end(doc_id)
        return found
