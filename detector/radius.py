"""A short text's Hamming radius, from the weight of its words.

A fingerprint bit is the sign of a sum: each feature adds its weight w or takes it away,
as its hash's bit says. Replace one feature of a text and a bit flips only when the new
feature's sign differs from the old one's (half the time) and the rest of the sum lies
within w of zero. With n features of equal weight the rest is a sum of n - 1 signs, near
zero with chance about 2 / sqrt(2 pi n): a bit flips with chance p = 1 / sqrt(2 pi n), and
the distance of the pair is Binomial(64, p) (tests/test_radius.py holds simulated pairs to
it). Weights that differ count as n = (sum w)^2 / sum w^2 features of equal weight.

A long text has hundreds of features and its near copies sit within a few bits. A text of
30 words has 15 to 25: one changed word puts its copy 7 to 10 bits away, past the default
k = 6, although the literal pass would call the pair a duplicate at once. So a text of
fewer than SHORT_WORDS words is looked up to the distance that holds `quantile` (99%) of its
one-word-changed copies, at most `widest`, never less than the scheme's k. Its lookup
reads the same tables, each probed at one bit more besides its own key (17 buckets a table
of 16-bit keys instead of 1: BlockScheme.widened), which finds a pair 10 bits apart 96
times in 100 under k6-b8; the literal pass keeps precision. A long text's lookup is the
scheme's, unchanged.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache

from .features import Weights
from .simhash import BITS
from .vectors import binomial_cdf

SHORT_WORDS = 150
QUANTILE = 0.99
WIDEST = 10
_WORD = re.compile(r"\w+")


def effective_features(weights: dict[str, float]) -> float:
    """(sum w)^2 / sum w^2 of a text's distinct features and their summed weights: the
    number of features of equal weight that one change would move as much."""
    total = sum(weights.values())
    square = sum(w * w for w in weights.values())
    return total * total / square if square else 0.0


def feature_weights(words: list[str], weights: Weights) -> dict[str, float]:
    """The summed weight of each distinct word, as the featurizer weighs it."""
    return {token: n * weights.weight(token) for token, n in Counter(words).items()}


def flip_chance(features: float) -> float:
    """The chance that a bit flips when one of `features` equal features is replaced."""
    return min(0.5, 1.0 / math.sqrt(2.0 * math.pi * features))


@cache
def one_change_distance(features: int, quantile: float) -> int:
    """The distance within which `quantile` of a text's one-word-changed copies fall."""
    if features < 1:
        return BITS
    p = flip_chance(features)
    return next(d for d in range(BITS + 1) if binomial_cdf(d, BITS, p) >= quantile)


def radius(
    text: str, weights: Weights, k: int, widest: int = WIDEST, quantile: float = QUANTILE
) -> int:
    """The lookup radius of a normalized text: the scheme's k for a long one, else the
    distance of its one-word-changed copies, between k and `widest`."""
    if widest <= k:
        return k
    words = _WORD.findall(text)
    if len(words) >= SHORT_WORDS:
        return k
    features = effective_features(feature_weights(words, weights))
    return max(k, min(widest, one_change_distance(round(features), quantile)))
