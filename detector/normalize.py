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
from functools import cache

import numpy as np

from .tables import CODE_POINTS, cached

# Tags, comments and the bodies of script/style elements; crawled pages carry all three.
# Elements and comments are found by a scan, not by one regex such as
# `<(script|style)\b[^>]*>.*?</\1\s*>`: that regex retries its lazy body from every
# opening that never closes, quadratic on a page of unclosed openings (64 kB of "<!--"
# took 8 s, 4 MB would take hours).
_OPENING: dict[tuple[str, ...], re.Pattern[str]] = {
    names: re.compile(rf"<({'|'.join(names)})\b[^>]*>", re.IGNORECASE)
    for names in (("script", "style"), ("script",), ("style",))
}
_CLOSING = {name: re.compile(rf"</{name}\s*>", re.IGNORECASE) for name in ("script", "style")}
_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<![^<>]*>")
# html.unescape's own pattern of a character reference (see _unescape).
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
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
NO_SPACE_CHAR = f"[{_NO_SPACE_RANGES}]"
# A token is one no-space-script character or a run of other word characters.
TOKEN = f"[{_NO_SPACE_RANGES}]|(?:(?![{_NO_SPACE_RANGES}])\\w)+"


@cache
def _token() -> re.Pattern[str]:
    """Compiled when first used (10 ms): the tables and the native kernels stand in for it."""
    return re.compile(TOKEN)


def looks_like_html(text: str) -> bool:
    return "<" in text and _LOOKS_LIKE_HTML.search(text) is not None


def strip_markup(text: str) -> str:
    """Remove HTML tags, comments, script/style bodies and decode entities.

    Tags go only from pages that look like HTML; in plain text only well-formed entities
    (with their semicolon) are decoded, so `?a=1&copy=2` stays as written.
    """
    if looks_like_html(text):
        return _unescape(_TAG.sub(" ", drop_comments_scripts_styles(text)))
    if "&" in text:
        text = _ENTITY.sub(lambda m: html.unescape(m[0]), text)
    return text


def drop_comments_scripts_styles(text: str) -> str:
    """strip_markup's first step on a page: comments and script/style elements -> a space."""
    return _drop_comments(_drop_scripts_and_styles(text))


def _drop_scripts_and_styles(text: str) -> str:
    """Each script or style element, body and all, -> a space; as the regex above would,
    in one pass: an element that never closes stays, and so does every later one of its
    name (none of them can close either)."""
    names: tuple[str, ...] = ("script", "style")
    kept: list[str] = []
    pos = at = 0
    end = text.rfind(">") + 1  # no opening tag ends later: no scan runs past the last ">"
    while names and (opening := _OPENING[names].search(text, at, end)):
        name = opening[1].lower()
        closing = _CLOSING[name].search(text, opening.end(), end)
        if closing is None:
            names = tuple(n for n in names if n != name)
            at = opening.start() + 1
            continue
        kept += (text[pos : opening.start()], " ")
        pos = at = closing.end()
    return "".join(kept) + text[pos:] if kept else text


def _drop_comments(text: str) -> str:
    """Each `<!--...-->` -> a space; after an unclosed `<!--` there is nothing to drop."""
    kept: list[str] = []
    pos = 0
    while (start := text.find("<!--", pos)) >= 0 and (end := text.find("-->", start + 4)) >= 0:
        kept += (text[pos:start], " ")
        pos = end + 3
    return "".join(kept) + text[pos:] if kept else text


def _unescape(text: str) -> str:
    """html.unescape, except that a decimal reference of more than 4,300 digits does not
    raise ValueError (Python refuses such int() conversions): it is beyond U+10FFFF, so
    U+FFFD, as html.unescape answers for any reference past the last code point."""
    return _CHARREF.sub(_unescape_one, text) if "&" in text else text


def _unescape_one(ref: re.Match[str]) -> str:
    if ref[1][0] == "#" and ref[1][1] not in "xX":
        digits = ref[1][1:].rstrip(";").lstrip("0")
        return "\ufffd" if len(digits) > 7 else html.unescape(f"&#{digits or 0};")
    return html.unescape(ref[0])


# UAX #15's stream-safe limit: no character of any script carries more combining marks.
MAX_NON_STARTERS = 30
_CGJ = "\u034f"  # combining grapheme joiner: a starter that changes no text's rendering


@cache
def non_starters() -> np.ndarray:
    """Code points whose NFKD begins with a combining mark (the interpreter's Unicode)."""
    return cached("non-starters", "combining-or-nfkd-leads-with-one/1", _non_starters).view(bool)


def _non_starters() -> np.ndarray:
    table = np.zeros(CODE_POINTS, np.uint8)
    for c in range(CODE_POINTS):
        ch = chr(c)
        if unicodedata.combining(ch) or (
            unicodedata.decomposition(ch)
            and unicodedata.combining(unicodedata.normalize("NFKD", ch)[0])
        ):
            table[c] = 1
    return table


def _stream_safe(text: str) -> str:
    """A combining grapheme joiner after every 30 combining marks in a row (UAX #15's
    stream-safe format). NFKC puts a run of marks in canonical order with an insertion
    sort, quadratic in the run's length: 300 kB of alternating marks took 25 s. Marks are
    not word characters, so the tokens stay the same."""
    marks = non_starters()[np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)]
    if np.count_nonzero(marks) <= MAX_NON_STARTERS:  # most texts: too few marks for a run
        return text
    edges = np.diff(marks.astype(np.int8), prepend=0, append=0)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long = (ends - starts) > MAX_NON_STARTERS
    if not long.any():
        return text
    kept: list[str] = []
    pos = 0
    for start, end in zip(starts[long].tolist(), ends[long].tolist(), strict=True):
        for cut in range(start + MAX_NON_STARTERS, end, MAX_NON_STARTERS):
            kept += (text[pos:cut], _CGJ)
            pos = cut
    return "".join(kept) + text[pos:]


def normalize(text: str) -> str:
    """Markup removed, NFKC, case folded."""
    return fold(strip_markup(text))


def fold(text: str) -> str:
    """NFKC, case folded: a text that has no markup (or whose markup is words)."""
    # Most texts are in NFKC already, and the quick check that says so is linear.
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", _stream_safe(text))
    return text.casefold()


# --------------------------------------------------- tables for the native fold (kernels)


@cache
def nfkc_safe() -> np.ndarray:
    """1 for a code point that leaves any text it is in NFKC when every other character
    is such too: a starter (combining class 0) that NFKC keeps as it is and that composes
    with no character before it (the second of no canonical pair, no Hangul vowel or
    trailing consonant). A text of these needs no normalization; any other character
    sends its text through the native NFKC, as fold() sends it to unicodedata. (UAX #15's
    NFKC_Quick_Check "yes", from below: where in doubt, a character is not safe.)"""
    return cached("nfkc-safe", "starter-kept-composes-with-nothing/1", _nfkc_safe)


def _nfkc_safe() -> np.ndarray:
    seconds = set()
    for c in range(CODE_POINTS):
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):  # a canonical pair
            seconds.add(int(parts[1], 16))
    table = np.zeros(CODE_POINTS, np.uint8)
    for c in range(CODE_POINTS):
        ch = chr(c)
        table[c] = (
            c not in seconds
            and not 0xD800 <= c <= 0xDFFF
            and unicodedata.combining(ch) == 0
            and unicodedata.normalize("NFKC", ch) == ch
        )
    table[0x1160 : 0x11FF + 1] = 0  # Hangul jamo: vowels and trailing consonants compose
    return table


@cache
def casefolds() -> np.ndarray:
    """str.casefold of every code point, as (3, code points) int32: the first character
    as an offset from the code point itself, then the second and third or 0 (a fold is
    at most three characters; it never depends on the neighbours)."""
    flat = cached("casefold", "str.casefold/1", _casefolds, 3 * CODE_POINTS, np.int32)
    return flat.reshape(3, CODE_POINTS)


def _casefolds() -> np.ndarray:
    table = np.zeros((3, CODE_POINTS), np.int32)
    for c in range(CODE_POINTS):
        folded = chr(c).casefold()
        if folded != chr(c):
            table[0, c] = ord(folded[0]) - c
            for i, ch in enumerate(folded[1:], 1):
                table[i, c] = ord(ch)
    return table.ravel()


# The native NFKC (native/src/nfkc.rs) runs UAX #15's algorithm on these: the data is the
# interpreter's, so the two paths agree on every Unicode version, as the other tables do.


@cache
def combining_classes() -> np.ndarray:
    """unicodedata.combining of every code point: canonical ordering, and what blocks a
    composition."""
    return cached("combining", "unicodedata.combining/1", _combining_classes)


def _combining_classes() -> np.ndarray:
    return np.array([unicodedata.combining(chr(c)) for c in range(CODE_POINTS)], np.uint8)


_NFKD = "unicodedata.normalize-NFKD-but-hangul-syllables/1"


@cache
def decompositions() -> tuple[np.ndarray, np.ndarray]:
    """The NFKD of every code point it changes, but Hangul syllables (decomposed by
    arithmetic): how many code points each decomposes to (uint8, 0 where NFKD keeps it),
    and all the decompositions one after another in code point order (int32)."""
    lengths = cached("nfkd-lengths", _NFKD, lambda: _decompositions()[0])
    size = int(lengths.sum(dtype=np.int64))
    values = cached("nfkd", _NFKD, lambda: _decompositions()[1], size, np.int32)
    return lengths, values


@cache  # one scan for both tables when neither was cached
def _decompositions() -> tuple[np.ndarray, np.ndarray]:
    lengths = np.zeros(CODE_POINTS, np.uint8)
    values: list[int] = []
    for c in range(CODE_POINTS):
        if 0xAC00 <= c <= 0xD7A3:
            continue
        nfkd = unicodedata.normalize("NFKD", chr(c))
        if nfkd != chr(c):
            lengths[c] = len(nfkd)
            values += map(ord, nfkd)
    return lengths, np.array(values, np.int32)


@cache
def compositions() -> np.ndarray:
    """The canonical pairs NFKC composes, by their primary composite: (2, code points)
    int32, the first and the second character, 0 and 0 for every other code point.
    Hangul syllables compose by arithmetic."""
    flat = cached("compositions", "nfc-recomposes/1", _compositions, 2 * CODE_POINTS, np.int32)
    return flat.reshape(2, CODE_POINTS)


def _compositions() -> np.ndarray:
    table = np.zeros((2, CODE_POINTS), np.int32)
    for c in range(CODE_POINTS):
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) != 2 or parts[0].startswith("<"):
            continue  # no canonical pair: a singleton, a compatibility form or nothing
        first, second = (int(p, 16) for p in parts)
        # Composition exclusions (U+0958, U+FB1D, ...) and pairs that lead with a mark
        # (U+0344) stay apart in NFC: only a pair the interpreter puts together counts.
        if unicodedata.normalize("NFC", chr(first) + chr(second)) == chr(c):
            table[:, c] = first, second
    return table.ravel()


def tokens(normalized: str) -> list[str]:
    """Words of a normalized text: runs of word characters; no-space scripts per character.

    The reference definition; detector.tokenize computes the same tokens vectorized.
    """
    if normalized.isascii():
        return _ASCII_WORD.findall(normalized)
    return _token().findall(normalized)


_ASCII_WORD = re.compile(r"\w+")
