"""The batch kernels of a text's print: tokens, features, SimHash, digest, shingle sets.

Two implementations of one contract. The numpy one (tokenize, features, simhash,
verify) is the reference; the native one (native/, Rust with PyO3, built into
detector._native when a Rust toolchain is there) computes the same bits in one pass per
text, without the GIL. tests/test_native.py holds them equal, and tests/data/frozen-prints
holds both to fingerprints no change may move.
"""

from __future__ import annotations

from itertools import pairwise
from types import ModuleType
from typing import Any

import numpy as np

from .errors import ConfigError
from .features import Featurizer, IdfTable
from .hashing import fmix64
from .normalize import (
    casefolds,
    combining_classes,
    compositions,
    decompositions,
    fold,
    nfkc_safe,
    non_starters,
)
from .simhash import simhash
from .sketch import SketchShape, sketches
from .tokenize import char_classes
from .verify import ReferenceShingler, shingle_sets

CHOICES = ("auto", "native", "numpy")

Prints = tuple[list[int], list[str], list[np.ndarray]]  # fingerprints, digests, shingle sets


def native_module() -> ModuleType | None:
    try:
        from . import _native  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return None
    module: ModuleType = _native
    return module


class NumpyKernels(ReferenceShingler):
    """The reference: numpy over the whole batch at once."""

    name = "numpy"

    def __init__(self, featurizer: Featurizer, literal_n: int) -> None:
        super().__init__(literal_n)
        self.featurizer = featurizer

    @staticmethod
    def fold(texts: list[str]) -> list[str]:
        return [fold(t) for t in texts]

    def prints(self, texts: list[str]) -> Prints:
        features = self.featurizer.batch(texts)
        tokens = features.tokens
        bounds = tokens.bounds()
        return (
            simhash(features).tolist(),
            digests(tokens.key, tokens.doc, bounds),
            shingle_sets(tokens.key, bounds, self.n),
        )

    @staticmethod
    def sketches(sets: list[np.ndarray], shape: SketchShape) -> list[bytes]:
        return sketches(sets, shape)


class NativeKernels:
    """detector._native, bit for bit the reference's results."""

    name = "native"

    def __init__(self, module: ModuleType, featurizer: Featurizer, literal_n: int) -> None:
        config, weights = featurizer.config, featurizer.weights
        table: dict[str, Any]
        if isinstance(weights, IdfTable):
            # float32, as the reference's weight arrays hold them
            idf = {
                t.encode("utf-8", "surrogatepass"): float(np.float32(weights.weight(t)))
                for t in weights.doc_freq
            }
            table = {"table": idf, "unseen": float(np.float32(weights.unseen))}
        else:
            lengths = [weights.weight("x" * n) for n in range(weights.LONGEST + 1)]
            table = {"by_length": [float(np.float32(w)) for w in lengths]}
        self._kernels = module.Kernels(
            char_classes().tobytes(),
            nfkc_safe().tobytes(),
            casefolds().astype("<i4").tobytes(),
            _nfkc_tables(),
            config.cjk_n,
            config.n if config.kind == "shingles" else 1,
            literal_n,
            **table,
        )
        self.jaccard = module.jaccard
        self.jaccards = module.jaccards
        self._sketches = module.sketches

    def fold(self, texts: list[str]) -> list[str]:
        """normalize.fold of each text; fold() takes the few the native one leaves (a lone
        surrogate, or a run of marks fold() would break with a grapheme joiner)."""
        folded = self._kernels.fold(texts)
        return [f if f is not None else fold(t) for f, t in zip(folded, texts, strict=True)]

    def prints(self, texts: list[str]) -> Prints:
        fps, dgs, sets, bounds = self._kernels.prints(_utf8(texts))
        halves = np.frombuffer(dgs, np.uint64).reshape(-1, 2).T
        return (
            np.frombuffer(fps, np.uint64).tolist(),
            _hex(halves[0], halves[1]),
            _split(sets, bounds),
        )

    def shingle_sets(self, texts: list[str]) -> list[np.ndarray]:
        return _split(*self._kernels.shingle_sets(_utf8(texts)))

    def sketches(self, sets: list[np.ndarray], shape: SketchShape) -> list[bytes]:
        if not sets:
            return []
        flat = np.concatenate(sets).astype(np.uint64, copy=False)
        bounds = np.concatenate(([0], np.cumsum([len(s) for s in sets]))).astype(np.int64)
        made: list[bytes] = self._sketches(flat, bounds, shape.log_bins, shape.bits)
        return made


Kernels = NumpyKernels | NativeKernels


def make_choice(choice: str) -> str:
    """`native` or `numpy` for a kernels choice: `auto` is native when it was built;
    NEARDUP_KERNELS=native makes its absence an error (CI), `numpy` takes the reference
    whatever was built."""
    if choice not in CHOICES:
        raise ConfigError(f"kernels must be one of {', '.join(CHOICES)}, not {choice!r}")
    module = native_module() if choice != "numpy" else None
    if module is None and choice == "native":
        raise ConfigError(
            "kernels native: detector._native was not built (install with a Rust "
            "toolchain: pip install . builds it; see the README)"
        )
    return "native" if module is not None else "numpy"


def make(choice: str, featurizer: Featurizer, literal_n: int) -> Kernels:
    """The kernels of a choice (make_choice)."""
    module = native_module() if make_choice(choice) == "native" else None
    return (
        NativeKernels(module, featurizer, literal_n)
        if module
        else NumpyKernels(featurizer, literal_n)
    )


def _nfkc_tables() -> tuple[bytes, ...]:
    lengths, values = decompositions()
    pairs = compositions()
    composites = np.flatnonzero(pairs[0])  # 941 of 1.1M in Unicode 14: sent as triples
    triples = np.stack((pairs[0, composites], pairs[1, composites], composites), axis=1)
    return (
        combining_classes().tobytes(),
        non_starters().tobytes(),
        lengths.tobytes(),
        values.astype("<i4").tobytes(),
        triples.astype("<i4").tobytes(),
    )


def _utf8(texts: list[str]) -> list[bytes]:
    return [t.encode("utf-8", "surrogatepass") for t in texts]


def _split(values: bytes, bounds: bytes) -> list[np.ndarray]:
    flat = np.frombuffer(values, np.uint64)
    cut = np.frombuffer(bounds, np.int64).tolist()
    return [flat[a:b] for a, b in pairwise(cut)]


def digests(keys: np.ndarray, doc: np.ndarray, bounds: np.ndarray) -> list[str]:
    """128-bit digest of each text's token sequence: equal digests mean exact copies."""
    docs = len(bounds) - 1
    position = (np.arange(len(keys)) - bounds[doc]).astype(np.uint64)
    halves = []
    for salt in (0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93):
        with np.errstate(over="ignore"):
            mixed = fmix64(keys ^ (position * np.uint64(salt)))
        sums = np.zeros(docs, np.uint64)
        nonempty = bounds[1:] > bounds[:-1]
        if len(keys):
            sums[nonempty] = np.add.reduceat(mixed, bounds[:-1][nonempty])
        halves.append(sums)
    return _hex(*halves)


def _hex(a: np.ndarray, b: np.ndarray) -> list[str]:
    return [f"{x:016x}{y:016x}" for x, y in zip(a.tolist(), b.tolist(), strict=True)]
