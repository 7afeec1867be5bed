"""The consumer-group member that hands the loop its batches (step 1) and commits only what
it is told, through its Committer (step 7, commit.py): with the consumer at least once, in
the sink's transaction exactly once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol, cast

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

from ...errors import ConfigError
from ...records import RawRecord
from .. import Batch
from .commit import Committer, ConsumerCommits, Offsets
from .settings import KafkaSettings, connect
from .sink import TransactionalSink

# The largest fetch response frame a consumer accepts. A topic whose max.message.bytes
# (1 MiB by default) lets a larger record batch in stalls its partition: keep it below.
MAX_FETCH_FRAME = 256 * 1024 * 1024


class Membership(Protocol):
    """Who hears of the group's rebalances (serve's log, health and metrics). Called from
    inside poll, on the loop's thread."""

    def assigned(self, partitions: list[TopicPartition]) -> None: ...

    def revoked(self, partitions: list[TopicPartition]) -> None: ...


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # untyped library
    """Tells the source's committer which partitions it holds, and its membership, whoever
    it is by then. (Eager rebalances revoke every partition before the assignment changes,
    cooperative ones after: the assignment itself says what is held.)"""

    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.source.committer.held(self.source.consumer.assignment())
        if self.source.membership is not None:
            self.source.membership.revoked(sorted(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.source.committer.held(self.source.consumer.assignment())
        if self.source.membership is not None:
            self.source.membership.assigned(sorted(assigned))

    def on_partitions_lost(self, lost: Any) -> None:
        # Called while the assignment still holds them: it is emptied next.
        self.source.committer.lost(set(lost))
        if self.source.membership is not None:
            self.source.membership.revoked(sorted(lost))


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
    next one to arrive. `transaction`: exactly once, the sink whose transaction takes each
    batch's offsets (None: at least once, the consumer commits them). `membership` hears of
    the group's rebalances (set it before the first poll).

    Exactly once, it reads read_committed, for two reasons: a member that takes over
    partitions then starts from their committed offsets only once a transaction still
    committing offsets of them is over (KIP-447: kafka-python asks for stable offsets in
    that mode), and input written by transactions is decided only once they commit.
    """

    membership: Membership | None = None

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        group: str,
        batch_size: int,
        start_from: str = "earliest",
        transaction: TransactionalSink | None = None,
    ) -> None:
        if start_from not in START_FROM:
            raise ConfigError(f"start_from must be one of {', '.join(START_FROM)}")
        self.topic = topic
        self.batch_size = batch_size
        self.isolation_level = "read_uncommitted" if transaction is None else "read_committed"
        self.consumer = connect(
            KafkaConsumer,
            "consumer",
            **consumer_options(settings, group, batch_size, start_from, self.isolation_level),
        )
        self.committer = Committer(
            self.consumer, ConsumerCommits(self.consumer) if transaction is None else transaction
        )
        self.consumer.subscribe([topic], listener=_Listener(self))

    @property
    def rewinds(self) -> int:
        return self.committer.rewinds

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
        self.committer.polled(offsets)
        return batch, offsets

    def commit(self, position: object) -> None:
        """Commit the offsets of a batch (`Batch.position`, its Offsets)."""
        self.committer.commit(cast(Offsets, position))

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
