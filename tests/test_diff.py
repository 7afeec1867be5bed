"""detector.diff: the word-level diff explain and review draw."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from detector.diff import render, shared_words, spans

WORDS = st.lists(st.sampled_from(["alpha", "Beta", "gamma", "delta", "eps"]), max_size=30)


@given(WORDS, WORDS)
def test_the_diff_gives_back_both_texts(a: list[str], b: list[str]) -> None:
    diff = spans(" ".join(a), " ".join(b))
    assert [w for s in diff for w in s.a] == a
    assert [w for s in diff for w in s.b] == b
    assert all(
        [w.casefold() for w in s.a] == [w.casefold() for w in s.b] for s in diff if s.tag == "equal"
    )


def test_a_changed_word_is_marked_on_both_sides_and_case_is_not_a_change() -> None:
    diff = spans("The quick brown fox jumps", "the quick red fox jumps")
    assert [s.tag for s in diff] == ["equal", "replace", "equal"]
    assert shared_words(diff) == (4, 5, 5)
    assert render(diff, color=False) == "the quick [-brown-] {+red+} fox jumps"
    colored = render(diff, color=True)
    assert "\x1b[" in colored and "[-" not in colored


def test_a_long_shared_run_is_shortened_around_its_ends() -> None:
    words = " ".join(f"w{i}" for i in range(100))
    got = render(spans(words + " end", words + " tail"), color=False, context=3)
    assert got == "w0 w1 w2 ... (94 shared words) ... w97 w98 w99 [-end-] {+tail+}"
    assert render(spans(words, words), color=False, context=None) == words
