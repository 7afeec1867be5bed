"""The hashing primitives every stage shares: a 64-bit mixer and a sequence combiner.

Pure numpy. Tokens, features, shingles, digests and the Redis bucket shards all hash
through these two, so they live apart from any one stage.
"""

from __future__ import annotations

import numpy as np

_U64 = np.uint64
MIX = _U64(0x9E3779B97F4A7C15)  # the golden ratio, odd: a multiplier that spreads bits


def fmix64(h: np.ndarray) -> np.ndarray:
    """The murmur3 finalizer: every output bit depends on every input bit."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> _U64(33))
        h = h * _U64(0xFF51AFD7ED558CCD)
        h = h ^ (h >> _U64(33))
        h = h * _U64(0xC4CEB93FE53A87E3)
        out: np.ndarray = h ^ (h >> _U64(33))
        return out


def combine(first: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    """One 64-bit hash for a sequence of hashes (order matters)."""
    with np.errstate(over="ignore"):
        acc = first.copy()
        for h in rest:
            acc = acc * MIX + h
    return fmix64(acc)
