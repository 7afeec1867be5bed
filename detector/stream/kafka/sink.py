"""Decisions to the output topic and bad records to the dead-letter topic: at least once
(KafkaSink flushes, then the source's committer commits the offsets), or exactly once
(TransactionalSink: a batch's records and its offsets in one transaction, which the
committer commits through it)."""

from __future__ import annotations

import contextlib
import copy
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kafka import KafkaProducer, TopicPartition
from kafka.errors import (
    AuthorizationError,
    KafkaError,
    MessageSizeTooLargeError,
    ProducerFencedError,
    RecordListTooLargeError,
)
from kafka.partitioner.default import DefaultPartitioner
from kafka.structs import OffsetAndMetadata

from ...errors import BackendUnavailable, ConfigError, Fenced, cause
from ...records import Decision, Tombstone
from .. import Headers
from .settings import KafkaSettings, connect
from .topics import BROKER_DEFAULT_MAX_MESSAGE, RECORD_OVERHEAD, TopicLimits, record_size


def _abandon(producer: Any) -> None:
    """Close a producer without waiting for what it still has in flight. kafka-python's
    close flushes first and raises when that does not finish in time, before it stops the
    sender thread, which would go on sending: so the sender is stopped first."""
    with contextlib.suppress(Exception):
        producer._sender.force_close()
        producer._sender.join(5)
    with contextlib.suppress(Exception):
        producer.close(timeout=0)


# A record batch of the producer, at most: a serve batch's decisions (256 of about 400
# bytes) go in one produce request rather than one every 16 KiB (kafka-python's default).
RECORD_BATCH = 1024 * 1024
# The sink flushes after every batch of the loop, and a flush sends what waits at once:
# lingering until then (or until a record batch is full) sends each batch's decisions in
# a few produce requests. With 5 ms, the sender thread took a few records at a time and
# send() woke it every ninth record; KafkaSource and KafkaSink alone drained 19% faster.
LINGER_MS = 1000


class _Partitioner(DefaultPartitioner):  # type: ignore[misc]  # untyped library
    """kafka-python's own choice of partition, without its pure-Python murmur2 of every
    key when the topic has one partition (the decisions and dead letters usually do)."""

    def partition(
        self, topic: str, key: Any, key_bytes: Any, value: Any, value_bytes: Any, cluster: Any
    ) -> int:
        partitions = cluster.partitions_for_topic(topic)
        if partitions is not None and len(partitions) == 1:
            return next(iter(partitions))  # type: ignore[no-any-return]
        return super().partition(  # type: ignore[no-any-return]
            topic, key, key_bytes, value, value_bytes, cluster
        )


def producer_options(settings: KafkaSettings, limits: TopicLimits) -> dict[str, Any]:
    """The at-least-once sink's kafka-python producer options (bench/floor.py sends with
    the same)."""
    largest = max(limits.bytes.values(), default=0) + RECORD_OVERHEAD
    # The broker refuses a record batch over its topic's max.message.bytes, however small
    # its records: a batch stays within the smallest limit of the topics written.
    smallest = min((limits.of(t) for t in limits.topics), default=BROKER_DEFAULT_MAX_MESSAGE)
    return {
        **settings.common(),
        "acks": "all",
        "linger_ms": LINGER_MS,
        "batch_size": max(1, min(RECORD_BATCH, smallest - RECORD_OVERHEAD)),
        "retries": 5,
        # The decisions are near-identical JSON: zstd sent and stored the floor bench's
        # output in 1/18 of the bytes (lz4: 1/11), at the same drain rate within noise.
        "compression_type": "zstd",
        "partitioner": _Partitioner(),
        "max_request_size": max(16 * 1024 * 1024, largest),
    }


class KafkaSink:
    """Decisions keyed by id to the output topic; bad records to the dead-letter topic.

    flush() checks the outcome of every send: kafka-python's own flush returns even when
    sends failed, and its idempotent producer refuses all later batches after a fatal
    error. So a failed send raises (nothing gets committed) and the producer is rebuilt.
    """

    flush_timeout = 30.0  # seconds

    def __init__(
        self,
        settings: KafkaSettings,
        output_topic: str,
        dead_letter_topic: str,
        limits: TopicLimits | None = None,
    ) -> None:
        self.settings = settings
        self.output_topic = output_topic
        self.dead_letter_topic = dead_letter_topic
        # A record a topic would refuse is never sent: a refused send fails the whole
        # batch, and it would fail again on every retry. (None: the broker's default.)
        self.limits = limits or TopicLimits(None, ())
        self._sent: list[Any] = []
        self.producer: Any = self._producer()

    def _options(self) -> dict[str, Any]:
        return producer_options(self.settings, self.limits)

    def _producer(self) -> Any:
        return connect(KafkaProducer, "producer", **self._options())

    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        limit = self.limits.of(self.output_topic)
        values = Decision.encode_many(decisions)
        for d, value, h in zip(decisions, values, headers or [None] * len(decisions), strict=True):
            key = d.id.encode()
            if (size := record_size(key, value, h)) <= limit:
                self._send(self.output_topic, key, value, h)
            else:  # a huge url or headers copied from the record: not lost, a dead letter
                self.error(too_large(d, size, self.output_topic, limit), h)

    def error(self, record: dict[str, object], headers: Headers = None) -> None:
        topic = self.dead_letter_topic
        value, headers = fit(record, headers, topic, self.limits.of(topic))
        self._send(topic, None, value, headers)

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        """Forwarded with the same key, so a compacted decisions topic forgets it too."""
        self._send(self.output_topic, dead.id.encode(), None, headers)

    def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = None
    ) -> None:
        try:
            if self.producer is None:  # rebuilt lazily: the broker may still be away
                self.producer = self._producer()
            self._sent.append(self.producer.send(topic, key=key, value=value, headers=headers))
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not take a record: {exc}") from exc

    def flush(self) -> None:
        """Return only when the broker has acknowledged everything sent since the last
        flush; otherwise raise, and everything must be sent again."""
        sent, self._sent = self._sent, []
        if self.producer is None:
            return
        try:
            self.producer.flush(timeout=self.flush_timeout)
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not acknowledge the decisions: {exc}") from exc
        failed = [f for f in sent if not f.is_done or f.failed()]
        if failed:
            reason = failed[0].exception if failed[0].is_done else "no answer"
            self._rebuild()
            if any(f.is_done and isinstance(f.exception, TOO_LARGE) for f in failed):
                self.limits.refresh()  # a topic's limit came down: the retry fits to it
            raise BackendUnavailable(
                f"{len(failed)} of {len(sent)} records were not acknowledged: {reason}"
            )

    def _rebuild(self) -> None:
        self._sent = []
        if self.producer is not None:
            _abandon(self.producer)
        self.producer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()


# What a broker answers for a record batch over a topic's max.message.bytes.
TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)


def too_large(decision: Decision, size: int, topic: str, limit: int) -> dict[str, Any]:
    """The dead letter of a decision its topic cannot take (it carries the decision)."""
    return {
        **(decision.origin or {}),
        "reason": "decision_too_large",
        "detail": f"the decision of {decision.id!r} is {size:,} bytes with its record's "
        f"headers; topic {topic!r} takes at most {limit:,} (its max.message.bytes)",
        "id": decision.id,
        "decision": decision.to_dict(),
    }


def fit(record: dict[str, Any], headers: Headers, topic: str, limit: int) -> tuple[bytes, Headers]:
    """A dead letter as bytes that `topic` takes: as it is if it fits, else without the
    record's headers, else with its longest strings cut (the raw bytes, a url), each
    named in "cut". A topic too small even for that is a ConfigError: serve stops before
    it commits anything, rather than lose the record."""
    value = json.dumps(record).encode()
    if record_size(None, value, headers) <= limit:
        return value, headers
    record = copy.deepcopy(record)
    if headers:
        record["headers_dropped"] = len(headers)
    cut: list[str] = []
    for _ in range(4):  # each cut takes the excess off the longest string left
        value = json.dumps(record).encode()
        excess = record_size(None, value, None) - limit
        if excess <= 0:
            return value, None
        longest = max(_strings(record), key=lambda found: len(found[1]), default=None)
        if longest is None or len(longest[1]) < 64:
            break
        path, text = longest
        keep = max(0, len(text) - excess - 64) // 4 * 4  # a multiple of 4: base64 stays valid
        _set(record, path, text[:keep])
        cut.append(".".join(path))
        record["cut"] = cut
        if path == ("raw_base64",):
            record["raw_truncated"] = True
    raise ConfigError(
        f"topic {topic!r} takes records of at most {limit:,} bytes (its max.message.bytes): "
        f"too small for a dead letter of {len(value):,} even with its longest fields cut; "
        "raise its max.message.bytes"
    )


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))


def _set(record: dict[str, Any], path: tuple[str, ...], text: str) -> None:
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = text


# A transaction spans one batch's publish, flush and commit, well under a second. The
# broker aborts one left open longer, and only that releases the output to read_committed
# readers (and the input offsets to the group) after a consumer died in the middle of one.
# 10 s is Kafka Streams' choice for exactly-once, and our consumers' session timeout: a
# dead consumer's partitions and its open transaction are let go after about as long.
TRANSACTION_TIMEOUT_MS = 10_000


def transactional_id(settings: KafkaSettings, group: str) -> str:
    """A new transactional id for one serve process. Unique, so no two processes ever fence
    each other: a zombie consumer is fenced by its group's generation instead, which the
    broker checks when a transaction commits offsets (KIP-447)."""
    return f"{settings.client_id}-{group}-{uuid.uuid4().hex[:12]}"


class TransactionalSink(KafkaSink):
    """KafkaSink whose sends of one batch, and that batch's input offsets, are one Kafka
    transaction (`serve --exactly-once`).

    The transaction begins at the batch's first send (step 5) and commit() (step 7, from
    the source's Committer) adds the offsets and commits it. A failure aborts it and raises,
    and the step the loop retries finds no transaction open: a publish step sends
    everything again in a new one; a commit, which the loop retries alone, first sends
    again the records this sink kept of the batch, in a new one.

    Aborting abandons the producer and makes a new one of the same transactional id, whose
    init_transactions aborts what the old one left open. kafka-python's abort_transaction
    would wait for ever for a broker that is away, and once the broker has timed the
    transaction out, it would get this producer fenced.
    """

    # A flush inside a transaction must give up well within the transaction's timeout.
    flush_timeout = TRANSACTION_TIMEOUT_MS / 2000
    atomic = True  # (commit.Commits) the batch's records are committed with its offsets

    def __init__(
        self,
        settings: KafkaSettings,
        output_topic: str,
        dead_letter_topic: str,
        transactional_id: str,
        observe: Callable[[str], object] = lambda outcome: None,
        limits: TopicLimits | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.observe = observe  # "committed" or "aborted", once per transaction
        self._batch: list[tuple[str, bytes | None, bytes | None, Headers]] = []
        self._open = False
        super().__init__(settings, output_topic, dead_letter_topic, limits)

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
            # init_transactions and sends wait this long for a broker that is away, not
            # 60 s: then the loop's retry takes over, and beats the health endpoint.
            "max_block_ms": TRANSACTION_TIMEOUT_MS,
            # A batch's first AddPartitionsToTxn is often refused while the broker still
            # writes the previous transaction's markers, and kafka-python waits
            # retry_backoff_ms (100 by default) before asking again, not the 20 ms Java
            # waits there: a transaction of 64 records took 115 ms at its p99, 35 at 20.
            "retry_backoff_ms": 20,
            # Sends retry until the flush gives up (flush_timeout): then the transaction
            # is aborted, which a failed send would cause anyway.
            "retries": float("inf"),
        }

    def _producer(self) -> Any:
        producer = super()._producer()
        try:
            producer.init_transactions()
        except KafkaError as exc:
            _abandon(producer)
            raise self._refusal(exc, producer) from exc
        return producer

    def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = None
    ) -> None:
        if not self._open:
            self._begin()
            self._batch = []  # a new batch, or its publish step again after an abort
        self._batch.append((topic, key, value, headers))
        super()._send(topic, key, value, headers)

    def _begin(self) -> None:
        if self.producer is None:
            self.producer = self._producer()
        try:
            self.producer.begin_transaction()
        except KafkaError as exc:
            raise self.failed(exc) from exc
        self._open = True

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Any) -> None:
        """Commit the batch with its input offsets, for the consumer of group metadata
        `group` (commit.Commits). The broker refuses offsets of a generation the group has
        left (KIP-447): CommitFailedError, which the Committer answers with abort()."""
        if not self._open:  # aborted after its flush: the batch again, in a new transaction
            self._begin()
            for record in self._batch:
                super()._send(*record)
            self.flush()
        if offsets:
            self.producer.send_offsets_to_transaction(offsets, group)
        self.producer.commit_transaction()
        self._open, self._batch = False, []
        self.observe("committed")

    def abort(self) -> None:
        """Abort the open transaction, if any, and forget the batch."""
        self._rebuild()
        self._batch = []

    def _rebuild(self) -> None:
        """Abort by abandoning the producer; a new one, made at once, aborts the transaction
        at the broker, which until then holds back the output's read_committed readers."""
        fenced = self.producer is not None and _fenced(self.producer)
        super()._rebuild()
        if self._open:
            self.observe("aborted")
        self._open = False
        if fenced:
            raise self._fenced_error()
        with contextlib.suppress(BackendUnavailable):
            self.producer = self._producer()

    def failed(self, exc: KafkaError) -> Exception:
        """Abort after a failed transactional call; what to raise for it."""
        refusal = self._refusal(exc, self.producer)
        self._rebuild()
        return refusal

    def _refusal(self, exc: KafkaError, producer: Any) -> Exception:
        """What a failed transactional call means: Fenced (stop), ConfigError (a missing
        ACL permission: no retry cures it) or BackendUnavailable (retry)."""
        if cause(exc, ProducerFencedError) or _fenced(producer):
            return self._fenced_error()
        refused = cause(exc, AuthorizationError) or _last_error(producer, AuthorizationError)
        if refused:
            return ConfigError(
                f"Kafka refused transactional id {self.transactional_id!r}: {refused}"
            )
        return BackendUnavailable(f"Kafka transaction of {self.transactional_id}: {exc}")

    def _fenced_error(self) -> Fenced:
        return Fenced(
            f"Kafka fenced transactional id {self.transactional_id!r}: another producer "
            f"took it, or a transaction outlasted {TRANSACTION_TIMEOUT_MS // 1000} s; "
            "stopping, so that the group gives this consumer's records to the others"
        )

    def close(self) -> None:
        if self._open and self.producer is not None:
            with contextlib.suppress(KafkaError):
                self.producer.abort_transaction()
        super().close()


def _last_error(producer: Any, kind: type[BaseException]) -> BaseException | None:
    """The error that put a transactional producer in its failed state, if of `kind`:
    kafka-python raises it once, then only a KafkaError that names it in its message."""
    error = getattr(getattr(producer, "_transaction_manager", None), "last_error", None)
    return error if isinstance(error, kind) else None


def _fenced(producer: Any) -> bool:
    return _last_error(producer, ProducerFencedError) is not None
