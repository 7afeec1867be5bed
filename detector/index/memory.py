"""The in-memory index: the embedded default, and the batch overlay of every pipeline."""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Sequence

from ..blocks import BlockScheme
from ..errors import ConfigError
from ..records import Decision
from . import Candidate, Entry, Found, Query


class MemoryIndex:
    """Block tables as dicts of buckets; each bucket holds distinct fingerprints.

    Exact copies never reach the tables (the digest map answers them), and documents that
    share a fingerprint share one bucket slot, so repeated content cannot bloat a bucket.
    """

    def __init__(self, scheme: BlockScheme, namespace: str = "default",
                 compress: bool = True) -> None:
        self.scheme = scheme
        self.compress = compress
        self.namespace = namespace
        self.version: str | None = None
        self._tables: dict[str, list[dict[int, list[int]]]] = {}
        self._ids: dict[tuple[str, int], list[str]] = defaultdict(list)
        self._digests: dict[str, str] = {}
        self._texts: dict[str, bytes | str] = {}
        self._decisions: dict[str, Decision] = {}

    def bind(self, version: str) -> None:
        if self.version not in (None, version):
            raise ConfigError(
                f"index {self.namespace!r} holds fingerprints of {self.version}, not {version}"
            )
        self.version = version

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        if not queries:
            return []
        keys = self.scheme.keys([q.fingerprint for q in queries])
        out = []
        for q, row in zip(queries, keys, strict=True):
            tables = self._tables.get(q.space)
            near: set[int] = set()
            if tables:
                for table, key in zip(tables, row, strict=True):
                    near.update(table.get(key, ()))
            cands = [
                Candidate(self._ids[(q.space, fp)][0], fp, d)
                for fp in near
                if (d := (fp ^ q.fingerprint).bit_count()) <= self.scheme.k
            ]
            cands.sort(key=lambda c: (c.distance, c.id))
            out.append(Found(self._digests.get(q.digest), cands))
        return out

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        out = {}
        for i in ids:
            t = self._texts.get(i)
            if t is not None:
                out[i] = zlib.decompress(t).decode() if isinstance(t, bytes) else t
        return out

    def insert(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        keys = self.scheme.keys([e.fingerprint for e in entries])
        for e, row in zip(entries, keys, strict=True):
            self._digests.setdefault(e.digest, e.id)
            self._texts[e.id] = zlib.compress(e.text.encode(), 1) if self.compress else e.text
            ids = self._ids[(e.space, e.fingerprint)]
            ids.append(e.id)
            if len(ids) > 1:
                continue  # the fingerprint is in every table already
            tables = self._tables.setdefault(e.space, [{} for _ in self.scheme.tables])
            for table, key in zip(tables, row, strict=True):
                table.setdefault(key, []).append(e.fingerprint)

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        return {i: self._decisions[i] for i in ids if i in self._decisions}

    def record(self, decisions: Sequence[Decision]) -> None:
        for d in decisions:
            self._decisions.setdefault(d.id, d)

    def stats(self) -> dict[str, int]:
        buckets = sum(len(t) for tables in self._tables.values() for t in tables)
        return {
            "documents": len(self._texts),
            "fingerprints": len(self._ids),
            "buckets": buckets,
            "text_bytes": sum(len(t) for t in self._texts.values()),  # compressed
        }
