"""detector.index.texts: the packed forms of the literal texts. Every form gives back the
exact text; LZ4 texts of older indexes still read; a frame names its dictionary, and a
reader that has not loaded it says which it misses; the sample and its training; and the
memory index trains at the planned point and packs its sample again."""

from __future__ import annotations

import lz4.block
import pytest
import zstandard
from hypothesis import example, given
from hypothesis import strategies as st

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index import Commit, Entry
from detector.index import texts as texts_module
from detector.index.memory import MemoryIndex
from detector.index.texts import (
    SAMPLE_TEXTS,
    ZSTD_MAGIC,
    Codec,
    MissingDictionary,
    Sample,
    dictionary_id,
    frame_dictionary,
    train,
)
from detector.records import Decision

from ..helpers import stream_texts

characters = st.text(st.characters(exclude_categories=["Cs"]))  # what a record may hold


def old_lz4(text: str) -> bytes:
    """A text as indexes packed it before zstd (the old texts.pack_text)."""
    return lz4.block.compress(text.encode("utf-8"), store_size=True)  # type: ignore[no-any-return]


_trained: dict[int, bytes] = {}


def dictionary() -> bytes:
    """A dictionary trained as an index trains it: on the first SAMPLE_TEXTS real texts."""
    if not _trained:
        data = train(t.encode("utf-8") for t in stream_texts()[:SAMPLE_TEXTS])
        assert data is not None
        _trained[0] = data
    return _trained[0]


def with_dictionary() -> Codec:
    codec = Codec()
    codec.use(dictionary())
    return codec


# ------------------------------------------------------------------------ round trips


@given(text=characters)
@example(text="")
@example(text="中文 日本語のテキスト straße ﬁ ελληνικά العربية 🙂 \x00")
@example(text="a" * 300_000)
def test_every_form_gives_back_the_exact_text(text: str) -> None:
    reader = with_dictionary()  # another process of the index: it reads every form
    for codec in (Codec(), Codec(with_dictionary=False), with_dictionary(), Codec("lz4")):
        packed = codec.pack(text)
        assert codec.unpack(packed) == text
        assert reader.unpack(packed) == text


@given(text=characters)
@example(text="")
def test_lz4_texts_of_older_indexes_read_and_are_never_taken_for_a_zstd_frame(text: str) -> None:
    packed = old_lz4(text)
    assert not packed.startswith(ZSTD_MAGIC)  # their length in front: far below 4 GiB
    assert frame_dictionary(packed) is None
    for codec in (Codec(), with_dictionary(), Codec("lz4")):
        assert codec.unpack(packed) == text


def test_real_texts_round_trip_and_take_under_40_percent_of_lz4s_bytes() -> None:
    texts = list(stream_texts()[SAMPLE_TEXTS:])  # not the ones the dictionary was trained on
    codec = with_dictionary()
    packed = [codec.pack(t) for t in texts]
    assert [codec.unpack(p) for p in packed] == texts
    assert sum(map(len, packed)) < 0.40 * sum(len(old_lz4(t)) for t in texts)


# ------------------------------------------------------------------ naming dictionaries


def test_a_frame_names_its_dictionary_and_a_reader_loads_it_by_that_id() -> None:
    writer = with_dictionary()
    made = writer.dictionary_id
    assert (
        made == dictionary_id(dictionary()) == zstandard.ZstdCompressionDict(dictionary()).dict_id()
    )
    text = stream_texts()[SAMPLE_TEXTS + 7]
    packed = writer.pack(text)
    assert frame_dictionary(packed) == made
    assert frame_dictionary(Codec().pack(text)) == 0  # before the index has one

    reader = Codec()
    assert reader.missing([packed, old_lz4(text), Codec().pack(text)]) == {made}
    with pytest.raises(MissingDictionary) as caught:
        reader.unpack(packed)
    assert caught.value.dictionary == made
    assert isinstance(caught.value, ConfigError)  # retrying cannot cure it
    assert reader.use(dictionary()) == made
    assert reader.missing([packed]) == set()
    assert reader.unpack(packed) == text
    assert reader.dictionary_id == made  # and it packs with it from now on


def test_a_codec_without_dictionary_reads_with_one_but_packs_without() -> None:
    codec = Codec(with_dictionary=False)
    codec.use(dictionary())
    text = stream_texts()[SAMPLE_TEXTS]
    assert frame_dictionary(codec.pack(text)) == 0
    assert codec.unpack(with_dictionary().pack(text)) == text
    lz4_codec = Codec("lz4")
    lz4_codec.use(dictionary())
    assert frame_dictionary(lz4_codec.pack(text)) is None


def test_what_is_not_a_dictionary_is_refused() -> None:
    assert dictionary_id(b"") == dictionary_id(b"not a dictionary") == 0
    with pytest.raises(ConfigError):
        Codec().use(b"raw content is no index dictionary")
    with pytest.raises(ConfigError):
        Codec("zstd9")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- sample


def test_the_sample_is_full_at_its_count_or_its_bytes_and_training_can_fail() -> None:
    sample = Sample()
    for n in range(SAMPLE_TEXTS - 1):
        sample.add(f"t{n}", "a text", b"")
    assert not sample.full
    sample.add("last", "a text", b"")
    assert sample.full
    sample.add("beyond", "a text", b"")
    assert len(sample.heads) == SAMPLE_TEXTS

    big = Sample()
    while not big.full:  # a few long texts: their heads only, up to the bytes
        big.add("x", "word " * 100_000, b"")
    assert len(big.heads) < 100
    assert all(len(h) == texts_module.SAMPLE_TEXT_BYTES for h in big.heads)

    assert train([b"", b"a", b"bc"]) is None  # nothing to learn from


def test_the_sample_is_packed_again_where_that_is_smaller() -> None:
    plain = Codec()
    texts = stream_texts()[:20]
    sample = Sample()
    for n, t in enumerate(texts):
        sample.add(f"t{n}", t, plain.pack(t))
    sample.add("old", texts[0], old_lz4(texts[0]))  # not a frame without dictionary: kept
    again = sample.repacked(with_dictionary())
    assert 15 <= len(again) <= 20
    for name, first, second in again:
        n = int(name[1:])
        assert first == plain.pack(texts[n])
        assert frame_dictionary(second) == dictionary_id(dictionary())
        assert len(second) < len(first)
        assert with_dictionary().unpack(second) == texts[n]


# ------------------------------------------------------------------------ memory index


def commit_texts(index: MemoryIndex, texts: list[str], start: int = 0) -> None:
    items = [
        Commit(Decision(f"t{n}", None, n), Entry(f"t{n}", "t", n, f"d{n}", t))
        for n, t in enumerate(texts, start)
    ]
    assert index.commit(items).done == len(items)


def test_the_memory_index_trains_at_its_sample_and_packs_the_sample_again() -> None:
    texts = list(stream_texts()[: SAMPLE_TEXTS + 100])
    index = MemoryIndex(BlockScheme.parse("k3-b4"))
    commit_texts(index, texts[: SAMPLE_TEXTS - 1])
    assert index.stats()["text_dictionary"] == 0
    before = index.stats()["text_bytes"]
    commit_texts(index, texts[SAMPLE_TEXTS - 1 : SAMPLE_TEXTS], SAMPLE_TEXTS - 1)
    stats = index.stats()
    made = stats["text_dictionary"]
    assert made and stats["text_dictionary_bytes"] == len(index.codec.dictionary or b"")
    assert stats["text_bytes"] < 0.7 * before  # the sample packed again with it
    commit_texts(index, texts[SAMPLE_TEXTS:], SAMPLE_TEXTS)
    assert index.stats()["text_dictionary"] == made  # once
    packed = index._texts
    named = [frame_dictionary(v) for v in packed.values() if isinstance(v, bytes)]
    assert named.count(made) >= 0.95 * len(texts)
    assert index.texts([f"t{n}" for n in range(len(texts))]) == {
        f"t{n}": t for n, t in enumerate(texts)
    }


def test_a_memory_index_with_nothing_to_learn_from_tries_the_next_texts() -> None:
    index = MemoryIndex(BlockScheme.parse("k3-b4"))
    commit_texts(index, ["x"] * SAMPLE_TEXTS)
    assert index.stats()["text_dictionary"] == 0
    texts = list(stream_texts()[:SAMPLE_TEXTS])
    commit_texts(index, texts, SAMPLE_TEXTS)
    assert index.stats()["text_dictionary"] != 0
    assert index.texts(["t0", f"t{SAMPLE_TEXTS}"]) == {"t0": "x", f"t{SAMPLE_TEXTS}": texts[0]}


def test_an_uncompressed_memory_index_keeps_its_texts_as_they_are() -> None:
    index = MemoryIndex(BlockScheme.parse("k3-b4"), compress=False)
    texts = list(stream_texts()[: SAMPLE_TEXTS + 1])
    commit_texts(index, texts)
    assert index.stats()["text_dictionary"] == 0
    assert index.texts(["t0"]) == {"t0": texts[0]}
