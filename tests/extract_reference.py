"""The extraction's parse before it took plain elements and bounded the truncated check
(detector.extract at 51e2d2b): lxml.html's parser, the walk over iterwalk's events and
the truncated check on every page's stripped words. The tests hold detector.extract.parse
to it page for page; the bounds are read from detector.extract, where a test may lower
them."""

from __future__ import annotations

from typing import Any

import xxhash

from detector import extract
from detector.extract import _BLOCK, _CONTAINER, _DIGITS, _SKIPPED, _WORD, Line, Page
from detector.normalize import strip_markup


def parse(html: str) -> Page | str:
    """The page's lines and containers, or the reason it cannot be had."""
    if len(html) > extract.MAX_HTML_BYTES:
        return "too_large"
    import lxml.etree as etree
    import lxml.html

    try:
        root = lxml.html.document_fromstring(
            html.encode("utf-8", "surrogatepass"), parser=_parser()
        )
    except (etree.ParserError, ValueError):
        return "unparsable"
    body = root.find("body")
    if body is None:
        body = root
    page = _walk(body, etree)
    # libxml2 stops reading at 256 levels of nesting: a page that lost its words there is
    # not one to cut (the head's title and the skipped elements make up the rest).
    if isinstance(page, Page) and 2 * sum(line.words for line in page.lines) < len(
        _WORD.findall(strip_markup(html))
    ):
        return "truncated"
    return page


_PARSER: Any = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        import lxml.html

        # no_network: a page's DTD or entities never make the parser fetch anything.
        _PARSER = lxml.html.HTMLParser(encoding="utf-8", no_network=True, remove_comments=True)
    return _PARSER


def _walk(body: Any, etree: Any) -> Page | str:
    lines: list[Line] = []
    containers: list[tuple[int, int]] = []
    chunks: list[str] = []
    link_words = 0
    starts: list[int] = []
    links: list[bool] = []  # per open element: is it a counted link
    in_link = skipped = elements = 0

    def flush() -> None:
        nonlocal link_words
        if chunks:
            text = " ".join("".join(chunks).split())
            if text:
                words = len(_WORD.findall(text))
                key = xxhash.xxh3_64_intdigest(
                    _DIGITS.sub("#", text.casefold()).encode("utf-8", "surrogatepass")
                )
                lines.append(Line(text, words, min(link_words, words), key))
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
            if elements > extract.MAX_ELEMENTS:  # read here: tests lower it
                return "too_many_elements"
            if skipped or tag in _SKIPPED:
                skipped += tag in _SKIPPED
                continue
            if tag in _BLOCK:
                flush()
            href = el.get("href") if tag == "a" else None
            counted = href is not None and not (href.startswith("#") and len(href) > 1)
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
    return Page(lines, containers)
