"""Dense embeddings: their space, the Hamming radius a cosine threshold needs, their
digest, and their compact stored form. Pure.

Charikar: for a random hyperplane r, Pr[sign(r.u) != sign(r.v)] = theta(u, v) / pi, so
the Hamming distance of the 64 hyperplane bits of two vectors at cosine c is binomial,
B(64, acos(c) / pi). A pair at exactly the threshold is found when it lands within k:
`hamming_radius` picks the smallest k that does so with the wanted probability, and
`vector_scheme` the block tables that find every pair within that k.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import xxhash

from .blocks import BITS, BlockScheme
from .errors import ConfigError

STORAGE = ("int8", "float16")
# = the options table's defaults of --cosine and --vector-recall (a test keeps them equal:
# options.py must not import numpy)
DEFAULT_COSINE = 0.9
DEFAULT_RECALL = 0.75
_INT8, _FLOAT16 = b"q", b"h"  # the first byte of a stored vector says its form


def space(dim: int) -> str:
    """Vectors of different dimensions never meet: each dimension is a space."""
    return f"v{dim}"


def units(rows: np.ndarray) -> np.ndarray:
    """Each row (finite, not all zero: records.py checks) as float32 of length 1."""
    rows = np.asarray(rows, np.float64)
    # scaled first, so that the norm of huge components does not overflow
    rows = rows / np.abs(rows).max(axis=1, keepdims=True)
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def digest(v: np.ndarray) -> str:
    """Equal for exact copies: the unit vector's float32 bits (and so its dimension)."""
    return "v" + xxhash.xxh3_128_hexdigest(np.ascontiguousarray(v, np.float32).tobytes())


def check_storage(storage: str) -> None:
    if storage not in STORAGE:
        raise ConfigError(f"vector storage must be one of {STORAGE}, not {storage!r}")


def pack(v: np.ndarray, storage: str = "int8") -> bytes:
    """The stored form: int8 with a per-vector scale (1 byte a component), or float16."""
    return pack_rows(v[None, :], storage)[0][0]


def pack_rows(rows: np.ndarray, storage: str = "int8") -> tuple[list[bytes], np.ndarray]:
    """pack() of every row of a batch at once, and the rows as unpack() reads them back."""
    check_storage(storage)
    if storage == "float16":
        half = rows.astype("<f2")
        return [_FLOAT16 + r.tobytes() for r in half], _normalized(half.astype(np.float32))
    scale = (np.abs(rows).max(axis=1) / 127.0).astype("<f4")
    q = np.rint(rows / scale[:, None]).astype(np.int8)
    blobs = [_INT8 + s.tobytes() + r.tobytes() for s, r in zip(scale, q, strict=True)]
    return blobs, _normalized(q.astype(np.float32) * scale[:, None])


def _normalized(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True).astype(np.float32)
    return out


def unpack(blob: bytes) -> np.ndarray:
    """A stored vector as float32 of length 1 (rounding moved it off the unit sphere)."""
    if blob[:1] == _FLOAT16:
        v = np.frombuffer(blob, "<f2", offset=1).astype(np.float32)
    elif blob[:1] == _INT8:
        scale = np.frombuffer(blob, "<f4", count=1, offset=1)[0]
        v = np.frombuffer(blob, np.int8, offset=5).astype(np.float32) * scale
    else:
        raise ValueError(f"not a stored vector (form {blob[:1]!r})")
    out: np.ndarray = _normalized(v[None, :])[0]  # as pack_rows reads it: bit for bit
    return out


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def hamming_radius(cosine: float, recall: float, bits: int = BITS) -> int:
    """The smallest k such that a pair at exactly `cosine` is within Hamming distance k of
    `bits` hyperplane bits with probability >= `recall`."""
    if not -1.0 < cosine < 1.0 or not 0.0 < recall < 1.0:
        raise ConfigError(
            f"need a cosine in (-1, 1) and a recall in (0, 1), got {cosine} and {recall}"
        )
    p = math.acos(cosine) / math.pi
    return next(k for k in range(bits + 1) if binomial_cdf(k, bits, p) >= recall)


def vector_scheme(cosine: float, recall: float) -> BlockScheme:
    """Four tables of 16 bits, probed: a pair within k differs in at most k // 4 bits of
    some table's key (pigeonhole), so probing that radius finds it."""
    k = hamming_radius(cosine, recall)
    try:
        return BlockScheme.parse(f"k{k}-b4-m1")
    except ConfigError as exc:
        raise ConfigError(
            f"cosine {cosine} at recall {recall} needs Hamming radius {k}, more than the "
            f"vector tables probe ({exc}); raise --cosine or lower --vector-recall"
        ) from None


@functools.cache
def default_vector_scheme() -> BlockScheme:
    return vector_scheme(DEFAULT_COSINE, DEFAULT_RECALL)


def parse_vector_scheme(spec: str, cosine: float, recall: float) -> BlockScheme:
    return vector_scheme(cosine, recall) if spec == "auto" else BlockScheme.parse(spec)
