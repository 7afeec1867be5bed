"""detector.normalize: Unicode, case, markup; and what it means for fingerprints and digests."""

from __future__ import annotations

import html
import random
import re
import time
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from detector.engine import Engine
from detector.normalize import _TAG, normalize, strip_markup, tokens
from detector.records import Document

JAPANESE = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした"
    "所でニャーニャー泣いていた事だけは記憶している。吾輩はここで始めて人間というものを見た。"
    "しかもあとで聞くとそれは書生という人間中で一番獰悪な種族であったそうだ。この書生というのは"
    "時々我々を捕えて煮て食うという話である。しかしその当時は何という考もなかったから別段恐し"
    "いとも思わなかった。ただ彼の掌に載せられてスーと持ち上げられた時何だかフワフワした感じが"
    "あったばかりである。掌の上で少し落ちついて書生の顔を見たのがいわゆる人間というものの見始"
    "であろう。この時妙なものだと思った感じが今でも残っている。"
)
CHINESE = (
    "天下大势，分久必合，合久必分。周末七国分争，并入于秦。及秦灭之后，楚、汉分争，又并入于汉。"
    "汉朝自高祖斩白蛇而起义，一统天下，后来光武中兴，传至献帝，遂分为三国。推其致乱之由，殆始"
    "于桓、灵二帝。桓帝禁锢善类，崇信宦官。及桓帝崩，灵帝即位，大将军窦武、太傅陈蕃共相辅佐。"
    "时有宦官曹节等弄权，窦武、陈蕃谋诛之，机事不密，反为所害，中涓自此愈横。"
)
UNRELATED_JAPANESE = (
    "東京の天気は明日から崩れる見込みで、気象庁は週末にかけて大雨に警戒するよう呼びかけている。"
    "交通機関への影響も予想されるため、外出の際は最新の情報を確認してほしいとしている。また、"
    "農作物の管理や河川の増水にも注意が必要だ。専門家によると、今年の梅雨は例年より長引く可能性"
    "があり、各地で土砂災害の危険性が高まっているという。自治体は避難所の準備を進めている。"
)


def fingerprint(*texts: str) -> list[int]:
    return [
        p.fingerprint
        for p in Engine().fingerprint([Document(str(i), t) for i, t in enumerate(texts)])
    ]


def digest(*texts: str) -> list[str]:
    return [
        p.digest for p in Engine().fingerprint([Document(str(i), t) for i, t in enumerate(texts)])
    ]


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def edit_characters(text: str, count: int, seed: int) -> str:
    """Replace `count` CJK characters of the text by other characters of the same text."""
    rng = random.Random(seed)
    chars = list(text)
    cjk = [i for i, c in enumerate(chars) if unicodedata.category(c) == "Lo"]
    for i in rng.sample(cjk, count):
        chars[i] = rng.choice([chars[j] for j in cjk if chars[j] != chars[i]])
    return "".join(chars)


# --- Unicode and case ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "fullwidth abc 123"),
        ("ﬁle ﬂow", "file flow"),
        ("Straße", "strasse"),
        ("HELLO World", "hello world"),
        ("ｶﾀｶﾅ", "カタカナ"),
        ("①②", "12"),
        ("e\u0301", "\u00e9"),  # composed
        ("ΣΊΣΥΦΟΣ", "σίσυφοσ"),
    ],
)
def test_nfkc_and_casefold(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_equivalent_spellings_give_equal_tokens_and_fingerprints() -> None:
    a = "The ﬁnal Straße report, ＶＥＲＳＩＯＮ ２, from café"
    b = "the final STRASSE report version 2 from cafe\u0301"
    assert tokens(normalize(a)) == tokens(normalize(b))
    fa, fb = fingerprint(a, b)
    assert fa == fb
    assert digest(a) == digest(b)


@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=50))
def test_normalize_is_idempotent_on_tokens(text: str) -> None:
    once = normalize(text)
    assert tokens(normalize(once)) == tokens(once)


# --- markup ------------------------------------------------------------------------------


def test_html_tags_comments_script_and_style_are_removed() -> None:
    page = (
        "<html><head><title>Title here</title>"
        "<style>body { color: red; }</style>"
        "<script type='text/javascript'>var tracking = 1;</script></head>"
        "<body><!-- hidden comment --><div class='x'><p>Hello <b>bold</b> world</p>"
        "<a href='https://example.com/page'>link text</a><br/></div></body></html>"
    )
    words = tokens(normalize(page))
    assert words == ["title", "here", "hello", "bold", "world", "link", "text"]


def test_doctype_declaration_is_markup_not_words() -> None:
    """`<!DOCTYPE html>` opens most pages; it must not add the words "doctype html", or a
    page and its text are no longer exact copies."""
    page = "<!DOCTYPE html>\n<html><body><p>Hello world, this is the story</p></body></html>"
    assert tokens(normalize(page)) == ["hello", "world", "this", "is", "the", "story"]
    assert digest(page) == digest("Hello world, this is the story")


def test_entities_are_decoded() -> None:
    assert normalize("Fish &amp; chips &lt;3 caf&eacute; &#233;&#x41;") == "fish & chips <3 café éa"
    assert tokens(normalize("<p>a&nbsp;b</p>")) == ["a", "b"]


def test_placeholders_in_plain_text_stay_words() -> None:
    man = "usage: cp [-r] <source> <dest>\n  copies <file> to <dir>; see <https://x.org>"
    words = tokens(normalize(man))
    for w in ("source", "dest", "file", "dir"):
        assert w in words
    # No HTML markers: nothing is stripped, not even things that look like tags.
    assert normalize(man) == man.casefold()


def test_comment_in_plain_text_is_kept() -> None:
    text = "compare a <!-- b --> c"
    assert "b" in tokens(normalize(text))


def test_markup_does_not_change_the_fingerprint_of_html_pages() -> None:
    plain = "Breaking news: the council approved the new budget for public libraries today"
    html = (
        "<html><body><div><p>Breaking news: the <em>council</em> approved the new budget "
        "for public libraries today</p><script>ads()</script></div></body></html>"
    )
    assert fingerprint(plain) == fingerprint(html)
    assert digest(plain) == digest(html)


# --- hostile markup and marks: linear time, no exception -----------------------------------

# The regexes strip_markup used before its scans; on pages whose elements close, the scans
# must do exactly what they did.
_OLD_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_OLD_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MARKUP = [
    "<p>", "<script>", "</script>", "<SCRIPT a=1>", "</Script >", "<style x='<script>'>",
    "</style>", "<!--", "-->", "<!-->", "<", ">", "x", " ", "\n", "&amp;", "&#65;", "&am",
    "p;", "<div", "<!doctype html>", "é",
]  # fmt: skip


@given(st.lists(st.sampled_from(_MARKUP), max_size=24).map("".join))
def test_markup_scans_remove_what_the_regexes_removed(text: str) -> None:
    page = "<html>" + text
    old = html.unescape(_TAG.sub(" ", _OLD_COMMENT.sub(" ", _OLD_SCRIPT_STYLE.sub(" ", page))))
    assert strip_markup(page) == old


@pytest.mark.parametrize(
    "text",
    [
        "<p>" + "<!--" * 1_000_000,  # 64 kB of these took 8 s
        "<p>" + "<script>" * 500_000,  # 128 kB took 14 s
        "<p" + "<style " * 500_000,
        "a" + "\u0301\u0316" * 1_000_000,  # NFKC's insertion sort: 320 kB took 25 s
        "\u0f73" * 1_300_000,  # one character, two marks in reverse order
    ],
    ids=["unclosed comments", "unclosed scripts", "openings without >", "marks", "tibetan"],
)
def test_hostile_pages_of_4_mb_normalize_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    normalize(text)
    assert time.perf_counter() - started < 5  # about 0.1-0.4 s; quadratic took hours


def test_a_decimal_reference_beyond_the_int_digit_limit_is_a_replacement_character() -> None:
    """html.unescape raises ValueError on `&#` and more than 4,300 digits."""
    assert normalize("<p>a &#" + "1" * 5000 + "; b") == " a \ufffd b"
    assert normalize("<p>&#" + "0" * 5000 + "65;") == " a"
    beyond = "<p>&#x" + "f" * 5000 + ";&#1114109;&#1114112;"  # U+10FFFD is the last but two
    assert normalize(beyond) == " \ufffd\U0010fffd\ufffd"


def test_runs_of_marks_are_cut_but_their_tokens_stay() -> None:
    zalgo = "z" + "\u0301\u0316\u0300\u0317" * 20 + "algo"
    assert tokens(normalize(zalgo)) == ["ź", "algo"]
    assert "\u034f" in normalize(zalgo)  # a CGJ after every 30 marks
    assert normalize("e\u0301 \u0301\u0316") == "é \u0316\u0301"  # short runs as NFKC


# --- CJK ------------------------------------------------------------------------------


def test_cjk_text_is_split_into_characters() -> None:
    assert tokens(normalize("我爱北京天安门")) == list("我爱北京天安门")
    assert tokens(normalize("日本語のテキスト")) == list("日本語のテキスト")
    assert tokens(normalize("ｶﾀｶﾅ")) == list("カタカナ")  # half-width kana, NFKC
    assert tokens(normalize("漢字とABCの混在")) == ["漢", "字", "と", "abc", "の", "混", "在"]


@pytest.mark.parametrize("text", [JAPANESE, CHINESE])
@pytest.mark.parametrize("edits", [1, 2, 3])
def test_cjk_texts_with_a_few_characters_changed_get_near_fingerprints(
    text: str, edits: int
) -> None:
    edited = edit_characters(text, edits, seed=edits)
    assert edited != text
    a, b = fingerprint(text, edited)
    # ~170 and ~300 characters: each edit changes two of the character bigrams.
    assert distance(a, b) <= 10


@pytest.mark.parametrize(
    ("a", "b"), [(JAPANESE, UNRELATED_JAPANESE), (JAPANESE, CHINESE), (CHINESE, UNRELATED_JAPANESE)]
)
def test_unrelated_cjk_texts_get_distant_fingerprints(a: str, b: str) -> None:
    fa, fb = fingerprint(a, b)
    assert distance(fa, fb) >= 20


def test_distances_separate_edits_from_unrelated_texts_across_seeds() -> None:
    """Over several edits, every edited pair is nearer than every unrelated pair."""
    near = [
        distance(*fingerprint(JAPANESE, edit_characters(JAPANESE, 3, seed))) for seed in range(10)
    ]
    far = [distance(*fingerprint(JAPANESE, t)) for t in (UNRELATED_JAPANESE, CHINESE)]
    assert max(near) < min(far)


# --- whitespace ---------------------------------------------------------------------

WHITESPACE = st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", " \n\t "])


@given(
    words=st.lists(st.sampled_from(["alpha", "Beta", "日本", "語", "x1", "ﬁ"]), max_size=20),
    seps=st.lists(WHITESPACE, min_size=21, max_size=21),
    seps2=st.lists(WHITESPACE, min_size=21, max_size=21),
)
def test_whitespace_only_edits_keep_digest_and_fingerprint(
    words: list[str], seps: list[str], seps2: list[str]
) -> None:
    a = seps[0] + "".join(w + s for w, s in zip(words, seps[1:], strict=False))
    b = seps2[0] + "".join(w + s for w, s in zip(words, seps2[1:], strict=False))
    assert digest(a) == digest(b)
    assert fingerprint(a) == fingerprint(b)


def test_different_word_order_gives_a_different_digest() -> None:
    """The digest is of the token sequence, not the bag of words."""
    a, b = digest("one two three", "three two one")
    assert a != b
    a, b = digest("one two three", "one two three four")
    assert a != b
