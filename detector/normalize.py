"""Text normalization: Unicode NFKC, case folding, markup removal.

Pure functions, no I/O. The same normalized text feeds both the fingerprint and the
literal second pass, so the two always agree on what a word is. Whitespace is folded by
tokenizing (runs of non-word characters separate tokens, whatever their length), so
spacing-only edits change neither the fingerprint nor the exact-copy digest; leaving the
string itself unfolded saves a regex pass over every document.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Tags, comments and the bodies of script/style elements; crawled pages carry all three.
_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<![^<>]*>")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Only pages that look like HTML lose their tags: plain text such as man pages writes
# placeholders like <file> that are words, not markup.
_LOOKS_LIKE_HTML = re.compile(
    r"<(?:!doctype|html|head|body|div|p|br|span|a|table|li|ul|ol|h[1-6]|script|style)\b",
    re.IGNORECASE,
)

# Scripts written without spaces between words: each character is a token, and the
# fingerprint uses character n-grams over runs of them.
_NO_SPACE_RANGES = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u31f0-\u31ff"  # Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
NO_SPACE_CHAR = re.compile(f"[{_NO_SPACE_RANGES}]")
# A token is one no-space-script character or a run of other word characters.
TOKEN = re.compile(f"[{_NO_SPACE_RANGES}]|(?:(?![{_NO_SPACE_RANGES}])\\w)+")


def strip_markup(text: str) -> str:
    """Remove HTML tags, comments, script/style bodies and decode entities.

    Tags go only from pages that look like HTML; in plain text only well-formed entities
    (with their semicolon) are decoded, so `?a=1&copy=2` stays as written.
    """
    if "<" in text and _LOOKS_LIKE_HTML.search(text):
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _COMMENT.sub(" ", text)
        return html.unescape(_TAG.sub(" ", text))
    if "&" in text:
        text = _ENTITY.sub(lambda m: html.unescape(m[0]), text)
    return text


def normalize(text: str) -> str:
    """Markup removed, NFKC, case folded."""
    text = strip_markup(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def tokens(normalized: str) -> list[str]:
    """Words of a normalized text: runs of word characters; no-space scripts per character.

    The reference definition; detector.tokenize computes the same tokens vectorized.
    """
    if normalized.isascii():
        return _ASCII_WORD.findall(normalized)
    return TOKEN.findall(normalized)


_ASCII_WORD = re.compile(r"\w+")
