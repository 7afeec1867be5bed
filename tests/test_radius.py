"""detector.radius: a short text's lookup radius, held to the distance spread of simulated
one-word changes (the statistical test), and what it finds that k = 6 does not."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from detector.blocks import BlockScheme
from detector.engine import Engine
from detector.features import BuiltinWeights
from detector.index.memory import MemoryIndex
from detector.radius import (
    SHORT_WORDS,
    effective_features,
    feature_weights,
    flip_chance,
    one_change_distance,
    radius,
)
from detector.records import Document
from detector.settings import EngineSettings
from detector.vectors import binomial_cdf

PAIRS = 1500


def one_word_changed(n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Texts of n distinct words of equal weight (six letters each), and each with one
    word replaced."""

    def word() -> str:
        return "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6))

    a, b = [], []
    for _ in range(PAIRS):
        words = [word() for _ in range(n)]
        changed = list(words)
        changed[rng.randrange(n)] = word()
        a.append(" ".join(words))
        b.append(" ".join(changed))
    return a, b


@pytest.mark.parametrize("n", [10, 20, 40, 80])
def test_one_changed_word_moves_a_text_by_the_binomial_of_its_feature_count(n: int) -> None:
    """The distances of simulated pairs: their mean is 64 p with p = 1 / sqrt(2 pi n) (within
    4 standard errors and the 3% the normal curve misses the signs' sum by at n = 10), and
    the radius holds at least 99% of them less 4 standard errors."""
    engine = Engine()
    a, b = one_word_changed(n, random.Random(n))
    pa = engine.fingerprint([Document(str(i), t) for i, t in enumerate(a)])
    pb = engine.fingerprint([Document(str(i), t) for i, t in enumerate(b)])
    d = np.array([(x.fingerprint ^ y.fingerprint).bit_count() for x, y in zip(pa, pb, strict=True)])
    p = flip_chance(n)
    error = 4 * math.sqrt(64 * p * (1 - p) / PAIRS) + 0.03 * 64 * p
    assert abs(d.mean() - 64 * p) < error, (d.mean(), 64 * p)
    k = one_change_distance(n, 0.99)
    share = float(np.mean(d <= k))
    expected = binomial_cdf(k, 64, p)
    assert share >= min(expected, 0.99) - 4 * math.sqrt(0.99 * 0.01 / PAIRS), (k, share)
    # and the spread follows the feature count: the mean times sqrt(n) is the same
    assert abs(d.mean() * math.sqrt(n) - 64 / math.sqrt(2 * math.pi)) < 0.12 * 64 / 2.5


def test_the_effective_count_of_features_weighs_them() -> None:
    weights = BuiltinWeights()
    assert effective_features(feature_weights(["abcdef"] * 1 + ["ghijkl"], weights)) == 2
    assert effective_features(feature_weights(["abcdef", "abcdef", "ghijkl"], weights)) == 1.8
    one_long = ["a"] * 3 + ["averyveryverylongword"]  # one word weighs most
    assert effective_features(feature_weights(one_long, weights)) < 3
    assert effective_features({}) == 0


def test_a_long_text_keeps_the_schemes_k_and_a_short_one_widens_up_to_the_widest() -> None:
    weights = BuiltinWeights()
    long_text = " ".join(f"w{i}" for i in range(SHORT_WORDS))
    assert radius(long_text, weights, 6) == 6
    short = " ".join(f"word{i}" for i in range(20))
    assert radius(short, weights, 6) == 10  # the widest
    assert radius(short, weights, 6, widest=30) == one_change_distance(20, 0.99) == 12
    assert radius(short, weights, 6, widest=6) == 6 and radius(short, weights, 8, widest=7) == 8
    assert [one_change_distance(n, 0.99) for n in (10, 40, 200)] == [15, 9, 5]


def test_the_widened_scheme_reads_each_table_one_bit_further() -> None:
    scheme = BlockScheme.parse("k6-b8")
    wide = scheme.widened(10)
    assert (wide.k, wide.radius, wide.tables) == (10, 1, scheme.tables)
    assert sum(len(f) for f in wide.flips) == 28 * 17 and scheme.widened(10) is wide


def test_a_short_copy_past_k_is_found_with_the_radius_and_not_without() -> None:
    """A 30-word text and its copy with the last word changed (Jaccard 25/27): their
    fingerprints 7 to 10 bits apart, beyond k = 6."""
    rng = random.Random(27)
    engine = Engine()
    for _ in range(200):
        words = [f"{rng.choice('bcdfg')}{rng.randrange(10**6)}" for _ in range(30)]
        copy = [*words[:-1], f"z{rng.randrange(10**6)}"]
        a, b = engine.fingerprint([Document("a", " ".join(words)), Document("b", " ".join(copy))])
        if 7 <= (a.fingerprint ^ b.fingerprint).bit_count() <= 10:
            break
    else:
        pytest.fail("no pair 7 to 10 bits apart in 200 tries")
    decided = {}
    for short_k in (6, 10):
        settings = EngineSettings(short_k=short_k)
        detector = settings.detector(MemoryIndex(settings.block_scheme()))
        docs = [Document("a", " ".join(words)), Document("b", " ".join(copy))]
        decided[short_k] = detector.process(docs[:1]) + detector.process(docs[1:])
    assert decided[6][1].decision == "unique"
    assert decided[10][1].duplicate_of == "a" and decided[10][1].similarity == pytest.approx(
        25 / 27, abs=1e-4
    )
