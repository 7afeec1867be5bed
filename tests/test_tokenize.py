"""detector.tokenize: the vectorized tokenizer finds exactly the reference regex's tokens."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from detector.normalize import NO_SPACE_CHAR, normalize, tokens
from detector.tokenize import TokenBatch, count_tokens, has_tokens, tokenize

# Every code point except the surrogates (not text; JSON lone-surrogate escapes are a
# records concern).
any_char = st.characters(exclude_categories=("Cs",))

FRAGMENTS = [
    "中文分词",
    "日本語のテキスト",
    "ひらがな",
    "カタカナー",
    "ｶﾀｶﾅ",
    "ภาษาไทยครับ",
    "한국어",
    "e\u0301",
    "\u0301",
    "a\u0308b",
    "क्षत्रिय",
    "مرحبا",
    "Ελληνικά",
    "Straße",
    "ﬁ",
    "Ａｂｃ",
    "👍🏽",
    "🇫🇷",
    "👩\u200d💻",
    "x_y",
    "__",
    "٣٤",
    "²",
    "Ⅻ",
    "\u00a0",
    "\u3000",
    "ー",
    "々",
    "\U00020000",
    "\U0002a6d6",
    "𝔘𝔫𝔦",
    "\ufeff",
    "\u200b",
    "tab\there",
    "line\nbreak",
    " ",
    "-",
    ".",
    "'",
    "\x00",
    "\x7f",
    "\u0e3f",
    "\u0e31",
    "\u17d2",
    "ຂອບໃຈ",
    "ၼ",
    "ㄅㄆ",
    "ﾞ",
]

mixed_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(any_char, max_size=8)), max_size=12
).map("".join)
texts = st.one_of(st.text(any_char), mixed_text)


def per_text(tb: TokenBatch) -> list[list[str]]:
    b = tb.bounds()
    return [[tb.text(i) for i in range(b[d], b[d + 1])] for d in range(tb.docs)]


@given(text=texts)
@example(text="")
@example(text="中文abc日本語def ภาษา e\u0301 👍🏽x")
@example(text="\U00020000\U00020001a")
def test_tokens_equal_the_reference_regex(text: str) -> None:
    (got,) = per_text(tokenize([text]))
    assert got == tokens(text)


@given(text=texts)
def test_tokens_of_normalized_text_equal_the_reference_regex(text: str) -> None:
    normalized = normalize(text)
    (got,) = per_text(tokenize([normalized]))
    assert got == tokens(normalized)


@given(batch=st.lists(texts, max_size=8))
def test_a_batch_is_its_texts_side_by_side(batch: list[str]) -> None:
    """No token spans two texts, none is lost or moved to a neighbour."""
    tb = tokenize(batch)
    assert tb.docs == len(batch)
    assert per_text(tb) == [tokens(t) for t in batch]
    assert len(tb.doc) == len(tb.start) == len(tb.end) == len(tb.key) == len(tb.nospace)
    assert np.all(np.diff(tb.doc) >= 0), "tokens are ordered by text"
    assert np.all(tb.end > tb.start)


@given(batch=st.lists(st.text(st.sampled_from("ab中 "), max_size=6), min_size=2, max_size=8))
def test_adjacent_texts_never_merge(batch: list[str]) -> None:
    """Texts ending and starting with word characters stay apart (e.g. "ab" + "ab")."""
    tb = tokenize(batch)
    assert per_text(tb) == [tokens(t) for t in batch]
    assert sum(len(tokens(t)) for t in batch) == len(tb.key)


@given(batch=st.lists(texts, max_size=6))
def test_nospace_flag_marks_single_no_space_characters(batch: list[str]) -> None:
    tb = tokenize(batch)
    for i in range(len(tb.key)):
        t = tb.text(i)
        assert bool(tb.nospace[i]) == bool(re.fullmatch(NO_SPACE_CHAR, t)), t


@given(batch=st.lists(st.text(st.sampled_from("abAé中日 ."), max_size=10), max_size=8))
def test_equal_tokens_have_equal_keys_and_distinct_tokens_distinct_keys(batch: list[str]) -> None:
    tb = tokenize(batch)
    by_text: dict[str, int] = {}
    for i in range(len(tb.key)):
        by_text.setdefault(tb.text(i), int(tb.key[i]))
        assert by_text[tb.text(i)] == int(tb.key[i])
    assert len(set(by_text.values())) == len(by_text)


def test_keys_do_not_depend_on_the_batch() -> None:
    alone = tokenize(["hello 中文 wörld"]).key
    together = tokenize(["x y", "hello 中文 wörld", "z"])
    b = together.bounds()
    assert np.array_equal(alone, together.key[b[1] : b[2]])


def test_known_tokenizations() -> None:
    cases = {
        "Hello, world_42!": ["Hello", "world_42"],
        "中文abc": ["中", "文", "abc"],
        "日本語のテキスト": ["日", "本", "語", "の", "テ", "キ", "ス", "ト"],
        "ภาษา ไทย": ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"],
        "naïve café": ["naïve", "café"],
        "e\u0301t\u00e9": ["e", "té"],  # a combining mark is not a word character
        "👍 ok": ["ok"],
        "": [],
        "   ": [],
    }
    for text, expected in cases.items():
        (got,) = per_text(tokenize([text]))
        assert got == expected, text
        assert tokens(text) == expected, text


def test_empty_batch() -> None:
    tb = tokenize([])
    assert tb.docs == 0 and len(tb.key) == 0
    assert list(tb.bounds()) == [0]
    tb = tokenize(["", "", "a"])
    assert per_text(tb) == [[], [], ["a"]]


@given(text=texts)
@example(text="")
@example(text="a" * 100 + " 中文 ภาษา e\u0301")
def test_count_tokens_is_the_number_of_tokens(text: str) -> None:
    assert count_tokens(text) == len(tokenize([text]).key) == len(tokens(text))


@given(text=texts)
@example(text="")
@example(text="!!! \u0e31 ...")  # a Thai vowel sign: no word character, yet a token
@example(text="  <br> ")
def test_has_tokens_says_whether_there_is_a_token(text: str) -> None:
    assert has_tokens(text) == (count_tokens(text) > 0)


@given(lengths=st.lists(st.integers(1, 700), min_size=1, max_size=60))
def test_long_tokens_get_the_same_key_however_many_share_the_batch(lengths: list[int]) -> None:
    """The longest tokens of a batch finish hashing in Python, the rest in numpy: a token's
    key must not depend on which (it is the identity of exact copies in the index)."""
    words = ["".join(chr(97 + (i * 7 + n) % 26) for i in range(n)) for n in lengths]
    together = tokenize([" ".join(words)]).key
    alone = [int(tokenize([w]).key[0]) for w in words]
    assert [int(k) for k in together] == alone
