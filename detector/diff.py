"""A word-level diff of two texts, for a person to see why a pair was matched or not:
`neardup explain` draws it in the terminal, `neardup review` in its HTML page.

Words are compared casefolded, as the detector compares them, and shown as written. The
diff is difflib's (Ratcliff-Obershelp on the word lists, without its junk heuristic,
which would call a long page's commonest words junk and misalign it).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

Tag = Literal["equal", "replace", "delete", "insert"]
_WORD = re.compile(r"\S+")
# ANSI: shared words plain, the first text's own struck red, the second's underlined green
_COLORS = {"a": "\x1b[9;31m", "b": "\x1b[4;32m"}
_RESET = "\x1b[0m"


@dataclass(frozen=True)
class Span:
    """A run of the diff: `a` and `b` are the two texts' words in it (one of them empty
    for a delete or an insert; equal, but for case, for an equal run)."""

    tag: Tag
    a: tuple[str, ...]
    b: tuple[str, ...]


def spans(a: str, b: str) -> list[Span]:
    """The runs of words shared by `a` and `b` and those that differ, in order."""
    wa, wb = _WORD.findall(a), _WORD.findall(b)
    matcher = difflib.SequenceMatcher(
        None, [w.casefold() for w in wa], [w.casefold() for w in wb], autojunk=False
    )
    return [
        Span(tag, tuple(wa[i1:i2]), tuple(wb[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def shared_words(diff: list[Span]) -> tuple[int, int, int]:
    """Words in shared runs, and the words of each text in total."""
    shared = sum(len(s.a) for s in diff if s.tag == "equal")
    return shared, sum(len(s.a) for s in diff), sum(len(s.b) for s in diff)


def render(diff: list[Span], color: bool, context: int | None = 12) -> str:
    """The diff as one text: shared words as they are, the first text's own words as
    [-words-] and the second's as {+words+} (or in color). A shared run longer than
    2 x `context` words keeps `context` at each end around "...", unless context is None."""
    out: list[str] = []
    for s in diff:
        if s.tag == "equal":
            words = list(s.b)
            if context is not None and len(words) > 2 * context + 1:
                words = [*words[:context], f"... ({len(words) - 2 * context} shared words) ...",
                         *words[-context:]]  # fmt: skip
            out.append(" ".join(words))
            continue
        for side, words_of in (("a", s.a), ("b", s.b)):
            if words_of:
                text = " ".join(words_of)
                if color:
                    out.append(f"{_COLORS[side]}{text}{_RESET}")
                else:
                    out.append(f"[-{text}-]" if side == "a" else f"{{+{text}+}}")
    return " ".join(out)
