"""detector.pipeline: the loop's commit order, retries that lose nothing, conflicts redone,
stopping between batches, parsing and the limits; over the list source and sink, no server."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from detector.decide import Detector
from detector.errors import BackendUnavailable, Contention
from detector.index import Commit, Committed, Found, Query
from detector.index.memory import MemoryIndex
from detector.pipeline import Limits, Loop, Prepared, prepare, run
from detector.records import CUT, DEFAULT_MAX_TOKENS, Decision, Tombstone
from detector.retry import CONFLICTS, ExponentialBackoff, Retry
from detector.settings import EngineSettings
from detector.stream import Batch, Headers
from detector.stream.memory import ListSink, ListSource

from .helpers import (
    decision_verdict,
    edit_words,
    make_detector,
    sample_texts,
    stream_from,
    words_text,
)

NO_WAIT = Retry(ExponentialBackoff(0.0, 0.0), (BackendUnavailable, Contention))


def detector(index: Any = None) -> Detector:
    settings = EngineSettings()
    return settings.detector(index if index is not None else MemoryIndex(settings.block_scheme()))


def records(n: int, copies: int = 1) -> list[bytes]:
    """n distinct texts, each `copies` times under different ids."""
    return [
        json.dumps({"id": f"d{i}-{c}", "text": f"text number {i} " + "word " * (20 + i)}).encode()
        for i in range(n)
        for c in range(copies)
    ]


class Journal:
    """A sink and a source's commit that write what happens, in order, to one list."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        self.events = events


class JournalSink(Journal):
    def __init__(self, events: list[tuple[str, Any]], failures: int = 0) -> None:
        super().__init__(events)
        self.failures = failures  # flushes that fail before one succeeds
        self.published: list[str] = []
        self.pending: list[str] = []

    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        self.pending += [d.id for d in decisions]
        self.events.append(("send", len(decisions)))

    def error(self, record: dict[str, object], headers: Headers = None) -> None:
        self.pending.append(f"error:{record['line']}")
        self.events.append(("send-error", record["reason"]))

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        self.pending.append(f"tombstone:{dead.id}")
        self.events.append(("send-tombstone", dead.id))

    def flush(self) -> None:
        if self.failures:
            self.failures -= 1
            self.pending = []  # what a failed flush took is lost and must be sent again
            self.events.append(("flush-failed", None))
            raise BackendUnavailable("broker away")
        self.published += self.pending
        self.pending = []
        self.events.append(("flush", None))

    def close(self) -> None:
        self.events.append(("close-sink", None))


class JournalSource(ListSource):
    def __init__(self, raw: list[bytes], batch_size: int, events: list[tuple[str, Any]]) -> None:
        super().__init__(raw, batch_size)
        self.events = events

    def commit(self, position: object) -> None:
        super().commit(position)
        self.events.append(("commit", position))


def test_each_batch_is_published_then_flushed_then_committed() -> None:
    events: list[tuple[str, Any]] = []
    raw = [*records(5), b"not json", *records(2)]
    source, sink = JournalSource(raw, 3, events), JournalSink(events)
    counts = Loop(detector(), source, sink, retry=NO_WAIT).run()
    assert counts.records == 8
    assert events == [
        ("send", 3),
        ("flush", None),
        ("commit", 3),
        ("send-error", "invalid_json"),
        ("send", 2),
        ("flush", None),
        ("commit", 6),
        ("send", 2),
        ("flush", None),
        ("commit", 8),
    ]
    assert len(sink.published) == len(raw)


def test_a_flush_that_fails_is_retried_and_nothing_is_committed_before_it_holds() -> None:
    events: list[tuple[str, Any]] = []
    seen: list[tuple[str, str]] = []

    class Watch:
        def polled(self, records: int) -> None: ...
        def retrying(self, step: str, exc: Exception, wait: float) -> None:
            seen.append((step, str(exc)))

        def done(self, batch: Prepared, decisions: list[Decision], seconds: float) -> None: ...

    raw = records(4)
    source, sink = JournalSource(raw, 4, events), JournalSink(events, failures=2)
    Loop(detector(), source, sink, observers=[Watch()], retry=NO_WAIT).run()
    assert [e for e, _ in events] == [
        "send",
        "flush-failed",
        "send",
        "flush-failed",
        "send",
        "flush",
        "commit",
    ]
    assert seen == [("publish", "broker away")] * 2
    assert sorted(sink.published) == sorted(json.loads(r)["id"] for r in raw)


class FlakyIndex(MemoryIndex):
    """A memory index whose lookups fail `outages` times, and whose commits stop short
    `conflicts` times (as when another consumer indexed a near-duplicate first)."""

    def __init__(self, outages: int = 0, conflicts: int = 0, stuck: bool = False) -> None:
        super().__init__(EngineSettings().block_scheme())
        self.outages, self.conflicts, self.lookups = outages, conflicts, 0
        self.stuck = stuck  # every commit meets a conflict at its first document

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        self.lookups += 1
        if self.outages:
            self.outages -= 1
            raise BackendUnavailable("Redis: connection refused")
        return super().lookup(queries)

    def commit(self, items: Sequence[Commit]) -> Committed:
        if self.stuck:
            return Committed(0, {})
        if self.conflicts and len(items) > 1:
            self.conflicts -= 1
            return super().commit(items[:1])  # the rest met a conflict
        return super().commit(items)


def verdicts(decisions: list[Decision]) -> list[tuple[Any, ...]]:
    return [(d.id, d.duplicate_of, d.distance, d.exact) for d in decisions]


def test_an_outage_of_the_index_is_waited_out_and_decides_alike() -> None:
    raw = records(6, copies=2)
    calm, flaky = ListSink(), ListSink()
    run(detector(), raw, calm, 4)
    index = FlakyIndex(outages=3)
    Loop(detector(index), ListSource(raw, 4), flaky, retry=NO_WAIT).run()
    assert verdicts(flaky.out) == verdicts(calm.out)
    assert index.lookups == 3 + 3  # three failed, then one per batch


def test_conflicts_redo_the_rest_of_the_batch_and_decide_alike() -> None:
    raw = records(6, copies=2)
    calm = ListSink()
    run(detector(), raw, calm, 12)
    index = FlakyIndex(conflicts=5)
    d = detector(index)
    flaky = ListSink()
    run(d, raw, flaky, 12)
    assert verdicts(flaky.out) == verdicts(calm.out)
    assert d.conflicts == 5


def test_conflicts_beyond_the_limit_raise_contention_not_an_outage() -> None:
    d = detector(FlakyIndex(stuck=True))
    batch = prepare(d.engine, [(r, {}) for r in records(3)])
    with pytest.raises(Contention):
        d.process(batch.docs, batch.prints)
    assert CONFLICTS.attempts is not None and d.conflicts == CONFLICTS.attempts
    assert not issubclass(Contention, BackendUnavailable)


def test_the_loop_stops_after_the_batch_in_flight() -> None:
    source, sink = ListSource(records(9), 3), ListSink()
    loop = Loop(detector(), source, sink, retry=NO_WAIT)

    class StopAfterFirst:
        def polled(self, records: int) -> None: ...
        def retrying(self, step: str, exc: Exception, wait: float) -> None: ...
        def done(self, batch: Prepared, decisions: list[Decision], seconds: float) -> None:
            loop.stopping = True

    loop.observers = [StopAfterFirst()]
    counts = loop.run()
    assert counts.records == 3 and source.committed == [3] and sink.flushed == 3


def test_upkeep_runs_between_batches_at_most_once_per_period() -> None:
    calls: list[int] = []
    loop = Loop(detector(), ListSource(records(6), 1), ListSink(), retry=NO_WAIT)
    loop.upkeep, loop.upkeep_every = (lambda: calls.append(1)), 3600.0
    loop.run()
    assert calls == [1]
    loop = Loop(detector(), ListSource(records(6), 1), ListSink(), retry=NO_WAIT)
    loop.upkeep, loop.upkeep_every = (lambda: calls.append(2)), 0.0
    loop.run()
    assert calls.count(2) == 6  # after every batch


# --- run(): parsing, errors and the sink ------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 2, 100])
def test_run_publishes_a_decision_or_an_error_for_every_record(batch_size: int) -> None:
    text = words_text(11, 300)
    lines = [
        json.dumps({"id": "a", "text": text}).encode(),
        b"not json",
        json.dumps({"id": "b", "text": text}).encode(),
        json.dumps({"id": 5, "text": "x"}).encode(),
        json.dumps({"id": "c", "text": edit_words(text, 2, 1)}).encode(),
        json.dumps({"text": "no id"}).encode(),
    ]
    records = [(raw, {"source": "test", "line": n}) for n, raw in enumerate(lines, 1)]
    sink = ListSink()
    counts = run(make_detector(), records, sink, batch_size, Limits(max_bytes=100_000))
    assert [d.id for d in sink.out] == ["a", "b", "c"]
    assert [(e["line"], e["reason"]) for e in sink.errors] == [
        (2, "invalid_json"),
        (4, "bad_id"),
        (6, "missing_id"),
    ]
    assert (counts.records, counts.errors, counts.unique, counts.duplicates, counts.exact) == (
        6,
        3,
        1,
        2,
        1,
    )
    assert counts.reasons == {"invalid_json": 1, "bad_id": 1, "missing_id": 1}
    assert sink.flushes >= 1


def test_run_with_worker_processes_gives_the_same_decisions() -> None:
    rng = random.Random(5)
    docs = stream_from(sample_texts()[:60], rng, 30)
    records = [
        (json.dumps({"id": d.id, "text": d.text}).encode(), {"line": i})
        for i, d in enumerate(docs, 1)
    ]
    inline, workers = ListSink(), ListSink()
    run(make_detector(), records, inline, 4, Limits(10**7), workers=0)
    run(make_detector(), records, workers, 4, Limits(10**7), workers=2, start_method="fork")
    assert [decision_verdict(d) for d in workers.out] == [decision_verdict(d) for d in inline.out]
    assert len(inline.out) == len(docs)


class RewindingSource(ListSource):
    """Goes back to the start of the batch at its `at`-th commit, once, as a transactional
    source does when a rebalance aborts the batch's transaction: the batches polled in
    between come again."""

    def __init__(self, raw: list[bytes], batch_size: int, at: int) -> None:
        super().__init__(raw, batch_size)
        self.at, self.polled = at, 0
        self.rewinds = 0
        self._back: int | None = None

    def batches(self) -> Iterator[Batch]:
        end = 0
        while end < len(self.records):
            if self._back is not None:
                end, self._back = self._back, None
            part = self.records[end : end + self.batch_size]
            self.polled += 1
            yield Batch(part, end + len(part))
            end += len(part)

    def commit(self, position: object) -> None:
        assert isinstance(position, int)
        if len(self.committed) + 1 == self.at and not self.rewinds:
            self.rewinds += 1
            self._back = position - self.batch_size  # the aborted batch's first record
            self.committed.append(-1)  # marks the abort
            return
        super().commit(position)


def test_prefetch_gives_the_same_decisions_and_commits_in_order() -> None:
    rng = random.Random(6)
    docs = stream_from(sample_texts()[:60], rng, 40)
    raw = [json.dumps({"id": d.id, "text": d.text}).encode() for d in docs]
    inline, ahead = ListSink(), ListSink()
    Loop(make_detector(), ListSource(raw, 4), inline, Limits(10**7)).run()
    source = ListSource(raw, 4)
    Loop(make_detector(), source, ahead, Limits(10**7), prefetch=True).run()
    assert [decision_verdict(d) for d in ahead.out] == [decision_verdict(d) for d in inline.out]
    assert source.committed == [*range(4, len(raw), 4), len(raw)]  # the last batch is short


def test_prefetch_drops_a_batch_polled_before_a_rewind() -> None:
    """A rebalance aborts batch 3: batch 4, prepared ahead, is not decided then, and the
    commits never skip a record: 3 and 4 are committed once they come again."""
    raw = records(24)
    source, sink = RewindingSource(raw, 4, at=3), ListSink()
    Loop(detector(), source, sink, Limits(10**7), prefetch=True).run()
    assert source.committed == [4, 8, -1, 12, 16, 20, 24]
    assert source.polled == 8  # batch 4 was polled before the rewind, dropped, polled again
    ids = [d.id for d in sink.out]
    assert ids[8:12] == ids[12:16]  # batch 3, published before its abort, then again
    assert len(ids) == 24 + 4 and sorted(set(ids)) == sorted(json.loads(r)["id"] for r in raw)
    assert ids[16:] == [json.loads(r)["id"] for r in raw[12:]]  # batch 4 once, after 3


# --- the token limit ---------------------------------------------------------------------


def test_a_record_over_the_token_limit_is_an_error_record_and_the_rest_are_decided() -> None:
    texts = ["a " * 1_000_000, words_text(3, 300), "z" * 2_000_000, "ab " * 20]
    records = [
        (json.dumps({"id": str(n), "text": t}).encode(), {"line": n})
        for n, t in enumerate(texts, 1)
    ]
    sink = ListSink()
    counts = run(make_detector(), records, sink, 100)
    assert [d.id for d in sink.out] == ["2", "3", "4"]  # one 2 MB word is one token
    assert [(e["line"], e["reason"], e["detail"]) for e in sink.errors] == [
        (1, "too_many_tokens", f"1000000 tokens, the limit is {DEFAULT_MAX_TOKENS}")
    ]
    assert counts.reasons == {"too_many_tokens": 1}
    sink = ListSink()
    run(make_detector(), records, sink, 100, Limits(max_tokens=20))
    assert [d.id for d in sink.out] == ["3", "4"]


def test_the_token_limit_counts_the_normalized_text() -> None:
    """NFKC makes six katakana of U+3316: 100 characters, 600 tokens."""
    detector = make_detector()
    raw = json.dumps({"id": "kana", "text": "\u3316" * 100}).encode()
    out = prepare(detector.engine, [(raw, {})], Limits(max_tokens=599))
    assert [e["detail"] for e in out.errors] == ["600 tokens, the limit is 599"]
    assert len(prepare(detector.engine, [(raw, {})], Limits(max_tokens=600)).docs) == 1


# --- records too large to be read whole --------------------------------------------------


def test_a_line_cut_by_its_source_is_too_large_at_its_true_size() -> None:
    """A file source gives a line over the limit as its first bytes and its size: its
    error record says the size, keeps those bytes, and never parses them (this prefix is a
    valid record of its own)."""
    prefix = json.dumps({"id": "a", "text": "looks like a whole record"}).encode()
    good = json.dumps({"id": "b", "text": words_text(4, 50)}).encode()
    batch = [(prefix, {"source": "f", "line": 1, CUT: 10**9}), (good, {"source": "f", "line": 2})]
    sink = ListSink()
    counts = run(make_detector(), batch, sink, limits=Limits(max_bytes=1000, raw_kept=10))
    (error,) = sink.errors
    assert (error["reason"], error["detail"]) == (
        "too_large",
        "1000000000 bytes, the limit is 1000",
    )
    assert (error["raw_bytes"], error["raw_truncated"]) == (10**9, True)
    assert base64.b64decode(error["raw_base64"]) == prefix[:10]
    assert (error["source"], error["line"]) == ("f", 1) and CUT not in error
    assert [d.id for d in sink.out] == ["b"] and counts.reasons == {"too_large": 1}
