"""detector.sketch: the b-bit one-permutation MinHash of a shingle set against brute force
(the exact Jaccard, verify.jaccard) and against its own error model (sigma), and the
native kernels' sketches against the numpy reference, bit for bit.

The statistical tests draw from fixed seeds and hypothesis runs derandomized: a sketch's
error is random, but the same examples every run, so CI is never flaky."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import kernels
from detector.errors import ConfigError
from detector.features import Featurizer
from detector.sketch import (
    HEADER,
    SketchShape,
    bins_of,
    estimate,
    shape_of,
    sigma,
    size_of,
    sketches,
)
from detector.verify import SHINGLE_BITS, jaccard

NATIVE = kernels.native_module()
T = TypeVar("T")
TOP = 2**SHINGLE_BITS - 1  # the largest shingle hash
SHAPES = [
    SketchShape(1024, 1),
    SketchShape(512, 2),
    SketchShape(256, 4),
    SketchShape(128, 8),
    SketchShape(8, 8),
]
# The smallest set the property tests draw: the reference densifies a set of one or two
# shingles in 1-3 s at 1,024 bins (every empty bin probes until it finds the one filled
# bin), too slow for hundreds of examples. Tiny sets are in the native test below.
LEAST = 16


def values(kind: str, count: int, seed: int, start: int) -> np.ndarray:
    """`count` distinct shingle hashes, shuffled: random 48-bit values, a run of
    consecutive integers, or a run with a power-of-two stride (hashes of low entropy, which
    the sketch's mixing must spread over the bins like any other)."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        out = np.unique(rng.integers(0, TOP + 1, count + count // 8 + 8, dtype=np.uint64))
        out = rng.permutation(out)[:count]
    else:
        stride = 1 if kind == "consecutive" else 1 << (seed % 20 + 1)
        start = min(start, TOP - stride * count)
        out = rng.permutation(
            np.uint64(start) + np.uint64(stride) * np.arange(count, dtype=np.uint64)
        )
    assert len(out) == count
    return out


@st.composite
def set_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Two sets with a shared part and parts of their own, of a union of 65 to 3,000
    shingles and any Jaccard from 0 (disjoint) to 1 (equal); each of at least LEAST."""
    union = draw(st.integers(65, 3000))
    shared = draw(st.integers(0, union))
    least = max(0, LEAST - shared)
    own_a = draw(st.integers(least, union - shared - least))
    kind = draw(st.sampled_from(["random", "consecutive", "strided"]))
    v = values(kind, union, draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, TOP)))
    a = np.sort(v[: shared + own_a])
    b = np.sort(np.concatenate((v[:shared], v[shared + own_a :])))
    return a, b


def pairs(items: list[T]) -> list[tuple[T, T]]:
    """(items[0], items[1]), (items[2], items[3]), ..."""
    return list(zip(items[::2], items[1::2], strict=True))


def random_set(rng: np.random.Generator, size: int) -> np.ndarray:
    return np.unique(rng.integers(0, TOP + 1, size, dtype=np.uint64))


def pairs_at(
    rng: np.random.Generator, j: float, unions: tuple[int, int], count: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """`count` pairs (a, b, a, b, ...) of true Jaccard about `j`, their unions drawn from
    `unions`, the shingles not shared split at random between the two; and the exact
    Jaccard of each."""
    sets: list[np.ndarray] = []
    for union in rng.integers(*unions, size=count):
        shared = round(j * union)
        v = values("random", int(union), int(rng.integers(2**32)), 0)
        cut = shared + int(rng.integers(0, union - shared + 1))
        sets += [np.sort(v[:cut]), np.sort(np.concatenate((v[:shared], v[cut:])))]
    exact = np.array([jaccard(a, b) for a, b in pairs(sets)])
    return sets, exact


def estimates(sets: list[np.ndarray], shape: SketchShape) -> np.ndarray:
    """The estimate of each pair (sets[0], sets[1]), (sets[2], sets[3]), ..., the sketches
    made in one batch (the reference is vectorized over the batch)."""
    made = sketches(sets, shape)
    return np.array([estimate(a, b, 0.8).jaccard for a, b in pairs(made)])


# ----------------------------------------------------------------- against brute force


@given(pair=set_pairs(), shape=st.sampled_from(SHAPES))
@settings(derandomize=True, max_examples=250)
def test_the_estimate_is_within_five_sigma_of_the_exact_jaccard(
    pair: tuple[np.ndarray, np.ndarray], shape: SketchShape
) -> None:
    """The model's standard deviation, with its small-set term, is what the literal pass
    trusts (verify.Z sigmas): five of them must hold every pair of a few hundred."""
    a, b = pair
    exact = jaccard(a, b)
    one, two = sketches([a, b], shape)
    got = estimate(one, two, 0.8)
    assert 0.0 <= got.jaccard <= 1.0
    assert abs(got.jaccard - exact) <= 5 * sigma(exact, shape, len(a) + len(b)), (
        f"{shape}: |A| {len(a)}, |B| {len(b)}, J {exact:.4f}, estimate {got.jaccard:.4f}"
    )


@given(pair=set_pairs(), shape=st.sampled_from(SHAPES))
@settings(derandomize=True, max_examples=60)
def test_identical_sets_estimate_exactly_one(
    pair: tuple[np.ndarray, np.ndarray], shape: SketchShape
) -> None:
    """A repost of the same text is a duplicate on its sketch, with no error at all."""
    a, _ = pair
    one, two = sketches([a, a.copy()], shape)
    assert one == two
    assert estimate(one, two, 0.8).jaccard == 1.0


@given(
    a=st.lists(st.integers(0, TOP), max_size=300, unique=True),
    b=st.lists(st.integers(0, TOP), max_size=300, unique=True),
    shared=st.integers(0, 300),
)
@example(a=[], b=[], shared=0)
@example(a=[1], b=[], shared=0)
@settings(derandomize=True, max_examples=200)
def test_the_size_bound_holds_the_exact_jaccard(a: list[int], b: list[int], shared: int) -> None:
    """|A n B| <= min(|A|, |B|): bound, read from the sizes in the sketches' headers, is
    never below the truth, so a pair it rules out is never a duplicate. Sets of any size
    here, from empty: the sketches are made in the shape of 8 bins, quick for any set."""
    x = np.unique(np.array(a + b[:shared], np.uint64))
    y = np.unique(np.array(b, np.uint64))
    one, two = sketches([x, y], SketchShape(8, 8))
    got = estimate(one, two, 0.8)
    assert got.bound >= jaccard(x, y)
    assert got.bound == (
        min(len(x), len(y)) / max(len(x), len(y)) if len(x) and len(y) else float(len(x) == len(y))
    )


@given(pair=set_pairs(), shape=st.sampled_from(SHAPES))
@settings(derandomize=True, max_examples=60)
def test_a_sketch_is_the_same_bytes_every_time_and_in_any_batch(
    pair: tuple[np.ndarray, np.ndarray], shape: SketchShape
) -> None:
    """Memory and Redis keep the bytes: the same set must give the same bytes alone, again,
    and among other sets of a batch; of the shape's length, its header naming the shape
    and the set's size."""
    a, b = pair
    alone = sketches([a], shape)[0]
    assert sketches([a], shape)[0] == alone
    assert sketches([b, a, b], shape)[1] == alone
    assert len(alone) == shape.nbytes == HEADER + shape.bins * shape.bits // 8
    assert shape_of(alone) == shape
    assert size_of(alone) == len(a)
    assert len(bins_of(alone)) == shape.bins
    assert int(bins_of(alone).max()) < 1 << shape.bits


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_an_empty_sets_sketch(shape: SketchShape) -> None:
    """An empty text (no words) has a sketch: size 0, bins all 0. Two are equal (as the exact
    Jaccard of two empty sets is 1), and one is nothing like a text with words."""
    empty = np.zeros(0, np.uint64)
    words = np.arange(100, dtype=np.uint64)
    none, some = sketches([empty, words], shape)
    assert none == b"S" + bytes((shape.bits, shape.log_bins)) + bytes(4 + shape.nbytes - HEADER)
    assert sketches([empty], shape) == [none]
    assert size_of(none) == 0 and not bins_of(none).any()
    both = estimate(none, none, 0.8)
    assert (both.jaccard, both.sigma, both.bound) == (1.0, 0.0, 1.0)
    assert jaccard(empty, empty) == 1.0
    one = estimate(none, some, 0.8)
    assert (one.jaccard, one.sigma, one.bound) == (0.0, 0.0, 0.0)
    assert jaccard(empty, words) == 0.0
    assert sketches([], shape) == []


# ------------------------------------------------------------------- native vs reference


def test_the_native_kernels_were_built() -> None:
    """The suite runs where pip built them (ops/test.sh): both paths are under test."""
    assert NATIVE is not None, "detector._native is missing: pip install -e . with Rust"


def sets_for_native() -> list[np.ndarray]:
    """Sets of every size that takes another path: empty, one and two shingles (almost every
    bin copied from one or two), fewer shingles than bins, about as many, many more; and the
    extreme values 0 and 2^48 - 1."""
    rng = np.random.default_rng(20240607)
    sizes = [0, 1, 2, 3, 7, 8, 9, 64, 65, 100, 255, 256, 1000, 1024, 3000, 20_000]
    out = [random_set(rng, n) for n in sizes]
    out += [
        np.array([0], np.uint64),
        np.array([0, TOP], np.uint64),
        np.arange(5000, dtype=np.uint64),
    ]
    out += [np.zeros(0, np.uint64), random_set(rng, 1)]  # an empty set between others
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_native_sketches_are_the_reference_s(shape: SketchShape) -> None:
    """An index written by one build is read by another: the bytes must not depend on
    which kernels made them."""
    native = kernels.make("native", Featurizer(), 5)  # ConfigError if it was not built
    sets = sets_for_native()
    want = sketches(sets, shape)
    got = native.sketches(sets, shape)
    assert len(got) == len(sets)
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"set {n} of {len(sets[n])} shingles"
    assert native.sketches([], shape) == []
    assert native.sketches(sets[-3:], shape) == want[-3:], "a set's sketch is its own, in any batch"


# ------------------------------------------------------------- against the error model


def test_large_sets_err_as_li_and_koenig_say() -> None:
    """At |A| ~ 3,000-5,000 (few empty bins) the estimator is unbiased and its spread is the
    binomial one over the bins (sigma without sizes). One permutation samples the union
    without replacement, which makes it slightly smaller: measured 0.92-0.99 of it."""
    shape = SketchShape()
    sets, exact = pairs_at(np.random.default_rng(8), 0.8, (3300, 5600), 400)
    err = estimates(sets, shape) - exact
    assert abs(exact.mean() - 0.8) < 0.01
    assert abs(err.mean()) <= 0.004
    model = sigma(0.8, shape)
    assert 0.8 * model <= err.std() <= 1.2 * model, (err.std(), model)


def test_small_unions_err_at_most_as_the_model_says() -> None:
    """Where the union has fewer shingles than bins (|A| ~ 80-400), most bins are copies and
    the spread grows: the model with the small-set term must not understate it (it decides
    which verdicts are sure). Each error is taken in units of its own pair's sigma; 1,600
    pairs, so that the sd is known to 2% (measured 0.92-0.95; at a union of 100, 0.83)."""
    shape = SketchShape()
    sets, exact = pairs_at(np.random.default_rng(9), 0.8, (90, 400), 1600)
    err = estimates(sets, shape) - exact
    model = np.array([sigma(0.8, shape, len(a) + len(b)) for a, b in pairs(sets)])
    assert abs(err.mean()) <= 0.004
    assert (err / model).std() <= 1.0, (err / model).std()


def test_mid_unions_err_at_most_as_the_model_says() -> None:
    """Unions of 500-1,500 shingles at 1,024 bins (a third to two thirds of the bins empty):
    the spread the model must not understate either. 6,000 pairs (sd known to 1%), their
    sketches made natively (the same bytes, above) to keep it quick."""
    shape = SketchShape()
    native = kernels.make("native", Featurizer(), 5)
    sets, exact = pairs_at(np.random.default_rng(10), 0.8, (500, 1500), 6000)
    made = native.sketches(sets, shape)
    est = np.array([estimate(a, b, 0.8).jaccard for a, b in pairs(made)])
    model = np.array([sigma(0.8, shape, len(a) + len(b)) for a, b in pairs(sets)])
    assert ((est - exact) / model).std() <= 1.0, ((est - exact) / model).std()


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("bins", "bits"),
    [(1000, 1), (0, 1), (4, 1), (1 << 17, 1), (1024, 0), (1024, 3), (1024, 16), (-8, 1)],
)
def test_a_shape_is_refused_unless_power_of_two_bins_and_bits_1_2_4_8(bins: int, bits: int) -> None:
    with pytest.raises(ConfigError):
        SketchShape(bins, bits)


def test_sketches_of_different_shapes_are_not_compared() -> None:
    """Their bins are of different samples: a count of equal bins would mean nothing."""
    a = np.arange(200, dtype=np.uint64)
    one = sketches([a], SketchShape(1024, 1))[0]
    for other in (SketchShape(512, 2), SketchShape(512, 1), SketchShape(256, 4)):
        with pytest.raises(ValueError, match="different shapes"):
            estimate(one, sketches([a], other)[0], 0.8)


def test_shape_of_refuses_what_is_not_a_whole_sketch() -> None:
    """A truncated or padded value read back from an index is an error, not a wrong estimate."""
    sketch = sketches([np.arange(200, dtype=np.uint64)], SketchShape())[0]
    for bad in (sketch[:-1], sketch + b"\0", sketch[:HEADER], b"", b"S", b"X" + sketch[1:]):
        with pytest.raises(ValueError):
            shape_of(bad)
    with pytest.raises(ValueError):
        estimate(sketch, sketch[:-1], 0.8)
    # A header naming no shape: refused too, though as the shape's ConfigError
    for header in (b"S\x03\x0a", b"S\x01\x00", b"S\x01\x11"):
        with pytest.raises((ValueError, ConfigError)):
            shape_of(header + sketch[3:])
