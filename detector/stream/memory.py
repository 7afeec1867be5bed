"""A source and a sink over Python lists: the loop without files or servers, for tests
and for programs that embed the detector (as quix-streams ships its ListSink)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..records import Decision, RawRecord, Tombstone
from . import Batch, Headers, chunks


class ListSource:
    """Records from a list: bytes (numbered from 1, like lines) or (bytes, where) pairs.
    The position of a batch is the number of records up to its end; `committed` keeps
    every position committed, in order."""

    def __init__(self, records: Iterable[bytes | RawRecord], batch_size: int = 512) -> None:
        self.records: list[RawRecord] = [
            (r, {"source": "list", "line": n}) if isinstance(r, bytes) else r
            for n, r in enumerate(records, start=1)
        ]
        self.batch_size = batch_size
        self.committed: list[int] = []
        self.closed = False

    rewinds = 0  # a file or a list never goes back

    def batches(self) -> Iterator[Batch]:
        end = 0
        for part in chunks(iter(self.records), self.batch_size):
            end += len(part)
            yield Batch(part, end)

    def commit(self, position: object) -> None:
        assert isinstance(position, int)
        self.committed.append(position)

    def close(self) -> None:
        self.closed = True


class ListSink:
    """Keeps what it is given. `flushed` is how many decisions were flushed (published,
    not merely sent), `flushes` how many times."""

    def __init__(self) -> None:
        self.out: list[Decision] = []
        self.errors: list[dict[str, Any]] = []
        self.tombstones: list[Tombstone] = []
        self.headers: list[Headers] = []  # of each decision, in order
        self.flushed = 0
        self.flushes = 0
        self.closed = False

    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        self.out.extend(decisions)
        self.headers.extend(headers or [None] * len(decisions))

    def error(self, record: dict[str, Any], headers: Headers = None) -> None:
        self.errors.append(record)

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        self.tombstones.append(dead)

    def flush(self) -> None:
        self.flushed = len(self.out)
        self.flushes += 1

    def close(self) -> None:
        self.closed = True
