"""The native NFKC (native/src/nfkc.rs) against the interpreter's: normalize.fold, bit for
bit, on every code point, every pair the interpreter composes, and random text of the
scripts NFKC changes most. The native fold leaves to fold() only texts with a lone
surrogate or a run of more than 30 non-starters (where fold() inserts a grapheme joiner)."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import kernels
from detector.features import Featurizer
from detector.normalize import (
    MAX_NON_STARTERS,
    combining_classes,
    compositions,
    fold,
    non_starters,
)

from .helpers import DATA, read_jsonl

NATIVE = kernels.native_module()
pytestmark = pytest.mark.skipif(NATIVE is None, reason="detector._native was not built")


@pytest.fixture(scope="module")
def native() -> kernels.NativeKernels:
    assert NATIVE is not None
    return kernels.NativeKernels(NATIVE, Featurizer(), 5)


def raw_fold(native: kernels.NativeKernels, texts: list[str]) -> list[str | None]:
    """The native answers alone, None where fold() would have to step in."""
    folded: list[str | None] = native._kernels.fold(texts)
    return folded


def assert_folds_alike(native: kernels.NativeKernels, texts: list[str]) -> None:
    for text, got in zip(texts, raw_fold(native, texts), strict=True):
        assert got == fold(text), [hex(ord(c)) for c in text]


def test_every_code_point_folds_as_the_interpreter_s(native: kernels.NativeKernels) -> None:
    for low in range(0, 0x110000, 0x10000):
        high = low + 0x10000
        texts = [chr(c) for c in range(low, high) if not 0xD800 <= c <= 0xDFFF]
        assert_folds_alike(native, texts)


def test_every_pair_the_interpreter_composes(native: kernels.NativeKernels) -> None:
    """Each character that begins a canonical pair (or is a composite, which may begin
    another) before each second of a pair, alone and after a mark that blocks it or not;
    and every Hangul L+V and LV+T."""
    table = compositions()
    seconds = sorted(set(table[1][table[1] != 0].tolist()))
    firsts = sorted(set(table[0][table[0] != 0].tolist()) | set(np.flatnonzero(table[0])))
    marks = ["", "\u0316", "\u0301", "\u0345", "\u05b0"]  # classes 220, 230, 240, 10
    texts = [chr(a) + m + chr(b) for a in firsts for b in seconds for m in marks]
    lv = [chr(0xAC00 + 28 * i) for i in range(19 * 21)]
    texts += [chr(0x1100 + lead) + chr(0x1161 + v) for lead in range(19) for v in range(21)]
    texts += [s + chr(t) for s in lv for t in range(0x11A7, 0x11C4)]
    for start in range(0, len(texts), 50_000):
        assert_folds_alike(native, texts[start : start + 50_000])


MARKS = st.characters(min_codepoint=0x300, max_codepoint=0x36F)
NFKC_ALPHABET = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(min_codepoint=0xC0, max_codepoint=0x24F),  # Latin, precomposed
    MARKS,
    st.characters(min_codepoint=0x1100, max_codepoint=0x11FF),  # Hangul jamo
    st.characters(min_codepoint=0x3130, max_codepoint=0x318F),  # compatibility jamo
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul syllables
    st.characters(min_codepoint=0xFB00, max_codepoint=0xFB4F),  # ligatures, Hebrew
    st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),  # half and full width
    st.characters(min_codepoint=0x2160, max_codepoint=0x2188),  # Roman numerals
    st.characters(min_codepoint=0x3300, max_codepoint=0x33FF),  # CJK squared words
    st.characters(min_codepoint=0xFB50, max_codepoint=0xFDFF),  # Arabic forms A
    st.characters(min_codepoint=0xFE70, max_codepoint=0xFEFF),  # Arabic forms B
    st.characters(min_codepoint=0x386, max_codepoint=0x3CE),  # Greek with tonos
    st.characters(min_codepoint=0x1F00, max_codepoint=0x1FFF),  # Greek extended
    st.characters(min_codepoint=0x900, max_codepoint=0xD7F),  # Indic two-part vowels
    st.characters(min_codepoint=0xF00, max_codepoint=0xFCF),  # Tibetan
    st.sampled_from("\u0345\u0316\u05b0\u0f71\u0f72\u0f80\u0344\u0f73\u1e9b\u212b\u2126"),
)
# A base and up to 40 marks: runs on either side of the stream-safe limit of 30.
MARK_RUN = st.builds(
    lambda base, marks: base + "".join(marks), NFKC_ALPHABET, st.lists(MARKS, max_size=40)
)
NFKC_TEXT = st.lists(st.text(NFKC_ALPHABET, max_size=30) | MARK_RUN, max_size=6).map("".join)


def longest_non_starter_run(text: str) -> int:
    marks = non_starters()[[ord(c) for c in text]].astype(np.int8)
    edges = np.flatnonzero(np.diff(marks, prepend=0, append=0))
    return int((edges[1::2] - edges[::2]).max(initial=0))


@given(st.lists(NFKC_TEXT, min_size=1, max_size=8))
@example(["a" + "\u0301\u0316" * 15, "a" + "\u0301\u0316" * 15 + "\u0301", "\u1100\u1161\u11a8"])
@example(["\u0b47\u0300\u0b3e", "\u0f73\u0f71\u0f72", "\u3131\u314f\u3131", "ﷺ\u0301"])
@settings(max_examples=400, deadline=None)
def test_random_text_folds_as_the_interpreter_s(
    native: kernels.NativeKernels, texts: list[str]
) -> None:
    assert native.fold(texts) == [fold(t) for t in texts]
    for text, got in zip(texts, raw_fold(native, texts), strict=True):
        assert (got is None) == (longest_non_starter_run(text) > MAX_NON_STARTERS)


def test_only_a_run_of_marks_or_a_surrogate_goes_to_fold(native: kernels.NativeKernels) -> None:
    at_limit = "x" + "\u0316\u0301" * 15
    assert raw_fold(native, [at_limit, at_limit + "\u0301", "a\udcffb"]) == [
        fold(at_limit),
        None,
        None,
    ]


@pytest.mark.parametrize("name", ["sample", "html-sample", "stream-2k"])
def test_the_native_fold_takes_every_text_of_the_samples(
    native: kernels.NativeKernels, name: str
) -> None:
    texts = [r["text"] for r in read_jsonl(DATA / f"{name}.jsonl.gz")]
    needing = [t for t in texts if not t.isascii() and not unicodedata.is_normalized("NFKC", t)]
    assert needing  # the samples do hold texts NFKC changes
    assert raw_fold(native, needing) == [fold(t) for t in needing]


def test_every_composition_begins_with_a_starter() -> None:
    """Only a starter takes a composition (nfkc.rs's compose), as in the interpreter."""
    table, classes = compositions(), combining_classes()
    for c in np.flatnonzero(table[0]).tolist():
        first, second = int(table[0, c]), int(table[1, c])
        assert unicodedata.normalize("NFC", chr(first) + chr(second)) == chr(c)
        assert classes[first] == 0, hex(c)  # a composite never begins with a mark
