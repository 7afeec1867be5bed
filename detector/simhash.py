"""Fingerprints: 64-bit SimHash of weighted features (Charikar), and of dense vectors.

Manku's shortcut: no hyperplane is materialized for text. Each feature's own hash bits
say on which side of every hyperplane it falls, so a weighted sum per bit suffices; the
sums are taken eight bits at a time through a per-byte weight histogram, which keeps the
work per feature at eight additions instead of sixty-four.
"""

from __future__ import annotations

import numpy as np

from .features import FeatureBatch

BITS = 64
_SHIFTS = np.arange(BITS, dtype=np.uint64)
# _BYTE_BITS[v, b] = bit b of the byte value v.
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float64)


def _pack(bits: np.ndarray) -> np.ndarray:
    """(n, 64) booleans, column i = bit i -> n uint64 fingerprints."""
    out: np.ndarray = (bits.astype(np.uint64) << _SHIFTS).sum(axis=1, dtype=np.uint64)
    return out


def simhash(features: FeatureBatch) -> np.ndarray:
    """The fingerprint of every text of the batch; a text without features gets 0."""
    docs = features.docs
    byte_values = features.hash.view(np.uint8).reshape(-1, 8)  # little endian: byte j = bits 8j..
    base = features.doc * 256
    weight = features.weight.astype(np.float64)
    above = np.empty((docs, BITS))
    for j in range(8):
        # Total weight of the features whose byte j has each of the 256 values, per text.
        hist = np.bincount(base + byte_values[:, j], weights=weight, minlength=docs * 256)
        # einsum, not @: a BLAS call this small costs more in thread wake-ups than in work.
        above[:, 8 * j : 8 * j + 8] = np.einsum("dv,vb->db", hist.reshape(docs, 256), _BYTE_BITS)
    # Every weight is a float32 of at least 1 (features.py), a multiple of 2^-23: sums
    # below 2^30 are exact in float64, so no order of addition (numpy's, the native
    # kernels') can move a bit.
    total = np.bincount(features.doc, weights=weight, minlength=docs)
    # Slot i of the accumulator = sum(+w if bit i else -w) = 2 * above - total.
    return _pack(2 * above > total[:, None])


def hyperplanes(dim: int, seed: int) -> np.ndarray:
    """64 random Gaussian hyperplanes, fixed by the seed (isotropic, as Charikar needs)."""
    return np.random.default_rng(seed).standard_normal((BITS, dim))


def simhash_vectors(vectors: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """Random-hyperplane fingerprints: bit i = sign(r_i . v)."""
    return _pack(np.asarray(vectors, dtype=np.float64) @ planes.T > 0)


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def hamming_many(fp: int, others: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.bitwise_count(np.asarray(others, dtype=np.uint64) ^ np.uint64(fp))
    return out
