"""The site-template model (detector.templates) in Redis: shared by every consumer.

A host's bitmap and line counts live in one shard (their keys share its hash tag), so a
lesson is one script, atomic on its own. Lessons of one URL are idempotent (its bit is set
once), so a batch replayed after a failure teaches nothing twice; consumers that learn the
same host at once each count their own URLs. What a page is decided on depends on what
the model knew when it was prepared, so two consumers may cut a page differently while
the model is young; a decision, once stored, is what every redelivery of its record gets.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...templates import MAX_LINES, Lesson, Template, changed_lines
from . import lua
from .store import Store


class RedisTemplates:
    """The model in an index's shards, through its `store`; `ttl`, the seconds it lives
    after its last lesson (RedisIndex.keep: as long as the index's entries, 0: for ever)."""

    def __init__(self, store: Store, ttl: int, threshold: int) -> None:
        if threshold < 1:
            raise ValueError("a template line is seen on at least one URL")
        self.store = store
        self.layout = store.layout
        self.ttl = ttl
        self.threshold = threshold

    def template(self, pages: Sequence[Lesson]) -> list[Template]:
        batch = self.store.batch()
        for page in pages:
            pairs, counts = self.layout.template(page.host)
            if page.keys:
                batch.add(
                    pairs, "BITFIELD_RO", pairs, *[a for b in page.bits for a in ("GET", "u1", b)]
                )
                batch.add(counts, "HMGET", counts, PAIRS, *map(_field, page.keys))
        replies = iter(self.store.call(batch.execute) if batch.commands else [])
        out: list[Template] = []
        for page in pages:
            if not page.keys:
                out.append(Template())
                continue
            counted, (pairs, *counts) = [int(b) for b in next(replies)], next(replies)
            known = {
                k
                for k, mine, c in zip(page.keys, counted, counts, strict=True)
                if c is not None and int(c) >= self.threshold + mine
            }
            out.append(Template(known, changed_lines(page.keys, counted, int(pairs or 0))))
        return out

    def learn(self, pages: Sequence[Lesson]) -> None:
        batch = self.store.batch()
        for page in pages:
            pairs, counts = self.layout.template(page.host)
            lines = [(b, _field(k)) for k, b in zip(page.keys, page.bits, strict=True)]
            args = lua.learn_template_args(
                pairs, counts, MAX_LINES, self.threshold, self.ttl, lines
            )
            batch.add(args.key, *args.command())
        if batch.commands:
            self.store.call(batch.execute)


# The counts hash's field for the bits set in the bitmap: line keys are 8 bytes, so no line
# is named so (learn_template.lua keeps it).
PAIRS = b"pairs"


def _field(key: int) -> bytes:
    return key.to_bytes(8, "little")
