"""detector.extract's parse against the one it replaced (tests/extract_reference.py:
lxml.html's elements, every page's stripped words counted): the same Page (lines, words,
link words, keys, containers) and the same verdicts (too many elements, truncated) on
every bundled page and on generated tag soup, and the same Extracted for every page of
the bundled sample. The native walk (native/src/html.rs, over lxml's serialization of
the tree) is held to the same, page for page."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import extract, templates
from detector.extract import Extractor, _more_words, _tagless_words, parse
from detector.normalize import _TAG, drop_comments_scripts_styles, looks_like_html, strip_markup
from detector.records import Document
from detector.templates import MemoryTemplates

from . import extract_reference as reference
from .helpers import HTML_SAMPLE, read_jsonl
from .strategies import FRAGMENTS

PAGES = extract.walker()  # the native walk; None where detector._native was not built
native = pytest.mark.skipif(PAGES is None, reason="detector._native was not built")
WALKS = [None, pytest.param(PAGES, id="native", marks=native)]


@pytest.fixture(scope="module")
def sample() -> list[dict[str, str]]:
    return read_jsonl(HTML_SAMPLE)


@pytest.mark.parametrize("pages", WALKS)
def test_every_bundled_page_is_cut_as_the_reference_cut_it(
    sample: list[dict[str, str]], pages: object
) -> None:
    for r in sample:
        assert parse(r["text"], pages) == reference.parse(r["text"]), r["id"]


@native
def test_the_native_walk_reads_every_bundled_page_itself(sample: list[dict[str, str]]) -> None:
    """The Python walk is only its fallback: on real pages it is never needed."""
    with mock.patch.object(extract, "_walk", side_effect=AssertionError("fell back")):
        for r in sample:
            assert isinstance(parse(r["text"], PAGES), extract.Page), r["id"]


@pytest.mark.parametrize("pages", WALKS)
def test_every_bundled_page_is_extracted_as_with_the_reference(
    sample: list[dict[str, str]], pages: object
) -> None:
    """The whole extractor: the walk, and the template model's lessons (whose pair bits
    the native module computes when it walks)."""

    def extracted(walk: object) -> list[extract.Extracted | None]:
        ex = Extractor("auto", MemoryTemplates(3), pages=walk)
        docs = [Document(r["id"], r["text"], r.get("url")) for r in sample]
        return [e for at in range(0, len(docs), 16) for e in ex.batch(docs[at : at + 16])]

    got = extracted(pages)
    with mock.patch.object(extract, "parse", lambda html, pages: reference.parse(html)):
        want = extracted(None)
    assert got == want
    assert {extract.path(e.extraction) for e in got if e} >= {"main", "body"}


@native
@given(st.integers(0, 2**64 - 1), st.lists(st.integers(0, 2**64 - 1), max_size=20))
def test_the_native_pair_bits_are_pair_bit(url: int, keys: list[int]) -> None:
    want = [templates.pair_bit(url, k) for k in keys]
    assert PAGES.pair_bits(url, keys, templates.PAIR_LOG2) == want


TAGS = sorted(extract._BLOCK | extract._SKIPPED | {"a", "b", "span", "em", "html", "body"})
opening = st.builds(
    lambda tag, attrs: f"<{tag}{attrs}>",
    st.sampled_from(TAGS),
    st.sampled_from(
        [
            "",
            " href",
            " href=''",
            " href='#'",
            " href='#top'",
            " href=/x",
            " HREF=y",
            " class=z",
            " id=top",
            " name=top",
            " id='caf\u00e9' name=x",
            " href='#caf\u00e9'",
            " href='#x'",
        ]
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
    [
        "<html><body>",
        "<!doctype html><html><head><title>t</title></head>",
        "",
        # an XHTML doctype: libxml2 writes `<br />` and `<p></p>`
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd"><html><body>',
    ]
)


# Text as lxml writes a tree, and near misses of it: what the native walk reads.
written = st.lists(
    st.sampled_from(
        [
            "<body>",
            "</body>",
            "<p>",
            "</p>",
            "<div>",
            "</div>",
            "<br/>",
            "<img />",
            '<a href="x">',
            '<a href="#t">',
            '<a href="">',
            "</a>",
            '<td class="c">',
            "</td>",
            "<script>",
            "</script>",
            "<svg/>",
            "<q:x>",
            "</q:x>",
            "&amp;",
            "&lt;",
            "&#13;",
            "&#xFFFD;",
            "&#x1F600;",
            "&#0;",
            "&nbsp;",
            "&",
            "<",
            ">",
            '"',
            "<?pi x?>",
            "<!x>",
            "a b",
            " 12 ",
            "\u00e9\u4e2d",
            "\u00a0",
            "\n",
        ]
    ),
    max_size=60,
).map(lambda parts: "".join(parts).encode())


@native
@given(st.binary(max_size=300) | written)
@settings(max_examples=500, deadline=None)
def test_the_native_walk_takes_any_bytes(xml: bytes) -> None:
    got = PAGES.walk(xml)
    if got is None or got == "too_many_elements":
        return
    texts, words, links, keys, stamped, containers = got
    lines = texts.split("\n") if texts else []
    assert len(lines) == len(words) == len(links) == len(keys) == len(stamped)
    assert all(line and line == " ".join(line.split()) for line in lines)
    assert all(0 <= n <= w for n, w in zip(links, words, strict=True))
    assert all(0 <= a <= b <= len(lines) for a, b in containers)


@given(prefixes, soup)
@settings(max_examples=400, deadline=None)
@example("<html><body>", "<p>" + "<a href=x>w</a>" * 60)
@example("<html>", "<body><p>x</p></body>tail words</html>")
@example("<html><body>", "<p>x</p><?pi a b?><b>y</b>")
def test_tag_soup_is_cut_as_the_reference_cut_it(prefix: str, body: str) -> None:
    html = prefix + body
    want = reference.parse(html)
    assert parse(html) == want
    if PAGES is not None:
        assert parse(html, PAGES) == want


@given(prefixes, soup, st.integers(1, 60), st.integers(1, 400))
@settings(max_examples=150, deadline=None)
def test_pages_beyond_the_bounds_fall_back_as_with_the_reference(
    prefix: str, body: str, elements: int, size: int
) -> None:
    html = prefix + body
    with mock.patch.multiple(extract, MAX_ELEMENTS=elements, MAX_HTML_BYTES=size):
        want = reference.parse(html)
        assert parse(html) == want
        if PAGES is not None:
            # the native walk's bound is its own copy, given when it was made
            pages = extract.walker()
            assert parse(html, pages) == want


@given(st.one_of(soup, st.lists(st.sampled_from(FRAGMENTS), max_size=20).map("".join)))
@settings(max_examples=300, deadline=None)
def test_the_stripped_words_are_counted_or_bounded_as_strip_markup_has_them(html: str) -> None:
    words = len(extract._WORD.findall(strip_markup(html)))
    tagless = len(extract._WORD.findall(_TAG.sub(" ", drop_comments_scripts_styles(html))))
    assert _tagless_words(html) == tagless
    if PAGES is not None:
        assert extract._tagless(html, PAGES) == tagless
    assert tagless >= words or not looks_like_html(html)  # a bound where it is used
    for limit in {0, words - 1, words, words + 1, tagless - 1, tagless, 2 * words}:
        assert _more_words(html, limit) == (words > limit)
        assert _more_words(html, limit, PAGES) == (words > limit)


@native
@given(st.text(st.sampled_from("0123456789-: a_\u0661\u0662\u00b2x"), max_size=24))
@settings(max_examples=400, deadline=None)
def test_the_native_walk_finds_the_stamps_the_regex_finds(line: str) -> None:
    """Dates and clock times (_STAMP), with Unicode digits, word characters before them,
    and runs too long to be either."""
    html = f"<html><body><p>{line}</p><p>{line} {line}</p></body></html>"
    page = parse(html, PAGES)
    assert page == parse(html)
    assert isinstance(page, extract.Page)
    for text, words, stamped in zip(page.texts, page.words, page.stamped, strict=True):
        found = extract._STAMP.search(text) is not None
        assert stamped == (found and words <= extract._STAMP_WORDS)
