"""The small producer and reader for trying things by hand: `neardup produce` and
`neardup tail`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError, MessageSizeTooLargeError

from ...errors import BackendUnavailable
from .settings import KafkaSettings, connect, plain
from .topics import RECORD_OVERHEAD, record_size


@dataclass(frozen=True)
class Refused:
    """A line that did not reach the topic, and why."""

    line: object  # its line number in the input
    id: str | None
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}" + (f" (id {self.id!r})" if self.id else "") + f": {self.reason}"


class Producer:
    """`neardup produce`: each line a record keyed by its id (when it has one), and the
    outcome of every send checked: a record the topic refuses is named, never counted as
    sent. Records over the topic's `limit` are refused here, with the reason in words."""

    def __init__(self, settings: KafkaSettings, topic: str, limit: int) -> None:
        self.topic = topic
        self.limit = limit
        self.producer = connect(
            KafkaProducer,
            "producer",
            **settings.common(),
            acks="all",
            linger_ms=20,
            max_request_size=limit + RECORD_OVERHEAD,
        )
        self.sent = 0  # acknowledged by the broker (counted on its thread)
        self.refused: list[Refused] = []

    def send(self, raw: bytes, where: dict[str, object]) -> None:
        doc_id = _id(raw)
        key = doc_id.encode("utf-8", "surrogatepass") if doc_id is not None else None
        line = where.get("line")
        if (size := record_size(key, raw, None)) > self.limit:
            self.refused.append(Refused(line, doc_id, self._too_large(size)))
            return
        try:
            future = self.producer.send(self.topic, key=key, value=raw)
        except KafkaTimeoutError as exc:  # no broker for max_block_ms: the rest would wait too
            raise BackendUnavailable(
                f"Kafka stopped answering ({plain(exc)}) at line {line}: that line and the "
                f"ones after it were not sent ({self.sent} acknowledged so far)"
            ) from exc
        except KafkaError as exc:
            self.refused.append(Refused(line, doc_id, self._reason(exc, size)))
            return
        future.add_callback(self._acknowledged)
        future.add_errback(
            lambda exc: self.refused.append(Refused(line, doc_id, self._reason(exc, size)))
        )

    def refuse(self, where: dict[str, object], size: int) -> None:
        """A line too long to be read whole: refused like any record over the limit."""
        self.refused.append(Refused(where.get("line"), None, self._too_large(size)))

    def _acknowledged(self, _: object) -> None:
        self.sent += 1

    def _failed(self, record: Refused, size: int, exc: BaseException) -> None:
        self.refused.append(Refused(record.line, record.id, self._reason(exc, size)))

    def close(self) -> None:
        """Wait for every answer; a record still unanswered then is refused by close."""
        try:
            self.producer.flush()
        finally:
            self.producer.close()

    def _reason(self, exc: BaseException, size: int) -> str:
        if isinstance(exc, MessageSizeTooLargeError):
            return self._too_large(size) + " (the broker said so)"
        return f"Kafka refused it: {type(exc).__name__}: {exc}"

    def _too_large(self, size: int) -> str:
        return (
            f"{size:,} bytes, more than topic {self.topic!r} takes ({self.limit:,} bytes, its "
            "max.message.bytes)"
        )


def _id(raw: bytes) -> str | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None  # a bad line is sent as it is: serve dead-letters it
    doc_id = body.get("id") if isinstance(body, dict) else None
    return doc_id if isinstance(doc_id, str) else None


def tail(
    settings: KafkaSettings,
    topic: str,
    from_beginning: bool,
    idle_ms: int | None,
    read_committed: bool = True,
) -> Iterator[Any]:
    """The records arriving on a topic (kafka-python's ConsumerRecord: topic, partition,
    offset, timestamp, key, headers, value), with no group: nothing is committed.
    read_committed: only records of committed transactions (and every record written
    without one)."""
    consumer = connect(
        KafkaConsumer,
        "consumer",
        **settings.common(),
        group_id=None,
        enable_auto_commit=False,
        allow_auto_create_topics=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level="read_committed" if read_committed else "read_uncommitted",
        consumer_timeout_ms=idle_ms if idle_ms is not None else float("inf"),
    )
    consumer.subscribe([topic])
    try:
        yield from consumer
    finally:
        consumer.close()


def as_json(record: Any) -> dict[str, Any]:
    """A record as `neardup tail --format json` prints it: the value as JSON when it is,
    else as text; a tombstone's value is null."""
    value: Any = record.value
    if value is not None:
        try:
            value = json.loads(value)
        except ValueError:
            value = value.decode("utf-8", "replace")
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": None if record.key is None else record.key.decode("utf-8", "replace"),
        "headers": {k: v.decode("utf-8", "replace") for k, v in record.headers or ()},
        "value": value,
    }
