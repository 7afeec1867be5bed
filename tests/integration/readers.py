"""Producing to and reading from the test's topics: a producer that checks every send was
acknowledged, a reader of a topic from its beginning, and one of decisions by id."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import UnknownTopicOrPartitionError

from .endpoints import BOOTSTRAP


class Producer:
    """kafka-python producer that checks every send was acknowledged. A record larger than
    16 MiB needs a larger max_request_size (and a topic whose max.message.bytes takes it)."""

    def __init__(self, max_request_size: int = 16 * 1024 * 1024) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=BOOTSTRAP.split(","),
            acks="all",
            linger_ms=5,
            max_request_size=max_request_size,
        )
        self.pending: list[Any] = []

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Any:
        future = self.producer.send(
            topic, value=value, key=key, partition=partition, headers=headers
        )
        self.pending.append(future)
        return future

    def send_record(self, topic: str, record: dict[str, Any], partition: int | None = None) -> Any:
        body = json.dumps(record, ensure_ascii=False).encode("utf-8")
        key = record["id"].encode("utf-8") if isinstance(record.get("id"), str) else None
        return self.send(topic, body, key, partition)

    def flush(self, timeout: float = 60) -> list[Any]:
        """Wait for every acknowledgement; returns their RecordMetadata, in send order."""
        self.producer.flush(timeout=timeout)
        done = [f.get(timeout=timeout) for f in self.pending]
        self.pending = []
        return done

    def close(self) -> None:
        self.producer.close(timeout=10)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TopicReader:
    """Reads a topic from its beginning without a group (nothing is committed), and keeps
    every record it has seen, in arrival order, with the reader's notes on where it was:
    `_partition`, `_offset` and `_key` (see without_notes). read_committed: only records
    of committed transactions (serve --exactly-once's); else aborted ones too. `bootstrap`:
    another Kafka than the suite's (tests/docker's compose one)."""

    def __init__(
        self,
        topic: str,
        partitions: int = 1,
        read_committed: bool = False,
        bootstrap: str = BOOTSTRAP,
    ) -> None:
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed" if read_committed else "read_uncommitted",
            max_partition_fetch_bytes=8 * 1024 * 1024,
        )
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(self.partitions)
        self.consumer.seek_to_beginning(*self.partitions)
        self.records: list[dict[str, Any]] = []  # values, parsed, with _partition/_offset
        self.tombstones: list[dict[str, Any]] = []  # records with no value, in order

    def poll(self, timeout_ms: int = 500) -> int:
        try:
            polled = self.consumer.poll(timeout_ms=timeout_ms)
        except UnknownTopicOrPartitionError:
            time.sleep(timeout_ms / 1000)
            return 0
        n = 0
        for tp in sorted(polled, key=lambda tp: tp.partition):
            for m in polled[tp]:
                if m.value is None:  # a tombstone: kept apart, it has no JSON
                    self.tombstones.append(
                        {
                            "_key": m.key,
                            "_partition": m.partition,
                            "_offset": m.offset,
                            "_headers": list(m.headers),
                        }
                    )
                    n += 1
                    continue
                value = json.loads(m.value)
                value["_partition"], value["_offset"] = m.partition, m.offset
                value["_key"] = m.key
                value["_headers"] = list(m.headers)
                self.records.append(value)
                n += 1
        return n

    def until(self, done: Callable[[TopicReader], bool], timeout: float, idle: float = 0.0) -> bool:
        """Poll until done(self) holds (then keep polling while records still arrive,
        up to `idle` seconds), or until the timeout. True if done."""
        deadline = time.monotonic() + timeout
        while not done(self):
            if time.monotonic() > deadline:
                return False
            self.poll()
        quiet_until = time.monotonic() + idle
        while time.monotonic() < min(quiet_until, deadline):
            if self.poll(timeout_ms=300):
                quiet_until = time.monotonic() + idle
        return True

    def close(self) -> None:
        self.consumer.close()


class DecisionReader(TopicReader):
    def by_id(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self.records:
            out[r["id"]].append(r)
        return out

    def first(self) -> dict[str, dict[str, Any]]:
        """The first decision published for each id."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.records:
            out.setdefault(r["id"], r)
        return out

    def missing(self, ids: Iterable[str]) -> list[str]:
        seen = {r["id"] for r in self.records}
        return [i for i in ids if i not in seen]

    def wait_for(self, ids: Iterable[str], timeout: float, idle: float = 1.0) -> list[str]:
        """Poll until every id has a decision; returns the ids still missing."""
        wanted = set(ids)
        seen: set[str] = set()
        at = 0

        def complete(reader: TopicReader) -> bool:
            nonlocal at
            for r in reader.records[at:]:
                seen.add(r["id"])
            at = len(reader.records)
            return wanted <= seen

        self.until(complete, timeout, idle)
        return sorted(wanted - seen)


def without_notes(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as they were published: without the reader's `_`-prefixed notes (the
    key among them is bytes, which JSON cannot hold)."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in records]


class Feeder(threading.Thread):
    """Produces records in chunks with a pause between them, in the background."""

    def __init__(self, topic: str, records: list[dict[str, Any]], chunk: int, pause: float):
        super().__init__(daemon=True)
        self.topic, self.records, self.chunk, self.pause = topic, records, chunk, pause
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer() as producer:
                for at in range(0, len(self.records), self.chunk):
                    for r in self.records[at : at + self.chunk]:
                        producer.send_record(self.topic, r)
                    producer.flush()
                    time.sleep(self.pause)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def finish(self, timeout: float = 120) -> None:
        self.join(timeout)
        assert not self.is_alive(), "the feeder did not finish"
        assert self.error is None, f"producing failed: {self.error!r}"
