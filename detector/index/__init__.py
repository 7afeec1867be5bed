"""The index interface: block tables of fingerprints, exact-copy digests, literal texts
and past decisions. `memory.MemoryIndex` implements it in process; the Redis index of
`neardup serve` implements the same interface on a server or a Redis Cluster. The
pipeline never asks which one it has.

Versions. A record id decided again with changed content (a re-fetch) is a new version of
it: revision 0 is indexed under the id itself, revision r under `version_id(id, r)`, so
every version has its own entries, text and cached shingles, and a lookup's candidates
name versions (`record_of` gives back the id and revision). A revision replaces the
version before it (`Commit.previous`), or keeps it as a candidate until retention
(`Commit.keep_previous`).

Both bound the work of a lookup the same way: a block-table bucket contributes only its
newest `max_bucket` entries (DEFAULT_MAX_BUCKET), so a flood of variants into one bucket
(a hot bucket) cannot slow every lookup that touches it. An older entry of a hot bucket
is still found through the other tables its fingerprint is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..records import VERSION_MARK, Decision

if TYPE_CHECKING:  # the model's module imports xxhash; the options module must not
    import numpy as np

    from ..blocks import BlockScheme
    from ..templates import Templates

DEFAULT_MAX_BUCKET = 1024


def version_id(doc_id: str, revision: int) -> str:
    """The name a version of a record is indexed under."""
    return doc_id if revision == 0 else f"{doc_id}{VERSION_MARK}{revision}"


def scheme_for(space: str, text: BlockScheme, vectors: BlockScheme | None) -> BlockScheme:
    """The block tables of a space: vectors have their own (vectors.vector_scheme), for
    their Hamming radius follows from the cosine threshold, not from the text's."""
    return vectors if vectors is not None and space.startswith("v") else text


def lookup_scheme(scheme: BlockScheme, k: int | None) -> BlockScheme:
    """The scheme a query of radius `k` reads: the space's own, or for a wider k the same
    tables probed at radius 1 (BlockScheme.widened)."""
    return scheme if k is None or k <= scheme.k else scheme.widened(k)


def by_lookup(queries: Sequence[Query]) -> dict[tuple[str, int | None], list[int]]:
    """Positions of the queries grouped by the tables their lookup reads: their space and
    radius (Query.k), in order within a group."""
    groups: dict[tuple[str, int | None], list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault((q.space, q.k), []).append(i)
    return groups


def record_of(version: str) -> tuple[str, int]:
    """(record id, revision) of an indexed version's name."""
    doc_id, _, revision = version.partition(VERSION_MARK)
    return doc_id, int(revision or 0)


@dataclass(frozen=True)
class Entry:
    """An indexed document: found by its fingerprint in its space, or by its digest."""

    id: str  # the version's name: version_id(record id, revision)
    space: str  # fingerprints of different kinds (text, vectors of a dimension) never meet
    fingerprint: int
    digest: str  # of the normalized token stream (or the vector): equal means exact copies
    text: str  # normalized, for the literal second pass
    vector: bytes | None = None  # a vector's stored form (vectors.pack), kept instead of text
    # the text's shingle sketch (detector.sketch), kept while the version is indexed,
    # after its text has left the window of texts kept; b"" for a vector
    sketch: bytes = b""


def text_kept(entry: Entry, window: int | None) -> bool:
    """Whether an index stores an entry's text as it indexes it: not where its sketch
    stands for it, with a window of 0 texts or for an imported document whose text had
    left the window (a sketch and no text; a text is never empty once decided on)."""
    return not (entry.sketch and (window == 0 or not entry.text))


@dataclass(frozen=True)
class Query:
    space: str
    fingerprint: int
    digest: str
    # A radius wider than the space's scheme's (a short text: detector.radius): its
    # tables are read at probe radius 1 besides their own key, and candidates kept to k.
    k: int | None = None


@dataclass(frozen=True)
class Candidate:
    id: str  # a version's name (record_of)
    fingerprint: int
    distance: int


@dataclass(frozen=True)
class Commit:
    """One decision to make durable; `entry` is set when the document joins the index."""

    decision: Decision
    entry: Entry | None
    replay: bool = False  # an earlier decision repeated for a redelivered record: no write
    # A changed record of a known id: the decision it replaces. The commit goes through
    # only if that is still the id's decision (else the item meets a conflict); the
    # version it was made on leaves the index, or stays a candidate with keep_previous.
    previous: Decision | None = None
    keep_previous: bool = False


@dataclass
class Committed:
    """How far a commit went. `done` items, a prefix, are durable; the rest met a conflict
    (a near-duplicate or an exact copy indexed by another consumer since the lookup) and
    must be decided again. `stored` replaces decisions whose id another consumer decided
    first: every delivery of a record gets that one decision."""

    done: int
    stored: dict[int, Decision]


@dataclass
class Found:
    exact: str | None  # id of an indexed exact copy
    candidates: list[Candidate]  # indexed fingerprints within distance k, nearest first


class Index(Protocol):
    namespace: str

    @property
    def evicted(self) -> int:
        """Block-table entries past their bucket's newest --max-bucket, which lookups no
        longer read (memory: in the index; Redis: pushed out by this process)."""

    def bind(self, version: str) -> None:
        """Tie the index to a fingerprint version; refuse one made by another."""

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        """Exact copies and candidates of a batch, in one round trip. The next commit
        checks against what was indexed since this lookup."""

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Normalized texts of indexed documents (those still kept: not expired, and
        within the window of texts kept, `text_window`)."""

    def sketches(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Shingle sketches of indexed documents (those that have one: every text indexed
        with a sketch, whether or not its text is still kept)."""

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of indexed documents (those still kept), float32 of length 1."""

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        """Earlier decisions for these ids: a redelivered record gets the same answer."""

    def clusters(self, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The revision and cluster of these ids' current decisions, for the decisions
        that name them as partner. Unlike `decisions`, no commit checks against it."""

    def commit(self, items: Sequence[Commit]) -> Committed:
        """Atomically check that nothing conflicting was indexed since the lookup, then
        index the entries and store the decisions, in order."""

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Forget documents: no longer candidates nor exact-copy targets, their texts and
        decisions gone (a record delivered again is decided afresh). Returns the ids
        that were known."""

    def stats(self) -> dict[str, int]: ...

    def templates(self, threshold: int) -> Templates:
        """The model of each site's template (detector.templates), shared by every
        consumer of the index."""
