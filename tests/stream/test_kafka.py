"""detector.stream.kafka without a broker: the order of the producer's calls in a batch of
`serve --exactly-once`, and what a failed flush or commit, a rebalance and a fence do to it;
what the one committer commits in either mode when the group takes partitions away; against
fakes of kafka-python's producer and consumer that keep a transaction's records apart until
it commits. The real broker is tests/integration/test_exactly_once.py's."""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import (
    CommitFailedError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from kafka.structs import ConsumerGroupMetadata

from detector import cli
from detector.errors import BackendUnavailable, ConfigError, Contention, Fenced
from detector.pipeline import Loop, Prepared
from detector.records import Decision
from detector.retry import ExponentialBackoff, Retry
from detector.stream import kafka
from detector.stream.kafka import (
    Committer,
    ConsumerCommits,
    KafkaSettings,
    KafkaSink,
    KafkaSource,
    Offsets,
    TransactionalSink,
)

from ..helpers import make_detector

NO_WAIT = Retry(ExponentialBackoff(0.0, 0.0), (BackendUnavailable, Contention))
SETTINGS = KafkaSettings("broker:9092")
TXN = "neardup-test-txn"
P0, P1 = TopicPartition("in", 0), TopicPartition("in", 1)


@dataclass
class Broker:
    """What the fakes share: the records and offsets committed, each transactional id's
    current epoch, the calls in order, and the faults to inject."""

    input: dict[TopicPartition, list[bytes]] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    generation: int = 1
    topics: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)  # call -> how many times it fails
    rebalances: int = 0  # offsets sent that find the group in a newer generation first
    # At the member's n-th poll, the partitions the group gives it, and whether it was
    # evicted (its session expired) and joined again first: n -> (partitions, evicted).
    moves: dict[int, tuple[set[TopicPartition], bool]] = field(default_factory=dict)

    def fail(self, call: str) -> bool:
        if self.failures.get(call):
            self.failures[call] -= 1
            return True
        return False

    def decided(self) -> list[str]:
        return [json.loads(v)["id"] for v in self.topics["out"]]


class Future:
    def __init__(self) -> None:
        self.is_done = True
        self.exception: BaseException | None = None

    def failed(self) -> bool:
        return self.exception is not None


class FakeProducer:
    """kafka-python's transactional producer as far as the sink uses it. A producer whose
    epoch is no longer its id's is fenced: begin and send are local and pass, the records
    fail when flushed (AddPartitionsToTxn is refused), and the coordinator's calls raise."""

    def __init__(self, broker: Broker, **config: Any) -> None:
        self.broker, self.config = broker, config
        self.tid = config.get("transactional_id")
        self.epoch = 0
        self.open = False
        self.pending: list[tuple[str, bytes]] = []
        self.futures: list[Future] = []
        self._transaction_manager = SimpleNamespace(last_error=None)
        self._sender = SimpleNamespace(force_close=lambda: None, join=lambda timeout: None)

    def _call(self, name: str) -> None:
        self.broker.calls.append(name)
        local = name in ("init", "begin", "send")
        if self.tid is not None and not local and self.broker.epochs[self.tid] != self.epoch:
            self._transaction_manager.last_error = ProducerFencedError()
            if name != "flush":
                raise ProducerFencedError()
        if self.broker.fail(name):
            raise KafkaTimeoutError(f"{name} failed")

    def init_transactions(self) -> None:
        self._call("init")
        assert self.tid is not None
        self.epoch = self.broker.epochs[self.tid] = self.broker.epochs.get(self.tid, 0) + 1

    def begin_transaction(self) -> None:
        self._call("begin")
        assert not self.open
        self.open, self.pending = True, []

    def send(
        self, topic: str, key: bytes | None = None, value: bytes = b"", headers: Any = None
    ) -> Future:
        self._call("send")
        assert self.open or self.tid is None
        self.pending.append((topic, value))
        self.futures.append(Future())
        return self.futures[-1]

    def flush(self, timeout: float | None = None) -> None:
        self._call("flush")
        fenced = self._transaction_manager.last_error
        for f in self.futures:
            f.exception = fenced
        self.futures = []
        if self.tid is None:  # not transactional: what is flushed is published
            for topic, value in self.pending:
                self.broker.topics[topic].append(value)
            self.pending = []

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any) -> None:
        self._call("offsets")
        if self.broker.rebalances:
            self.broker.rebalances -= 1
            self.broker.generation += 1
        if group.generation_id != self.broker.generation:
            raise CommitFailedError("metadata mismatch: IllegalGenerationError")
        self.offsets = {tp: o.offset for tp, o in offsets.items()}

    def commit_transaction(self) -> None:
        self._call("commit")
        assert self.open
        for topic, value in self.pending:
            self.broker.topics[topic].append(value)
        self.broker.offsets.update(self.offsets)
        self.open = False

    def abort_transaction(self) -> None:
        self._call("abort")
        self.open = False

    def close(self, timeout: float | None = None) -> None:
        self.broker.calls.append("close")


class FakeConsumer:
    """A consumer-group member holding `broker.assigned`. It joins the group in poll(), as
    kafka-python's does: at its first poll, when the group's generation moved on, and
    when `broker.moves` says; and tells its listener as kafka-python's eager protocol
    does (every partition revoked, then the new ones assigned; a partition kept keeps its
    position, a new one starts from the committed offset; an evicted member's are lost)."""

    def __init__(self, broker: Broker, **config: Any) -> None:
        self.broker, self.config = broker, config
        self.positions = {tp: broker.offsets.get(tp, 0) for tp in broker.input}
        self.generation = -1  # not a member before its first poll
        self.listener: Any = None
        self.held: set[TopicPartition] = set()
        self.polls = 0

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        self.listener = listener

    def _join(self, partitions: set[TopicPartition], evicted: bool) -> None:
        if evicted:
            self.listener.on_partitions_lost(set(self.held))
            self.held = set()
        else:
            self.listener.on_partitions_revoked(set(self.held))
        for tp in partitions - self.held:
            self.positions[tp] = self.broker.offsets.get(tp, 0)
        self.broker.assigned = self.held = set(partitions)
        self.generation = self.broker.generation
        self.listener.on_partitions_assigned(set(partitions))

    def poll(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        self.polls += 1
        if self.polls in self.broker.moves:
            partitions, evicted = self.broker.moves[self.polls]
            self.broker.generation += 2 if evicted else 1  # evicted: a generation without it
            self._join(partitions, evicted)
        elif self.generation != self.broker.generation:
            self._join(self.broker.assigned, False)
        out: dict[TopicPartition, list[Any]] = {}
        for tp in sorted(self.broker.assigned):
            at = self.positions[tp]
            take = self.broker.input[tp][at : at + max_records - sum(map(len, out.values()))]
            if take:
                out[tp] = [
                    SimpleNamespace(
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=at + i,
                        key=None,
                        value=v,
                        headers=[],
                    )
                    for i, v in enumerate(take)
                ]
                self.positions[tp] = at + len(take)
        return out

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata("group", self.generation, "member-1")

    def assignment(self) -> set[TopicPartition]:
        return set(self.broker.assigned)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.broker.calls.append(f"seek {tp.partition} {offset}")
        self.positions[tp] = offset

    def commit(self, offsets: dict[TopicPartition, Any]) -> None:
        self.broker.calls.append("consumer commit")
        self.broker.offsets.update({tp: o.offset for tp, o in offsets.items()})

    def close(self) -> None:
        pass


def docs(partition: int, n: int) -> list[bytes]:
    texts = [f"text {partition} {i} " + "w " * i for i in range(n)]
    return [
        json.dumps({"id": f"p{partition}-{i}", "text": t}).encode() for i, t in enumerate(texts)
    ]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    """Two partitions of three records each, both this member's; the fakes in place of
    kafka-python's clients."""
    b = Broker(input={P0: docs(0, 3), P1: docs(1, 3)}, assigned={P0, P1})
    monkeypatch.setattr(kafka.sink, "KafkaProducer", lambda **config: FakeProducer(b, **config))
    monkeypatch.setattr(kafka.source, "KafkaConsumer", lambda **config: FakeConsumer(b, **config))
    return b


class UntilIdle:
    """Stops the loop at the first poll that brings nothing."""

    def __init__(self) -> None:
        self.loop: Loop | None = None

    def polled(self, records: int) -> None:
        if not records and self.loop is not None:
            self.loop.stopping = True

    def retrying(self, step: str, exc: Exception, wait: float) -> None: ...

    def done(self, batch: Prepared, decisions: list[Decision], seconds: float) -> None: ...


def serve(source: KafkaSource, sink: KafkaSink, prefetch: bool = False) -> None:
    watch = UntilIdle()
    loop = Loop(make_detector(), source, sink, observers=[watch], retry=NO_WAIT)
    loop.prefetch = prefetch
    watch.loop = loop
    loop.run()


def exactly_once(batch_size: int = 4) -> tuple[KafkaSource, TransactionalSink, list[str]]:
    outcomes: list[str] = []
    sink = TransactionalSink(SETTINGS, "out", "dlq", TXN, observe=outcomes.append)
    return KafkaSource(SETTINGS, "in", "group", batch_size, transaction=sink), sink, outcomes


def at_least_once(batch_size: int = 4) -> tuple[KafkaSource, KafkaSink]:
    return KafkaSource(SETTINGS, "in", "group", batch_size), KafkaSink(SETTINGS, "out", "dlq")


ALL = sorted(f"p{p}-{i}" for p in (0, 1) for i in range(3))
BATCH_1 = ["begin", *["send"] * 4, "flush", "offsets", "commit"]  # p0's three, p1's first
BATCH_2 = ["begin", *["send"] * 2, "flush", "offsets", "commit"]  # p1's other two
ABORT = ["close", "init"]  # the producer abandoned, a new one of the same id made at once


def test_each_batch_is_one_transaction_begun_at_its_first_send_committed_with_its_offsets(
    broker: Broker,
) -> None:
    source, sink, outcomes = exactly_once()
    serve(source, sink)
    assert broker.calls == ["init", *BATCH_1, *BATCH_2]
    assert sorted(broker.decided()) == ALL
    assert broker.offsets == {P0: 3, P1: 3}
    assert outcomes == ["committed", "committed"]
    consumer = source.consumer.config
    producer = sink.producer.config
    assert consumer["isolation_level"] == "read_committed" and not consumer["enable_auto_commit"]
    assert producer["transactional_id"] == TXN
    assert producer["transaction_timeout_ms"] == kafka.TRANSACTION_TIMEOUT_MS


def assert_decided_once_and_committed(broker: Broker, outcomes: list[str]) -> None:
    """Every record's decision published once, every offset committed, after one abort."""
    assert sorted(broker.decided()) == ALL  # the aborted sends were never committed
    assert broker.offsets == {P0: 3, P1: 3}
    assert outcomes == ["aborted", "committed", "committed"]


@pytest.mark.parametrize("fails", ["send", "flush", "offsets", "commit"])
def test_a_failure_aborts_and_the_retried_step_sends_the_batch_in_a_new_transaction(
    broker: Broker, fails: str
) -> None:
    """A failed publish step is retried whole; a failed commit is retried alone, so the
    sink first sends again the batch it kept, in a new transaction, before the offsets.
    Either way nothing is committed twice or lost."""
    broker.failures[fails] = 1
    source, sink, outcomes = exactly_once()
    serve(source, sink)
    first = BATCH_1[: BATCH_1.index(fails) + 1]
    assert broker.calls == ["init", *first, *ABORT, *BATCH_1, *BATCH_2]
    assert_decided_once_and_committed(broker, outcomes)


def test_offsets_refused_for_an_old_generation_abort_and_rewind_to_the_batch(
    broker: Broker,
) -> None:
    """The group rebalanced while the batch was in flight (KIP-447: the broker refuses its
    offsets). The partitions that stay keep their position in kafka-python, so the
    source seeks them back to the batch's first offsets, and the batch is decided again,
    committed once."""
    broker.rebalances = 1
    source, sink, outcomes = exactly_once()
    serve(source, sink)
    rewind = ["seek 0 0", "seek 1 0"]
    assert broker.calls == ["init", *BATCH_1[:-1], *ABORT, *rewind, *BATCH_1, *BATCH_2]
    assert_decided_once_and_committed(broker, outcomes)


@pytest.mark.parametrize("lost", ["a partition", "the generation"])
def test_no_offsets_are_sent_for_partitions_this_member_may_have_lost(
    broker: Broker, lost: str
) -> None:
    """A member that knows it lost a partition, or has no generation (whose offsets the
    broker would take from anyone), aborts instead of committing, and rewinds what it
    still holds."""
    source, sink, outcomes = exactly_once(batch_size=6)
    records, offsets = source.poll()
    sink.decisions([])  # nothing decided needs to be real here: one dead letter will do
    sink.error({"reason": "invalid_json", "offset": 0})
    sink.flush()
    if lost == "a partition":
        broker.assigned.discard(P1)
    else:
        source.consumer.generation = -1
    source.commit(offsets)
    kept = ["seek 0 0"] if lost == "a partition" else ["seek 0 0", "seek 1 0"]
    assert broker.calls == ["init", "begin", "send", "flush", *ABORT, *kept]
    assert broker.topics["dlq"] == [] and broker.offsets == {}
    assert outcomes == ["aborted"]
    assert len(records) == 6 and offsets == Offsets({P0: 0, P1: 0}, {P0: 3, P1: 3})


def test_a_fenced_producer_stops_the_loop_and_never_takes_its_id_back(broker: Broker) -> None:
    source, sink, outcomes = exactly_once()
    broker.epochs[TXN] += 1  # another producer initialized the same transactional id
    with pytest.raises(Fenced, match=TXN):
        serve(source, sink)
    assert broker.calls == ["init", *BATCH_1[: BATCH_1.index("flush") + 1], "close"]
    assert broker.calls.count("init") == 1  # a new init would fence the other one back
    assert broker.decided() == [] and broker.offsets == {}
    assert outcomes == ["aborted"]


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (KafkaTimeoutError("no broker"), BackendUnavailable),
        (TransactionalIdAuthorizationFailedError(), ConfigError),
        (ProducerFencedError(), Fenced),
    ],
)
def test_what_a_refused_init_means(
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
    error: KafkaError,
    raised: type[Exception],
) -> None:
    def refused(self: FakeProducer) -> None:
        raise error

    monkeypatch.setattr(FakeProducer, "init_transactions", refused)
    with pytest.raises(raised):
        TransactionalSink(SETTINGS, "out", "dlq", TXN)


def test_closing_with_a_transaction_open_aborts_it(broker: Broker) -> None:
    _, sink, _ = exactly_once()
    sink.error({"reason": "invalid_json"})
    sink.close()
    assert broker.calls == ["init", "begin", "send", "abort", "close"]
    assert broker.topics["dlq"] == []


def test_at_least_once_flushes_then_commits_with_the_consumer(broker: Broker) -> None:
    source = KafkaSource(SETTINGS, "in", "group", 4)
    serve(source, KafkaSink(SETTINGS, "out", "dlq"))
    batches = [*["send"] * 4, "flush", "consumer commit", *["send"] * 2, "flush", "consumer commit"]
    assert broker.calls == batches
    assert sorted(broker.decided()) == ALL and broker.offsets == {P0: 3, P1: 3}
    assert source.consumer.config["isolation_level"] == "read_uncommitted"


# ------------------------------------------------------------- one committer, both modes


@pytest.mark.parametrize("mode", ["at least once", "exactly once"])
def test_both_modes_commit_step_7_through_the_one_committer(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The loop's step 7 is KafkaSource.commit in both modes, and that is the Committer's:
    only how the offsets reach the broker differs (the consumer, or the transaction)."""
    through: list[tuple[Any, dict[TopicPartition, int]]] = []
    commit = Committer.commit

    def spy(self: Committer, offsets: Offsets) -> None:
        through.append((self.commits, dict(offsets.next)))
        commit(self, offsets)

    monkeypatch.setattr(Committer, "commit", spy)
    source, sink = exactly_once()[:2] if mode == "exactly once" else at_least_once()
    serve(source, sink)
    commits = sink if mode == "exactly once" else source.committer.commits
    assert isinstance(commits, TransactionalSink if mode == "exactly once" else ConsumerCommits)
    assert through == [(commits, {P0: 3, P1: 1}), (commits, {P1: 3})]
    assert sorted(broker.decided()) == ALL and broker.offsets == {P0: 3, P1: 3}


def test_at_least_once_commits_only_the_partitions_still_held(broker: Broker) -> None:
    """A partition the member knows it lost keeps its offsets for its new owner, and a
    member without a generation commits nothing; the records are published already, so
    nothing is taken back or read again."""
    source, _ = at_least_once(batch_size=6)
    _, offsets = source.poll()
    broker.assigned.discard(P1)
    source.commit(offsets)
    assert broker.offsets == {P0: 3}
    source.consumer.generation = -1
    broker.offsets.clear()
    source.commit(offsets)
    assert broker.offsets == {} and source.rewinds == 0
    assert not [c for c in broker.calls if c.startswith("seek")]


@pytest.mark.parametrize("mode", ["at least once", "exactly once"])
def test_a_partition_given_away_before_its_batch_is_committed(broker: Broker, mode: str) -> None:
    """With prefetch, the next batch is polled before this one is committed, and that poll
    may take a partition of this batch away (here p0, while p1 stays). Its offsets are not
    committed under the new generation (the broker would take them, and they could move
    the new owner's offsets back). Exactly once, the batch is aborted, and p1, which the
    batch polled ahead holds and the loop drops, is rewound too: its records are decided,
    once, not skipped."""
    broker.moves = {2: ({P1}, False)}
    if mode == "exactly once":
        source, sink, outcomes = exactly_once(batch_size=3)
    else:
        (source, sink), outcomes = at_least_once(batch_size=3), []
    serve(source, sink, prefetch=True)
    p1 = [f"p1-{i}" for i in range(3)]
    assert broker.offsets == {P1: 3}  # p0's are its new owner's to commit
    if mode == "exactly once":
        assert broker.decided() == p1  # p0's were aborted, and are its new owner's
        assert outcomes == ["aborted", "committed"]
        sends = ["begin", *["send"] * 3, "flush"]
        assert broker.calls == ["init", *sends, *ABORT, "seek 1 0", *sends, "offsets", "commit"]
    else:
        assert sorted(broker.decided()) == ALL  # published once each, p0's not committed
        assert broker.calls.count("consumer commit") == 1


def test_a_partition_lost_and_given_back_is_a_new_hold(broker: Broker) -> None:
    """Exactly once, with prefetch: the member's session expired and it joined again while
    its batch of p0 was in flight, and got p0 back, read again from the committed offset.
    The batch is not committed in the new generation (another member may have held p0
    meanwhile): it is aborted, and p0 read again from where the new hold began. Every
    decision is published once."""
    broker.moves = {2: ({P0, P1}, True)}
    source, sink, outcomes = exactly_once(batch_size=3)
    serve(source, sink, prefetch=True)
    assert sorted(broker.decided()) == ALL
    assert broker.offsets == {P0: 3, P1: 3}
    assert outcomes == ["aborted", "committed", "committed"]
    assert [c for c in broker.calls if c.startswith("seek")] == ["seek 0 0"]


def test_a_fence_ends_the_command_with_status_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fenced(args: Any) -> Iterator[int]:
        raise Fenced("Kafka fenced transactional id 'x'")

    monkeypatch.setitem(cli.COMMANDS, "serve", fenced)
    assert cli.main(["serve"]) == 3
    assert "neardup: error: Kafka fenced transactional id 'x'" in capsys.readouterr().err


# ----------------------------------------------------------------- records fitted to topics


def test_a_dead_letter_that_fits_is_sent_as_it_is() -> None:
    letter = {"reason": "invalid_json", "raw_base64": "QUJD", "offset": 3}
    value, headers = kafka.sink.fit(letter, [("trace", b"t")], "dlq", 10_000)
    assert json.loads(value) == letter and headers == [("trace", b"t")]


@pytest.mark.parametrize("limit", [2_000, 5_000, 50_000])
def test_a_dead_letter_too_large_loses_its_headers_then_its_longest_strings(limit: int) -> None:
    raw = base64.b64encode(b"x" * 60_000).decode()
    letter = {"reason": "invalid_json", "detail": "d", "raw_base64": raw, "raw_bytes": 60_000}
    headers = [("big", b"h" * 3_000)]
    value, kept = kafka.sink.fit(letter, headers, "dlq", limit)
    fitted = json.loads(value)
    assert kept is None and fitted["headers_dropped"] == 1
    assert kafka.topics.record_size(None, value, None) <= limit
    assert fitted["cut"] == ["raw_base64"] and fitted["raw_truncated"] is True
    assert raw.startswith(fitted["raw_base64"]) and len(fitted["raw_base64"]) % 4 == 0
    base64.b64decode(fitted["raw_base64"], validate=True)  # still base64
    assert fitted["raw_bytes"] == 60_000  # the record's true size stays
    assert letter["raw_base64"] == raw  # the caller's record is untouched


def test_a_topic_too_small_for_any_dead_letter_is_a_configuration_error() -> None:
    letter = {"reason": "invalid_json", "detail": "d" * 40, "raw_base64": "QUJD" * 1000}
    with pytest.raises(ConfigError, match="topic 'dlq' takes records of at most 200 bytes"):
        kafka.sink.fit(letter, None, "dlq", 200)


def test_a_decision_its_topic_cannot_take_becomes_a_dead_letter_that_carries_it(
    broker: Broker,
) -> None:
    """The output topic takes 1,000 bytes: a decision with a long url (copied from its
    record) goes to the dead-letter topic, whole, and the others to the output."""
    limits = kafka.TopicLimits(None, ())
    limits.bytes = {"out": 1_000}
    sink = KafkaSink(SETTINGS, "out", "dlq", limits)
    small = Decision("small", None, 1)
    long = Decision("long", None, 2, url="https://example.org/" + "a" * 2_000)
    long.origin = {"topic": "in", "partition": 0, "offset": 7}
    sink.decisions([small, long])
    sink.flush()
    assert broker.decided() == ["small"]
    (letter,) = [json.loads(v) for v in broker.topics["dlq"]]
    assert letter["reason"] == "decision_too_large" and letter["id"] == "long"
    assert letter["offset"] == 7 and letter["decision"]["url"] == long.url
    assert "topic 'out' takes at most 1,000" in letter["detail"]
