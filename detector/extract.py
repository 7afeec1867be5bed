"""HTML pages -> the text a decision is made on: the page's main content, not its template.

A crawled page is its site's template (header, navigation, sidebar, footer) around the
page's own content. Different pages of one site share the template, and a page syndicated
elsewhere sits in another site's template, so fingerprints of whole pages say "same site",
not "same content". The content is located, not filtered: the page is cut into lines at
block elements, each line weighs its words that are neither link text nor template, and
the content is the smallest container element (div, main, article, section, td...) that
holds `share` of the page's weight. Its text is kept whole, so a line that also recurs on
other pages (an inherited member list, a licence paragraph quoted in an article) stays in
the content of every fetch of the page: what is kept never depends on what the model has
learned, only where the container is.

Template lines are learned online per host (detector.templates): a line (digits masked,
case folded) seen on `template_urls` distinct URLs of the host is template, and so are
the lines a re-fetch has that its URL did not have before. Link text (`<a href>` other
than a same-page anchor to a section the page has), short date-stamped lines ("Page
generated 2025-11-29 17:18:08 UTC", which change on every fetch) and trails of crumbs
("Docs » latest » Page") weigh nothing either.
Until the model knows a host, its pages weigh their non-link words; if nothing weighs
anything, the whole body is kept (less a re-fetch's changes).

A page that cannot be parsed within the bounds below falls back to the stripped text
(`normalize.strip_markup`), and the decision says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import numpy as np
import xxhash

from .errors import BadRecord
from .normalize import drop_comments_scripts_styles, fold, looks_like_html, strip_markup
from .records import CUT, Document, RawRecord, parse_document, too_large
from .tables import CODE_POINTS, cached
from .templates import PAIR_LOG2, Lesson, Template, Templates, lesson

Mode = Literal["auto", "main", "text"]
MODES: tuple[Mode, ...] = ("auto", "main", "text")

# The `extraction` a decision names: the located content, the whole body (nothing
# weighed anything), or the stripped page after a failure or over a bound; the first two
# with the share of the page's words kept (main:0.42), the last with its reason.
MAIN, BODY, STRIPPED = "main", "body", "stripped"

DEFAULT_SHARE = 0.9
# Bounds on one page: beyond them the stripped text is used, and the walk below (pure
# Python, linear in the elements) never sees the page. libxml2 itself stops nesting at
# 256 levels, so a page of nested tables is a wide tree, not a deep one.
MAX_HTML_BYTES = 4 * 1024 * 1024
MAX_ELEMENTS = 100_000


def _names(names: str) -> frozenset[str]:
    return frozenset(names.split())


_BLOCK = _names(
    "address article aside blockquote body br caption dd details dialog div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr li main nav ol p pre "
    "section summary table tbody td tfoot th thead tr ul"
)
_CONTAINER = _names("article aside blockquote body dd details div li main section td")
_SKIPPED = _names("button head math noscript script select style svg template")
_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")
# A fetch's own stamp: an ISO date or a clock time, on a line of a few words.
_STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}|\b\d{1,2}:\d{2}")
_STAMP_WORDS = 10
# A trail of three crumbs or more, "Docs » 3.25 » MSVC12" or "Apache > HTTP Server >
# Programs": where the page sits, not what it says. The last crumb is often the title, as
# plain text, so the line is not link-dominated; counted as words, it pulls a short page's
# cut out to the element that holds it. Separators with a space each side, crumbs of a
# few words: quoted «words», arrows in code and a sentence's "a > b" do not split so.
_CRUMB_SEPARATORS = ("\u00bb", "\u203a", ">", "\u2192")
_CRUMB_WORDS = 5
_CRUMB_LINE_WORDS = 16


@dataclass
class Page:
    """A parsed page: its lines, as columns, and the line range of each container element.
    A line's key is the xxh3 of its casefolded text with digits masked: the template
    model's key."""

    texts: list[str]
    words: list[int]
    link_words: list[int]  # of its words, those in link text
    keys: list[int]
    stamped: list[bool]  # a line of a few words with a date or a clock time (_STAMP)
    containers: list[tuple[int, int]]  # [start, end) line ranges

    def line_keys(self) -> list[int]:
        return sorted(set(self.keys))


@dataclass
class Extracted:
    text: str
    extraction: str  # MAIN, BODY or STRIPPED (+ ":" reason)
    removed: list[str] = field(default_factory=list)  # lines outside the content
    template: list[str] = field(default_factory=list)  # lines the model calls template
    why: str = field(default="", compare=False)  # how the cut was chosen (neardup extract)


def is_html(text: str, meta: dict[str, Any] | None) -> bool:
    """A page: a content type in meta says so, or the text has a document's own tags
    (<!DOCTYPE html>, <html>, <head> or <body>). Plain text that only mentions a tag (a man
    page about <a> elements) is not one, and keeps its decisions."""
    if meta:
        for name in CONTENT_TYPE_KEYS:
            value = meta.get(name)
            if isinstance(value, str):
                return "html" in value.lower()
    return looks_like_html(text) and _PAGE.search(text) is not None


CONTENT_TYPE_KEYS = ("content_type", "content-type", "contentType", "mime_type")
_PAGE = re.compile(r"<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE)


def host_of(url: str | None) -> str:
    if not url:
        return ""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:  # e.g. an invalid IPv6 literal
        return ""


def url_key(url: str) -> int:
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass"))


def parse(html: str, pages: Any = None) -> Page | str:
    """The page's lines and containers, or the reason it cannot be had. `pages` is the
    native walk (walker()), or None for _walk's."""
    if len(html) > MAX_HTML_BYTES:
        return "too_large"
    import lxml.etree as etree

    try:
        root = etree.fromstring(html.encode("utf-8", "surrogatepass"), _parser())
    except (etree.ParserError, ValueError):
        return "unparsable"
    if root is None:  # what lxml.html.document_fromstring calls "Document is empty"
        return "unparsable"
    body = root.find("body")
    if body is None:
        body = root
    page = _walk(body, etree) if pages is None else _walk_native(body, etree, pages)
    # libxml2 stops reading at 256 levels of nesting: a page that lost its words there is
    # not one to cut (the head's title and the skipped elements make up the rest).
    if isinstance(page, Page) and _more_words(html, 2 * sum(page.words), pages):
        return "truncated"
    return page


_PARSER: Any = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        import lxml.etree as etree

        # no_network: a page's DTD or entities never make the parser fetch anything. Plain
        # elements, not lxml.html's: its class lookup runs Python for every element the
        # walk touches (half the parse's time), and the tree is the same.
        _PARSER = etree.HTMLParser(encoding="utf-8", no_network=True, remove_comments=True)
    return _PARSER


def _walk(body: Any, etree: Any) -> Page | str:
    page = Page([], [], [], [], [], [])
    lines, containers = page.texts, page.containers
    chunks: list[str] = []
    link_words = 0
    starts: list[int] = []
    links: list[bool] = []  # per open element: is it a counted link
    in_link = skipped = elements = 0
    # What a same-page anchor can point to. One to nothing on the page is another page's
    # navigation: the table of contents of the page whose template a copy was put in.
    targets = {*body.xpath(".//@id"), *body.xpath(".//a/@name")}

    def flush() -> None:
        nonlocal link_words
        if chunks:
            text = " ".join("".join(chunks).split())
            if text:
                words = len(_WORD.findall(text))
                key = xxhash.xxh3_64_intdigest(
                    _DIGITS.sub("#", text.casefold()).encode("utf-8", "surrogatepass")
                )
                lines.append(text)
                page.words.append(words)
                page.link_words.append(min(link_words, words))
                page.keys.append(key)
                page.stamped.append(words <= _STAMP_WORDS and _STAMP.search(text) is not None)
            chunks.clear()
        link_words = 0

    def add(text: str | None) -> None:
        nonlocal link_words
        if text:
            chunks.append(text)
            if in_link:
                link_words += len(_WORD.findall(text))

    for event, el in etree.iterwalk(body, events=("start", "end")):
        tag = el.tag if isinstance(el.tag, str) else ""
        if event == "start":
            elements += 1
            if elements > MAX_ELEMENTS:
                return "too_many_elements"
            if skipped or tag in _SKIPPED:
                skipped += tag in _SKIPPED
                continue
            if tag in _BLOCK:
                flush()
            href = el.get("href") if tag == "a" else None
            counted = href is not None and not (
                href.startswith("#") and len(href) > 1 and href[1:] in targets
            )
            in_link += counted
            links.append(counted)
            starts.append(len(lines))
            add(el.text)
        else:
            if tag in _SKIPPED:
                skipped -= 1
                if not skipped:
                    add(el.tail)
                continue
            if skipped:
                continue
            if tag in _BLOCK:
                flush()
            start = starts.pop()
            in_link -= links.pop()
            if tag in _CONTAINER:
                containers.append((start, len(lines)))
            add(el.tail)
    flush()
    return page


def walker(choice: str = "auto") -> Any:
    """The native walk (detector._native's Pages, native/src/html.rs) for a kernels choice
    (kernels.CHOICES): None for `numpy`, or for `auto` without the module."""
    from .kernels import make_choice, native_module
    from .normalize import casefolds

    module = native_module() if make_choice(choice) != "numpy" else None
    if module is None:
        return None
    return module.Pages(
        page_classes().tobytes(),
        casefolds().astype("<i4").tobytes(),
        sorted(_BLOCK),
        sorted(_CONTAINER),
        sorted(_SKIPPED),
        MAX_ELEMENTS,
        _STAMP_WORDS,
    )


def _walk_native(body: Any, etree: Any, pages: Any) -> Page | str:
    """_walk's Page from the native walk over lxml's serialization of the same tree;
    _walk itself where the serialization has what the native walk does not read."""
    got = pages.walk(etree.tostring(body, encoding="utf-8"))  # with its tail, as _walk
    if got is None:
        return _walk(body, etree)
    if isinstance(got, str):
        return got
    texts, *columns = got
    return Page(texts.split("\n") if texts else [], *columns)


@cache
def page_classes() -> np.ndarray:
    """The walk's classes of every code point, as bits: 1 a word character (_WORD's \\w),
    2 whitespace (str.split's), 4 a digit (_DIGITS's \\d)."""
    return cached("page-classes", r"\w|isspace|\d/1", _page_classes)


def _page_classes() -> np.ndarray:
    table = word_chars().astype(np.uint8)  # bit 1
    every = "".join(map(chr, range(CODE_POINTS)))  # index = code point
    for m in _DIGITS.finditer(every):
        table[m.start() : m.end()] |= 4
    table[[c for c in range(CODE_POINTS) if chr(c).isspace()]] |= 2
    return table


def _more_words(html: str, limit: int, pages: Any = None) -> bool:
    """Whether strip_markup(html) has more than `limit` words (_WORD), counted only where
    _tagless_words (or the native walk's count of the same) cannot tell."""
    if limit >= len(html):  # stripping never lengthens a text
        return False
    if looks_like_html(html) and _tagless(html, pages) <= limit:
        return False
    return len(_WORD.findall(strip_markup(html))) > limit


def _tagless(html: str, pages: Any) -> int:
    if pages is not None:
        dropped = drop_comments_scripts_styles(html).encode("utf-8", "surrogatepass")
        words: int | None = pages.tagless_words(dropped)
        if words is not None:
            return words
    return _tagless_words(html)


def _tagless_words(html: str) -> int:
    """The words of strip_markup(html) before its entities are decoded, a bound of its
    words: decoding adds none (a reference's name or number is a word of its own that its
    character at most joins to its neighbours). Tags are found as strip_markup's regex
    finds them, with numpy instead of a regex pass over the page."""
    text = drop_comments_scripts_styles(html)
    a = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    word = word_chars().take(a)
    starts = np.flatnonzero(word[1:] > word[:-1]) + 1
    if len(a) and word[0]:
        starts = np.concatenate(([0], starts))
    # Less the words inside tags. A tag as the regex finds it: a "<" followed
    # by a letter, "/" and a letter, or "!", up to the next "<" or ">" when that is a ">".
    # Such matches never overlap (none has a "<" inside), so each "<" is one or not on its
    # own; and a word never crosses a tag's "<" or ">".
    opening = np.flatnonzero(a == 60)
    angles = np.flatnonzero((a == 60) | (a == 62))
    at = np.searchsorted(angles, opening) + 1
    opening, ends = opening[at < len(angles)], angles[at[at < len(angles)]]
    after = a[opening + 1]
    # | 32: an ASCII letter to lower case, and no other character to a letter
    letter = ((after | 32) >= 97) & ((after | 32) <= 122)
    second = a[np.minimum(opening + 2, len(a) - 1)] | 32
    tag = (a[ends] == 62) & (
        letter | (after == 33) | ((after == 47) & (second >= 97) & (second <= 122))
    )
    opening, ends = opening[tag], ends[tag]
    within = np.searchsorted(opening, starts) - 1
    inside = (within >= 0) & (starts < ends[np.maximum(within, 0)]) if len(opening) else []
    return len(starts) - int(np.count_nonzero(inside))


@cache
def word_chars() -> np.ndarray:
    """Whether each code point is a word character (_WORD's \\w, the interpreter's)."""
    return cached("word-chars", r"\w/1", _word_chars).view(bool)


def _word_chars() -> np.ndarray:
    table = np.zeros(CODE_POINTS, np.uint8)
    every = "".join(map(chr, range(CODE_POINTS)))  # index = code point
    for m in _WORD.finditer(every):
        table[m.start() : m.end()] = 1
    return table


def weights(page: Page, template: Set[int]) -> list[int]:
    """Each line's weight: its words that are neither link text nor template."""
    out = []
    for words, link_words, key, stamped in zip(
        page.words, page.link_words, page.keys, page.stamped, strict=True
    ):
        noise = key in template or 2 * link_words >= words or stamped
        out.append(0 if noise else words - link_words)
    for i, text in enumerate(page.texts):
        if out[i] and page.words[i] <= _CRUMB_LINE_WORDS and is_breadcrumb(text):
            out[i] = 0
    return out


def is_breadcrumb(line: str) -> bool:
    """A line of three crumbs or more, split by one separator with a space each side."""
    for sep in _CRUMB_SEPARATORS:
        if line.count(sep) >= 2:
            crumbs = re.split(rf"\s{sep}\s", line.strip())
            if len(crumbs) >= 3 and all(0 < len(_WORD.findall(c)) <= _CRUMB_WORDS for c in crumbs):
                return True
    return False


def locate(page: Page, template: Set[int], share: float = DEFAULT_SHARE) -> tuple[int, int]:
    """The smallest container holding `share` of the page's weight; (0, 0) if nothing
    weighs anything even without the template model."""
    start, end, _, _ = _locate(page, template, share)
    return start, end


def _locate(page: Page, template: Set[int], share: float) -> tuple[int, int, float, bool]:
    """locate's cut, the share of the weight it holds, and whether the template model was
    set aside (nothing weighed with it)."""
    w = weights(page, template)
    aside = not any(w)
    if aside:
        w = weights(page, set())
    total = sum(w)
    if not total:
        return 0, 0, 0.0, aside
    prefix = [0, *accumulate(w)]
    best = (0, len(page.texts))
    for start, end in page.containers:
        if prefix[end] - prefix[start] >= share * total and end - start < best[1] - best[0]:
            best = (start, end)
    return *best, (prefix[best[1]] - prefix[best[0]]) / total, aside


def main_content(page: Page, template: Set[int], share: float = DEFAULT_SHARE) -> Extracted:
    """The page's content, and in `extraction` the path that cut it and the share of the
    page's words kept (MAIN:0.42)."""
    changed = template.changed if isinstance(template, Template) else frozenset()
    start, end, held, aside = _locate(page, template, share)
    lines = page.texts
    words = page.words
    if end == 0 or (start, end) == (0, len(lines)):
        # Nothing to cut to: the page as its first fetch had it, less what a re-fetch
        # changed around it (an advert, a box, a stamp), or all of it if that is nothing.
        keep = [key not in changed for key in page.keys]
        if not any(keep):
            keep = [True] * len(lines)
        extraction = BODY
        why = (
            "nothing on the page weighs anything (links, stamps, no words)"
            if end == 0
            else f"no element smaller than the page holds {share:.0%} of its weight"
        )
        dropped = keep.count(False)
        why += "; kept whole" + (f", less {dropped} lines a re-fetch changed" if dropped else "")
    else:
        # A re-fetch's new box of links (related pages, see also) inside the content is
        # left out; a changed line of words (an edit) stays.
        keep = [
            start <= i < end and not (key in changed and 2 * page.link_words[i] >= words[i])
            for i, key in enumerate(page.keys)
        ]
        extraction = MAIN
        why = (
            f"lines {start + 1}-{end} of {len(lines)}: the smallest element holding "
            f"{share:.0%} of the page's weight ({held:.0%})"
        )
        if dropped := end - start - keep.count(True):
            why += f", less {dropped} lines of links a re-fetch added"
    kept = [text for text, k in zip(lines, keep, strict=True) if k]
    kept_words = sum(n for n, k in zip(words, keep, strict=True) if k)
    if aside:
        why += "; every line the model knows as template, so weighed without it"
    total = sum(words)
    return Extracted(
        "\n".join(kept),
        f"{extraction}:{kept_words / total:.2f}" if total else extraction,
        removed=lines[:start] + lines[end:] if end else [],
        template=[text for text, key in zip(lines, page.keys, strict=True) if key in template],
        why=why,
    )


def path(extraction: str) -> str:
    """The path an `extraction` names (MAIN, BODY or STRIPPED), without its share or
    reason."""
    return extraction.split(":", 1)[0]


def stripped(text: str, reason: str | None = None) -> Extracted:
    why = "tags stripped" + (f": the page could not be cut ({reason})" if reason else "")
    extraction = STRIPPED if reason is None else f"{STRIPPED}:{reason}"
    return Extracted(strip_markup(text), extraction, why=why)


class Extractor:
    """The text of each document of a batch: None for plain text (normalized as it is),
    else what an HTML page is decided on. The template model is asked, then taught, once
    per LESSON pages: the pages of one lesson do not see each other's lines, and a batch
    of 512 pages of a new site would otherwise all be cut without a model."""

    def __init__(
        self, mode: Mode, templates: Templates, share: float = DEFAULT_SHARE, pages: Any = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"html mode must be one of {', '.join(MODES)}")
        self.mode = mode
        self.templates = templates
        self.share = share
        self.pages = pages  # walker()'s native walk, or None for _walk

    def batch(self, docs: Sequence[Document]) -> list[Extracted | None]:
        out: list[Extracted | None] = [None] * len(docs)
        if self.mode == "text":
            return out
        pages: list[tuple[int, Page]] = []
        for i, doc in enumerate(docs):
            # an empty text (a record with only an embedding) has no page to parse
            if not doc.text or (self.mode == "auto" and not is_html(doc.text, doc.meta)):
                continue
            page = parse(doc.text, self.pages)
            if isinstance(page, str):
                out[i] = stripped(doc.text, page)
            else:
                pages.append((i, page))
        for at in range(0, len(pages), LESSON):
            part = pages[at : at + LESSON]
            lessons = [
                self._lesson(host_of(docs[i].url), url_key(docs[i].url or docs[i].id), page)
                for i, page in part
            ]
            known = self.templates.template(lessons)
            for (i, page), template in zip(part, known, strict=True):
                out[i] = main_content(page, template, self.share)
            self.templates.learn(lessons)
        return out

    def _lesson(self, host: str, url: int, page: Page) -> Lesson:
        keys = page.line_keys()
        if self.pages is None:
            return lesson(host, url, keys)
        return Lesson(host, keys, self.pages.pair_bits(url, keys, PAIR_LOG2))


LESSON = 16


def texts(
    docs: Sequence[Document],
    extractor: Extractor | None,
    folder: Callable[[list[str]], list[str]] | None = None,
) -> list[str]:
    """The normalized text each document is decided on (one definition: the fingerprint,
    the exact-copy digest, the literal pass and the stored text all take it). Sets each
    HTML page's `extraction`. `folder` is normalize.fold of a batch (the engine's
    kernels'), one text at a time by default."""
    got = extractor.batch(docs) if extractor is not None else [None] * len(docs)
    out = written(docs, got)
    return folder(out) if folder is not None else [fold(t) for t in out]


def written(docs: Sequence[Document], got: Sequence[Extracted | None]) -> list[str]:
    """texts() before the fold, from the extractor's answers (Extractor.batch): each
    document's text as written, a page's main content or a text without its markup. Sets
    each HTML page's `extraction`."""
    out = []
    for doc, extracted in zip(docs, got, strict=True):
        if extracted is None:
            out.append(strip_markup(doc.text))
        else:
            doc.extraction = extracted.extraction
            out.append(extracted.text)
    return out


@dataclass
class Cut:
    """A record as `neardup detect` reads it: the document, what its page was cut to (None
    for plain text), and where it was read (its line)."""

    doc: Document
    extracted: Extracted | None
    where: dict[str, object]


def in_order(
    batches: Iterable[Sequence[RawRecord]],
    extractor: Extractor,
    max_bytes: int,
    refused: Callable[[dict[str, object], str], None] | None = None,
) -> Iterator[list[Cut]]:
    """The records of a stream, a batch at a time, each page cut as `detect` cuts it: the
    template model learns from the pages in order, batch by batch (so the batches must be
    detect's --batch-size). A line detect makes an error record (too large, not a record)
    is left out, and told to `refused` with its reason."""
    for batch in batches:
        docs, wheres = [], []
        for raw, where in batch:
            try:
                if CUT in where:  # a line the source would not hold
                    raise too_large(cast(int, where[CUT]), max_bytes)
                docs.append(parse_document(raw, max_bytes))
            except BadRecord as bad:
                if refused is not None:
                    refused(where, bad.reason)
                continue
            wheres.append(where)
        got = extractor.batch(docs)
        yield [Cut(d, e, w) for d, e, w in zip(docs, got, wheres, strict=True)]
