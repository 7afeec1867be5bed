"""The extraction's parse before it took plain elements and bounded the truncated check
(detector.extract at 51e2d2b): lxml.html's parser, the walk over iterwalk's events and
the truncated check on every page's stripped words. The tests hold detector.extract.parse
to it page for page; the bounds are read from detector.extract, where a test may lower
them."""

from __future__ import annotations

from typing import Any

from detector import extract
from detector.extract import _WORD, Page
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
    page = extract._walk(body, etree)  # the walk itself did not change
    # libxml2 stops reading at 256 levels of nesting: a page that lost its words there is
    # not one to cut (the head's title and the skipped elements make up the rest).
    if isinstance(page, Page) and 2 * sum(page.words) < len(_WORD.findall(strip_markup(html))):
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
