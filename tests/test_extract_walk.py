"""detector.extract's parse against the one it replaced (tests/extract_reference.py:
lxml.html's elements, every page's stripped words counted): the same Page (lines, words,
link words, keys, containers) and the same verdicts (too many elements, truncated) on
every bundled page and on generated tag soup, and the same Extracted for every page of
the bundled sample."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import extract
from detector.extract import Extractor, _more_words, _tagless_words, parse
from detector.normalize import _TAG, drop_comments_scripts_styles, looks_like_html, strip_markup
from detector.records import Document
from detector.templates import MemoryTemplates

from . import extract_reference as reference
from .helpers import HTML_SAMPLE, read_jsonl
from .strategies import FRAGMENTS


@pytest.fixture(scope="module")
def sample() -> list[dict[str, str]]:
    return read_jsonl(HTML_SAMPLE)


def test_every_bundled_page_is_cut_as_the_reference_cut_it(sample: list[dict[str, str]]) -> None:
    for r in sample:
        assert parse(r["text"]) == reference.parse(r["text"]), r["id"]


def test_every_bundled_page_is_extracted_as_with_the_reference(
    sample: list[dict[str, str]],
) -> None:
    def extracted() -> list[extract.Extracted | None]:
        ex = Extractor("auto", MemoryTemplates(3))
        docs = [Document(r["id"], r["text"], r.get("url")) for r in sample]
        return [e for at in range(0, len(docs), 16) for e in ex.batch(docs[at : at + 16])]

    got = extracted()
    with mock.patch.object(extract, "parse", reference.parse):
        want = extracted()
    assert got == want
    assert {e.extraction for e in got if e} >= {"main", "body"}


TAGS = sorted(extract._BLOCK | extract._SKIPPED | {"a", "b", "span", "em", "html", "body"})
opening = st.builds(
    lambda tag, attrs: f"<{tag}{attrs}>",
    st.sampled_from(TAGS),
    st.sampled_from(
        ["", " href", " href=''", " href='#'", " href='#top'", " href=/x", " HREF=y", " class=z"]
    ),
)
piece = st.one_of(
    opening,
    st.sampled_from([f"</{t}>" for t in TAGS]),
    st.sampled_from(
        [
            "<!-- c -->",
            "<!--",
            "<?php echo 1 ?>",
            "<![CDATA[x]]>",
            "&amp;",
            "&nbsp;",
            "&#98;",
            "&ampx",
            "&#x81;",
            "&#129;",
            "x&#x30;y",
            "</",
            "<>",
            "<a href=/a><a href=/b>in</a>out</a>",
            "<script>if (a<b) x='</p>'</script>",
            "<style>p{}</style>",
            "<td>" * 40,
            "<div>" * 300,  # beyond libxml2's 256 levels
            "\u00a0",
            "2025-11-29 17:18",
        ]
    ),
    st.sampled_from(FRAGMENTS[:14]),
    st.text(st.sampled_from("ab cd\u00e9\u4e2d1_.-\n\t"), max_size=12),
)
soup = st.lists(piece, max_size=80).map("".join)
prefixes = st.sampled_from(
    ["<html><body>", "<!doctype html><html><head><title>t</title></head>", ""]
)


@given(prefixes, soup)
@settings(max_examples=400, deadline=None)
@example("<html><body>", "<p>" + "<a href=x>w</a>" * 60)
@example("<html>", "<body><p>x</p></body>tail words</html>")
@example("<html><body>", "<p>x</p><?pi a b?><b>y</b>")
def test_tag_soup_is_cut_as_the_reference_cut_it(prefix: str, body: str) -> None:
    html = prefix + body
    assert parse(html) == reference.parse(html)


@given(prefixes, soup, st.integers(1, 60), st.integers(1, 400))
@settings(max_examples=150, deadline=None)
def test_pages_beyond_the_bounds_fall_back_as_with_the_reference(
    prefix: str, body: str, elements: int, size: int
) -> None:
    html = prefix + body
    with mock.patch.multiple(extract, MAX_ELEMENTS=elements, MAX_HTML_BYTES=size):
        assert parse(html) == reference.parse(html)


@given(st.one_of(soup, st.lists(st.sampled_from(FRAGMENTS), max_size=20).map("".join)))
@settings(max_examples=300, deadline=None)
def test_the_stripped_words_are_counted_or_bounded_as_strip_markup_has_them(html: str) -> None:
    words = len(extract._WORD.findall(strip_markup(html)))
    tagless = len(extract._WORD.findall(_TAG.sub(" ", drop_comments_scripts_styles(html))))
    assert _tagless_words(html) == tagless
    assert tagless >= words or not looks_like_html(html)  # a bound where it is used
    for limit in {0, words - 1, words, words + 1, tagless - 1, tagless, 2 * words}:
        assert _more_words(html, limit) == (words > limit)
