"""Step 7, written once for both modes: a batch's offsets are committed only for the
partitions this member has held, without a break, since it polled them.

Which partitions those are, what a rebalance that took some of them does, what a refusal
means and when the source goes back (`rewinds`) is the Committer's; only how the offsets
reach the broker is the mode's (its Commits):

  at least once   the consumer commits them (ConsumerCommits). The batch's decisions are
                  published already (step 6), so a partition the group gave to another
                  member meanwhile is only logged: its new owner starts from the offsets
                  committed before, and decides those records again, the same way (by id).
  exactly once    the sink's transaction takes them and commits (TransactionalSink.commit,
                  which sends the consumer's group metadata with them: KIP-447). A lost
                  partition aborts the whole transaction, which holds that partition's
                  decisions too; the partitions kept are rewound to the first record handed
                  out and not committed, so that neither the aborted batch nor a batch
                  polled after it (which the loop then drops) is skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import TopicPartition
from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from ...errors import BackendUnavailable

log = logging.getLogger("neardup.kafka")


class Hold:
    """This member's hold of one partition, from its assignment to its revocation or loss:
    kafka-python keeps the partition's position for exactly as long."""

    __slots__ = ("handed", "unsettled")

    def __init__(self) -> None:
        self.unsettled: int | None = None  # the first offset handed out and not committed
        self.handed = 0  # the offset after the last record handed out


@dataclass
class Offsets:
    """A Kafka batch's position: on each partition, its first offset and the next one, and
    the hold of the partition it was polled in."""

    first: dict[TopicPartition, int] = field(default_factory=dict)
    next: dict[TopicPartition, int] = field(default_factory=dict)
    holds: dict[TopicPartition, Hold] = field(default_factory=dict, compare=False, repr=False)


class Commits(Protocol):
    """How a mode hands a batch's offsets to the broker."""

    # The batch's records are committed with its offsets: a lost partition aborts them all,
    # and the partitions kept are read again. Otherwise the records are published already.
    atomic: bool

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Any) -> None:
        """Commit, for the member of group metadata `group`; raises kafka-python's errors."""

    def abort(self) -> None:
        """Take back what the commit would have committed with the offsets, if anything."""

    def failed(self, exc: KafkaError) -> Exception:
        """What a refusal other than the group's means (its clean-up done): what to raise."""


class ConsumerCommits:
    """At least once: the consumer commits the offsets (OffsetCommit)."""

    atomic = False

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Any) -> None:
        self.consumer.commit(offsets)  # kafka-python sends its own generation with them

    def abort(self) -> None:
        pass  # the decisions are published: nothing to take back

    def failed(self, exc: KafkaError) -> Exception:
        return BackendUnavailable(f"Kafka did not take the offsets: {exc}")


# What kafka-python raises when the group has moved on from this member's generation (the
# broker refused it, or the member is rejoining): the offsets are the group's to give now,
# and retrying the commit cannot cure that, only the next poll rejoins.
GROUP_MOVED_ON = (CommitFailedError, RebalanceInProgressError)


class Committer:
    """Commits a batch's offsets (Offsets) for the partitions still held, by `commits`.

    `held` and `lost` hear of the group's rebalances (the source's listener, inside poll),
    `polled` of every batch handed to the loop. `rewinds` counts the times it moved the
    consumer back: a batch polled before that is polled again, and must not be decided."""

    def __init__(self, consumer: Any, commits: Commits) -> None:
        self.consumer = consumer
        self.commits = commits
        self.rewinds = 0
        self._holds: dict[TopicPartition, Hold] = {}

    def held(self, partitions: set[TopicPartition]) -> None:
        """The partitions this member holds now: a hold that ended is forgotten, with the
        position kafka-python forgot; a partition assigned again begins a new one."""
        for tp in self._holds.keys() - partitions:
            del self._holds[tp]
        for tp in partitions - self._holds.keys():
            self._holds[tp] = Hold()

    def lost(self, partitions: set[TopicPartition]) -> None:
        """This member left the group without giving these back (its session expired): their
        positions are reset, and a partition given back to it is a new hold."""
        for tp in partitions:
            self._holds.pop(tp, None)

    def polled(self, offsets: Offsets) -> None:
        for tp, first in offsets.first.items():
            # kafka-python tells the listener of a partition before it fetches from it; a
            # consumer that does not is taken to hold it from its first records on
            hold = self._holds.setdefault(tp, Hold())
            offsets.holds[tp] = hold
            if hold.unsettled is None:
                hold.unsettled = first
            hold.handed = max(hold.handed, offsets.next[tp])

    def commit(self, offsets: Offsets) -> None:
        if not offsets.next:
            return  # nothing polled, nothing to commit
        group = self.consumer.group_metadata()
        kept = self._kept(offsets, group)
        lost = sorted(offsets.next.keys() - kept)
        if lost and self.commits.atomic:
            self.commits.abort()
            self._rebalanced(offsets, lost)
            return
        try:
            if kept:
                self.commits.commit(
                    {tp: OffsetAndMetadata(offsets.next[tp], "", -1) for tp in sorted(kept)},
                    group,
                )
        except GROUP_MOVED_ON:
            self.commits.abort()
            self._rebalanced(offsets, sorted(offsets.next))
            return
        except KafkaError as exc:
            raise self.commits.failed(exc) from exc
        for tp in kept:
            hold = self._holds[tp]
            hold.unsettled = None if offsets.next[tp] >= hold.handed else offsets.next[tp]
        if lost:
            self._rebalanced(offsets, lost)

    def _kept(self, offsets: Offsets, group: Any) -> set[TopicPartition]:
        """The batch's partitions held since its poll, by a member of the group's generation.
        The broker checks neither: it takes offsets sent without a generation from anyone,
        and of any partition from a member of the current one."""
        if group.generation_id < 0 or not group.member_id:
            return set()
        assigned = self.consumer.assignment()
        return {
            tp
            for tp in offsets.next
            if tp in assigned and tp in self._holds and self._holds[tp] is offsets.holds.get(tp)
        }

    def _rebalanced(self, offsets: Offsets, lost: list[TopicPartition]) -> None:
        """The group took `lost` (or refused the batch): log it; if the records went with
        the offsets (aborted), go back for those of the partitions kept."""
        if not self.commits.atomic:
            log.warning(
                "offsets of %s not committed: the group rebalanced; whoever holds them now "
                "decides their records again",
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in lost),
            )
            return
        # kafka-python keeps the position of a partition held through a rebalance: without
        # a rewind, the aborted records would be skipped, and so would those of a batch
        # polled since, on any partition held (the loop drops that batch, seeing `rewinds`).
        assigned = self.consumer.assignment()
        for tp, hold in sorted(self._holds.items()):
            back = [hold.unsettled] if hold.unsettled is not None else []
            if offsets.holds.get(tp) is hold and tp in offsets.first:
                back.append(offsets.first[tp])
            if back and tp in assigned:
                hold.unsettled = min(back)
                self.consumer.seek(tp, hold.unsettled)
        self.rewinds += 1
        log.warning("transaction aborted: the group rebalanced; its records go again")
