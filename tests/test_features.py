"""detector.features: the IDF table (fit against brute force, save/load, versions) and the
feature settings."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector.errors import ConfigError
from detector.features import BuiltinWeights, FeatureConfig, Featurizer, IdfTable
from detector.normalize import normalize, tokens

VOCAB = [
    "the",
    "The",
    "cat",
    "CAT",
    "sat",
    "on",
    "mat",
    "日本",
    "語",
    "Straße",
    "strasse",
    "ﬁle",
    "file",
    "x",
    "42",
    "a_b",
]
corpus = st.lists(st.lists(st.sampled_from(VOCAB), max_size=12).map(" ".join), max_size=25)


@settings(max_examples=40)
@given(texts=corpus, min_df=st.integers(1, 3), batch=st.integers(1, 7))
def test_fit_counts_documents_per_token_like_brute_force(
    texts: list[str], min_df: int, batch: int
) -> None:
    if not texts:
        with pytest.raises(ConfigError):
            IdfTable.fit(texts, min_df=min_df, batch=batch)
        return
    table = IdfTable.fit(texts, min_df=min_df, batch=batch)
    df = Counter(tok for t in texts for tok in set(tokens(normalize(t))))
    assert table.docs == len(texts)
    assert table.doc_freq == {tok: c for tok, c in df.items() if c >= min_df}


def test_idf_weights_and_smoothing() -> None:
    table = IdfTable({"common": 9, "rare": 1}, docs=9)
    assert table.weight("common") == pytest.approx(math.log(10 / 10) + 1)
    assert table.weight("rare") == pytest.approx(math.log(10 / 2) + 1)
    assert table.weight("unseen") == table.weight("rare"), "unseen counts as seen once"
    assert table.weight("common") < table.weight("rare")


def test_save_load_round_trip_and_versions(tmp_path: Path) -> None:
    table = IdfTable.fit(["a b c", "a b", "a", "日本 語 a"], min_df=1)
    path = tmp_path / "idf.json.gz"
    table.save(path)
    loaded = IdfTable.load(path)
    assert (loaded.docs, loaded.doc_freq, loaded.version) == (
        table.docs,
        table.doc_freq,
        table.version,
    )
    assert table.version.startswith("idf-")
    assert IdfTable({"a": 1}, 2).version != IdfTable({"a": 2}, 2).version
    assert IdfTable({"a": 1}, 2).version != IdfTable({"a": 1}, 3).version
    assert IdfTable({"a": 1}, 2).version == IdfTable({"a": 1}, 2).version
    # The featurizer's version names the weights, so an index refuses mixed fingerprints.
    assert table.version in Featurizer(weights=loaded).version
    assert Featurizer(weights=loaded).version != Featurizer().version


def test_builtin_weights_rank_longer_tokens_higher() -> None:
    w = BuiltinWeights()
    assert w.weight("a") < w.weight("the") < w.weight("internationally")
    assert w.weight("x" * 12) == w.weight("x" * 40), "capped"
    assert w.weight("語") == pytest.approx(math.sqrt(3))


@pytest.mark.parametrize(
    ("kind", "n", "cjk_n"),
    [("trigrams", 2, 2), ("words", 0, 2), ("shingles", 9, 2), ("words", 2, 0), ("words", 2, 5)],
)
def test_feature_config_rejects_bad_settings(kind: str, n: int, cjk_n: int) -> None:
    with pytest.raises(ConfigError):
        FeatureConfig(kind, n, cjk_n)


def test_feature_config_tags_differ() -> None:
    tags = {
        FeatureConfig().tag,
        FeatureConfig("shingles", 2).tag,
        FeatureConfig("shingles", 3).tag,
        FeatureConfig("words", 2, 1).tag,
    }
    assert len(tags) == 4
