"""Deciding a batch: look up, verify, decide, and the atomic check-and-insert.

`Detector.process` decides a batch of fingerprinted documents in order against an index
(the memory index or the Redis index, behind one interface), redoing from a conflict when
another consumer committed a near-duplicate first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from . import __version__, radius
from .blocks import BlockScheme
from .engine import Engine, Print
from .errors import Contention
from .extract import Extractor
from .extract import texts as texts_of
from .features import Weights
from .index import Candidate, Commit, Entry, Found, Index, Query, record_of, scheme_for, version_id
from .profile import stage
from .records import Decision, Document
from .retry import CONFLICTS
from .sketch import SHORT_SHINGLES
from .vectors import default_vector_scheme
from .verify import LiteralCheck, cosine

# What decided a decision (Decision.evidence): an exact copy's digest; the exact shingle
# Jaccard of texts; the sketch of a text the index no longer keeps; the cosine of
# vectors; or, for a unique record, no candidate within the radius.
DIGEST, TEXT, SKETCH, VECTOR, FINGERPRINT = "digest", "text", "sketch", "vector", "fingerprint"


def _quiet(what: str, exc: Exception, wait: float) -> None:
    """Conflicts are counted (Detector.conflicts), not logged: they are how consumers
    that share an index take turns, not a fault."""


def lookup_radius(p: Print, k: int, short_k: int, weights: Weights) -> int:
    """A document's lookup radius: its space's k, or a short text's own, wider up to
    `short_k` (radius.py). What `detect` and `serve` look up with, and so what `explain` and
    `review` judge a pair by."""
    if p.vector is None and len(p.shingles) < radius.SHORT_WORDS and short_k > k:
        return radius.radius(p.text, weights, k, short_k)
    return k


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
        keep_previous: bool = False,
        extractor: Extractor | None = None,
        vector_scheme: BlockScheme | None = None,
        short_k: int = radius.WIDEST,
    ) -> None:
        self.engine = engine
        self.index = index
        self.scheme = scheme
        # the tables of records with an embedding
        self.vector_scheme = vector_scheme or default_vector_scheme()
        self.literal = literal
        self.max_candidates = max_candidates
        self.short_k = short_k  # the widest radius of a short text's lookup (radius.py)
        # A re-fetch replaces the version before it; keep_previous keeps that one as a
        # candidate until retention (a copy of the old text is then still a duplicate).
        self.keep_previous = keep_previous
        # HTML pages -> their main content (None: tags stripped, nothing removed)
        self.extractor = extractor
        self.conflicts = 0  # commits that met another consumer's documents
        self.stale = 0  # records older than their id's last version: answered, not decided
        self.revisions = 0  # records of a known id with changed content: decided afresh
        self.vector_lookups = 0  # records with an embedding looked up, and the candidates
        self.vector_candidates = 0  # the tables gave them (within k)
        self._now = ""  # when the batch being decided was decided
        if bind:  # a server-side index binds once its server answers
            index.bind(engine.version)

    def process(self, docs: list[Document], prints: list[Print] | None = None) -> list[Decision]:
        """Decide a batch in order; each document sees the index and the batch before it.

        Optimistic: decide against a lookup, then commit. If another consumer indexed a
        conflicting document meanwhile, the commit stops there and the rest of the batch
        is decided again against a fresh lookup, which now sees that document.
        """
        if prints is None:
            prints = self.engine.fingerprint(
                docs, texts_of(docs, self.extractor, self.engine.kernels.fold)
            )
        out: list[Decision] = []

        def attempt() -> None:
            start = len(out)
            items, stales = self._decide(docs[start:], prints[start:])
            with stage("decide/index"):
                committed = self.index.commit(items)
            self.stale += sum(stales[: committed.done])
            self.revisions += sum(
                1
                for i, item in enumerate(items[: committed.done])
                if item.previous is not None and not item.replay and i not in committed.stored
            )
            for i, item in enumerate(items[: committed.done]):
                out.append(committed.stored.get(i, item.decision))
                if item.entry is not None:  # recent documents are the likeliest originals
                    p = prints[start + i]
                    # a vector as the index keeps it: every comparison sees the same one
                    kept = p.shingles if p.stored is None else p.stored
                    self.literal.remember(item.entry.id, kept)
            if len(out) < len(docs):
                self.conflicts += 1
                raise Contention(
                    f"{len(docs) - len(out)} of {len(docs)} documents met another consumer's commit"
                )

        CONFLICTS.call("commit", attempt, on_retry=_quiet)
        return out

    def _decide(self, docs: list[Document], prints: list[Print]) -> tuple[list[Commit], list[bool]]:
        """The batch's commit items, and which of them answer a stale record."""
        self.literal.new_batch()
        with stage("decide/decisions"):
            prior = self.index.decisions([d.id for d in docs])
        ks = self._radii(prints)
        with stage("decide/lookup"):
            found = self.index.lookup(
                [
                    Query(p.space, p.fingerprint, p.digest, k if k > self.scheme.k else None)
                    for p, k in zip(prints, ks, strict=True)
                ]
            )
        # One clock reading for the batch's decisions (one a record cost 3% of a vector
        # record's time), taken after the lookup: whatever the lookup found was decided
        # before it, so a duplicate is never dated before the record it names.
        self._now = datetime.now(UTC).isoformat()
        wanted: tuple[set[str], set[str]] = set(), set()  # texts, vectors
        for p, f in zip(prints, found, strict=True):
            wanted[p.vector is not None].update(c.id for c in f.candidates[: self.max_candidates])
        texts, vectors = (sorted(w - self.literal.cached_ids(w)) for w in wanted)
        with stage("decide/fetch"):  # the candidates' texts, vectors and sketches
            got = self.index.texts(texts)
            self.literal.load(got)
            self.literal.load_vectors(self.index.vectors(vectors))
            if self.literal.sketch is not None:  # texts gone from the window: their sketches
                self._load_sketches([i for i in texts if i not in got])
        with stage("decide/sketch"):
            sketches = self._sketches(prints)
        with stage("decide/near"):
            near = self._near_in_batch(prints, ks)
        with stage("decide/verify"):
            items, stales = self._verified(docs, prints, found, prior, near, sketches)
        with stage("decide/clusters"):
            self._clusters(items)
        return items, stales

    def _clusters(self, items: list[Commit]) -> None:
        """Each new decision's cluster: itself for a unique, else its partner's, as this
        batch decided it before, or as the index has it (one read for the batch). A
        partner gone since (deleted) or named in an earlier version than its current
        one (--keep-old-versions) is its own cluster's first document."""
        here: dict[str, Decision] = {}
        outside = set()
        for item in items:
            of = item.decision.duplicate_of
            if not item.replay and of is not None and of not in here:
                outside.add(of)
            here[item.decision.id] = item.decision
        read = self.index.clusters(sorted(outside)) if outside else {}
        here.clear()
        for item in items:
            d = item.decision
            of = d.duplicate_of
            if not item.replay and of is not None:  # a unique's is itself (Decision)
                partner = here.get(of)
                revision, cluster = (
                    (partner.revision, partner.cluster) if partner else read.get(of, (-1, of))
                )
                d.cluster = cluster if revision == d.duplicate_of_revision else of
            here[d.id] = d

    def _verified(
        self,
        docs: list[Document],
        prints: list[Print],
        found: list[Found],
        prior: dict[str, Decision],
        near: dict[int, list[tuple[int, int]]],
        sketches: list[bytes],
    ) -> tuple[list[Commit], list[bool]]:
        """The batch's decisions in order: each against the lookup's candidates and the
        batch's documents before it."""
        batch = InBatch()
        items: list[Commit] = []
        stales: list[bool] = []
        for i, (doc, p, f) in enumerate(zip(docs, prints, found, strict=True)):
            earlier = batch.decided.get(doc.id) or prior.get(doc.id)
            old = earlier is not None and stale(doc, earlier)
            stales.append(old)
            if earlier is not None and (old or same_content(earlier, p.digest)):
                items.append(Commit(earlier, None, replay=True))  # the same answer again
                continue
            revision = earlier.revision + 1 if earlier is not None else 0
            version = version_id(doc.id, revision)

            def other(name: str) -> bool:
                """A re-fetch is decided against the index without its own versions, and
                nothing is against a version an earlier revision of the batch replaced."""
                return record_of(name)[0] != doc.id and name not in batch.replaced  # noqa: B023

            exact = next(
                (e for e in (f.exact, batch.digests.get(p.digest)) if e and other(e)), None
            )
            entry = None
            if exact is not None:
                d = self._decision(doc, p, exact, 0, 1.0, exact=True, evidence=DIGEST)
            else:
                local = [
                    Candidate(batch.indexed[j], prints[j].fingerprint, dist)
                    for j, dist in near.get(i, ())
                    if j in batch.indexed and other(batch.indexed[j])
                ]
                stored = [c for c in f.candidates if other(c.id)]
                if p.vector is not None:
                    self.vector_lookups += 1
                    self.vector_candidates += len(stored) + len(local)
                vector = p.packed if p.vector is not None else None
                d = self._verify(doc, p, stored + local, prints, batch.positions, sketches, i)
                kept = sketches[i] if len(p.shingles) > SHORT_SHINGLES else b""
                entry = Entry(version, p.space, p.fingerprint, p.digest, p.text, vector, kept)
            if earlier is not None:
                d.revision, d.previous_fingerprint = revision, earlier.fingerprint
                if not self.keep_previous:  # its earlier version leaves, for the batch too
                    batch.replace(version_id(doc.id, earlier.revision))
            if entry is not None:
                batch.index(i, version, p.digest)
            items.append(Commit(d, entry, previous=earlier, keep_previous=self.keep_previous))
            batch.decided[doc.id] = d
        return items, stales

    def _sketches(self, prints: list[Print]) -> list[bytes]:
        """The batch's shingle sketches when texts leave a window (b"" for vectors)."""
        if self.literal.sketch is None:
            return [b""] * len(prints)
        text = [i for i, p in enumerate(prints) if p.vector is None]
        made = self.engine.kernels.sketches([prints[i].shingles for i in text], self.literal.sketch)
        out = [b""] * len(prints)
        for i, s in zip(text, made, strict=True):
            out[i] = s
        return out

    def _sketch_of(self, version: str) -> bytes | None:
        """A candidate's sketch, from the cache or else the index."""
        if self.literal.sketch is None:
            return None
        self._load_sketches([version])
        return self.literal.sketch_of(version)

    def _load_sketches(self, ids: list[str]) -> None:
        missing = [i for i in ids if self.literal.sketch_of(i) is None]
        if missing:
            for doc_id, s in self.index.sketches(missing).items():
                self.literal.remember_sketch(doc_id, s)

    def _radii(self, prints: list[Print]) -> list[int]:
        weights = self.engine.featurizer.weights
        return [lookup_radius(p, self.k(p.space), self.short_k, weights) for p in prints]

    def _near_in_batch(
        self, prints: list[Print], radii: list[int]
    ) -> dict[int, list[tuple[int, int]]]:
        """For each document, the earlier ones of the batch within its radius."""
        fps = np.array([p.fingerprint for p in prints], np.uint64)
        spaces = np.array([p.space for p in prints])
        ks = np.array(radii)
        out: dict[int, list[tuple[int, int]]] = {}
        for top in range(0, len(fps), 1024):  # row blocks keep a large batch's matrix small
            rows = np.arange(top, min(top + 1024, len(fps)))
            dist = np.bitwise_count(fps[rows, None] ^ fps[None, : rows[-1]])
            close = (dist <= ks[rows, None]) & (spaces[rows, None] == spaces[None, : rows[-1]])
            close &= rows[:, None] > np.arange(rows[-1])[None, :]
            for r, j in zip(*np.nonzero(close), strict=True):
                out.setdefault(int(rows[r]), []).append((int(j), int(dist[r, j])))
        return out

    def k(self, space: str) -> int:
        return scheme_for(space, self.scheme, self.vector_scheme).k

    def _verify(
        self,
        doc: Document,
        p: Print,
        candidates: list[Candidate],
        batch: list[Print],
        in_batch: dict[str, int],
        sketches: list[bytes],
        at: int,
    ) -> Decision:
        """The literal pass: the most similar candidate above the threshold, if any (the
        shingle Jaccard of texts, the cosine of vectors). A candidate whose text has left
        the window of texts kept is judged on its sketch (LiteralCheck.judge)."""
        vector = p.vector is not None
        if not candidates:
            return self._decision(doc, p, None, None, None, evidence=FINGERPRINT)
        candidates = sorted(candidates, key=lambda c: (c.distance, c.id))[: self.max_candidates]
        mine = p.vector if p.vector is not None else p.shingles
        threshold = self.literal.cosine if vector else self.literal.threshold
        held: list[tuple[Candidate, np.ndarray | None, bytes | None]] = []
        for c in candidates:
            theirs: np.ndarray | None
            sketch: bytes | None = None
            if c.id in in_batch:
                b = batch[in_batch[c.id]]
                theirs = b.shingles if b.stored is None else b.stored
                if self.literal.window == 0 and len(b.shingles) > SHORT_SHINGLES:
                    # what the index keeps of it, as for a candidate of an earlier batch
                    theirs, sketch = None, sketches[in_batch[c.id]]
            else:
                theirs = self.literal.get(c.id)
            if theirs is None and sketch is None:  # evicted from the cache since the prefetch
                if vector:
                    self.literal.load_vectors(self.index.vectors([c.id]))
                else:
                    self.literal.load(self.index.texts([c.id]))
                theirs = self.literal.get(c.id)
            if theirs is None and sketch is None and not vector:
                sketch = self._sketch_of(c.id)
            held.append((c, theirs, sketch))
        # every candidate's similarity at once: one kernel call, not one per candidate
        compared = [theirs for _, theirs, _ in held if theirs is not None]
        similarities = iter(
            [cosine(mine, t) for t in compared]
            if vector
            else self.literal.kernels.jaccards(mine, compared)
        )
        best: tuple[float, Candidate, str] | None = None
        evidence = VECTOR if vector else FINGERPRINT  # the weakest that judged a candidate
        for c, theirs, sketch in held:
            if theirs is not None:
                sim = next(similarities)
                if not vector and evidence == FINGERPRINT:
                    evidence = TEXT
                if sim >= threshold and (best is None or sim > best[0]):
                    best = (sim, c, VECTOR if vector else TEXT)
                continue
            if sketch is None:
                continue  # its text has expired: unverifiable, so not a duplicate
            judged = self.literal.judge(sketches[at], sketch, c.distance)
            evidence = SKETCH
            if judged.duplicate and (best is None or judged.estimate.jaccard > best[0]):
                best = (judged.estimate.jaccard, c, SKETCH)
        if best is not None:
            return self._decision(doc, p, best[1].id, best[1].distance, best[0], evidence=best[2])
        return self._decision(doc, p, None, None, None, evidence=evidence)

    def _decision(
        self,
        doc: Document,
        p: Print,
        dup: str | None,  # the version it duplicates
        distance: int | None,
        similarity: float | None,
        exact: bool = False,
        evidence: str = TEXT,
    ) -> Decision:
        of, of_revision = record_of(dup) if dup is not None else (None, 0)
        return Decision(
            id=doc.id,
            duplicate_of=of,
            fingerprint=p.fingerprint,
            distance=distance,
            similarity=similarity,
            exact=exact,
            features=self.engine.version,
            namespace=self.index.namespace,
            detector=__version__,
            duplicate_of_revision=of_revision,
            url=doc.url,
            version=doc.version,
            origin=doc.origin,
            extraction=doc.extraction,
            digest=p.digest,
            decided_at=self._now,
            space=p.space if p.vector is not None else None,
            k=self.k(p.space) if p.vector is not None else None,
            evidence=evidence,
        )


@dataclass
class InBatch:
    """What deciding a batch knows of its own documents, as it goes: a document is decided
    against the index and the batch's documents before it."""

    decided: dict[str, Decision] = field(default_factory=dict)  # id -> its latest decision
    indexed: dict[int, str] = field(default_factory=dict)  # position -> version indexed
    positions: dict[str, int] = field(default_factory=dict)  # and back
    digests: dict[str, str] = field(default_factory=dict)  # digest -> its first version
    digest_of: dict[str, str] = field(default_factory=dict)  # version -> its digest
    replaced: set[str] = field(default_factory=set)  # versions a revision took out

    def index(self, at: int, version: str, digest: str) -> None:
        self.digests.setdefault(digest, version)
        self.digest_of[version] = digest
        self.positions[version] = at
        self.indexed[at] = version

    def replace(self, gone: str) -> None:
        """A revision takes `gone` out: no later document of the batch meets it. In place,
        so that a batch of re-fetches costs no copy of the batch's maps per revision."""
        self.replaced.add(gone)
        at = self.positions.get(gone)
        if at is not None and self.indexed.get(at) == gone:
            del self.indexed[at]
        digest = self.digest_of.get(gone)
        if digest is not None and self.digests.get(digest) == gone:
            del self.digests[digest]


def same_content(earlier: Decision, digest: str) -> bool:
    """A decision made on this content (an index written before digests were kept
    cannot tell: it takes every record of a known id as a redelivery)."""
    return not earlier.digest or earlier.digest == digest


def stale(doc: Document, earlier: Decision) -> bool:
    """A record older than the version its id was last decided on."""
    return doc.version is not None and earlier.version is not None and doc.version < earlier.version
