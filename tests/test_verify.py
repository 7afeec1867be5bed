"""detector.verify: the literal pass against brute-force Python sets of word shingles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detector.engine import Engine
from detector.errors import ConfigError
from detector.normalize import normalize, tokens
from detector.records import Document
from detector.sketch import SketchShape, sketches
from detector.tokenize import tokenize
from detector.verify import LiteralCheck, Z, jaccard, shingle_set, shingle_sets

# A small vocabulary, so that random texts share many shingles; mixed case, markup-free
# punctuation and a CJK word, because the shingles are of normalized tokens.
VOCAB = [
    "the",
    "The",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "dog",
    "ran",
    "x",
    "Straße",
    "strasse",
    "ﬁle",
    "file",
    "日本",
    "語",
    "42",
]
SEPARATORS = [" ", "  ", "\n", ", ", " - ", "\t"]

words = st.lists(st.sampled_from(VOCAB), max_size=40)


@st.composite
def texts(draw: st.DrawFn) -> str:
    ws = draw(words)
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(ws), max_size=len(ws)))
    return "".join(w + s for w, s in zip(ws, seps, strict=True))


@st.composite
def related_texts(draw: st.DrawFn) -> tuple[str, str]:
    """A text and an edited copy (words replaced, inserted, deleted), so Jaccard varies
    over the whole range instead of sitting near 0."""
    a = draw(st.lists(st.sampled_from(VOCAB), max_size=40))
    b = list(a)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        at = draw(st.integers(0, max(len(b), 1) - 1)) if b else 0
        if op == "insert" or not b:
            b.insert(at, draw(st.sampled_from(VOCAB)))
        elif op == "replace":
            b[at] = draw(st.sampled_from(VOCAB))
        else:
            del b[at]
    return " ".join(a), " ".join(b)


def brute_shingles(text: str, n: int) -> set[tuple[str, ...]]:
    """The truth's definition: word n-shingles of the normalized text; a text shorter than
    n words is one shingle; a text without words has none."""
    ws = tokens(normalize(text))
    if not ws:
        return set()
    if len(ws) < n:
        return {tuple(ws)}
    return {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)}


def brute_jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def keys_of(text: str) -> np.ndarray:
    return tokenize([normalize(text)]).key


@given(text=texts(), n=st.integers(1, 7))
def test_shingle_set_has_one_hash_per_distinct_shingle(text: str, n: int) -> None:
    got = shingle_set(keys_of(text), n)
    assert len(got) == len(brute_shingles(text, n))
    assert np.all(got[1:] > got[:-1]), "shingle sets are sorted and distinct"


@given(pair=related_texts(), n=st.integers(1, 6))
def test_jaccard_equals_brute_force(pair: tuple[str, str], n: int) -> None:
    a, b = pair
    got = jaccard(shingle_set(keys_of(a), n), shingle_set(keys_of(b), n))
    assert got == pytest.approx(
        brute_jaccard(brute_shingles(a, n), brute_shingles(b, n)), abs=1e-12
    )


@given(a=texts(), b=texts())
def test_jaccard_of_unrelated_texts_equals_brute_force(a: str, b: str) -> None:
    got = jaccard(shingle_set(keys_of(a), 5), shingle_set(keys_of(b), 5))
    assert got == pytest.approx(
        brute_jaccard(brute_shingles(a, 5), brute_shingles(b, 5)), abs=1e-12
    )


def test_jaccard_hand_computed() -> None:
    a = "one two three four five six seven"  # 3 shingles of 5
    b = "one two three four five six eight"  # shares 2 of them
    assert jaccard(shingle_set(keys_of(a), 5), shingle_set(keys_of(b), 5)) == pytest.approx(2 / 4)
    assert jaccard(shingle_set(keys_of(""), 5), shingle_set(keys_of("!!"), 5)) == 1.0
    assert jaccard(shingle_set(keys_of("a"), 5), shingle_set(keys_of(""), 5)) == 0.0
    # Normalization: case, NFKC and spacing do not change a shingle.
    assert (
        jaccard(
            shingle_set(keys_of("The ﬁle  is HERE ok"), 5),
            shingle_set(keys_of("the file is here ok"), 5),
        )
        == 1.0
    )


@given(batch=st.lists(texts(), max_size=12), n=st.integers(1, 6))
def test_shingle_sets_of_a_batch_equal_one_text_at_a_time(batch: list[str], n: int) -> None:
    tb = tokenize([normalize(t) for t in batch])
    bounds = tb.bounds()
    together = shingle_sets(tb.key, bounds, n)
    assert len(together) == len(batch)
    for d, text in enumerate(batch):
        assert np.array_equal(together[d], shingle_set(keys_of(text), n)), text


def test_shingle_sets_of_a_batch_of_more_than_65536_texts() -> None:
    """shingle_sets tags each shingle with its text's number in 16 bits and splits larger
    batches in two; `neardup detect --batch-size 70000` takes that path."""
    rng = np.random.default_rng(7)
    docs = 70_000
    sizes = rng.integers(0, 9, docs)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    keys = rng.integers(0, 2**63, int(bounds[-1]), dtype=np.uint64)
    out = shingle_sets(keys, bounds, 5)
    assert len(out) == docs
    for d in (0, 1, 2, 65_535, 65_536, 65_537, docs - 1, *rng.integers(0, docs, 50).tolist()):
        assert np.array_equal(out[d], shingle_set(keys[bounds[d] : bounds[d + 1]], 5)), d


def test_engine_prints_carry_the_literal_shingles_of_their_text() -> None:
    docs = [
        Document("a", "Hello big wide World of ours today"),
        Document("b", ""),
        Document("c", "短い"),
    ]
    prints = Engine(literal_shingle=5).fingerprint(docs)
    for doc, p in zip(docs, prints, strict=True):
        assert np.array_equal(p.shingles, shingle_set(keys_of(doc.text), 5))


def test_literal_check_cache_is_bounded_and_lru() -> None:
    check = LiteralCheck(threshold=0.8, n=5, cache_size=2)
    check.load({"a": "one two three four five", "b": "six seven eight nine ten"})
    assert check.get("a") is not None  # a is now the most recent
    check.remember("c", shingle_set(keys_of("x y z"), 5))
    assert check.get("b") is None, "the least recently used entry is evicted"
    assert check.get("a") is not None and check.get("c") is not None
    assert check.cached_ids({"a", "b", "c"}) == {"a", "c"}
    assert np.array_equal(check.get("a"), shingle_set(keys_of("one two three four five"), 5))


def test_literal_check_cache_is_bounded_by_bytes_too() -> None:
    """A few huge shingle sets cannot make the cache weigh more than its byte budget: the
    least recently used go first, and the count of bytes stays exact."""
    big = np.arange(1000, dtype=np.uint64)  # 8,000 bytes
    check = LiteralCheck(cache_size=100, cache_bytes=20_000)
    for name in "abc":
        check.remember(name, big.copy())
    assert check.cached_ids({"a", "b", "c"}) == {"b", "c"}
    assert check.cached_bytes == 16_000
    check.remember("b", big[:10].copy())  # replacing an entry counts its new size
    assert check.cached_bytes == 8_080
    check.remember("d", np.arange(5000, dtype=np.uint64))  # 40,000: more than the budget
    assert check.cached_ids({"a", "b", "c", "d"}) == set()
    assert check.cached_bytes == 0


def test_a_sketch_is_sure_outside_the_band_and_the_band_rule_decides_inside() -> None:
    """LiteralCheck.judge: a duplicate for sure Z sigma above the threshold, surely not Z
    below or when the sizes' bound is below it; in between, the declared rule."""
    base = np.arange(1000, dtype=np.uint64)

    def pair(shared: int) -> tuple[bytes, bytes]:
        a = base
        b = np.concatenate((base[:shared], np.arange(5000, 6000 - shared, dtype=np.uint64)))
        made = sketches([a, np.sort(b)])
        return made[0], made[1]

    rules = {r: LiteralCheck(sketch=SketchShape(), band_rule=r) for r in ("estimate", "unique")}
    near = LiteralCheck(sketch=SketchShape(), band_rule="distance", band_distance=2)
    a, b = pair(1000)  # the same set
    judged = rules["unique"].judge(a, b, 5)
    assert judged.duplicate and not judged.banded and judged.estimate.jaccard == 1.0
    a, b = pair(200)  # J = 0.11
    assert not rules["estimate"].judge(a, b, 0).duplicate
    a, b = pair(890)  # J = 0.80: in the band
    judged = rules["estimate"].judge(a, b, 0)
    assert judged.banded
    assert abs(judged.estimate.jaccard - 0.8) < Z * judged.estimate.sigma
    assert judged.duplicate == (judged.estimate.jaccard >= 0.8)
    assert not rules["unique"].judge(a, b, 0).duplicate
    assert near.judge(a, b, 2).duplicate and not near.judge(a, b, 3).duplicate
    small = sketches([base[:700]])[0]  # the sizes alone: J <= 700 / 1000
    assert not rules["estimate"].judge(a, small, 0).duplicate
    with pytest.raises(ConfigError, match="band rule"):
        LiteralCheck(band_rule="maybe")
