"""Vectorized tokenizer: normalized texts -> word tokens as byte spans, for a whole batch.

A token is what the regex `\\w+` finds (Unicode word characters: str.isalnum() or "_"),
except that characters of scripts written without spaces (CJK, Thai, ...) are one token
each. Working on the UTF-8 bytes with numpy keeps Python out of the per-character and
per-token loop, which is where a regex tokenizer spends most of a fingerprint's time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from .hashing import fmix64
from .normalize import NO_SPACE_CHAR, TOKEN
from .tables import CODE_POINTS, cached

NONWORD, WORD, NO_SPACE = 0, 1, 2
_U64 = np.uint64


@cache
def char_classes() -> np.ndarray:
    """Class of every code point, from the regex engine's own \\w (the interpreter's
    Unicode) and the no-space scripts' ranges."""
    return cached("char-classes", f"{TOKEN}/1", _char_classes)


def _char_classes() -> np.ndarray:
    table = np.zeros(CODE_POINTS, np.uint8)
    every = "".join(map(chr, range(CODE_POINTS)))  # index = code point (surrogates match nothing)
    for m in re.finditer(r"\w+", every):
        table[m.start() : m.end()] = WORD
    for m in re.finditer(NO_SPACE_CHAR + "+", every):
        table[m.start() : m.end()] = NO_SPACE
    return table


@dataclass
class TokenBatch:
    """Tokens of a batch of texts, in order, as parallel arrays."""

    buffer: bytes  # the texts' UTF-8 bytes, joined by single spaces
    doc: np.ndarray  # index of the text each token belongs to
    start: np.ndarray  # byte offset of the token in buffer
    end: np.ndarray  # byte offset just past the token
    nospace: np.ndarray  # True for a single character of a no-space script
    key: np.ndarray  # 64-bit hash of the token's bytes (identity, not the feature hash)
    docs: int

    def text(self, i: int) -> str:
        return self.buffer[self.start[i] : self.end[i]].decode("utf-8")

    def bounds(self) -> np.ndarray:
        """bounds[d]:bounds[d+1] are the token indices of text d."""
        return np.searchsorted(self.doc, np.arange(self.docs + 1))


def tokenize(texts: list[str]) -> TokenBatch:
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    buffer = b" ".join(encoded)
    lengths = np.fromiter((len(e) + 1 for e in encoded), np.int64, len(encoded))
    doc_start = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(texts) else lengths
    raw = np.frombuffer(buffer, np.uint8)
    padded = np.concatenate((raw, np.zeros(8, np.uint8)))

    # Class of every byte: ASCII by table; a multi-byte character's class goes to all
    # of its bytes, so that runs of word bytes are runs of word characters.
    klass = _ASCII_CLASSES[raw]
    lead = np.flatnonzero(raw >= 0xC0)
    if len(lead):
        size = np.where(raw[lead] < 0xE0, 2, np.where(raw[lead] < 0xF0, 3, 4))
        lead_class = char_classes()[_code_points(padded, lead)]
        for i in range(4):
            at = lead[size > i] + i
            klass[at[at < len(raw)]] = lead_class[size > i][at < len(raw)]
    else:
        size = np.zeros(0, np.int64)
    word = klass == WORD
    # The buffer starts and ends with word bytes only if a text does: pad with non-words.
    padded_word = np.concatenate(([False], word, [False]))
    run_start = np.flatnonzero(padded_word[1:-1] & ~padded_word[:-2])
    run_end = np.flatnonzero(~padded_word[2:] & padded_word[1:-1]) + 1
    nospace_lead = lead[klass[lead] == NO_SPACE] if len(lead) else lead
    start = np.concatenate((run_start, nospace_lead))
    end = np.concatenate((run_end, nospace_lead + size[klass[lead] == NO_SPACE]))
    nospace = np.concatenate((np.zeros(len(run_start), bool), np.ones(len(nospace_lead), bool)))
    if len(nospace_lead):
        order = np.argsort(start, kind="stable")
        start, end, nospace = start[order], end[order], nospace[order]
    doc = np.searchsorted(doc_start, start, side="right") - 1
    return TokenBatch(
        buffer=buffer,
        doc=doc,
        start=start,
        end=end,
        nospace=nospace,
        key=_span_hash(padded, start, end),
        docs=len(texts),
    )


_ASCII_CLASSES = np.array(
    [WORD if chr(c).isalnum() or chr(c) == "_" else NONWORD for c in range(128)] + [0] * 128,
    np.uint8,
)


def _code_points(padded: np.ndarray, at: np.ndarray) -> np.ndarray:
    b0, b1, b2, b3 = (padded[at + i].astype(np.int64) for i in range(4))
    two = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
    three = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
    four = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
    code = np.where(b0 < 0xE0, two, np.where(b0 < 0xF0, three, four))
    out: np.ndarray = np.minimum(code, 0x10FFFF)
    return out


def count_tokens(text: str) -> int:
    """How many tokens `tokenize` finds in one text, without making them: the runs of
    word characters and the no-space characters, counted with numpy."""
    if text.isascii():
        klass = _ASCII_CLASSES[np.frombuffer(text.encode("ascii"), np.uint8)]
    else:
        code = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        klass = char_classes()[code]
    word = np.concatenate(([False], klass == WORD))
    return int(np.count_nonzero(word[1:] & ~word[:-1]) + np.count_nonzero(klass == NO_SPACE))


def has_tokens(text: str) -> bool:
    """Whether `tokenize` finds any token in a text: a word character or one of a no-space
    script (a text's first character usually says so)."""
    return _token_start().search(text) is not None


@cache
def _token_start() -> re.Pattern[str]:
    return re.compile(rf"\w|{NO_SPACE_CHAR}")


_SPAN_SEED, _SPAN_STEP = 0x9E3779B97F4A7C15, 0x632BE59BD9B4E019
# Below this many tokens still being hashed, Python ints beat a numpy step per 8 bytes.
_FEW = 32


def _span_hash(padded: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each byte span, eight bytes at a time."""
    # Every byte offset seen as the start of an unaligned little-endian uint64.
    window = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    length = end - start
    h = fmix64(length.astype(_U64) * _U64(_SPAN_SEED))
    live = np.arange(len(start))
    chunk = 0
    while len(live) > _FEW:
        left = np.minimum(length[live] - chunk, 8).astype(_U64)
        mask = np.where(left >= 8, ~_U64(0), (_U64(1) << (left * _U64(8))) - _U64(1))
        word = window[start[live] + chunk] & mask
        with np.errstate(over="ignore"):
            h[live] = fmix64(h[live] ^ word) + _U64(_SPAN_STEP)
        chunk += 8
        live = live[length[live] > chunk]
    # The longest tokens (a 4 MB word is a 500,000-step numpy loop above: 16 s) finish
    # in Python, with the same arithmetic.
    for i in live.tolist():
        words = window[start[i] + chunk : end[i] : 8].tolist()
        tail = (int(end[i]) - int(start[i]) - chunk) % 8
        if tail:
            words[-1] &= (1 << (8 * tail)) - 1
        h[i] = _chain(int(h[i]), words)
    return h


_MASK = (1 << 64) - 1


def _chain(h: int, words: list[int]) -> int:
    """The loop of _span_hash for one token, on Python ints."""
    for word in words:
        h ^= word
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & _MASK
        h ^= h >> 33
        h = (h * 0xC4CEB93FE53A87E3) & _MASK
        h = ((h ^ (h >> 33)) + _SPAN_STEP) & _MASK
    return h
