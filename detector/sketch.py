"""A small sketch of a document's literal shingle set, for the literal pass where the
document's text is no longer kept (`--text-window`).

b-bit one-permutation MinHash with optimal densification (Li, Owen & Zhang 2012; Li &
König 2010; Shrivastava 2017):

- every shingle hashes (fmix64) to a bin, the top log2(BINS) bits, and an order; a bin
  keeps the shingle of least order that falls in it (one permutation, BINS samples);
- an empty bin takes the value of the first filled bin of its own fixed probe sequence,
  the same for every document, so two sets' empty bins copy from the same bins and every
  bin is still an unbiased min-wise sample of the union;
- a bin keeps only BITS bits of its shingle (a second hash of it): two different shingles
  agree by chance with probability C = 2^-BITS, so P(bins equal) = C + (1 - C) J.

The estimate is (matches / BINS - C) / (1 - C). Its standard deviation is that of a
binomial proportion over the bins, sqrt(P (1 - P) / BINS) / (1 - C), grown for a union
of few shingles (`sigma`). The set's size travels in the sketch: |A n B| <= min(|A|, |B|), so
J <= min/max bounds every pair exactly (`bound`).

A sketch is bytes: b"S", BITS, log2(BINS), the set's size (uint32 LE), the bins' bits
packed low bit first. The same shingle set gives the same bytes in every index: memory and
Redis keep them alike. bench/sketch.py measures the error against the bytes (README,
"Texts beyond memory").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .errors import ConfigError
from .hashing import fmix64

MAGIC = b"S"
HEADER = 7  # magic, bits, log2 bins, size
_ORDER_SEED = np.uint64(0x5BD1E9955BD1E995)
_BITS_SEED = np.uint64(0x27D4EB2F165667C5)
_PROBE_SEED = np.uint64(0x165667B19E3779F9)
# A text of at most this many shingles keeps its text for as long as it is indexed, and no
# sketch: packed, it weighs about what a sketch does (bench/sketch.py), and its exact
# Jaccard is free of the sketch's error where that error is largest (small unions).
SHORT_SHINGLES = 64
# The variance's growth for a small union, a multiple of BINS / |A u B| (sigma): measured
# at most 0.19 for unions of 0.1 to 1.5 x BINS, at 256 to 4,096 bins (tests/test_sketch.py)
SMALL_SETS = 0.2
PROBES = 2  # probe steps the first round of densification tries
PROBE_STEPS = 64  # then the rotation (_densify)
# 1,024 bins of 1 bit: 128 bytes and sigma 0.019 at J = 0.8 (the README's table)
DEFAULT_BINS, DEFAULT_BITS = 1024, 1


@dataclass(frozen=True)
class SketchShape:
    bins: int = DEFAULT_BINS
    bits: int = DEFAULT_BITS

    def __post_init__(self) -> None:
        if self.bins < 8 or self.bins > 1 << 16 or self.bins & (self.bins - 1):
            raise ConfigError(f"sketch bins must be a power of two in 8..65536, got {self.bins}")
        if self.bits not in (1, 2, 4, 8):
            raise ConfigError(f"sketch bits must be 1, 2, 4 or 8, got {self.bits}")

    @property
    def log_bins(self) -> int:
        return self.bins.bit_length() - 1

    @property
    def nbytes(self) -> int:
        return HEADER + self.bins * self.bits // 8

    @property
    def chance(self) -> float:
        """C: the chance that two different shingles' bits agree."""
        return 2.0**-self.bits


@lru_cache(maxsize=8)
def _probes(bins: int, steps: int) -> np.ndarray:
    """Probe sequences: row j is, for every bin, the bin it tries at step j."""
    i = np.arange(bins, dtype=np.uint64)[None, :]
    j = np.arange(steps, dtype=np.uint64)[:, None]
    with np.errstate(over="ignore"):
        h = fmix64((j * np.uint64(bins) + i) ^ _PROBE_SEED)
    out = (h >> np.uint64(64 - (bins.bit_length() - 1))).astype(np.int64)
    out.setflags(write=False)
    return out


def sketches(sets: list[np.ndarray], shape: SketchShape = SketchShape()) -> list[bytes]:
    """The sketch of each shingle set (sorted distinct uint64, verify.shingle_set), the
    batch at once."""
    if not sets:
        return []
    k, logk = shape.bins, shape.log_bins
    sizes = np.array([len(s) for s in sets], np.int64)
    docs = len(sets)
    # values[d, bin]: the bits kept of the bin's least shingle; filled where one fell
    values = np.zeros((docs, k), np.uint8)
    filled = np.zeros((docs, k), bool)
    if sizes.sum():
        flat = np.concatenate(sets).astype(np.uint64, copy=False)
        doc = np.repeat(np.arange(docs, dtype=np.int64), sizes)
        order = fmix64(flat ^ _ORDER_SEED)
        cell = doc * k + (order >> np.uint64(64 - logk)).astype(np.int64)
        by = np.lexsort((order, cell))  # by cell, least order first
        cell, flat = cell[by], flat[by]
        first = np.concatenate(([True], cell[1:] != cell[:-1]))
        mask = np.uint64((1 << shape.bits) - 1)
        kept = (fmix64(flat[first] ^ _BITS_SEED) & mask).astype(np.uint8)
        values.reshape(-1)[cell[first]] = kept
        filled.reshape(-1)[cell[first]] = True
    _densify(values, filled, sizes > 0)
    return [_pack(values[d], int(sizes[d]), shape) for d in range(docs)]


def _densify(values: np.ndarray, filled: np.ndarray, nonempty: np.ndarray) -> None:
    """Empty bins copy the first filled bin of their probe sequence, a few steps of every
    remaining empty bin of the batch at a time (a step misses with probability 1 - the
    document's filled share). A bin that PROBE_STEPS steps missed (a set of few shingles,
    where probing would take about BINS steps) copies the next filled bin after it, round
    the end: Shrivastava & Li's rotation, as unbiased, and O(BINS)."""
    k = values.shape[1]
    rows, cols = np.nonzero(~filled & nonempty[:, None])
    step, steps = 0, PROBES
    while len(rows) and step < PROBE_STEPS:
        steps = min(steps, PROBE_STEPS - step)
        tries = _probes(k, step + steps)[step:].T[cols]  # (empty bins, steps)
        hit = filled[rows[:, None], tries]
        got = hit.any(1)
        at = tries[got, hit[got].argmax(1)]
        values[rows[got], cols[got]] = values[rows[got], at]
        rows, cols = rows[~got], cols[~got]
        step += steps
        steps *= 2  # those left are in sparse documents: try more at once
    for d in np.unique(rows):
        mine = cols[rows == d]
        full = np.flatnonzero(filled[d])
        after = np.searchsorted(full, mine, "right")
        values[d, mine] = values[d, full[np.where(after < len(full), after, 0)]]


def _pack(bins: np.ndarray, size: int, shape: SketchShape) -> bytes:
    head = MAGIC + bytes((shape.bits, shape.log_bins)) + min(size, 0xFFFFFFFF).to_bytes(4, "little")
    per = 8 // shape.bits  # bins a byte
    grouped = bins.reshape(-1, per).astype(np.uint8)
    shifts = (np.arange(per, dtype=np.uint8) * shape.bits)[None, :]
    packed: np.ndarray = np.bitwise_or.reduce(grouped << shifts, axis=1).astype(np.uint8)
    return head + packed.tobytes()


def shape_of(sketch: bytes) -> SketchShape:
    if len(sketch) < HEADER or sketch[:1] != MAGIC:
        raise ValueError("not a sketch")
    try:
        shape = SketchShape(1 << sketch[2], sketch[1])
    except ConfigError as bad:  # a stored value, not a setting: it is corrupt
        raise ValueError(f"not a sketch: {bad}") from None
    if len(sketch) != shape.nbytes:
        raise ValueError(f"a sketch of {shape} is {shape.nbytes} bytes, not {len(sketch)}")
    return shape


def size_of(sketch: bytes) -> int:
    return int.from_bytes(sketch[3:7], "little")


def bins_of(sketch: bytes) -> np.ndarray:
    """The bins' bits, one a byte."""
    shape = shape_of(sketch)
    raw = np.frombuffer(sketch, np.uint8, offset=HEADER)
    per = 8 // shape.bits
    shifts = (np.arange(per, dtype=np.uint8) * shape.bits)[None, :]
    return ((raw[:, None] >> shifts) & np.uint8((1 << shape.bits) - 1)).reshape(-1)


@dataclass(frozen=True)
class Estimate:
    jaccard: float  # the estimate, in [0, 1]
    sigma: float  # its standard deviation at the threshold it is judged against
    bound: float  # min/max of the sets' sizes: the true Jaccard is at most this


def estimate(a: bytes, b: bytes, threshold: float) -> Estimate:
    """The Jaccard of two sets from their sketches (of one shape), and the estimator's
    standard deviation if the truth were at `threshold`."""
    shape = shape_of(a)
    if shape_of(b) != shape:
        raise ValueError(f"sketches of different shapes: {shape} and {shape_of(b)}")
    na, nb = size_of(a), size_of(b)
    if na == 0 or nb == 0:
        same = float(na == nb)
        return Estimate(same, 0.0, same)
    if a[HEADER:] == b[HEADER:]:
        matches = shape.bins
    elif shape.bits == 1:  # a bin a bit: the bins that differ are the bits set in a ^ b
        x = np.frombuffer(a, np.uint8, offset=HEADER) ^ np.frombuffer(b, np.uint8, offset=HEADER)
        matches = shape.bins - int(np.bitwise_count(x).sum())
    else:
        matches = int(np.count_nonzero(bins_of(a) == bins_of(b)))
    c = shape.chance
    j = min(max((matches / shape.bins - c) / (1 - c), 0.0), 1.0)
    bound = min(na, nb) / max(na, nb)
    return Estimate(j, sigma(threshold, shape, na + nb), bound)


def sigma(j: float, shape: SketchShape, sizes: int | None = None) -> float:
    """Standard deviation of the estimate when the truth is `j` (`sizes`: |A| + |B|).

    Over independent bins it is a binomial proportion's, sqrt(P (1 - P) / BINS) / (1 - C),
    Li & König's. A union of fewer shingles than BINS x 8 fills few bins, and its empty
    bins are copies: the bins are then fewer independent samples than BINS, and the
    b-bit agreements of the same two shingles repeat. Measured (tests/test_sketch.py), the
    variance grows by less than SMALL_SETS x BINS / |A u B|, which is added."""
    c = shape.chance
    p = c + (1 - c) * j
    var = p * (1 - p) / shape.bins / (1 - c) ** 2
    if sizes is not None:
        union = max(sizes / (1 + j), 1.0)
        var *= 1 + SMALL_SETS * shape.bins / union
    return math.sqrt(var)
