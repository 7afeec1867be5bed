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

from ...templates import MAX_LINES, pair_bit
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

    def template(self, pages: Sequence[tuple[str, int, Sequence[int]]]) -> list[set[int]]:
        batch = Batch(self.index.client)
        for host, url, keys in pages:
            pairs, counts = self.layout.template(host)
            if keys:
                gets = [a for k in keys for a in ("GET", "u1", pair_bit(url, k))]
                batch.add(pairs, "BITFIELD_RO", pairs, *gets)
                batch.add(counts, "HMGET", counts, *map(_field, keys))
        replies = iter(self.index._call(batch.execute) if batch.commands else [])
        out: list[set[int]] = []
        for _, _, keys in pages:
            if not keys:
                out.append(set())
                continue
            counted, counts = next(replies), next(replies)
            out.append(
                {
                    k
                    for k, mine, c in zip(keys, counted, counts, strict=True)
                    if c is not None and int(c) >= self.threshold + int(mine)
                }
            )
        return out

    def learn(self, pages: Sequence[tuple[str, int, Sequence[int]]]) -> None:
        batch = Batch(self.index.client)
        ttl = self.index.keep
        for host, url, keys in pages:
            pairs, counts = self.layout.template(host)
            args = [a for k in keys for a in (pair_bit(url, k), _field(k))]
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
