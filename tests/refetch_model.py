"""The re-fetch rules as a brute-force model, and a hypothesis state machine that holds an
index to it: random interleavings of new, unchanged, changed, stale and deleted records
over a few ids. tests/test_refetch.py runs it over the memory index, the integration suite
over the Redis server and the Redis Cluster.

The model knows nothing of block tables, digests maps or caches: it keeps every version
that is a candidate, and compares each record with all of them. It also holds each
decision's cluster to the rule: itself for a unique, its partner's for a duplicate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from detector.decide import Detector
from detector.engine import Print
from detector.index import Index, version_id
from detector.records import Decision, Document
from detector.verify import jaccard

from .helpers import edit_words, words_text

IDS = ("a", "b", "c")
# Four unrelated texts and two near copies of each: exact copies, near-duplicates and
# unrelated records all happen within a few steps.
TEXTS = [
    t
    for seed in range(4)
    for t in (words_text(seed, 120), *(edit_words(words_text(seed, 120), 2, v) for v in (1, 2)))
]


@dataclass
class Live:
    """A version the model counts as a candidate."""

    name: str
    doc_id: str
    print: Print


def verdict(d: Decision) -> tuple[Any, ...]:
    return (
        d.id,
        d.duplicate_of,
        d.duplicate_of_revision,
        d.exact,
        d.revision,
        d.previous_fingerprint,
        d.fingerprint,
        None if d.similarity is None else round(d.similarity, 4),  # as published
        d.cluster,
    )


class Model:
    def __init__(self, detector: Detector) -> None:
        self.detector = detector
        self.k = detector.scheme.k
        self.threshold = detector.literal.threshold
        self.keep = detector.keep_previous
        self.live: list[Live] = []  # in the order they were indexed
        self.last: dict[str, tuple[Decision, Print | None]] = {}  # id -> decision, print

    def expect(self, doc: Document, p: Print) -> tuple[Any, ...] | None:
        """The verdict the rules give; None: the stored decision again (compared by the
        caller against what the index answered before)."""
        known = self.last.get(doc.id)
        if known is not None:
            earlier = known[0]
            if (
                doc.version is not None
                and earlier.version is not None
                and doc.version < earlier.version
            ):
                return None  # stale
            if earlier.digest == p.digest:
                return None  # unchanged
        others = [v for v in self.live if v.doc_id != doc.id]
        revision = known[0].revision + 1 if known else 0
        previous = known[0].fingerprint if known else None
        exact = next((v for v in others if v.print.digest == p.digest), None)
        if exact is not None:
            of, rev = _record(exact.name)
            cluster = self.cluster(of, rev)
            return (doc.id, of, rev, True, revision, previous, p.fingerprint, 1.0, cluster)
        near = sorted(
            (
                ((v.print.fingerprint ^ p.fingerprint).bit_count(), v.name, v)
                for v in others
                if v.print.space == p.space
                and (v.print.fingerprint ^ p.fingerprint).bit_count() <= self.k
            ),
            key=lambda t: (t[0], t[1]),
        )
        best: tuple[float, Live] | None = None
        for _, _, v in near:
            sim = jaccard(p.shingles, v.print.shingles)
            if best is None or sim > best[0]:
                best = (sim, v)
        if best is not None and best[0] >= self.threshold:
            of, rev = _record(best[1].name)
            sim = round(best[0], 4)
            cluster = self.cluster(of, rev)
            return (doc.id, of, rev, False, revision, previous, p.fingerprint, sim, cluster)
        return (doc.id, None, 0, False, revision, previous, p.fingerprint, None, doc.id)

    def cluster(self, of: str, revision: int) -> str:
        """A duplicate's cluster: its partner's, when the partner is the id's current
        version; else (an earlier version kept, or deleted since) the partner itself."""
        known = self.last.get(of)
        return known[0].cluster if known and known[0].revision == revision else of

    def apply(self, doc: Document, p: Print, decision: Decision, replay: bool) -> None:
        if replay:
            return
        known = self.last.get(doc.id)
        if known is not None and not self.keep:
            gone = version_id(doc.id, known[0].revision)
            self.live = [v for v in self.live if v.name != gone]
        if not decision.exact:
            self.live.append(Live(version_id(doc.id, decision.revision), doc.id, p))
        self.last[doc.id] = (decision, p)

    def delete(self, doc_id: str) -> None:
        self.live = [v for v in self.live if v.doc_id != doc_id]
        self.last.pop(doc_id, None)


def _record(name: str) -> tuple[str, int]:
    doc_id, _, revision = name.partition("\x00")
    return doc_id, int(revision or 0)


def machine(make: Callable[[bool], tuple[Detector, Index]]) -> type[RuleBasedStateMachine]:
    """A state machine over the detectors `make(keep_old_versions)` gives."""

    class Refetches(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.detector: Detector | None = None
            self.clock = 100.0

        @precondition(lambda self: self.detector is None)
        @rule(keep=st.booleans())
        def start(self, keep: bool) -> None:
            self.detector, self.index = make(keep)
            self.model = Model(self.detector)

        def _send(self, *docs: Document) -> None:
            """One batch; the model takes its records one after the other."""
            assert self.detector is not None
            prints = self.detector.engine.fingerprint(list(docs))
            decided = self.detector.process(list(docs), prints)
            for doc, p, got in zip(docs, prints, decided, strict=True):
                want = self.model.expect(doc, p)
                if want is None:
                    earlier = self.model.last[doc.id][0]
                    assert verdict(got) == verdict(earlier), "the stored decision again"
                else:
                    assert verdict(got) == want
                self.model.apply(doc, p, got, replay=want is None)

        @precondition(lambda self: self.detector is not None)
        @rule(doc_id=st.sampled_from(IDS), text=st.sampled_from(TEXTS), versioned=st.booleans())
        def record(self, doc_id: str, text: str, versioned: bool) -> None:
            """A new record, or a re-fetch (changed or not) of a known id."""
            self.clock += 1
            self._send(Document(doc_id, text, version=self.clock if versioned else None))

        @precondition(lambda self: self.detector is not None)
        @rule(
            ids=st.tuples(st.sampled_from(IDS), st.sampled_from(IDS)),
            texts=st.tuples(st.sampled_from(TEXTS), st.sampled_from(TEXTS)),
        )
        def two_in_one_batch(self, ids: tuple[str, str], texts: tuple[str, str]) -> None:
            """A revision and what follows it in one batch see each other as in order."""
            self._send(*(Document(i, t) for i, t in zip(ids, texts, strict=True)))

        @precondition(lambda self: self.detector is not None and bool(self.model.last))
        @rule(data=st.data())
        def stale(self, data: st.DataObject) -> None:
            """A record older than the stored version of its id."""
            doc_id = data.draw(st.sampled_from(sorted(self.model.last)))
            earlier = self.model.last[doc_id][0]
            text = data.draw(st.sampled_from(TEXTS))
            when = earlier.version - 1 if earlier.version is not None else None
            self._send(Document(doc_id, text, version=when))

        @precondition(lambda self: self.detector is not None)
        @rule(doc_id=st.sampled_from(IDS))
        def delete(self, doc_id: str) -> None:
            assert self.detector is not None
            self.detector.index.delete([doc_id])
            self.model.delete(doc_id)

        def teardown(self) -> None:
            drop = getattr(getattr(self, "index", None), "drop", None)
            if drop is not None:  # a Redis index: its keys go
                drop()

        @invariant()
        def documents_are_the_versions_indexed(self) -> None:
            """The index's count of its documents follows revisions, kept versions and
            deletes (on Redis, a counter the scripts keep)."""
            if self.detector is not None:
                assert self.index.stats()["documents"] == len(self.model.live)

        @invariant()
        def decisions_are_the_stored_ones(self) -> None:
            if self.detector is None:
                return
            stored = self.index.decisions(sorted(self.model.last))
            assert set(stored) == set(self.model.last)
            for doc_id, (decision, _) in self.model.last.items():
                assert verdict(stored[doc_id]) == verdict(decision)

    return Refetches
