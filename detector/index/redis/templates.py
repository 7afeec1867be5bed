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
from typing import Any

from ...templates import MAX_LINES, Lesson
from .cluster import Batch
from .keys import Layout
from .lua import LEARN_TEMPLATE


class RedisTemplates:
    def __init__(self, index: Any, threshold: int) -> None:
        if threshold < 1:
            raise ValueError("a template line is seen on at least one URL")
        self.index = index  # a RedisIndex: its client, layout, retention and error mapping
        self.threshold = threshold

    @property
    def layout(self) -> Layout:
        layout: Layout = self.index.layout
        return layout

    def template(self, pages: Sequence[Lesson]) -> list[set[int]]:
        batch = Batch(self.index.client)
        for page in pages:
            pairs, counts = self.layout.template(page.host)
            if page.keys:
                batch.add(
                    pairs, "BITFIELD_RO", pairs, *[a for b in page.bits for a in ("GET", "u1", b)]
                )
                batch.add(counts, "HMGET", counts, *map(_field, page.keys))
        replies = iter(self.index._call(batch.execute) if batch.commands else [])
        out: list[set[int]] = []
        for page in pages:
            if not page.keys:
                out.append(set())
                continue
            counted, counts = next(replies), next(replies)
            out.append(
                {
                    k
                    for k, mine, c in zip(page.keys, counted, counts, strict=True)
                    if c is not None and int(c) >= self.threshold + int(mine)
                }
            )
        return out

    def learn(self, pages: Sequence[Lesson]) -> None:
        batch = Batch(self.index.client)
        ttl = self.index.keep
        for page in pages:
            pairs, counts = self.layout.template(page.host)
            args = [a for k, b in zip(page.keys, page.bits, strict=True) for a in (b, _field(k))]
            batch.add(
                pairs,
                "EVAL",
                LEARN_TEMPLATE,
                2,
                pairs,
                counts,
                MAX_LINES,
                self.threshold,
                ttl,
                *args,
            )
        if batch.commands:
            self.index._call(batch.execute)


def _field(key: int) -> bytes:
    return key.to_bytes(8, "little")
