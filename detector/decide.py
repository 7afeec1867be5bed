"""Deciding a batch: look up, verify, decide, and the atomic check-and-insert.

`Detector.process` decides a batch of fingerprinted documents in order against an index
(the memory index or the Redis index, behind one interface), redoing from a conflict when
another consumer committed a near-duplicate first.
"""

from __future__ import annotations

import numpy as np

from . import __version__
from .blocks import BlockScheme
from .engine import Engine, Print
from .errors import Contention
from .index import Candidate, Commit, Entry, Index, Query
from .records import Decision, Document
from .retry import CONFLICTS
from .verify import LiteralCheck, jaccard


def _quiet(what: str, exc: Exception, wait: float) -> None:
    """Conflicts are counted (Detector.conflicts), not logged: they are how consumers
    that share an index take turns, not a fault."""


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

        def attempt() -> None:
            start = len(out)
            items = self._decide(docs[start:], prints[start:])
            committed = self.index.commit(items)
            for i, item in enumerate(items[: committed.done]):
                out.append(committed.stored.get(i, item.decision))
                if item.entry is not None:  # recent documents are the likeliest originals
                    self.literal.remember(item.decision.id, prints[start + i].shingles)
            if len(out) < len(docs):
                self.conflicts += 1
                raise Contention(
                    f"{len(docs) - len(out)} of {len(docs)} documents met another consumer's commit"
                )

        CONFLICTS.call("commit", attempt, on_retry=_quiet)
        return out

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
