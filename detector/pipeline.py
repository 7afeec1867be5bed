"""The loop, written once: `neardup detect` and `neardup serve` both run `Loop.run`.

One batch, in this order:
  1. poll a batch from the source
  2. parse and validate; bad records become error (dead-letter) records with a reason
  3. fingerprint the batch
  4. decide and index: one lookup for candidates, the literal pass, the atomic
     check-and-insert (decide.py; redone from a conflict if another consumer was first)
  5. publish the decisions and the error records to the sink
  6. flush the sink: every decision and error record acknowledged (or written)
  7. commit the source's position (Kafka: the offsets, by stream/kafka/commit.py's
     Committer; with `serve --exactly-once`, in the transaction that 5 began)
A crash anywhere before 7 delivers the batch again; the index remembers every decision by
id, so the redelivered records get the decisions already published (exactly once: those
of the crashed batch were aborted, and read_committed readers see each once). Steps 4 to
7 wait out a backend outage (retry.LOOP) and lose nothing; a stop request ends the loop
between batches, never inside one.

Steps 2 and 3 need no index, so with `workers` they run in other processes ahead of the
decisions (`neardup detect --workers N`), which stay in source order in this one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast

from . import profile
from .decide import Detector
from .engine import Engine, Print
from .errors import BadRecord
from .extract import Extractor
from .extract import texts as texts_of
from .profile import stage
from .records import (
    CUT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_TOKENS,
    MAX_ID_CHARS,
    ORIGIN,
    RAW_KEPT,
    VERSION_MARK,
    Decision,
    Document,
    RawRecord,
    Tombstone,
    error_record,
    parse_document,
    too_large,
)
from .retry import LOOP, Retry
from .stream import Batch, Headers, Sink, Source
from .tokenize import count_tokens, has_tokens

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one record may weigh: larger ones are error records, not decisions; and how
    much of a bad record's bytes its error record keeps (its sink's own measure)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_tokens: int = DEFAULT_MAX_TOKENS
    raw_kept: int = RAW_KEPT


LIMITS = Limits()


@dataclass
class Prepared:
    """A batch parsed and fingerprinted (steps 2 and 3): everything that needs no index.
    The headers of a record (Kafka's, copied to its decision or dead letter) are kept
    beside it, not in the decision: a redelivery gets the stored decision with its own."""

    size: int
    docs: list[Document]
    prints: list[Print]
    errors: list[dict[str, object]]
    position: object = None
    headers: list[Headers] = field(default_factory=list)  # of the docs
    error_headers: list[Headers] = field(default_factory=list)
    # Kafka tombstones, each with the number of docs before it in the batch
    tombstones: list[tuple[int, Tombstone, Headers]] = field(default_factory=list)


def prepare(
    engine: Engine,
    batch: list[RawRecord],
    limits: Limits = LIMITS,
    extractor: Extractor | None = None,
) -> Prepared:
    """Steps 2 and 3: parse, extract the text of HTML pages, check and fingerprint; a
    record over a limit is an error. Without an extractor, HTML only loses its tags."""
    out = Prepared(len(batch), [], [], [])
    parsed: list[tuple[Document, RawRecord, Headers]] = []
    for raw, where in batch:
        headers = cast(Headers, where.get("headers"))
        origin = {k: where[k] for k in ORIGIN if k in where} or None
        try:
            if where.get("tombstone"):
                dead = Tombstone(tombstone_id(where.get("key")), origin)
                out.tombstones.append((len(parsed), dead, headers))
                continue
            size = where.get(CUT)
            if size is not None:  # a line the source would not hold: too large for the limit
                raise too_large(cast(int, size), limits.max_bytes)
            doc = parse_document(raw, limits.max_bytes)
        except BadRecord as bad:
            _fail(out, bad, raw, where, headers, limits.raw_kept)
        else:
            doc.origin = origin
            parsed.append((doc, (raw, where), headers))
    texts = []
    before = [0]  # before[j]: the docs kept of parsed[:j]
    with stage("prepare/text"):  # HTML extraction and the fold
        all_texts = texts_of([d for d, _, _ in parsed], extractor, engine.kernels.fold)
    for (doc, (raw, where), headers), text in zip(parsed, all_texts, strict=True):
        try:
            check_tokens(text, limits.max_tokens)
            check_words(doc, text)
        except BadRecord as bad:
            _fail(out, bad, raw, where, headers, limits.raw_kept)
        else:
            out.docs.append(doc)
            out.headers.append(headers)
            texts.append(text)
        before.append(len(out.docs))
    out.tombstones = [(before[n], t, h) for n, t, h in out.tombstones]
    with stage("prepare/fingerprint"):
        out.prints = engine.fingerprint(out.docs, texts)
    return out


def _fail(
    out: Prepared, bad: BadRecord, raw: bytes, where: dict[str, object], h: Headers, kept: int
) -> None:
    told = {k: v for k, v in where.items() if k not in NOT_TOLD}
    size = cast(int | None, where.get(CUT))
    out.errors.append(error_record(bad.reason, bad.detail, raw, kept=kept, size=size, **told))
    out.error_headers.append(h)


# What a source tells of a record that is not for its dead letter's JSON: the headers go
# with it as headers, the key and the tombstone mark are what made it one, and a cut
# line's size is its `raw_bytes`.
NOT_TOLD = ("headers", "key", "tombstone", CUT)


def tombstone_id(key: object) -> str:
    """The id a tombstone deletes: its key, a record id's UTF-8."""
    if key is None:
        raise BadRecord("tombstone_without_key", "a record with neither a value nor a key")
    try:
        doc_id = key.decode("utf-8") if isinstance(key, bytes) else str(key)
    except UnicodeDecodeError:
        raise BadRecord("bad_key", "a tombstone's key is not UTF-8") from None
    if not doc_id or len(doc_id) > MAX_ID_CHARS or VERSION_MARK in doc_id:
        raise BadRecord("bad_key", "a tombstone's key is not a record id")
    return doc_id


def check_tokens(normalized: str, max_tokens: int) -> None:
    """BadRecord when a normalized text has more than max_tokens tokens.

    Every token takes at least one character of the normalized text, so only a text
    longer than the limit is counted. The raw text's length would not do: NFKC turns
    one character into up to 18 (U+FDFA) and up to 6 tokens (U+3316).
    """
    if len(normalized) > max_tokens and (count := count_tokens(normalized)) > max_tokens:
        raise BadRecord("too_many_tokens", f"{count} tokens, the limit is {max_tokens}")


def check_words(doc: Document, normalized: str) -> None:
    """BadRecord when a record without an embedding has no words to be decided on: its
    fingerprint would be 0 and every later empty text (or a page of markup alone) its
    exact copy, so it never enters the index."""
    if doc.embedding is None and not has_tokens(normalized):
        how = (
            f"once its text is extracted ({doc.extraction})"
            if doc.extraction
            else "once normalized"
        )
        raise BadRecord("empty_text", f"no words {how}")


@dataclass
class Counts:
    records: int = 0
    unique: int = 0
    duplicates: int = 0
    exact: int = 0
    errors: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    revisions: int = 0  # decisions on changed content of a known id
    stale: int = 0  # records older than their id's last version: the stored decision again
    tombstones: int = 0
    seconds: float = 0.0

    def add(self, batch: Prepared, decisions: list[Decision]) -> None:
        self.records += batch.size
        self.tombstones += len(batch.tombstones)
        for error in batch.errors:
            self.errors += 1
            reason = str(error["reason"])
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        for d in decisions:
            if d.duplicate_of is None:
                self.unique += 1
            else:
                self.duplicates += 1
                self.exact += d.exact

    @property
    def failed(self) -> bool:
        """Records came and not one could be decided: most likely the wrong file, or a
        producer writing the wrong format, which a run's exit status should say."""
        return self.records > 0 and self.errors == self.records

    def summary(self) -> str:
        rate = self.records / self.seconds if self.seconds else 0.0
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        refetch = ", ".join(
            f"{n} {what}"
            for n, what in (
                (self.revisions, "revisions"),
                (self.stale, "stale"),
                (self.tombstones, "tombstones"),
            )
            if n
        )
        return (
            f"{self.records} records: {self.unique} unique, {self.duplicates} duplicates "
            f"({self.exact} exact copies), {self.errors} errors"
            f"{' (' + reasons + ')' if reasons else ''}"
            f"{'; ' + refetch if refetch else ''}; "
            f"{self.seconds:.1f} s, {rate:,.0f} records/s"
        )


class Observer(Protocol):
    """What the loop tells whoever watches it (serve's metrics and health, detect's
    progress bar). Each method returns quickly and raises nothing."""

    def polled(self, records: int) -> None:
        """After every poll (step 1), 0 for a quiet one."""

    def retrying(self, step: str, exc: Exception, wait: float) -> None:
        """A step failed and is retried after `wait` seconds."""

    def done(self, batch: Prepared, decisions: list[Decision], seconds: float) -> None:
        """After step 7: the batch is committed, `seconds` after its poll."""


@dataclass
class Loop:
    detector: Detector
    source: Source
    sink: Sink
    limits: Limits = LIMITS
    observers: Sequence[Observer] = ()
    retry: Retry = LOOP
    # Upkeep between batches (serve's retention sweep), at most once per `upkeep_every` s.
    upkeep: Callable[[], object] | None = None
    upkeep_every: float = 1.0
    workers: int = 0
    start_method: str = "spawn"  # fork is quicker, but only safe without threads (detect)
    # Parse and fingerprint the next batch in a thread while this one is in Redis and
    # Kafka round trips (the native kernels and the sockets release the GIL). Polls and
    # commits stay on this thread, in order.
    prefetch: bool = False
    # A Kafka tombstone: "delete" forgets its id (index delete) and forwards a tombstone
    # of the same key; "ignore" passes over it.
    tombstones: str = "delete"
    stopping: bool = False  # set from a signal handler: the loop ends after this batch
    _upkept: float = -float("inf")

    def run(self) -> Counts:
        counts = Counts()
        started = time.perf_counter()
        for batch in self._prepared():  # 1, 2, 3
            polled = time.perf_counter()
            for o in self.observers:
                o.polled(batch.size)
            if batch.size:
                before = self.detector.stale, self.detector.revisions
                decisions = self._one(batch)  # 4 to 7
                counts.add(batch, decisions)
                counts.stale += self.detector.stale - before[0]
                counts.revisions += self.detector.revisions - before[1]
                done = time.perf_counter()
                for o in self.observers:
                    o.done(batch, decisions, done - polled)
                if (p := profile.active()) is not None:
                    p.batch(batch.size, done)
            if self.stopping:
                break
            if self.upkeep is not None and time.monotonic() - self._upkept >= self.upkeep_every:
                with stage("upkeep"):
                    self._step("upkeep", self.upkeep)
                self._upkept = time.monotonic()
        counts.seconds = time.perf_counter() - started
        return counts

    def _one(self, batch: Prepared) -> list[Decision]:
        deleting = self.tombstones == "delete"

        def decide() -> list[Decision | Tombstone]:
            """The decisions and the tombstones forwarded, in the batch's order: a record
            before a tombstone of its id is decided before the delete, one after it
            afresh."""
            out: list[Decision | Tombstone] = []
            start = 0
            for at, dead, _ in (
                *(batch.tombstones if deleting else ()),
                (len(batch.docs), None, None),
            ):
                if at > start:
                    out += self.detector.process(batch.docs[start:at], batch.prints[start:at])
                if dead is not None:
                    self.detector.index.delete([dead.id])
                    out.append(dead)
                start = at
            return out

        def publish() -> None:
            for error, headers in zip(batch.errors, batch.error_headers, strict=True):
                self.sink.error(error, headers)
            docs = iter(batch.headers)
            dead = iter(h for _, _, h in batch.tombstones)
            run: list[Decision] = []
            run_headers: list[Headers] = []
            for item in outputs:
                if isinstance(item, Tombstone):
                    if run:
                        self.sink.decisions(run, run_headers)
                    run, run_headers = [], []
                    self.sink.tombstone(item, next(dead))
                else:
                    run.append(item)
                    run_headers.append(next(docs))
            if run:
                self.sink.decisions(run, run_headers)
            with stage("publish/flush"):
                self.sink.flush()

        with stage("decide"):
            outputs = self._step("decide", decide)  # 4
        with stage("publish"):
            self._step("publish", publish)  # 5, 6
        with stage("commit"):
            self._step("commit", lambda: self.source.commit(batch.position))  # 7
        return [d for d in outputs if isinstance(d, Decision)]

    def _step(self, step: str, action: Callable[[], T]) -> T:
        return self.retry.call(step, action, on_retry=self._retrying)

    def _retrying(self, step: str, exc: Exception, wait: float) -> None:
        for o in self.observers:
            o.retrying(step, exc, wait)

    def _prepared(self) -> Iterator[Prepared]:
        engine, limits, extractor = self.detector.engine, self.limits, self.detector.extractor
        batches = _polls(self.source.batches())
        if self.workers <= 0 and self.prefetch:
            yield from self._prefetched(batches)
            return
        if self.workers <= 0:
            for b in batches:
                yield _prepare_batch(engine, b, limits, extractor)
            return
        # Each worker learns its own copy of the template model from the batches it gets.
        import multiprocessing  # worker processes only: detect's default is none
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context(self.start_method)
        start = (engine, extractor)
        with ProcessPoolExecutor(self.workers, context, _start_worker, start) as pool:
            pending: deque[Future[Prepared]] = deque()
            for b in batches:
                pending.append(pool.submit(_prepare_in_worker, b, limits))
                if len(pending) > 2 * self.workers:
                    yield _waited(pending.popleft())
            while pending:
                yield _waited(pending.popleft())

    def _prefetched(self, batches: Iterator[Batch]) -> Iterator[Prepared]:
        """Each batch prepared in a thread while the one before it is decided. A batch
        polled before a commit rewound the source is dropped: its records come again."""
        engine, limits, extractor = self.detector.engine, self.limits, self.detector.extractor
        with ThreadPoolExecutor(1, thread_name_prefix="neardup-prepare") as pool:
            ahead: tuple[Future[Prepared], int] | None = None
            for b in batches:
                polled = (
                    pool.submit(_prepare_batch, engine, b, limits, extractor),
                    self.source.rewinds,
                )
                if ahead is not None:
                    prepared = _waited(ahead[0])
                    if ahead[1] == self.source.rewinds:
                        yield prepared
                ahead = polled
            if ahead is not None and ahead[1] == self.source.rewinds:
                yield _waited(ahead[0])


def _polls(batches: Iterator[Batch]) -> Iterator[Batch]:
    """The source's batches, each poll's time profiled: an empty one's as idle."""
    while True:
        start = time.perf_counter()
        batch = next(batches, None)
        if batch is None:
            return
        if (p := profile.active()) is not None:
            p.poll(len(batch.records), start, time.perf_counter())
        yield batch


def _waited(future: Future[Prepared]) -> Prepared:
    with stage("wait-prepare"):
        return future.result()


def _prepare_batch(
    engine: Engine, batch: Batch, limits: Limits, extractor: Extractor | None
) -> Prepared:
    with stage("prepare"):
        prepared = prepare(engine, batch.records, limits, extractor)
    prepared.position = batch.position
    return prepared


_worker: tuple[Engine, Extractor | None] | None = None


def _start_worker(engine: Engine, extractor: Extractor | None) -> None:
    global _worker
    _worker = engine, extractor


def _prepare_in_worker(batch: Batch, limits: Limits) -> Prepared:
    assert _worker is not None
    return _prepare_batch(_worker[0], batch, limits, _worker[1])


def run(
    detector: Detector,
    records: Iterable[bytes | RawRecord],
    sink: Sink,
    batch_size: int = 512,
    limits: Limits = LIMITS,
    workers: int = 0,
    start_method: str = "spawn",
) -> Counts:
    """The loop over records in memory (a ListSource): for tests, and for programs that
    embed the detector."""
    from .stream.memory import ListSource

    source = ListSource(records, batch_size)
    return Loop(detector, source, sink, limits, workers=workers, start_method=start_method).run()
