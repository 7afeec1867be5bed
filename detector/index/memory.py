"""The in-memory index: the embedded default, with the interface of the Redis index.

Each block table is a pair of numpy arrays sorted by key: the table key of every indexed
fingerprint, and the fingerprint's position in the list of distinct fingerprints. A
batch's lookup is then a few vectorized binary searches per table, not a dict probe per
document and table. New fingerprints wait in a small unsorted tail, searched by brute
force, until the tail is large enough to merge.

Exact copies never reach the tables (the digest map answers them), and documents that
share a fingerprint (different texts, rarely) share one table entry and are candidates,
the newest `max_bucket` of them. A table key contributes its newest `max_bucket`
fingerprints; the tail is always scanned whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..blocks import BlockScheme
from ..errors import ConfigError
from ..kernels import native_module
from ..records import Decision
from ..templates import MemoryTemplates
from ..vectors import default_vector_scheme, unpack
from . import (
    DEFAULT_MAX_BUCKET,
    Candidate,
    Commit,
    Committed,
    Entry,
    Found,
    Query,
    by_lookup,
    lookup_scheme,
    scheme_for,
    text_kept,
    version_id,
)
from .texts import Codec, Sample

# the lookup's kernel (native/src/index.rs); _pairs is its reference
NEAR = getattr(native_module(), "near", None)

TAIL = 4096  # fingerprints waiting unsorted: scanned by brute force, then merged
# A table of keys this short also keeps where each key's run starts (2^bits + 1 offsets,
# 256 KB at 16 bits): a probe is then two gathers, not two binary searches. The vector
# tables' lookups read 548 keys each, and the searches were most of their time.
DIRECT_BITS = 16
DIRECT_ROWS = 1024  # a smaller table is searched: its offsets would cost more than they save


@dataclass
class _Space:
    """The tables of one kind of fingerprint (text, or vectors of one dimension)."""

    scheme: BlockScheme
    fps: list[int] = field(default_factory=list)  # distinct fingerprints, in insertion order
    ids: list[list[str]] = field(default_factory=list)  # documents of each fingerprint
    position: dict[int, int] = field(default_factory=dict)  # fingerprint -> index in fps
    keys: list[np.ndarray] = field(default_factory=list)  # per table, sorted
    members: list[np.ndarray] = field(default_factory=list)  # per table, positions in fps
    starts: list[np.ndarray | None] = field(default_factory=list)  # per table, DIRECT_BITS
    merged: int = 0  # fps[:merged] are in the tables; the rest is the tail
    evicted: int = 0  # table entries past their key's newest max_bucket: never read
    _array: np.ndarray = field(default_factory=lambda: np.zeros(1024, np.uint64))
    _filled: int = 0

    def array(self) -> np.ndarray:
        """fps as a numpy array, kept up to date as fps grows (capacity doubles)."""
        if len(self.fps) > len(self._array):
            grown = np.zeros(max(2 * len(self._array), len(self.fps)), np.uint64)
            grown[: self._filled] = self._array[: self._filled]
            self._array = grown
        if self._filled < len(self.fps):
            self._array[self._filled : len(self.fps)] = self.fps[self._filled :]
            self._filled = len(self.fps)
        return self._array[: self._filled]


class MemoryIndex:
    def __init__(
        self,
        scheme: BlockScheme,
        namespace: str = "default",
        compress: bool = True,
        max_bucket: int = DEFAULT_MAX_BUCKET,
        vectors: BlockScheme | None = None,
        codec: Codec | None = None,
        text_window: int | None = None,
    ) -> None:
        if max_bucket < 1:
            raise ConfigError("max_bucket must be at least 1")
        if text_window is not None and text_window < 0:
            raise ConfigError(f"text_window must be 0 or more, got {text_window}")
        self.scheme = scheme
        self.vector_scheme = vectors or default_vector_scheme()
        self.namespace = namespace
        self.compress = compress
        self.codec = codec or Codec()
        # the texts written before the dictionary, until there are enough to train it
        self._sample: Sample | None = Sample() if compress and self.codec.with_dictionary else None
        self.max_bucket = max_bucket
        self.version: str | None = None
        self._templates: MemoryTemplates | None = None
        self._spaces: dict[str, _Space] = {}
        self._digests: dict[str, str] = {}
        # versions -> texts, oldest first: of the texts with a sketch, the newest
        # text_window keep theirs (None: all); a text without one is kept
        self.text_window = text_window
        self._texts: dict[str, bytes | str] = {}
        self._windowed: dict[str, None] = {}  # the versions of texts with a sketch, in order
        self._sketches: dict[str, bytes] = {}
        self._vectors: dict[str, bytes] = {}
        self._decisions: dict[str, Decision] = {}
        self._where: dict[str, tuple[_Space, int]] = {}  # version -> its fingerprint's place
        self._digest_of: dict[str, str] = {}  # version -> the digest that names it
        self._kept: dict[str, list[str]] = {}  # id -> earlier versions kept as candidates

    def templates(self, threshold: int) -> MemoryTemplates:
        """The site-template model of this index's HTML pages (one per threshold)."""
        if self._templates is None or self._templates.threshold != threshold:
            self._templates = MemoryTemplates(threshold)
        return self._templates

    def bind(self, version: str) -> None:
        if self.version not in (None, version):
            raise ConfigError(
                f"index {self.namespace!r} holds fingerprints of {self.version}, not {version}"
            )
        self.version = version

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        near: list[list[Candidate]] = [[] for _ in queries]
        for (name, k), rows in by_lookup(queries).items():
            if (space := self._spaces.get(name)) is None:
                continue  # a space nothing was indexed in: no candidates
            scheme = lookup_scheme(space.scheme, k)
            fingerprints = [queries[i].fingerprint for i in rows]
            for i, cands in zip(rows, self._near(space, fingerprints, scheme), strict=True):
                near[i] = cands
        return [Found(self._digests.get(q.digest), c) for q, c in zip(queries, near, strict=True)]

    def _near(
        self, space: _Space, fingerprints: list[int], scheme: BlockScheme
    ) -> list[list[Candidate]]:
        q = np.array(fingerprints, np.uint64)
        fps = space.array()
        if NEAR is not None:
            bounds, pos, dist = self._pairs_native(space, q, fps, scheme)
            query = np.repeat(np.arange(len(q)), np.diff(bounds))
        else:
            query, pos, dist = self._pairs(space, q, fps, scheme)
        out: list[list[Candidate]] = [[] for _ in fingerprints]
        for i, p, d in zip(query.tolist(), pos.tolist(), dist.tolist(), strict=True):
            out[i].extend(
                Candidate(doc_id, space.fps[p], d) for doc_id in space.ids[p][-self.max_bucket :]
            )
        for cands in out:
            cands.sort(key=lambda c: (c.distance, c.id))
        return out

    def _pairs_native(
        self, space: _Space, q: np.ndarray, fps: np.ndarray, scheme: BlockScheme
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """_pairs by the native kernel, which reads the tables in place: (bounds of each
        query's pairs, positions, distances)."""
        assert NEAR is not None
        if space.merged:
            tables, probes = scheme.probe_array(q)
            which = tables.tolist()
        else:
            which, probes = [], np.zeros(0, np.uint64)
        arrays = list(zip(space.keys, space.members, space.starts, strict=True))
        bounds, pos, dist = NEAR(
            q, fps, arrays, which, probes, space.merged, scheme.k, self.max_bucket
        )
        return (
            np.frombuffer(bounds, np.int64),
            np.frombuffer(pos, np.uint32),
            np.frombuffer(dist, np.uint8),
        )

    def _pairs(
        self, space: _Space, q: np.ndarray, fps: np.ndarray, scheme: BlockScheme
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The reference: each query's distinct fingerprints within k (query, position,
        distance), by query and then position; `scheme` is the space's, or the same tables
        read wider (index.lookup_scheme)."""
        key_type = _key_type(scheme)
        which: list[np.ndarray] = []  # (query, position) pairs, possibly repeated
        if space.merged:
            tables, probes = scheme.probe_array(q)
            probes = probes.astype(key_type)
            for t, (table, members) in enumerate(zip(space.keys, space.members, strict=True)):
                mine = tables == t  # this table's own key and those within the radius
                per = int(np.count_nonzero(mine))
                probe = probes[:, mine].ravel()
                starts = space.starts[t]
                if starts is not None:
                    at = probe.astype(np.intp)
                    lo, hi = starts[at].astype(np.intp), starts[at + 1].astype(np.intp)
                else:
                    lo = np.searchsorted(table, probe, "left")
                    hi = np.searchsorted(table, probe, "right")
                # members of a key are in insertion order: the newest are last
                lo = np.maximum(lo, hi - self.max_bucket)
                count = hi - lo
                total = int(count.sum())
                if total:
                    query = np.repeat(np.arange(len(q)).repeat(per), count)
                    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
                    pos = members[np.repeat(lo, count) + offset]
                    # within k first: most of a probed bucket's members are not
                    near = np.bitwise_count(q[query] ^ fps[pos]) <= scheme.k
                    which.append(np.stack((query[near], pos[near])))
        tail = np.arange(space.merged, len(fps))
        if len(tail):
            query, pos = np.nonzero(np.bitwise_count(q[:, None] ^ fps[None, tail]) <= scheme.k)
            which.append(np.stack((query, tail[pos])))
        if not which:
            empty = np.zeros(0, np.intp)
            return empty, empty, empty
        # Distinct (query, fingerprint) pairs: a pair sharing several table keys counts once.
        flat = np.unique(np.concatenate(which, axis=1).T @ np.array([len(fps), 1]))
        query, pos = flat // len(fps), flat % len(fps)
        return query, pos, np.bitwise_count(q[query] ^ fps[pos])

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        out = {}
        for i in ids:
            t = self._texts.get(i)
            if t is not None:
                out[i] = self.codec.unpack(t) if isinstance(t, bytes) else t
        return out

    def sketches(self, ids: Sequence[str]) -> dict[str, bytes]:
        return {i: self._sketches[i] for i in ids if i in self._sketches}

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: unpack(self._vectors[i]) for i in ids if i in self._vectors}

    def insert(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            if self._digests.setdefault(e.digest, e.id) == e.id:
                self._digest_of[e.id] = e.digest
            if e.sketch:
                self._sketches[e.id] = e.sketch
            if e.vector is not None:
                self._vectors[e.id] = e.vector
            elif not text_kept(e, self.text_window):
                pass  # its sketch stands for it
            elif not self.compress:
                self._texts[e.id] = e.text
            else:
                packed = self._texts[e.id] = self.codec.pack(e.text)
                if self._sample is not None:
                    self._sample.add(e.id, e.text, packed)
                    if self._sample.full:
                        self._learn(self._sample)
            space = self._spaces.get(e.space)
            if space is None:
                scheme = scheme_for(e.space, self.scheme, self.vector_scheme)
                space = self._spaces[e.space] = _Space(scheme)
            pos = space.position.get(e.fingerprint)
            if pos is None:
                pos = space.position[e.fingerprint] = len(space.fps)
                space.fps.append(e.fingerprint)
                space.ids.append([e.id])
            else:
                space.ids[pos].append(e.id)
            self._where[e.id] = (space, pos)
            if e.sketch and e.id in self._texts:
                self._windowed[e.id] = None
        if self.text_window is not None:
            while len(self._windowed) > self.text_window:  # the oldest texts go first
                gone = next(iter(self._windowed))
                del self._windowed[gone]
                self._texts.pop(gone, None)
        for space in self._spaces.values():
            if len(space.fps) - space.merged >= TAIL:
                self._merge(space)

    def _learn(self, sample: Sample) -> None:
        """Train the text dictionary on the sample, and pack its texts again with it."""
        data = sample.train(self.codec.level)
        if data is None:  # nothing to learn from: try the next texts
            self._sample = Sample()
            return
        self.codec.use(data)
        for name, first, again in sample.repacked(self.codec):
            if self._texts.get(name) == first:
                self._texts[name] = again
        self._sample = None

    def _merge(self, space: _Space) -> None:
        """Move the tail into the sorted tables (a linear merge per table)."""
        new = np.arange(space.merged, len(space.fps), dtype=np.uint32)
        scheme, key_type = space.scheme, _key_type(space.scheme)
        keys = np.array(scheme.keys(space.fps[space.merged :]), np.uint64)
        if not space.keys:
            space.keys = [np.zeros(0, key_type) for _ in scheme.tables]
            space.members = [np.zeros(0, np.uint32) for _ in scheme.tables]
        for t in range(len(scheme.tables)):
            order = np.argsort(keys[:, t], kind="stable")
            add = keys[order, t].astype(key_type)
            at = np.searchsorted(space.keys[t], add, "right")
            space.keys[t] = np.insert(space.keys[t], at, add)
            space.members[t] = np.insert(space.members[t], at, new[order])
        space.evicted = sum(
            int(np.maximum(_runs(table) - self.max_bucket, 0).sum()) for table in space.keys
        )
        bits = scheme.key_bits()
        space.starts = [
            np.concatenate(([0], np.bincount(table, minlength=1 << b).cumsum())).astype(np.uint32)
            if b <= DIRECT_BITS and len(table) >= DIRECT_ROWS
            else None
            for table, b in zip(space.keys, bits, strict=True)
        ]
        space.merged = len(space.fps)

    def commit(self, items: Sequence[Commit]) -> Committed:
        """One process owns this index, so nothing changes between a lookup and its
        commit; the checks are the interface's, for callers that commit without one."""
        stored = {}
        for i, item in enumerate(items):
            d, expected = item.decision, item.previous
            earlier = self._decisions.get(d.id)
            if item.replay:
                continue
            if earlier is not expected:  # decided, revised or deleted since the lookup
                if earlier is not None and (not earlier.digest or earlier.digest == d.digest):
                    stored[i] = earlier  # on the same content: that decision stands
                    continue
                return Committed(i, stored)  # on other content: decide it again
            if expected is not None:
                old = version_id(d.id, expected.revision)
                if item.keep_previous and old in self._where:
                    self._kept.setdefault(d.id, []).append(old)
                else:
                    self._forget(old)
            if item.entry is not None:
                self.insert([item.entry])
            self._decisions[d.id] = d
        return Committed(len(items), stored)

    def _forget(self, version: str) -> None:
        """A version out of the index: no candidate, exact-copy target or text. Its
        fingerprint stays in the tables (sorted arrays are not worth rewriting for one
        document) but names it no more."""
        self._texts.pop(version, None)
        self._windowed.pop(version, None)
        self._sketches.pop(version, None)
        self._vectors.pop(version, None)
        place = self._where.pop(version, None)
        if place is not None:
            space, pos = place
            space.ids[pos] = [i for i in space.ids[pos] if i != version]
        digest = self._digest_of.pop(version, None)
        if digest is not None and self._digests.get(digest) == version:
            del self._digests[digest]

    def delete(self, ids: Sequence[str]) -> list[str]:
        gone = []
        for doc_id in dict.fromkeys(ids):
            earlier = self._decisions.pop(doc_id, None)
            versions = self._kept.pop(doc_id, [])
            if earlier is not None:
                versions.append(version_id(doc_id, earlier.revision))
            for version in versions:
                self._forget(version)
            if earlier is not None:
                gone.append(doc_id)
        return gone

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        return {i: self._decisions[i] for i in ids if i in self._decisions}

    def clusters(self, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        return {i: (d.revision, d.cluster) for i in ids if (d := self._decisions.get(i))}

    def stats(self) -> dict[str, int]:
        return {
            "documents": len(self._where),
            "vectors": len(self._vectors),
            "fingerprints": sum(len(s.fps) for s in self._spaces.values()),
            "table_bytes": sum(
                a.nbytes for s in self._spaces.values() for a in (*s.keys, *s.members)
            ),
            "text_bytes": sum(len(t) for t in self._texts.values()),
            "texts": len(self._texts),
            "sketch_bytes": sum(map(len, self._sketches.values())),
            "text_dictionary": self.codec.dictionary_id,
            "text_dictionary_bytes": len(self.codec.dictionary or b""),
            "vector_bytes": sum(len(v) for v in self._vectors.values()),
            "evicted": self.evicted,
        }

    @property
    def evicted(self) -> int:
        """Table entries past their key's newest `max_bucket`, which no lookup reads (the
        unmerged tail is read whole)."""
        return sum(s.evicted for s in self._spaces.values())


def _runs(table: np.ndarray) -> np.ndarray:
    """The lengths of the runs of equal keys in a sorted table."""
    if not len(table):
        return np.zeros(0, np.intp)
    return np.diff(np.flatnonzero(np.concatenate(([True], table[1:] != table[:-1], [True]))))


def _key_type(scheme: BlockScheme) -> type[np.unsignedinteger[Any]]:
    return np.uint32 if max(scheme.key_bits()) <= 32 else np.uint64
