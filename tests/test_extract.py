"""detector.extract and detector.templates: which records are pages, where a page's content
is, the site-template model, the fallbacks and hostile pages; and that the detector decides
a page on what was kept (a re-fetch with a new footer and advert is an exact copy)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from detector import extract
from detector.decide import Detector
from detector.extract import BODY, MAIN, Extractor, is_html, parse, path
from detector.index.memory import MemoryIndex
from detector.records import Decision, Document
from detector.settings import EngineSettings
from detector.templates import MemoryTemplates, lesson, pair_bit

from .helpers import HTML_SAMPLE, HTML_SAMPLE_TRUTH, read_jsonl

NAV = "".join(f'<li><a href="/p{i}.html">Chapter {i} of the guide</a></li>' for i in range(12))
FOOTER = "<p>Copyright 2020 The Example Project. All rights reserved. Built with care.</p>"


def page(title: str, body: str, extra_header: str = "", extra_footer: str = "") -> str:
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        f'<div class="header"><p>Example Docs: the manual of everything</p>{extra_header}</div>'
        f'<div class="sidebar"><ul>{NAV}</ul></div>'
        f'<div class="content"><h1>{title}</h1>{body}</div>'
        f'<div class="footer">{FOOTER}{extra_footer}</div></body></html>'
    )


def prose(seed: int, words: int = 60) -> str:
    """Words of letters only: the template model masks digits."""
    return (
        "<p>" + " ".join(_word((seed * 7919 + i * 104729) % 50_003) for i in range(words)) + "</p>"
    )


def _word(n: int) -> str:
    letters = ""
    while n:
        n, r = divmod(n, 26)
        letters += chr(ord("a") + r)
    return letters or "a"


def doc(i: int, html: str, url: str | None = None) -> Document:
    return Document(f"d{i}", html, url or f"https://site.example/p{i}.html")


def decide_in_batches(detector: Detector, docs: list[Document], size: int) -> list[Decision]:
    out: list[Decision] = []
    for at in range(0, len(docs), size):
        out += detector.process(docs[at : at + size])
    return out


def extractor(threshold: int = 3) -> Extractor:
    return Extractor("auto", MemoryTemplates(threshold))


def test_plain_text_is_not_a_page_and_keeps_its_text() -> None:
    ex = extractor()
    docs = [Document("a", "man page about the <a> element and <p> tags"), Document("b", "hi")]
    assert ex.batch(docs) == [None, None]
    assert not is_html("see <a href=x>here</a>", None)  # markup, but no document tags
    assert is_html("<!doctype html><p>x", None)
    assert is_html("no tags at all", {"content_type": "text/html; charset=utf-8"})
    assert not is_html("<html><body>x</body></html>", {"content-type": "text/plain"})


def test_text_mode_strips_tags_only_and_main_mode_takes_every_record() -> None:
    html = page("Title", prose(1))
    assert Extractor("text", MemoryTemplates(3)).batch([doc(0, html)]) == [None]
    got = Extractor("main", MemoryTemplates(3)).batch([Document("a", "just <b>words</b>")])[0]
    assert got is not None and got.text == "just words" and path(got.extraction) == BODY


def test_a_new_site_is_kept_whole_until_its_template_is_learned_then_only_the_content() -> None:
    ex = extractor()
    first = ex.batch([doc(0, page("Intro", prose(0)))])[0]
    assert first is not None and "Chapter 3 of the guide" in first.text  # nothing learned yet
    ex.batch([doc(i, page(f"Page {i}", prose(i))) for i in range(1, 5)])
    got = ex.batch([doc(9, page("Install", prose(9)))])[0]
    assert got is not None and path(got.extraction) == MAIN
    assert got.text.splitlines()[0] == "Install"
    assert "Chapter" not in got.text and "Copyright" not in got.text
    assert "Example Docs: the manual of everything" in got.template
    assert any("Copyright" in line for line in got.removed)


def refetched(i: int, words: int) -> str:
    """Page i fetched again: the site now shows an advert, a stamp and a related box."""
    related = "".join(f'<li><a href="#">Page {j} | Example</a></li>' for j in range(i, i + 8))
    return page(
        f"Page {i}",
        prose(i, words),
        extra_header="<div class=ad-banner><p>Join our community forum to share.</p></div>",
        extra_footer=f"<p>Page generated 2025-11-29 17:{i:02}:08 UTC</p>"
        f"<h3>See also</h3><ul>{related}</ul>",
    )


def test_a_refetch_with_a_new_advert_stamp_and_related_box_keeps_the_same_text() -> None:
    """The advert and the "See also" heading are new to the site when its re-fetches start;
    once a few re-fetched URLs showed them they are template, and a short page's re-fetch
    is cut as its first fetch was. The stamp weighs nothing from the start."""
    ex = extractor()
    first = [ex.batch([doc(i, page(f"Page {i}", prose(i, 25)))])[0] for i in range(8)]
    ex.batch([doc(i, refetched(i, 25)) for i in range(4)])
    again = ex.batch([doc(i, refetched(i, 25)) for i in range(4, 8)])
    for before, after in zip(first[4:], again, strict=True):
        assert before is not None and after is not None
        assert path(after.extraction) == MAIN and after.text == before.text


def test_a_short_refetch_is_cut_as_its_first_fetch_before_the_site_learns_its_advert() -> None:
    """The first re-fetches of a site: its advert, stamp and related box are new to the
    site, not yet template, but new to the page's URL: they change around its content."""
    ex = extractor()
    first = [ex.batch([doc(i, page(f"Page {i}", prose(i, 25)))])[0] for i in range(8)]
    again = ex.batch([doc(i, refetched(i, 25)) for i in (5, 6)])  # the site's first
    for before, after in zip(first[5:7], again, strict=True):
        assert before is not None and after is not None
        assert path(before.extraction) == MAIN
        assert after.text == before.text
        assert "Join our community forum to share." in after.template


def test_a_refetch_leaves_out_a_new_box_of_links_inside_its_content_but_keeps_an_edit() -> None:
    def content(i: int) -> str:
        return prose(i, 40) + prose(i + 50, 40) + prose(i + 90, 40)

    ex = extractor()
    first = [ex.batch([doc(i, page(f"Page {i}", content(i)))])[0] for i in range(6)]
    box = (
        "<h3>See also</h3><ul>"
        + "".join(f'<li><a href="/p{j}.html">Page {j} of the guide</a></li>' for j in range(5))
        + "</ul>"
    )
    again = ex.batch([doc(5, page("Page 5", content(5) + box))])[0]
    edited = content(4).replace("<p>", "<p>Edited ", 1)
    changed = ex.batch([doc(4, page("Page 4", edited + box))])[0]
    assert first[5] is not None and again is not None and changed is not None
    # the links go; the box's heading is a line of words, and stays as an edit would
    assert again.text == first[5].text + "\nSee also"
    assert changed.text.splitlines()[1].startswith("Edited ")
    assert "Page 0 of the guide" not in changed.text


def test_a_refetch_kept_whole_leaves_out_what_changed_around_it() -> None:
    """A page with nothing to cut to (its only lines are links and template) is kept
    whole, and its re-fetch less the advert, box and stamp that are new to its URL."""
    ex = extractor()
    links = "<ul>" + "".join(f'<li><a href="/x{j}">Ref {j}</a></li>' for j in range(5)) + "</ul>"
    for i in range(6):
        ex.batch([doc(i, page(f"Page {i}", prose(i)))])
    title = "Example Docs: the manual of everything"  # the heading is template too
    first = ex.batch([doc(20, page(title, links))])[0]
    refetch = refetched(20, 0).replace(prose(20, 0), links).replace("Page 20", title)
    again = ex.batch([doc(20, refetch)])[0]
    assert first is not None and again is not None
    assert path(first.extraction) == path(again.extraction) == BODY
    assert again.text == first.text
    assert "Ref 3" in first.text and "Copyright" in first.text
    assert "Join our community forum to share." in again.template


def test_the_extraction_says_the_path_and_the_share_of_words_kept_and_why() -> None:
    ex = extractor()
    for i in range(5):
        ex.batch([doc(i, page(f"Page {i}", prose(i)))])
    got = ex.batch([doc(9, page("Install", prose(9)))])[0]
    assert got is not None
    kept, every = len(got.text.split()), sum(len(t.split()) for t in [got.text, *got.removed])
    assert got.extraction == f"{MAIN}:{kept / every:.2f}"
    assert got.why.startswith("lines ") and "smallest element holding 90%" in got.why


def test_a_same_page_anchor_to_nothing_on_the_page_is_navigation() -> None:
    """A table of contents whose anchors point to sections the page does not have (the
    sidebar of the page whose template a copy was put in) is link text; one whose
    sections are there (a member list, the page's own contents) is the page's words."""
    toc = '<ul><li><a href="#{0}">Section {0} of it</a></li></ul>'
    body = '<div><h2 id="here">Here</h2><p>words and more words</p></div>'
    page = parse(f"<html><body>{toc.format('here')}{toc.format('gone')}{body}</body></html>")
    assert isinstance(page, extract.Page)
    got = dict(zip(page.texts, page.link_words, strict=True))
    assert got["Section here of it"] == 0 and got["Section gone of it"] == 4


def test_a_line_recurring_inside_the_content_stays_in_it() -> None:
    """Locating, not filtering: a quoted licence that is on every page stays in each."""
    ex = extractor(threshold=2)
    licence = "<p>Permission is granted to copy this document under the terms of the GFDL.</p>"
    pages = [doc(i, page(f"Page {i}", prose(i) + licence)) for i in range(6)]
    got = [ex.batch([d])[0] for d in pages]
    assert all(g is not None and "Permission is granted" in g.text for g in got)


def test_the_template_counts_urls_not_fetches_and_replays_teach_nothing() -> None:
    t = MemoryTemplates(2)
    first = [lesson("h", 1, [10, 11])]
    t.learn(first)
    t.learn(first)  # a redelivery
    assert t.template([lesson("h", 5, [10, 11])]) == [set()]  # one URL so far
    t.learn([lesson("h", 2, [10, 12])])
    assert t.template([lesson("h", 5, [10, 11, 12])]) == [{10}]
    # the page's own URL is not one of the others: URL 1 has seen 10 on one other URL only
    assert t.template([lesson("h", 1, [10])]) == [set()]
    assert t.template([lesson("other", 5, [10])]) == [set()]  # per host


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 9), st.sets(st.integers(0, 20))), max_size=40
    )
)
@settings(max_examples=60, deadline=None)
def test_the_template_model_is_brute_force_distinct_urls(
    lessons: list[tuple[int, int, set[int]]],
) -> None:
    """Against brute force (no bitmap collisions at this size): a key is template for a page
    when it was counted on `threshold` URLs other than the page's, or when the page is a
    re-fetch of its URL and the key is new to it."""
    t = MemoryTemplates(2)
    seen: dict[tuple[int, int], set[int]] = {}
    had: dict[tuple[int, int], set[int]] = {}  # (host, URL) -> the keys it was fetched with
    bits = {pair_bit(u, k) for _, u, ks in lessons for k in ks}
    assert len(bits) == len({(u, k) for _, u, ks in lessons for k in ks})
    for host, url, keys in lessons:
        h = f"h{host % 2}"
        want = {k for k in keys if len(seen.get((host % 2, k), set()) - {url}) >= 2}
        # a re-fetch (3 of its lines, and a fifth, fetched before at its URL, not all):
        # the lines it did not have before changed around its content
        before = keys & had.get((host % 2, url), set())
        if 3 <= len(before) < len(keys) and len(before) >= 0.2 * len(keys):
            want |= keys - before
        assert t.template([lesson(h, url, sorted(keys))]) == [want]
        t.learn([lesson(h, url, sorted(keys))])
        had.setdefault((host % 2, url), set()).update(keys)
        for k in keys:
            seen.setdefault((host % 2, k), set()).add(url)


def test_pages_that_cannot_be_cut_fall_back_to_the_stripped_text() -> None:
    nested = "<html><body>" + "<table><tr><td>cell " * 5000
    assert parse(nested) == "truncated"  # libxml2 stops at 256 levels
    huge = "<html><body>" + "<p>word</p>" * (extract.MAX_ELEMENTS + 1)
    assert parse(huge) == "too_many_elements"
    got = extractor().batch([doc(0, nested), doc(1, huge)])
    assert [g.extraction if g else None for g in got] == [
        "stripped:truncated",
        "stripped:too_many_elements",
    ]
    assert got[0] is not None and got[0].text.split()[:2] == ["cell", "cell"]


def test_an_empty_or_all_link_page_is_kept_whole() -> None:
    got = extractor().batch(
        [doc(0, "<html><body></body></html>"), doc(1, f"<html><body><ul>{NAV}</ul>")]
    )
    assert got[0] is not None and got[0].text == "" and path(got[0].extraction) == BODY
    assert got[1] is not None and "Chapter 0 of the guide" in got[1].text


TAGS = ["div", "p", "table", "td", "tr", "a", "b", "li", "ul", "script", "style", "main", "br"]
soup = st.lists(
    st.one_of(
        st.sampled_from([f"<{t}>" for t in TAGS] + [f"</{t}>" for t in TAGS]),
        st.sampled_from(["<a href='#x'>", "<a href=/y>", "<!--", "-->", "<![CDATA[", "&amp;", "<"]),
        st.text(max_size=12),
    ),
    max_size=60,
).map(lambda parts: "<html><body>" + "".join(parts))


@given(st.lists(soup, min_size=1, max_size=4))
@settings(max_examples=150, deadline=None)
def test_tag_soup_never_raises_and_every_page_gets_a_text(pages: list[str]) -> None:
    got = extractor(threshold=1).batch([doc(i, h) for i, h in enumerate(pages)])
    assert all(g is not None and isinstance(g.text, str) for g in got)
    assert all(path(g.extraction) in (MAIN, BODY, "stripped") for g in got if g)
    for g in got:
        assert g is not None and g.why
        if path(g.extraction) != "stripped" and ":" in g.extraction:
            assert 0 <= float(g.extraction.split(":")[1]) <= 1  # the share of words kept


def test_the_detector_decides_pages_on_their_content_and_says_how() -> None:
    settings = EngineSettings()
    detector = settings.detector(MemoryIndex(settings.block_scheme()))
    docs = [doc(i, page(f"Page {i}", prose(i, 25))) for i in range(8)]
    docs += [
        Document(f"again{i}", refetched(i, 25), f"https://site.example/p{i}.html") for i in range(8)
    ]
    decisions = decide_in_batches(detector, docs, 4)
    assert all(d.extraction and path(d.extraction) in (MAIN, BODY) for d in decisions)
    assert decisions[-1].duplicate_of == "d7" and decisions[-1].exact
    assert path(decisions[-1].to_dict()["extraction"]) == MAIN
    plain = decide_in_batches(detector, [Document("plain", "some plain words here")], 1)[0]
    assert plain.extraction is None and "extraction" not in plain.to_dict()


def other_site(title: str, body: str) -> str:
    """Another site's template: its own header, a sidebar of its own and a footer."""
    side = "".join(f'<li><a href="/t{i}">Topic number {i} here</a></li>' for i in range(9))
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        "<header><p>Other Docs portal for developers</p></header>"
        f"<main><article><h1>{title}</h1>{body}</article><aside><ul>{side}</ul></aside></main>"
        "<footer><p>Powered by Another Engine. Terms of use and privacy.</p></footer>"
        "</body></html>"
    )


def test_a_copy_in_a_foreign_template_is_cut_to_its_content() -> None:
    """A long page syndicated in another site's template, with a new title and an advert
    inside the content: the copy's cut is the source's content, its heading and advert."""
    ex = extractor()
    for i in range(6):
        ex.batch([doc(i, page(f"Page {i}", prose(i, 200)))])
        ex.batch(
            [
                Document(
                    f"o{i}", other_site(f"Other {i}", prose(100 + i, 150)), f"https://o.example/{i}"
                )
            ]
        )
    source = ex.batch([doc(2, page("Page 2", prose(2, 200)))])[0]
    advert = "<p>This content is brought to you by our partners, with thanks.</p>"
    copy = other_site("Reposted: Page 2", prose(2, 200) + advert)
    got = ex.batch([Document("copy", copy, "https://o.example/c")])[0]
    assert source is not None and got is not None and path(got.extraction) == MAIN
    body = source.text.splitlines()[1:]  # the source's content under its heading
    assert got.text.splitlines() == [
        "Reposted: Page 2",
        *body,
        "This content is brought to you by our partners, with thanks.",
    ]
    assert "Topic number 3 here" in got.removed


def test_generated_siblings_of_one_site_are_duplicates() -> None:
    """A sibling URL generated with the same content under its own title (a version path)
    is a duplicate of the first, and pages of the same template with other content are
    not."""
    settings = EngineSettings()
    detector = settings.detector(MemoryIndex(settings.block_scheme()))
    docs = [doc(i, page(f"Page {i}", prose(i, 200))) for i in range(6)]
    docs.append(doc(50, page("Page 3 (latest)", prose(3, 200)), "https://site.example/l/p3.html"))
    got = {d.id: d for d in decide_in_batches(detector, docs, 4)}
    assert got["d50"].decision == "duplicate" and got["d50"].duplicate_of == "d3"
    assert all(got[f"d{i}"].decision == "unique" for i in range(6))


def test_a_short_generated_sibling_leaves_out_its_trail_of_crumbs() -> None:
    """A short page's sibling at a version path, with a plain-text trail ("Docs » latest »
    Page 3") just outside its content: the trail is where the page sits, so the cut is the
    content alone, and the sibling is an exact copy of the first."""
    settings = EngineSettings()
    detector = settings.detector(MemoryIndex(settings.block_scheme()))
    docs = [doc(i, page(f"Page {i}", prose(i, 200))) for i in range(5)]
    docs.append(doc(7, page("Page 7", prose(7, 40))))
    trail = "<div><p>Example Docs \u00bb latest \u00bb Page 7</p></div>"
    docs.append(
        doc(50, page("Page 7", prose(7, 40), extra_header=trail), "https://site.example/l/p7")
    )
    got = {d.id: d for d in decide_in_batches(detector, docs, 4)}
    assert got["d50"].duplicate_of == "d7" and got["d50"].exact, got["d50"]
    assert extract.is_breadcrumb("Apache > HTTP Server > Documentation > Version 2.4 > Programs")
    assert not extract.is_breadcrumb("the «add» and «remove» events » all of them")
    assert not extract.is_breadcrumb("a > b")


def test_the_bundled_real_pages_beat_stripped_tags() -> None:
    """121 real pages of two sites with re-fetches and syndicated copies (tests/data)."""
    records = read_jsonl(HTML_SAMPLE)
    truth = {t["id"]: t for t in read_jsonl(HTML_SAMPLE_TRUTH)}
    scores = {}
    for mode in ("auto", "text"):
        settings = EngineSettings(html=mode)
        detector = settings.detector(MemoryIndex(settings.block_scheme()))
        docs = [Document(r["id"], r["text"], r.get("url")) for r in records]
        said = {d.id for d in decide_in_batches(detector, docs, 64) if d.duplicate_of}
        true = {i for i, t in truth.items() if t["max_jaccard_earlier"] >= 0.8}
        scores[mode] = (len(said & true) / max(len(said), 1), len(said & true) / len(true))
    assert scores["auto"][0] >= 0.95 and scores["auto"][1] >= 0.8, scores
    assert scores["auto"][0] > scores["text"][0] + 0.3, scores
