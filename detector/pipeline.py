"""The batch flow: fingerprint, look up, verify, decide, index, publish, commit.

`Detector.process` decides a batch against an index; `run` drives a source and a sink.
The same code serves `neardup detect` (file source, JSONL sink, memory index) and
`neardup serve` (Kafka source and sink, Redis index).
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from . import __version__
from .backoff import ExponentialBackoff
from .blocks import BlockScheme
from .engine import Engine, Print
from .errors import BackendUnavailable, BadRecord
from .index import Candidate, Commit, Entry, Index, Query
from .normalize import normalize
from .records import (
    DEFAULT_MAX_TOKENS,
    Decision,
    Document,
    RawRecord,
    error_record,
    parse_document,
)
from .tokenize import count_tokens
from .verify import LiteralCheck, jaccard

MAX_ATTEMPTS = 20
CONFLICT_BACKOFF = ExponentialBackoff(base=0.001, cap=0.1)


class Detector:
    """Decides batches of documents in order against an index."""

    def __init__(
        self,
        engine: Engine,
        index: Index,
        scheme: BlockScheme,
        literal: LiteralCheck,
        max_candidates: int = 32,
        bind: bool = True,
    ) -> None:
        self.engine = engine
        self.index = index
        self.scheme = scheme
        self.literal = literal
        self.max_candidates = max_candidates
        self.conflicts = 0  # commits that met another consumer's documents
        if bind:  # a server-side index binds once its server answers
            index.bind(engine.version)

    def process(self, docs: list[Document], prints: list[Print] | None = None) -> list[Decision]:
        """Decide a batch in order; each document sees the index and the batch before it.

        Optimistic: decide against a lookup, then commit. If another consumer indexed a
        conflicting document meanwhile, the commit stops there and the rest of the batch
        is decided again against a fresh lookup, which now sees that document.
        """
        if prints is None:
            prints = self.engine.fingerprint(docs)
        out: list[Decision] = []
        for attempt in range(MAX_ATTEMPTS):
            start = len(out)
            items = self._decide(docs[start:], prints[start:])
            committed = self.index.commit(items)
            for i, item in enumerate(items[: committed.done]):
                out.append(committed.stored.get(i, item.decision))
                if item.entry is not None:  # recent documents are the likeliest originals
                    self.literal.remember(item.decision.id, prints[start + i].shingles)
            if len(out) == len(docs):
                return out
            self.conflicts += 1
            time.sleep(CONFLICT_BACKOFF.compute(attempt))
        raise BackendUnavailable(f"the index kept changing under {MAX_ATTEMPTS} attempts")

    def _decide(self, docs: list[Document], prints: list[Print]) -> list[Commit]:
        prior = self.index.decisions([d.id for d in docs])
        found = self.index.lookup([Query(p.space, p.fingerprint, p.digest) for p in prints])
        wanted = {c.id for f in found for c in f.candidates[: self.max_candidates]}
        self.literal.load(self.index.texts(sorted(wanted - self.literal.cached_ids(wanted))))
        near = self._near_in_batch(prints)
        digests: dict[str, str] = {}  # digest -> id of this batch's indexed documents
        decided: dict[str, Decision] = {}
        indexed: dict[int, str] = {}  # position in batch -> id, for documents indexed
        positions: dict[str, int] = {}  # and back
        items = []
        for i, (doc, p, f) in enumerate(zip(docs, prints, found, strict=True)):
            earlier = prior.get(doc.id) or decided.get(doc.id)
            if earlier is not None:  # redelivered: the same answer again
                items.append(Commit(earlier, None, replay=True))
                continue
            exact = f.exact or digests.get(p.digest)
            if exact is not None:
                d = self._decision(doc.id, p, exact, 0, 1.0, exact=True)
                items.append(Commit(d, None))
            else:
                local = [
                    Candidate(indexed[j], prints[j].fingerprint, dist)
                    for j, dist in near.get(i, ())
                    if j in indexed
                ]
                d = self._verify(doc.id, p, f.candidates + local, prints, positions)
                digests.setdefault(p.digest, doc.id)
                positions[doc.id] = i
                indexed[i] = doc.id
                items.append(Commit(d, Entry(doc.id, p.space, p.fingerprint, p.digest, p.text)))
            decided[doc.id] = d
        return items

    def _near_in_batch(self, prints: list[Print]) -> dict[int, list[tuple[int, int]]]:
        """For each document, the earlier ones of the batch within distance k."""
        fps = np.array([p.fingerprint for p in prints], np.uint64)
        spaces = np.array([p.space for p in prints])
        out: dict[int, list[tuple[int, int]]] = {}
        for top in range(0, len(fps), 1024):  # row blocks keep a large batch's matrix small
            rows = np.arange(top, min(top + 1024, len(fps)))
            dist = np.bitwise_count(fps[rows, None] ^ fps[None, : rows[-1]])
            close = (dist <= self.scheme.k) & (spaces[rows, None] == spaces[None, : rows[-1]])
            close &= rows[:, None] > np.arange(rows[-1])[None, :]
            for r, j in zip(*np.nonzero(close), strict=True):
                out.setdefault(int(rows[r]), []).append((int(j), int(dist[r, j])))
        return out

    def _verify(
        self,
        doc_id: str,
        p: Print,
        candidates: list[Candidate],
        batch: list[Print],
        in_batch: dict[str, int],
    ) -> Decision:
        """The literal pass: the most similar candidate above the threshold, if any."""
        if not candidates:
            return self._decision(doc_id, p, None, None, None)
        candidates = sorted(candidates, key=lambda c: (c.distance, c.id))[: self.max_candidates]
        mine = p.shingles
        best: tuple[float, Candidate] | None = None
        for c in candidates:
            theirs = batch[in_batch[c.id]].shingles if c.id in in_batch else self.literal.get(c.id)
            if theirs is None:  # evicted from the cache since the batch's prefetch
                self.literal.load(self.index.texts([c.id]))
                theirs = self.literal.get(c.id)
            if theirs is None:
                continue  # its text has expired: unverifiable, so not a duplicate
            sim = jaccard(mine, theirs)
            if best is None or sim > best[0]:
                best = (sim, c)
        if best is not None and best[0] >= self.literal.threshold:
            return self._decision(doc_id, p, best[1].id, best[1].distance, best[0])
        return self._decision(doc_id, p, None, None, None)

    def _decision(
        self,
        doc_id: str,
        p: Print,
        dup: str | None,
        distance: int | None,
        similarity: float | None,
        exact: bool = False,
    ) -> Decision:
        return Decision(
            id=doc_id,
            duplicate_of=dup,
            fingerprint=p.fingerprint,
            distance=distance,
            similarity=similarity,
            exact=exact,
            features=self.engine.version,
            namespace=self.index.namespace,
            detector=__version__,
        )


class Sink(Protocol):
    def decisions(self, decisions: list[Decision]) -> None: ...
    def error(self, record: dict[str, object]) -> None: ...
    def flush(self) -> None: ...


@dataclass
class Counts:
    records: int = 0
    unique: int = 0
    duplicates: int = 0
    exact: int = 0
    errors: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> str:
        rate = self.records / self.seconds if self.seconds else 0.0
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        return (
            f"{self.records} records: {self.unique} unique, {self.duplicates} duplicates "
            f"({self.exact} exact copies), {self.errors} errors"
            f"{' (' + reasons + ')' if reasons else ''}; "
            f"{self.seconds:.1f} s, {rate:,.0f} records/s"
        )


def batches(records: Iterable[RawRecord], size: int) -> Iterator[list[RawRecord]]:
    batch: list[RawRecord] = []
    for r in records:
        batch.append(r)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class Prepared:
    """A batch parsed and fingerprinted: everything that needs no index."""

    size: int
    docs: list[Document]
    prints: list[Print]
    errors: list[dict[str, object]]


def prepare(
    engine: Engine, batch: list[RawRecord], max_bytes: int, max_tokens: int = DEFAULT_MAX_TOKENS
) -> Prepared:
    """Parse, check and fingerprint a batch; a record over a limit is an error record."""
    docs, texts, errors = [], [], []
    for raw, where in batch:
        try:
            doc = parse_document(raw, max_bytes)
            text = normalize(doc.text)
            check_tokens(text, max_tokens)
        except BadRecord as bad:
            errors.append(error_record(bad.reason, bad.detail, raw, **where))
        else:
            docs.append(doc)
            texts.append(text)
    return Prepared(len(batch), docs, engine.fingerprint(docs, texts), errors)


def check_tokens(normalized: str, max_tokens: int) -> None:
    """BadRecord when a normalized text has more than max_tokens tokens.

    Every token takes at least one character of the normalized text, so only a text
    longer than the limit is counted. The raw text's length would not do: NFKC turns
    one character into up to 18 (U+FDFA) and up to 6 tokens (U+3316).
    """
    if len(normalized) > max_tokens and (count := count_tokens(normalized)) > max_tokens:
        raise BadRecord("too_many_tokens", f"{count} tokens, the limit is {max_tokens}")


_worker_engine: Engine | None = None


def _start_worker(engine: Engine) -> None:
    global _worker_engine
    _worker_engine = engine


def _prepare_in_worker(batch: list[RawRecord], max_bytes: int, max_tokens: int) -> Prepared:
    assert _worker_engine is not None
    return prepare(_worker_engine, batch, max_bytes, max_tokens)


def prepared(
    engine: Engine,
    records: Iterable[RawRecord],
    batch_size: int,
    max_bytes: int,
    workers: int,
    start_method: str = "spawn",
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> Iterator[Prepared]:
    """Batches parsed and fingerprinted, in order. With workers, that work runs in other
    processes ahead of the decisions, which must stay in order in this one. Fork starts
    them at once but is only safe in a process without threads (`detect`, not `serve`)."""
    if workers <= 0:
        for batch in batches(records, batch_size):
            yield prepare(engine, batch, max_bytes, max_tokens)
        return
    context = multiprocessing.get_context(start_method)
    with ProcessPoolExecutor(workers, context, _start_worker, (engine,)) as pool:
        pending: deque[Future[Prepared]] = deque()
        for batch in batches(records, batch_size):
            pending.append(pool.submit(_prepare_in_worker, batch, max_bytes, max_tokens))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def run(
    detector: Detector,
    records: Iterable[RawRecord],
    sink: Sink,
    batch_size: int,
    max_bytes: int,
    progress: Any = None,
    workers: int = 0,
    start_method: str = "spawn",
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> Counts:
    """Parse, decide and publish every record; bad ones become error records.

    Order per batch: 1. decide (and index) 2. publish decisions and errors 3. flush.
    A source that must commit (Kafka) commits after run's flush of each batch.
    """
    counts = Counts()
    started = time.perf_counter()
    batches_ = prepared(
        detector.engine, records, batch_size, max_bytes, workers, start_method, max_tokens
    )
    for batch in batches_:
        for error in batch.errors:
            counts.errors += 1
            reason = str(error["reason"])
            counts.reasons[reason] = counts.reasons.get(reason, 0) + 1
            sink.error(error)
        decisions = detector.process(batch.docs, batch.prints) if batch.docs else []
        for d in decisions:
            if d.duplicate_of is None:
                counts.unique += 1
            else:
                counts.duplicates += 1
                counts.exact += d.exact
        counts.records += batch.size
        sink.decisions(decisions)
        sink.flush()
        if progress is not None:
            progress.update(batch.size)
    counts.seconds = time.perf_counter() - started
    return counts
