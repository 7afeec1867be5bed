"""Kafka adapters: the consumer-group source, the decision and dead-letter sink, and the
small producer and tail used to try things by hand."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import CommitFailedError, KafkaError, TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from ..errors import BackendUnavailable, ConfigError
from ..records import Decision, RawRecord


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str
    client_id: str = "neardup"

    def common(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers.split(","), "client_id": self.client_id}


def _connect(factory: Any, what: str, **kwargs: Any) -> Any:
    try:
        return factory(**kwargs)
    except KafkaError as exc:
        raise BackendUnavailable(
            f"no Kafka broker answers at {kwargs['bootstrap_servers']}: {what}"
        ) from exc


def ensure_topics(settings: KafkaSettings, topics: dict[str, int]) -> None:
    """Create the topics that do not exist yet (name -> partitions)."""
    admin = _connect(KafkaAdminClient, "admin", **settings.common())
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):  # another got there first
                admin.create_topics(new)
    finally:
        admin.close()


log = logging.getLogger("neardup.kafka")


class KafkaSource:
    """A consumer-group member that hands out batches and commits only what it is told."""

    def __init__(self, settings: KafkaSettings, topic: str, group: str, batch_size: int) -> None:
        self.topic = topic
        self.batch_size = batch_size
        self.consumer = _connect(
            KafkaConsumer,
            "consumer",
            **settings.common(),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=batch_size,
            max_partition_fetch_bytes=8 * 1024 * 1024,
            # A dead consumer's partitions move after 10 s, not the client default of 45.
            session_timeout_ms=10_000,
            heartbeat_interval_ms=3_000,
        )
        self.consumer.subscribe([topic])

    def poll(self, timeout_ms: int = 500) -> tuple[list[RawRecord], dict[TopicPartition, int]]:
        """A batch of records with where they came from, and the offsets that commit it."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_size)
        batch: list[RawRecord] = []
        offsets: dict[TopicPartition, int] = {}
        for tp, records in polled.items():
            for r in records:
                where = {"topic": r.topic, "partition": r.partition, "offset": r.offset}
                batch.append((r.value if r.value is not None else b"", where))
                offsets[tp] = r.offset + 1
        return batch, offsets

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            self.consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
        except CommitFailedError:
            # The group rebalanced: these partitions belong to another member now, which
            # gets the records again and, by id, the same decisions. Nothing to retry.
            log.warning("offsets not committed: the group rebalanced")
        except KafkaError as exc:
            raise BackendUnavailable(f"Kafka did not take the offsets: {exc}") from exc

    def lag(self) -> int:
        """Records on the assigned partitions not yet consumed."""
        assigned = list(self.consumer.assignment())
        if not assigned:
            return 0
        ends = self.consumer.end_offsets(assigned)
        return sum(max(0, ends[tp] - self.consumer.position(tp)) for tp in assigned)

    def close(self) -> None:
        self.consumer.close()  # leaves the group, so the partitions move at once


class KafkaSink:
    """Decisions keyed by id to the output topic; bad records to the dead-letter topic.

    flush() checks the outcome of every send: kafka-python's own flush returns even when
    sends failed, and its idempotent producer refuses all later batches after a fatal
    error. So a failed send raises (nothing gets committed) and the producer is rebuilt.
    """

    def __init__(self, settings: KafkaSettings, output_topic: str, dead_letter_topic: str) -> None:
        self.settings = settings
        self.output_topic = output_topic
        self.dead_letter_topic = dead_letter_topic
        self.producer: Any = self._producer()
        self._sent: list[Any] = []

    def _producer(self) -> Any:
        return _connect(
            KafkaProducer,
            "producer",
            **self.settings.common(),
            acks="all",
            linger_ms=5,
            retries=5,
            max_request_size=16 * 1024 * 1024,
        )

    def decisions(self, decisions: list[Decision]) -> None:
        for d in decisions:
            self._send(self.output_topic, d.id.encode(), d.to_json().encode())

    def error(self, record: dict[str, object]) -> None:
        self._send(self.dead_letter_topic, None, json.dumps(record).encode())

    def _send(self, topic: str, key: bytes | None, value: bytes) -> None:
        try:
            if self.producer is None:  # rebuilt lazily: the broker may still be away
                self.producer = self._producer()
            self._sent.append(self.producer.send(topic, key=key, value=value))
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not take a record: {exc}") from exc

    def flush(self, timeout: float = 30.0) -> None:
        """Return only when the broker has acknowledged everything sent since the last
        flush; otherwise raise, and everything must be sent again."""
        sent, self._sent = self._sent, []
        if self.producer is None:
            return
        try:
            self.producer.flush(timeout=timeout)
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not acknowledge the decisions: {exc}") from exc
        failed = [f for f in sent if not f.is_done or f.failed()]
        if failed:
            reason = failed[0].exception if failed[0].is_done else "no answer"
            self._rebuild()
            raise BackendUnavailable(
                f"{len(failed)} of {len(sent)} records were not acknowledged: {reason}"
            )

    def _rebuild(self) -> None:
        self._sent = []
        with contextlib.suppress(Exception):
            self.producer.close(timeout=0)
        self.producer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()


def produce(settings: KafkaSettings, topic: str, lines: Iterator[RawRecord]) -> Iterator[int]:
    """Send each line as a record keyed by its id (when it has one); yields a count."""
    producer = _connect(
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
    settings: KafkaSettings, topic: str, from_beginning: bool, idle_ms: int | None
) -> Iterator[bytes]:
    """Values arriving on a topic (no group: nothing is committed)."""
    consumer = _connect(
        KafkaConsumer,
        "consumer",
        **settings.common(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        consumer_timeout_ms=idle_ms if idle_ms is not None else float("inf"),
    )
    consumer.subscribe([topic])
    try:
        for message in consumer:
            yield message.value
    finally:
        consumer.close()


def check_topic_name(name: str) -> str:
    if not name or len(name) > 249 or not all(c.isalnum() or c in "._-" for c in name):
        raise ConfigError(f"{name!r} is not a valid Kafka topic name")
    return name
