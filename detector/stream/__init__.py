"""Where records come from and where decisions go: the Source and Sink interfaces.

Three pairs implement them side by side, and the loop (detector/pipeline.py) never asks
which one it has:
  files.py    JSONL files and stdin in, JSONL out: the embedded default (`neardup detect`)
  kafka/      a consumer-group member in, a producer out (`neardup serve`)
  memory.py   lists in and out: for tests, and for a program that embeds the detector
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..records import Decision, RawRecord, Tombstone

# A Kafka record's headers, as kafka-python gives them; None for a file's records.
Headers = list[tuple[str, bytes]] | None


@dataclass
class Batch:
    """Records in source order, and what the source needs to mark them done."""

    records: list[RawRecord] = field(default_factory=list)
    position: object = None  # handed back to Source.commit (Kafka: the next offsets)


class Source(Protocol):
    @property
    def rewinds(self) -> int:
        """How many times commit() moved the source back (a transaction aborted by a
        rebalance): a batch polled before that is polled again, and must not be decided."""

    def batches(self) -> Iterator[Batch]:
        """Batches until the source ends (a file) or is closed (Kafka). An empty batch
        means nothing arrived for now: the loop gets control back to stop or upkeep."""

    def commit(self, position: object) -> None:
        """Every record up to `position` is decided and published: never deliver it again."""

    def close(self) -> None: ...


class Sink(Protocol):
    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        """Decisions, each with the headers of its record (when the source has them)."""

    def error(self, record: dict[str, object], headers: Headers = None) -> None:
        """A dead-letter record: a bad input with its reason and bytes."""

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        """A deleted id: a record of that key and no value, for a compacted topic."""

    def flush(self) -> None:
        """Return once everything sent is durable (acknowledged, written), else raise."""

    def close(self) -> None: ...


def chunks(records: Iterator[RawRecord], size: int) -> Iterator[list[RawRecord]]:
    """Consecutive lists of `size` records (the last one shorter)."""
    batch: list[RawRecord] = []
    for r in records:
        batch.append(r)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
