"""The consumer-group member that hands the loop its batches and commits only what it is
told: at least once (KafkaSource), or in the sink's transaction (TransactionalSource)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import (
    CommitFailedError,
    KafkaError,
)
from kafka.structs import OffsetAndMetadata

from ...errors import BackendUnavailable, ConfigError
from ...records import RawRecord
from .. import Batch
from .settings import KafkaSettings, connect
from .sink import TransactionalSink

log = logging.getLogger("neardup.kafka")

# The largest fetch response frame a consumer accepts. A topic whose max.message.bytes
# (1 MiB by default) lets a larger record batch in stalls its partition: keep it below.
MAX_FETCH_FRAME = 256 * 1024 * 1024


@dataclass
class Offsets:
    """A Kafka batch's position: on each partition, its first offset and the next one."""

    first: dict[TopicPartition, int] = field(default_factory=dict)
    next: dict[TopicPartition, int] = field(default_factory=dict)

    def to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(o, "", -1) for tp, o in self.next.items()}


class Membership(Protocol):
    """Who hears of the group's rebalances (serve's log, health and metrics). Called from
    inside poll, on the loop's thread."""

    def assigned(self, partitions: list[TopicPartition]) -> None: ...

    def revoked(self, partitions: list[TopicPartition]) -> None: ...


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # untyped library
    """Tells the source's membership, whoever it is by then."""

    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        if self.source.membership is not None:
            self.source.membership.revoked(sorted(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        if self.source.membership is not None:
            self.source.membership.assigned(sorted(assigned))


def consumer_options(
    settings: KafkaSettings,
    group: str,
    batch_size: int,
    start_from: str = "earliest",
    isolation_level: str = "read_uncommitted",
) -> dict[str, Any]:
    """A serve consumer's kafka-python options (bench/floor.py reads with the same)."""
    return dict(
        **settings.common(),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset=start_from,
        allow_auto_create_topics=False,  # topics.py: a typo must not become a topic
        isolation_level=isolation_level,
        max_poll_records=batch_size,
        max_partition_fetch_bytes=8 * 1024 * 1024,
        # The broker sends a record batch larger than the fetch sizes anyway (KIP-74),
        # but kafka-python drops a frame over this limit and fetches it again, for ever:
        # the partition would stall behind one huge batch. Above it, it still does.
        receive_message_max_bytes=MAX_FETCH_FRAME,
        # A dead consumer's partitions move after 10 s, not the client default of 45.
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,
    )


START_FROM = ("earliest", "latest")


class KafkaSource:
    """A consumer-group member that hands out batches and commits only what it is told.

    `start_from`: where a partition without a committed offset of the group starts (a
    new group, or offsets the topic's retention has deleted): its oldest record, or the
    next one to arrive. `membership` hears of the group's rebalances (set it before the
    first poll)."""

    isolation_level = "read_uncommitted"
    membership: Membership | None = None

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        group: str,
        batch_size: int,
        start_from: str = "earliest",
    ) -> None:
        if start_from not in START_FROM:
            raise ConfigError(f"start_from must be one of {', '.join(START_FROM)}")
        self.topic = topic
        self.batch_size = batch_size
        self.consumer = connect(
            KafkaConsumer,
            "consumer",
            **consumer_options(settings, group, batch_size, start_from, self.isolation_level),
        )
        self.consumer.subscribe([topic], listener=_Listener(self))

    rewinds = 0

    def batches(self) -> Iterator[Batch]:
        """Polls for ever (the loop stops taking them); an empty batch after a quiet poll."""
        while True:
            records, offsets = self.poll()
            yield Batch(records, offsets)

    def poll(self, timeout_ms: int = 500) -> tuple[list[RawRecord], Offsets]:
        """A batch of records with where they came from, and its offsets."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_size)
        batch: list[RawRecord] = []
        offsets = Offsets()
        for tp, records in polled.items():
            for r in records:
                where: dict[str, object] = {
                    "topic": r.topic,
                    "partition": r.partition,
                    "offset": r.offset,
                    "key": r.key,
                    "headers": list(r.headers) or None,
                }
                if r.value is None:  # a tombstone: "this key is gone"
                    where["tombstone"] = True
                batch.append((r.value if r.value is not None else b"", where))
                offsets.first.setdefault(tp, r.offset)
                offsets.next[tp] = r.offset + 1
        return batch, offsets

    def commit(self, position: object) -> None:
        """Commit the offsets of a batch (`Batch.position`, its Offsets)."""
        offsets = cast(Offsets, position)
        if not offsets.next:
            return
        try:
            self.consumer.commit(offsets.to_commit())
        except CommitFailedError:
            # The group rebalanced: these partitions belong to another member now, which
            # gets the records again and, by id, the same decisions. Nothing to retry.
            log.warning("offsets not committed: the group rebalanced")
        except KafkaError as exc:
            raise BackendUnavailable(f"Kafka did not take the offsets: {exc}") from exc

    def lags(self, timeout_ms: int = 1000) -> dict[TopicPartition, int]:
        """Records not yet consumed on each assigned partition. The ends come from the
        high watermarks that fetches bring back; a partition not fetched yet is asked,
        briefly: this runs on the loop's thread, and a partition whose end or position
        is not to be had within `timeout_ms` is left out this time."""
        assigned = sorted(self.consumer.assignment())
        ends = {tp: self.consumer.highwater(tp) for tp in assigned}
        if unknown := [tp for tp, end in ends.items() if end is None]:
            with contextlib.suppress(KafkaError):
                ends.update(self.consumer.end_offsets(unknown, timeout_ms=timeout_ms))
        out = {}
        for tp in assigned:
            with contextlib.suppress(KafkaError):
                position = self.consumer.position(tp, timeout_ms=timeout_ms)
                if ends.get(tp) is not None and position is not None:
                    out[tp] = max(0, ends[tp] - position)
        return out

    def lag(self) -> int:
        """Records on the assigned partitions not yet consumed."""
        return sum(self.lags().values())

    def close(self) -> None:
        self.consumer.close()  # leaves the group, so the partitions move at once


class TransactionalSource(KafkaSource):
    """A KafkaSource whose commit hands the batch's offsets to the sink's transaction.

    It reads read_committed, for two reasons: a member that takes over partitions then
    starts from their committed offsets only once a transaction still committing offsets
    of them is over (KIP-447: kafka-python asks for stable offsets in that mode), and input
    written by transactions is decided only once they commit.
    """

    isolation_level = "read_committed"

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        group: str,
        batch_size: int,
        sink: TransactionalSink,
        start_from: str = "earliest",
    ) -> None:
        self.sink = sink
        super().__init__(settings, topic, group, batch_size, start_from)

    def commit(self, position: object) -> None:
        offsets = cast(Offsets, position)
        group = self.consumer.group_metadata()
        # The broker refuses offsets of an old generation, but takes offsets sent without
        # one (generation -1) from anyone: never send those for partitions this member
        # may no longer own.
        member = group.generation_id >= 0 and bool(group.member_id)
        if member and offsets.next.keys() <= self.consumer.assignment():
            if self.sink.commit(offsets.to_commit(), group):
                return
        else:
            self.sink.abort()
        # kafka-python keeps the position of a partition that stays with this member
        # through a rebalance: without a rewind, the aborted records would be skipped.
        assigned = self.consumer.assignment()
        for tp, offset in offsets.first.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)
        self.rewinds += 1
        log.warning("transaction aborted: the group rebalanced; its records go again")
