"""The native kernels (native/, detector._native) against the numpy reference: the same
tokens, token keys, feature hashes and weights, fingerprints, digests, shingle sets and
Jaccard similarities, bit for bit, on random Unicode; and both against a frozen file of
prints that no change may move (tests/data/frozen-prints.json.gz)."""

from __future__ import annotations

import gzip
import json
import random
import sys
import unicodedata

import numpy as np
import pytest
import xxhash
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import kernels
from detector.features import BuiltinWeights, FeatureConfig, Featurizer, IdfTable
from detector.normalize import normalize
from detector.tokenize import _ASCII_CLASSES, char_classes, tokenize
from detector.verify import jaccard

from .helpers import DATA, STREAM_2K, decision_verdict, make_detector, read_lines, sample_texts
from .strategies import FRAGMENTS

NATIVE = kernels.native_module()
FROZEN = DATA / "frozen-prints.json.gz"
CONFIGS = [
    FeatureConfig(),
    FeatureConfig(cjk_n=1),
    FeatureConfig(cjk_n=3),
    FeatureConfig("shingles", n=2),
    FeatureConfig("shingles", n=4, cjk_n=4),
]


def test_the_native_kernels_were_built() -> None:
    """The suite runs where pip built them (ops/test.sh): both paths are under test."""
    assert NATIVE is not None, "detector._native is missing: pip install -e . with Rust"


def pair(config: FeatureConfig = CONFIGS[0], idf: IdfTable | None = None, literal: int = 5):
    featurizer = Featurizer(config, idf)
    assert NATIVE is not None
    return (
        kernels.NumpyKernels(featurizer, literal),
        kernels.NativeKernels(NATIVE, featurizer, literal),
    )


# Code points a text is drawn from: ASCII, Latin with accents, Cyrillic, Greek, CJK and
# kana, Hangul, Thai, combining marks, digits of other scripts, symbols and emoji, and
# characters newer than Python 3.11's Unicode 14 (unassigned to it: not word characters).
ALPHABET = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(min_codepoint=0xC0, max_codepoint=0x24F),
    st.characters(min_codepoint=0x370, max_codepoint=0x4FF),
    st.characters(min_codepoint=0x300, max_codepoint=0x36F),
    st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),
    st.characters(min_codepoint=0x0E00, max_codepoint=0x0E7F),
    st.characters(min_codepoint=0x0660, max_codepoint=0x0669),
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1F6FF),
    st.characters(min_codepoint=0x20000, max_codepoint=0x20040),
    st.characters(min_codepoint=0x1E030, max_codepoint=0x1E08F),  # new in Unicode 15
    st.characters(min_codepoint=0x31350, max_codepoint=0x323AF),  # CJK ext. H, 15
    st.sampled_from(" \t\n_-.,'"),
)
TEXT = st.one_of(
    st.text(ALPHABET, max_size=80),
    st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join),
    st.builds(lambda w, n: w * n, st.text(ALPHABET, min_size=1, max_size=3), st.integers(1, 3000)),
)
TEXTS = st.lists(TEXT, max_size=8)
HUGE = ["a" * 70_000 + " " + "β" * 10_000, "中" * 5_000, "x" * 9 + "\u0301" * 500]


# What NFKC and case folding do most to: compatibility forms, ligatures, Hangul jamo,
# composing starters (the second of a canonical pair), expanding folds.
FOLDING = st.one_of(
    ALPHABET,
    st.characters(min_codepoint=0x1100, max_codepoint=0x11FF),
    st.characters(min_codepoint=0xFB00, max_codepoint=0xFB4F),
    st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),
    st.characters(min_codepoint=0x2150, max_codepoint=0x218F),
    st.characters(min_codepoint=0x3300, max_codepoint=0x33FF),
    st.sampled_from("ßẞİıΣσςﬁŉǰΐ\u0cd5\u0b3e\u0bbe\u102e\u1161\u11a8\u0345\u1e9b"),
)


@given(st.lists(st.text(FOLDING, max_size=60) | st.sampled_from(FRAGMENTS), max_size=8))
@example(["Straße ǅ ﬃ Ⅻ ㍱ 가 \u1100\u1161\u11a8 e\u0301 \u0b47\u0b3e", "\udcff a", "A" * 5000])
@settings(max_examples=300, deadline=None)
def test_fold_is_the_reference_s(texts: list[str]) -> None:
    from detector.normalize import fold

    _, native = pair()
    assert native.fold(texts) == [fold(t) for t in texts]


def test_the_fold_tables_say_what_the_interpreter_says() -> None:
    """Every code point the native fold takes without unicodedata is NFKC alone, and
    folds as str.casefold folds it."""
    from detector.normalize import casefolds, nfkc_safe

    safe, folds = nfkc_safe(), casefolds()
    for c in np.flatnonzero(safe[:0x32400]).tolist():  # beyond: no character is assigned
        ch = chr(c)
        assert unicodedata.is_normalized("NFKC", ch), hex(c)
        rest = "".join(chr(p) for p in (int(folds[1, c]), int(folds[2, c])) if p)
        assert chr(c + int(folds[0, c])) + rest == ch.casefold(), hex(c)


def test_ascii_classes_are_the_tables() -> None:
    """The native tokenizer classifies ASCII through the table: it must say what the
    reference's ASCII shortcut says."""
    assert np.array_equal(char_classes()[:128], _ASCII_CLASSES[:128])


@given(TEXTS)
@example(HUGE)
@example(["", " ", "\u0301", "\udcff x", "a\ud800b"])
@settings(max_examples=150, deadline=None)
def test_tokens_and_their_keys_are_the_reference_s(texts: list[str]) -> None:
    _, native = pair()
    ref = tokenize(texts)
    doc, start, end, nospace, key = native._kernels.tokens(kernels._utf8(texts))
    bases = np.cumsum([0] + [len(t.encode("utf-8", "surrogatepass")) + 1 for t in texts])
    got_doc = np.frombuffer(doc, np.int64)
    assert np.array_equal(got_doc, ref.doc)
    assert np.array_equal(np.frombuffer(start, np.int64) + bases[got_doc], ref.start)
    assert np.array_equal(np.frombuffer(end, np.int64) + bases[got_doc], ref.end)
    assert np.array_equal(np.frombuffer(nospace, np.uint8).astype(bool), ref.nospace)
    assert np.array_equal(np.frombuffer(key, np.uint64), ref.key)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.tag)
@given(texts=TEXTS)
@example(texts=HUGE)
@settings(max_examples=60, deadline=None)
def test_features_and_prints_are_the_reference_s(config: FeatureConfig, texts: list[str]) -> None:
    numpy_, native = pair(config)
    texts = [normalize(t) for t in texts]
    ref = numpy_.featurizer.batch(texts)
    doc, hashes, weights = native._kernels.features(kernels._utf8(texts))
    assert np.array_equal(np.frombuffer(doc, np.int64), ref.doc)
    assert np.array_equal(np.frombuffer(hashes, np.uint64), ref.hash)
    assert np.frombuffer(weights, np.float32).tobytes() == ref.weight.astype(np.float32).tobytes()
    assert_same_prints(numpy_.prints(texts), native.prints(texts))
    assert_same_sets(numpy_.shingle_sets(texts), native.shingle_sets(texts))


def test_an_idf_table_weighs_alike() -> None:
    texts = [normalize(t) for t in sample_texts()[:200]]
    idf = IdfTable.fit(texts[:100], min_df=1)
    numpy_, native = pair(FeatureConfig("shingles", n=2), idf)
    assert_same_prints(numpy_.prints(texts), native.prints(texts))


def test_the_weights_by_length_are_the_builtin_weights() -> None:
    _, native = pair()
    texts = ["a" * n for n in range(1, 40)] + ["é" * n for n in range(1, 20)]
    _, _, weights = native._kernels.features(kernels._utf8(texts))
    expected = [BuiltinWeights().weight(t) for t in texts]
    assert np.frombuffer(weights, np.float32).tolist() == np.float32(expected).tolist()


@given(
    st.lists(st.integers(0, 2**48 - 1), max_size=60, unique=True),
    st.lists(st.integers(0, 2**48 - 1), max_size=60, unique=True),
    st.integers(0, 30),
)
def test_jaccard_is_the_reference_s(a: list[int], b: list[int], shared: int) -> None:
    x = np.unique(np.array(a + b[:shared], np.uint64))
    y = np.unique(np.array(b, np.uint64))
    assert NATIVE is not None
    assert NATIVE.jaccard(x, y) == jaccard(x, y)


def test_the_kernels_release_the_gil_and_keep_their_results() -> None:
    """Two threads through one Kernels object at once get what one gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    _, native = pair()
    texts = [normalize(t) for t in sample_texts()]
    alone = native.prints(texts)
    with ThreadPoolExecutor(2) as pool:
        for got in pool.map(native.prints, [texts] * 4):
            assert_same_prints(alone, got)


def test_kernels_choice_is_checked() -> None:
    from detector.errors import ConfigError

    with pytest.raises(ConfigError, match="kernels must be one of"):
        kernels.make("fast", Featurizer(), 5)
    assert kernels.make("numpy", Featurizer(), 5).name == "numpy"
    assert kernels.make("auto", Featurizer(), 5).name == "native"


def test_the_option_offers_the_choices() -> None:
    from detector.options import ENGINE

    assert next(o for o in ENGINE if o.name == "kernels").choices == kernels.CHOICES


def test_both_kernels_decide_a_stream_alike() -> None:
    """2,000 records of the dev stream, one batch at a time: the same decisions."""
    from detector.pipeline import Limits, prepare

    raw = read_lines(STREAM_2K)
    said = []
    for which in ("numpy", "native"):
        detector = make_detector(kernels=which)
        assert detector.engine.kernels.name == which
        out = []
        for at in range(0, len(raw), 256):
            batch = prepare(detector.engine, [(r, {}) for r in raw[at : at + 256]], Limits(10**7))
            out += [decision_verdict(d) for d in detector.process(batch.docs, batch.prints)]
        said.append(out)
    assert said[0] == said[1]
    assert sum(v[1] == "duplicate" for v in said[0]) > 100


# ---------------------------------------------------------------- the frozen prints


def frozen_texts() -> list[str]:
    """The sample's first 60 records and texts of every script above: only characters
    of Unicode 14 or older, whose classes no later interpreter changes."""
    rng = random.Random(13)
    made = [" ".join(rng.choices(FRAGMENTS, k=rng.randint(1, 12))) for _ in range(40)]
    return sample_texts()[:60] + made + ["", "a", "中文", "日本語のテキスト " * 30]


def prints_of(kernel: kernels.Kernels, texts: list[str]) -> list[list[str]]:
    fps, digests, sets = kernel.prints([normalize(t) for t in texts])
    return [
        [f"{fp:016x}", dg, xxhash.xxh64(s.astype("<u8").tobytes()).hexdigest()]
        for fp, dg, s in zip(fps, digests, sets, strict=True)
    ]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.tag)
@pytest.mark.parametrize("which", ["numpy", "native"])
def test_the_frozen_prints_do_not_move(which: str, config: FeatureConfig) -> None:
    with gzip.open(FROZEN, "rt", encoding="utf-8") as f:
        frozen = json.load(f)
    kernel = kernels.make(which, Featurizer(config), 5)
    assert prints_of(kernel, frozen_texts()) == frozen["prints"][config.tag]


def freeze() -> None:
    """python -m tests.test_native: writes the frozen file (never to change a print)."""
    body = {
        "unicode": unicodedata.unidata_version,
        "prints": {
            c.tag: prints_of(kernels.make("numpy", Featurizer(c), 5), frozen_texts())
            for c in CONFIGS
        },
    }
    with gzip.open(FROZEN, "wt", encoding="utf-8") as f:
        json.dump(body, f, indent=0)


def assert_same_prints(a: kernels.Prints, b: kernels.Prints) -> None:
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert_same_sets(a[2], b[2])


def assert_same_sets(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


if __name__ == "__main__":
    sys.exit(freeze())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["t", "v384", "v8"]), st.integers(0, 27), st.integers(0, 2**64 - 1)
        ),
        max_size=50,
    )
)
def test_bucket_names_are_the_reference_s(buckets: list[tuple[str, int, int]]) -> None:
    from detector.index.redis import keys

    layout = keys.Layout("ix")
    spaces = [b[0] for b in buckets]
    tables = np.array([b[1] for b in buckets], np.int64)
    fps = np.array([b[2] for b in buckets], np.uint64)
    native, shards = layout.buckets(spaces, tables, fps)
    saved, keys._NATIVE = keys._NATIVE, None
    try:
        reference, same_shards = layout.buckets(spaces, tables, fps)
    finally:
        keys._NATIVE = saved
    assert [n.decode() for n in native] == reference
    assert np.array_equal(shards, same_shards)


# One Redis argument as redis-py's Encoder takes it.
RESP_ARGS = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["SET", "HMGET", "EVAL"]), st.lists(RESP_ARGS, max_size=12)),
        max_size=8,
    )
)
def test_resp_commands_are_redis_pys_packing(commands: list[tuple[str, list[object]]]) -> None:
    """The native RESP packer writes the bytes redis-py's pipeline would send."""
    import redis

    assert NATIVE is not None
    cmds = [(name, *args) for name, args in commands]
    expected = b"".join(bytes(c) for c in redis.Connection().pack_commands(cmds))
    assert NATIVE.resp_commands(cmds) == expected


@pytest.mark.parametrize("bad", [True, None, object(), np.uint64(1)])
def test_resp_commands_refuse_what_redis_py_refuses(bad: object) -> None:
    import redis

    assert NATIVE is not None
    with pytest.raises(redis.DataError):
        redis.Connection().pack_commands([("SET", "k", bad)])
    with pytest.raises(TypeError, match="Redis argument"):
        NATIVE.resp_commands([("SET", "k", bad)])


@pytest.mark.parametrize("spec", ["k3-b4", "k6-b8", "k8-b10"])
@pytest.mark.parametrize("max_bucket", [1, 1024])
def test_memory_lookup_kernel_is_the_reference(spec: str, max_bucket: int, monkeypatch) -> None:
    """The native lookup (index::near) finds what memory.py's _pairs finds, through the
    direct offsets, the searched tables, a bounded bucket and the unmerged tail."""
    from detector.blocks import BlockScheme
    from detector.index import Entry, Query, memory

    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**63, 300, dtype=np.uint64)
    fps = [int(b) ^ (1 << int(bit)) for b in base for bit in rng.integers(0, 64, 20)]
    index = memory.MemoryIndex(BlockScheme.parse(spec), compress=False, max_bucket=max_bucket)
    index.insert([Entry(f"d{i}", "t", fp, f"g{i}", "x") for i, fp in enumerate(fps)])
    assert index._spaces["t"].merged  # 6,000 entries: the tables and a tail
    queries = [Query("t", int(b) ^ 5, "none") for b in base[:100]]
    monkeypatch.setattr(memory, "NEAR", NATIVE.near)
    got = index.lookup(queries)
    monkeypatch.setattr(memory, "NEAR", None)
    assert got == index.lookup(queries)
    assert sum(len(f.candidates) for f in got) > 100


@given(st.lists(st.sets(st.integers(0, 60)), max_size=6), st.sets(st.integers(0, 60)))
def test_jaccards_are_each_jaccard(others: list[set[int]], mine: set[int]) -> None:
    def arr(s: set[int]) -> np.ndarray:
        return np.array(sorted(s), np.uint64)

    assert NATIVE.jaccards(arr(mine), [arr(o) for o in others]) == [
        jaccard(arr(mine), arr(o)) for o in others
    ]
