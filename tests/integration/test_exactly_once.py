"""`serve --exactly-once` on the real Kafka and Redis.

Three consumers of a 6-partition topic are killed with SIGKILL and restarted, each several
times, at random moments while a few hundred records (and some bad lines) arrive: a
read_committed reader of the output sees every decision once and of the dead-letter topic
every dead letter once, and the decisions keep the invariants (with --prefetch too). At
least once, under the same kills, may publish a decision twice but never two different
ones. A consumer whose transactional id another producer takes stops cleanly, and the
group decides its records; offsets of an old generation of the group are refused, the
batch aborted and decided again. In either mode, a partition the group gives away between
a batch's poll and its commit keeps its offsets for its new owner.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from detector.errors import BackendUnavailable
from detector.records import RawRecord
from detector.stream.kafka import (
    KafkaSettings,
    KafkaSource,
    Offsets,
    TransactionalSink,
    transactional_id,
)

from ..helpers import STREAM_2K, read_jsonl, write_jsonl
from .admin import admin, committed_offset, create_topics, wait_for_group
from .endpoints import BOOTSTRAP
from .invariants import check_invariants
from .processes import Names, Serve, logs, run_detector
from .readers import DecisionReader, Producer, TopicReader

PARTITIONS = 6
CONSUMERS = 3
RECORDS = 420  # of the 2,000-record stream
BAD_EVERY = 35  # a bad line after every 35 records: 12 dead letters
KILLS_EACH = 2
# The feed: a burst of 60 lines before each kill, decided in batches of 4 by a group at
# rest (not rebalancing after the last kill), so that the consumer killed a moment later
# is likely in the middle of a batch, often between its flush and its commit: the moment
# at which at least once publishes a batch again.
BURST, BATCH = 60, ["--batch-size", "4"]
EXACTLY_ONCE = ["--exactly-once"]


def stream() -> tuple[list[dict[str, Any]], list[bytes | dict[str, Any]]]:
    """The good records, and the feed: the good records with a bad line every BAD_EVERY."""
    good = read_jsonl(STREAM_2K)[:RECORDS]
    feed: list[bytes | dict[str, Any]] = []
    for n, r in enumerate(good, 1):
        feed.append(r)
        if n % BAD_EVERY == 0:
            feed.append(f"not json {n}".encode())
    return good, feed


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """`neardup detect` on the good records, for check_invariants."""
    tmp = tmp_path_factory.mktemp("detect")
    good, _ = stream()
    run_detector(["detect", str(write_jsonl(tmp / "in.jsonl", good)), "-o", str(tmp / "out")])
    return read_jsonl(tmp / "out")


@pytest.fixture
def committed(names: Names) -> Iterator[tuple[DecisionReader, TopicReader]]:
    """read_committed readers of the decisions and of the dead letters."""
    decisions = DecisionReader(names.output, read_committed=True)
    dead = TopicReader(names.dead_letter, read_committed=True)
    yield decisions, dead
    decisions.close()
    dead.close()


def settle(group: str, servers: list[Serve]) -> None:
    """Until the group is at rest with every consumer in it; else fail, saying who is in it
    (members by client id, which names the process) and what each consumer logged."""
    try:
        wait_for_group(group, CONSUMERS)
    except AssertionError as exc:
        client = admin()
        try:
            described = client.describe_groups([group])
        finally:
            client.close()
        raise AssertionError(f"{exc}: {described}\n{logs(servers)}") from None


def feed_with_kills(
    names: Names,
    servers: list[Serve],
    start: Callable[[], Serve],
    feed: list[bytes | dict[str, Any]],
    rng: random.Random,
) -> int:
    """Produce the feed in bursts; after each of the first ones, once the group is at rest,
    kill a consumer (SIGKILL) a random moment later and start a new one, sooner or later.
    Every consumer is killed KILLS_EACH times. Returns the kills."""
    bursts = [feed[at : at + BURST] for at in range(0, len(feed), BURST)]
    victims = [n for n in range(CONSUMERS) for _ in range(KILLS_EACH)]
    assert len(bursts) > len(victims)
    rng.shuffle(victims)
    with Producer() as producer:
        for n, burst in enumerate(bursts):
            if n < len(victims):
                settle(names.group, servers)
            for r in burst:
                if isinstance(r, bytes):
                    producer.send(names.input, r)
                else:
                    producer.send_record(names.input, r)
            producer.flush()
            if n < len(victims):
                time.sleep(rng.uniform(0.02, 0.3))
                servers[victims[n]].kill()
                time.sleep(rng.uniform(0.0, 1.5))
                servers[victims[n]] = start()
    return len(victims)


def dead_letter_places(reader: TopicReader) -> Counter[tuple[int, int]]:
    """How often each bad input line (its partition and offset) was dead-lettered."""
    return Counter((d["partition"], d["offset"]) for d in reader.records)


# --prefetch polls the next batch before this one is committed: a rebalance in that poll
# aborts this batch's transaction, and the rewind must cover the batch polled ahead too.
@pytest.mark.parametrize("mode", ["exactly-once", "exactly-once --prefetch", "at-least-once"])
def test_consumers_killed_again_and_again_mid_stream(
    mode: str,
    names: Names,
    serve: Callable[..., Serve],
    committed: tuple[DecisionReader, TopicReader],
    reference: list[dict[str, Any]],
) -> None:
    decisions, dead = committed
    extra = [*BATCH, *(EXACTLY_ONCE if mode.startswith("exactly-once") else [])]
    extra += ["--prefetch"] if mode.endswith("--prefetch") else []
    good, feed = stream()
    ids = [r["id"] for r in good]
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    create_topics({names.input: PARTITIONS})
    servers = [serve(extra) for _ in range(CONSUMERS)]
    kills = feed_with_kills(names, servers, lambda: serve(extra), feed, rng)
    context = f"{mode}, seed {seed}, {kills} kills"
    missing = decisions.wait_for(ids, timeout=240, idle=3.0)
    assert not missing, f"{context}: {len(missing)} undecided, e.g. {missing[:5]}\n{logs(servers)}"
    for s in servers:
        assert s.stop() == 0, f"{context}\n{logs(servers)}"
    decisions.until(lambda r: True, timeout=5, idle=2.0)  # anything published at the stop
    dead.until(lambda r: len(dead_letter_places(r)) >= len(feed) - len(good), 60, idle=1.0)

    published = decisions.by_id()
    check_invariants(good, published, reference)  # and a repeated decision never differs
    places = dead_letter_places(dead)
    assert len(places) == len(feed) - len(good), f"{context}: dead letters {places}"
    everything = TopicReader(names.output)  # read_uncommitted: aborted transactions too
    try:
        everything.until(lambda r: len(r.records) >= len(decisions.records), 60, idle=1.0)
        print(f"{context}: {len(everything.records)} decisions written, of them")
        print(f"{len(decisions.records)} committed, for {len(ids)} records")
    finally:
        everything.close()
    if mode.startswith("exactly-once"):
        twice = {i: len(ds) for i, ds in published.items() if len(ds) > 1}
        assert not twice, f"{context}: decisions seen more than once: {twice}"
        assert set(places.values()) == {1}, f"{context}: dead letters not once: {places}"


def test_a_fenced_consumer_stops_and_the_group_decides_its_records(
    names: Names,
    serve: Callable[..., Serve],
    committed: tuple[DecisionReader, TopicReader],
    reference: list[dict[str, Any]],
) -> None:
    """Another producer takes a consumer's transactional id (init_transactions, while the
    consumer is idle between batches): its next transaction is refused, and it stops with
    status 3, out of the group, instead of taking the id back (which would fence the
    other in turn) or retrying for ever. The other consumer decides its records."""
    decisions, _ = committed
    good, _ = stream()
    first, then = good[: RECORDS // 2], good[RECORDS // 2 :]
    create_topics({names.input: PARTITIONS})
    victim, survivor = serve(EXACTLY_ONCE), serve(EXACTLY_ONCE)
    wait_for_group(names.group, 2, why=lambda: logs([victim, survivor]))
    with Producer() as producer:
        for r in first:
            producer.send_record(names.input, r)
        producer.flush()
    missing = decisions.wait_for([r["id"] for r in first], timeout=90, idle=1.0)
    assert not missing, logs([victim, survivor])

    found = re.search(r"transactional id (\S+),", victim.log())
    assert found, victim.log()
    fencer = KafkaProducer(bootstrap_servers=BOOTSTRAP.split(","), transactional_id=found[1])
    try:
        fencer.init_transactions()
        with Producer() as producer:
            for r in then:
                producer.send_record(names.input, r)
            producer.flush()
        assert victim.wait(60) == 3, victim.log()
    finally:
        fencer.close()
    assert f"Kafka fenced transactional id '{found[1]}'" in victim.log()

    missing = decisions.wait_for([r["id"] for r in good], timeout=90, idle=2.0)
    assert not missing, logs([victim, survivor])
    published = decisions.by_id()
    check_invariants(good, published, reference)
    assert all(len(ds) == 1 for ds in published.values())
    assert survivor.stop() == 0, survivor.log()


def polled(
    source: KafkaSource,
    enough: Callable[[list[RawRecord]], bool],
    timeout: float = 60,
) -> tuple[list[RawRecord], Offsets]:
    """Step 1 as many times as it takes for `enough` (or `timeout` seconds): the records,
    and the polls' offsets as one batch's."""
    records: list[RawRecord] = []
    offsets = Offsets()
    deadline = time.monotonic() + timeout
    while not enough(records) and time.monotonic() < deadline:
        got, more = source.poll()
        records += got
        for tp, first in more.first.items():
            offsets.first.setdefault(tp, first)
        offsets.next.update(more.next)
        offsets.holds.update(more.holds)
    return records, offsets


class InProcess:
    """An exactly-once KafkaSource and its TransactionalSink in this process, on a
    2-partition input of ten bad lines, for the steps of a batch one at a time."""

    def __init__(self, names: Names) -> None:
        create_topics({names.input: 2})
        with Producer() as producer:
            for n in range(10):
                producer.send(names.input, f"bad {n}".encode(), partition=n % 2)
            producer.flush()
        settings = KafkaSettings(BOOTSTRAP)
        self.names = names
        self.outcomes: list[str] = []
        self.sink = TransactionalSink(
            settings,
            names.output,
            names.dead_letter,
            transactional_id(settings, names.group),
            observe=self.outcomes.append,
        )
        self.source = KafkaSource(settings, names.input, names.group, 64, transaction=self.sink)

    def publish(self) -> Offsets:
        """Steps 1 to 6: the ten lines, from as many polls as it takes, dead-lettered."""
        records, offsets = polled(self.source, lambda got: len(got) >= 10)
        assert len(records) == 10, records
        for raw, where in records:
            self.sink.error({**where, "reason": "test", "raw": raw.decode()})
        self.sink.flush()
        return offsets

    def written(self, count: int) -> None:
        """`count` dead letters were written, committed or not."""
        everything = TopicReader(self.names.dead_letter)
        try:
            assert everything.until(lambda r: len(r.records) >= count, 30, idle=1.0)
            assert len(everything.records) == count
        finally:
            everything.close()

    def committed_once(self, dead: TopicReader) -> None:
        """Each of the ten dead letters read_committed once, and every offset committed."""
        assert dead.until(lambda r: len(r.records) >= 10, 30, idle=2.0)
        assert sorted(dead_letter_places(dead).values()) == [1] * 10
        names = self.names
        assert [committed_offset(names.group, names.input, p) for p in (0, 1)] == [5, 5]

    def close(self) -> None:
        self.sink.close()
        self.source.close()


@pytest.fixture
def in_process(names: Names) -> Iterator[InProcess]:
    steps = InProcess(names)
    yield steps
    steps.close()


def test_offsets_of_an_old_generation_abort_the_batch_which_is_decided_again(
    in_process: InProcess,
    monkeypatch: pytest.MonkeyPatch,
    committed: tuple[DecisionReader, TopicReader],
) -> None:
    """The broker refuses offsets sent for an old generation of the group (KIP-447), as a
    zombie's after a rebalance would be: the transaction is aborted, nothing of it is
    read_committed, no offset is committed, and the source rewinds, so that the same
    records come again and are committed once."""
    _, dead = committed
    steps, source = in_process, in_process.source
    offsets = steps.publish()
    group = source.consumer.group_metadata()
    stale = group._replace(generation_id=group.generation_id + 1)  # not the group's
    with monkeypatch.context() as m:
        m.setattr(source.consumer, "group_metadata", lambda: stale)
        source.commit(offsets)
    assert steps.outcomes == ["aborted"]
    assert committed_offset(steps.names.group, steps.names.input, 0) is None
    steps.written(10)
    dead.until(lambda r: False, timeout=3)
    assert dead.records == []

    source.commit(steps.publish())  # the same records again, after the rewind
    assert steps.outcomes == ["aborted", "committed"]
    steps.committed_once(dead)
    steps.written(20)


def test_a_failed_commit_is_retried_alone_and_sends_its_batch_again(
    in_process: InProcess,
    monkeypatch: pytest.MonkeyPatch,
    committed: tuple[DecisionReader, TopicReader],
) -> None:
    """The commit fails after the offsets went into the transaction: it is aborted, and
    the loop's retry of the commit step (not of the publish) sends the kept batch again
    in a new transaction before the offsets: committed once, nothing lost."""
    _, dead = committed
    steps = in_process
    offsets = steps.publish()
    with monkeypatch.context() as m:

        def refused() -> None:
            raise KafkaTimeoutError("the commit timed out")

        m.setattr(steps.sink.producer, "commit_transaction", refused)
        with pytest.raises(BackendUnavailable, match="the commit timed out"):
            steps.source.commit(offsets)
    assert steps.outcomes == ["aborted"]
    steps.source.commit(offsets)  # what the loop's retry does
    assert steps.outcomes == ["aborted", "committed"]
    steps.committed_once(dead)
    steps.written(20)


class OtherMember:
    """Another member of the group, polling in a thread (kafka-python joins the group in
    poll) and committing nothing. Its client id sorts before the source's, so the range
    assignor gives it partition 0 of 2 and the source partition 1."""

    def __init__(self, names: Names) -> None:
        self.consumer = KafkaConsumer(
            names.input,
            bootstrap_servers=BOOTSTRAP.split(","),
            group_id=names.group,
            client_id="a-other",
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=3_000,
        )
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(timeout_ms=200)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        self.consumer.close()


def dead_letter(sink: TransactionalSink | None, records: list[RawRecord]) -> None:
    """Steps 5 and 6 for `records` (exactly once; at least once, the offsets alone)."""
    if sink is not None:
        for raw, where in records:
            sink.error({**where, "reason": "test", "raw": raw.decode()})
        sink.flush()


@pytest.mark.parametrize("mode", ["exactly once", "at least once"])
def test_a_partition_given_away_between_a_poll_and_its_commit(names: Names, mode: str) -> None:
    """As `serve --prefetch` meets it: a batch of partition 0 is polled; the poll of the
    next one (another member joining) gives partition 0 away, keeps partition 1 and brings
    its records. The first batch's commit sends no offset of partition 0: the broker would
    take it from a member of the new generation, and it is the new owner's. Exactly once,
    the transaction is aborted and partition 1 is rewound too, so the records of the batch
    polled ahead (which the loop drops) come again and are committed once."""
    create_topics({names.input: 2})
    p0, p1 = TopicPartition(names.input, 0), TopicPartition(names.input, 1)
    settings = KafkaSettings(BOOTSTRAP, client_id="z-source")
    outcomes: list[str] = []
    sink = None
    if mode == "exactly once":
        txn = transactional_id(settings, names.group)
        sink = TransactionalSink(
            settings, names.output, names.dead_letter, txn, observe=outcomes.append
        )
    source = KafkaSource(settings, names.input, names.group, 64, transaction=sink)
    other: OtherMember | None = None
    try:
        with Producer() as producer:
            for n in range(5):
                producer.send(names.input, f"p0 {n}".encode(), partition=0)
            producer.flush()
        records, batch = polled(source, lambda got: len(got) >= 5)
        assert set(batch.next) == {p0}, batch
        dead_letter(sink, records)
        with Producer() as producer:
            for n in range(5):
                producer.send(names.input, f"p1 {n}".encode(), partition=1)
            producer.flush()
        other = OtherMember(names)

        def moved(got: list[RawRecord]) -> bool:
            ones = sum(where["partition"] == 1 for _, where in got)
            return ones >= 5 and source.consumer.assignment() == {p1}

        ahead, _ = polled(source, moved)
        assert moved(ahead), (source.consumer.assignment(), ahead)
        source.commit(batch)
        assert committed_offset(names.group, names.input, 0) is None
        if sink is None:
            assert source.rewinds == 0
            return
        assert outcomes == ["aborted"] and source.rewinds == 1
        again, offsets = polled(source, lambda got: len(got) >= 5, timeout=20)
        assert [(w["partition"], w["offset"]) for _, w in again] == [(1, n) for n in range(5)]
        dead_letter(sink, again)
        source.commit(offsets)
        assert outcomes == ["aborted", "committed"]
        assert committed_offset(names.group, names.input, 1) == 5
        assert committed_offset(names.group, names.input, 0) is None
    finally:
        if other is not None:
            other.close()
        source.close()
        if sink is not None:
            sink.close()


def test_tail_reads_committed_decisions_by_default(names: Names) -> None:
    """`neardup tail` reads read_committed: a transaction that was aborted is not shown,
    unless --no-read-committed."""
    aborted = KafkaProducer(bootstrap_servers=BOOTSTRAP.split(","), transactional_id=names.group)
    try:
        aborted.init_transactions()
        aborted.begin_transaction()
        aborted.send(names.output, b'{"id": "aborted"}')
        aborted.flush()
        aborted.abort_transaction()
        aborted.begin_transaction()
        aborted.send(names.output, b'{"id": "committed"}')
        aborted.commit_transaction()
    finally:
        aborted.close()
    tail = ["tail", "--topic", names.output, "--from-beginning", "--idle", "5"]
    assert run_detector(tail).stdout.splitlines() == ['{"id": "committed"}']
    everything = run_detector([*tail, "--no-read-committed"]).stdout.splitlines()
    assert everything == ['{"id": "aborted"}', '{"id": "committed"}']
