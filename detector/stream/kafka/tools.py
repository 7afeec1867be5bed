"""The small producer and reader for trying things by hand: `neardup produce` and
`neardup tail`."""

from __future__ import annotations

import json
from collections.abc import Iterator

from kafka import KafkaConsumer, KafkaProducer

from ...records import RawRecord
from .settings import KafkaSettings, connect


def produce(settings: KafkaSettings, topic: str, lines: Iterator[RawRecord]) -> Iterator[int]:
    """Send each line as a record keyed by its id (when it has one); yields a count."""
    producer = connect(
        KafkaProducer,
        "producer",
        **settings.common(),
        acks="all",
        linger_ms=20,
        max_request_size=64 * 1024 * 1024,
    )
    try:
        for raw, _ in lines:
            key = None
            try:
                body = json.loads(raw)
                if isinstance(body, dict) and isinstance(body.get("id"), str):
                    key = body["id"].encode()
            except ValueError:
                pass  # bad lines are sent as they are: the detector dead-letters them
            producer.send(topic, key=key, value=raw)
            yield 1
        producer.flush()
    finally:
        producer.close()


def tail(
    settings: KafkaSettings,
    topic: str,
    from_beginning: bool,
    idle_ms: int | None,
    read_committed: bool = True,
) -> Iterator[bytes]:
    """Values arriving on a topic (no group: nothing is committed). read_committed: only
    records of committed transactions (and every record written without one)."""
    consumer = connect(
        KafkaConsumer,
        "consumer",
        **settings.common(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level="read_committed" if read_committed else "read_uncommitted",
        consumer_timeout_ms=idle_ms if idle_ms is not None else float("inf"),
    )
    consumer.subscribe([topic])
    try:
        for message in consumer:
            yield message.value
    finally:
        consumer.close()
