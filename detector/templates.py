"""Each site's template, learned online from the feed: which lines recur across its URLs.

A line (digits masked, case folded, hashed: extract.Line.key) seen on `threshold`
distinct URLs of a host, other than the page's own, is template there. Which URL a line
was counted for is a bit of a per-host bitmap of (URL, line) pairs, so a redelivery or a
replayed batch teaches nothing twice, while a re-fetch teaches the lines it did not have
before (a re-fetch is where a site's new advert or "related pages" box first shows). A
collision only makes a pair count as already counted, at the rate of the bitmap's fill:
about 1 in 40 at 200,000 pairs (2,000 pages of 100 lines). A host's line counts hold at
most MAX_LINES lines; past that the lines not yet template are dropped (they are counted
again from 1 when they recur). Counts saturate at 255.

A re-fetch also shows its own template: the lines a URL has now that it did not have at
an earlier fetch (an advert, a "related pages" box, a fetch's stamp) changed around its
content, so they are template for that page (changed_lines). A page is taken for a
re-fetch when REFETCH_LINES of its lines, and REFETCH_SHARE of them, were counted for its
URL, and REFETCH_FILL times the share a first fetch would show by collisions alone (the
host's bitmap fill, which the model counts): a first fetch is then one only by a chance
of about 1 in 500 for a page of 10 lines at a fill of 1/40, and less for longer pages.

MemoryTemplates is the reference; index.redis.templates keeps the same model in Redis,
where every consumer of the index shares it. A host costs PAIR_BITS / 8 bytes of bitmap
(1 MiB) and about 50 bytes a counted line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import xxhash

PAIR_LOG2 = 23
PAIR_BITS = 1 << PAIR_LOG2
MAX_LINES = 50_000
MAX_COUNT = 255
REFETCH_LINES = 3
REFETCH_SHARE = 0.2
REFETCH_FILL = 4


def pair_bit(url: int, key: int) -> int:
    """The bitmap bit of a (URL, line) pair."""
    pair = url.to_bytes(8, "little") + key.to_bytes(8, "little")
    return xxhash.xxh3_64_intdigest(pair) >> (64 - PAIR_LOG2)


@dataclass(frozen=True)
class Lesson:
    """A page as the model sees it: its host, its distinct line keys, and the bitmap bit
    of each (URL, line) pair (computed once, for the question and for the lesson)."""

    host: str
    keys: Sequence[int]
    bits: Sequence[int]


def lesson(host: str, url: int, keys: Sequence[int]) -> Lesson:
    return Lesson(host, keys, [pair_bit(url, k) for k in keys])


def changed_lines(keys: Sequence[int], counted: Sequence[int], pairs: int) -> set[int]:
    """The lines of a re-fetch that its URL did not have before (none if the page is not
    a re-fetch): `counted`, whether each key was counted for the page's URL; `pairs`, the
    bits set in the host's bitmap."""
    seen, share = sum(counted), max(REFETCH_SHARE, REFETCH_FILL * pairs / PAIR_BITS)
    if seen < REFETCH_LINES or seen < share * len(keys) or seen == len(keys):
        return set()
    return {k for k, c in zip(keys, counted, strict=True) if not c}


class Template(frozenset[int]):
    """The keys that are template for a page: its host's template lines and, in `changed`
    too, a re-fetch's changed lines (the extractor leaves those out of a page it keeps
    whole; a host's template it keeps there, as the page's first fetch had it)."""

    changed: frozenset[int]

    def __new__(cls, known: Iterable[int] = (), changed: Iterable[int] = ()) -> Template:
        self = super().__new__(cls, (*known, *changed))
        self.changed = frozenset(changed)
        return self


class Templates(Protocol):
    threshold: int

    def template(self, pages: Sequence[Lesson]) -> list[Template]:
        """For each page: the keys that are template of its host, counted on `threshold`
        URLs other than the page's, and a re-fetch's changed lines (changed_lines)."""

    def learn(self, pages: Sequence[Lesson]) -> None:
        """Each line of each page not yet counted for its URL is counted once."""


class MemoryTemplates:
    def __init__(self, threshold: int) -> None:
        if threshold < 1:
            raise ValueError("a template line is seen on at least one URL")
        self.threshold = threshold
        self._pairs: dict[str, bytearray] = {}
        self._set: dict[str, int] = {}  # bits set in each host's bitmap
        self._counts: dict[str, dict[int, int]] = {}

    def template(self, pages: Sequence[Lesson]) -> list[Template]:
        out = []
        for page in pages:
            counts = self._counts.get(page.host, {})
            bitmap = self._pairs.get(page.host)
            counted = [_get(bitmap, bit) for bit in page.bits]
            known = {
                k
                for k, mine in zip(page.keys, counted, strict=True)
                if counts.get(k, 0) >= self.threshold + mine
            }
            pairs = self._set.get(page.host, 0)
            out.append(Template(known, changed_lines(page.keys, counted, pairs)))
        return out

    def learn(self, pages: Sequence[Lesson]) -> None:
        for page in pages:
            bitmap = self._pairs.setdefault(page.host, bytearray(PAIR_BITS // 8))
            counts = self._counts.setdefault(page.host, {})
            for k, bit in zip(page.keys, page.bits, strict=True):
                if not _get(bitmap, bit):
                    bitmap[bit >> 3] |= 0x80 >> (bit & 7)
                    self._set[page.host] = self._set.get(page.host, 0) + 1
                    counts[k] = min(counts.get(k, 0) + 1, MAX_COUNT)
            if len(counts) > MAX_LINES:
                self._counts[page.host] = {k: c for k, c in counts.items() if c >= self.threshold}


def _get(bitmap: bytearray | None, bit: int) -> int:
    """Redis's bit order (SETBIT: bit 0 is the most significant bit of byte 0)."""
    return 0 if bitmap is None else (bitmap[bit >> 3] >> (7 - (bit & 7))) & 1
