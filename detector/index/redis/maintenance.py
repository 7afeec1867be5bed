"""What the index commands do to a Redis index besides deciding: delete documents, sweep
what retention aged out, export and import, list and drop its keys, and its stats. A
mixin of RedisIndex, which provides the round trips and the decide path it works with."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis
from redis.cluster import RedisCluster

from ...blocks import BlockScheme
from ...errors import BackendUnavailable, ConfigError
from ...records import Decision
from .. import Commit, Committed, Entry, record_of
from . import footprint, lua
from .keys import IDS_PER_HASH, SHARDS, Layout, Version, parse_decision

if TYPE_CHECKING:
    from .cluster import Batch
    from .index import Snapshot

# What `stats` reports of the counts (keys.py), in this order.
COUNTS = ("documents", "committed", "replaced", "deleted", "expired")
SWEEP_HASHES = 1024  # id hashes a SWEEP_IDS script deletes: about 2 ms of the coordinator
COUNT_HASHES = 4096  # id hashes a COUNT_IDS script counts: about 4 ms


class Maintenance:
    """The maintenance half of RedisIndex, a mixin: it works through the attributes and
    methods below, which RedisIndex provides."""

    client: redis.Redis | RedisCluster
    scheme: BlockScheme
    namespace: str
    retention: int
    layout: Layout
    _mark: int
    _swept_to: int

    if TYPE_CHECKING:  # RedisIndex's round trips and decide path

        def _call(self, fn: Any, *args: Any) -> Any: ...
        def _eval(self, script: str, *args: Any) -> Any: ...
        def _batch(self) -> Batch: ...
        def _snapshot(self) -> Snapshot: ...
        def _commit(self, items: Sequence[Commit], dhs: list[bytes]) -> Committed: ...
        def texts(self, ids: Sequence[str]) -> dict[str, str]: ...
        def packed_vectors(self, ids: Sequence[str]) -> dict[str, bytes]: ...
        def scheme_for(self, space: str) -> BlockScheme: ...

    # ------------------------------------------------------------------ retention

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Forget documents. The coordinator first (the numbers of every version lose
        their names, so no lookup returns them from then on), then the shards give back
        the memory."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        replies = self._eval(lua.DELETE, *ids)
        gone = [(i, parse_decision(r)) for i, r in zip(ids, replies, strict=True) if r]
        # the id's own text too: one written for a commit that never came (a crash)
        self._forget_versions([v for _, s in gone for v in s.versions], [i for i, _ in gone])
        return [i for i, _ in gone]

    def _forget_versions(self, versions: Sequence[Version], texts: Sequence[str] = ()) -> None:
        """Versions that lookups no longer find (DELETE, or a revision that replaced
        them): their bucket entries, digests and texts out of the shards."""
        batch = self._batch()
        for name in dict.fromkeys([*texts, *(v.name for v in versions)]):
            text = self.layout.text(name)
            batch.add(text, "DEL", text, self.layout.vector(name))
        for v in versions:
            for t, key in enumerate(self.scheme_for(v.space).keys([v.fingerprint])[0]):
                bucket = self.layout.bucket(v.space, t, key)
                batch.add(bucket, "EVAL", lua.FILTER_BUCKET, 1, bucket, v.num)
            digests = self.layout.digest(v.digest_hash)
            batch.add(digests, "EVAL", lua.FORGET_DIGEST, 1, digests, v.digest_hash[2:], v.num)
        if batch.commands:
            self._call(batch.execute)

    def sweep(self, shards: int | None = None) -> int:
        """Give back the memory of documents past the retention horizon; lookups ignore
        them already. Their texts and decisions expire, and so does a bucket once its
        newest entry is past the horizon (a bucket that keeps getting entries holds at
        most max_bucket of them). What is left is cut here: the id map, and the digest
        hashes of `shards` of the SHARDS (None: all), round robin, one script each, so
        that the work per call is bounded whatever the size of the index. Returns the
        number of digests removed."""
        if not self.retention:
            return 0
        cutoff = self._snapshot().cutoff
        if not cutoff:
            return 0
        self._sweep_coordinator(cutoff)
        count = SHARDS if shards is None else min(shards, SHARDS)
        batch = self._batch()
        for at in range(self._swept_to, self._swept_to + count):
            # a shard's digest hashes: those whose first byte is the shard modulo SHARDS
            keys = [
                self.layout.digest(bytes((high, low)))
                for high in range(at % SHARDS, 256, SHARDS)
                for low in range(256)
            ]
            batch.add(keys[0], "EVAL", lua.SWEEP_DIGESTS, len(keys), *keys, cutoff)
        self._swept_to = (self._swept_to + count) % SHARDS
        return sum(int(r) for r in self._call(batch.execute))

    def _sweep_coordinator(self, cutoff: int) -> None:
        """Id maps of numbers at or below the cutoff, and the epochs before it."""
        while int(self._eval(lua.SWEEP_IDS, cutoff, SWEEP_HASHES)) < cutoff:
            pass

    # ------------------------------------------------------------------ export

    def documents(self) -> Iterator[dict[str, Any]]:
        """Every decision of the index, the indexed documents first in number order with
        what rebuilding them takes (fingerprint space, digest hash, text)."""
        seq = int(self._call(self.client.get, self.layout.seq) or 0)
        cutoff = self._snapshot().cutoff
        for j in range(cutoff // IDS_PER_HASH, seq // IDS_PER_HASH + 1):
            got = self._call(self.client.hgetall, self.layout.ids(j))
            nums = sorted((j * IDS_PER_HASH + int(f), v.decode()) for f, v in got.items())
            ids = [i for n, i in nums if n > cutoff]
            if not ids:
                continue
            keys = [self.layout.decision(record_of(name)[0]) for name in ids]
            values = self._call(self.client.mget, keys)
            texts = self.texts(ids)
            vectors = self.packed_vectors(ids)
            for name, value in zip(ids, values, strict=True):
                stored = parse_decision(value) if value else None
                if stored is None or stored.current is None or stored.current.name != name:
                    continue  # a version kept as a candidate: not exported
                record: dict[str, Any] = {
                    "decision": stored.decision.to_dict(),
                    "digest": stored.decision.digest,
                }
                # else its text (or vector) expired: it can no longer be verified
                if name in texts or name in vectors:
                    record.update(
                        id=name,
                        space=stored.current.space,
                        digest_hash=stored.current.digest_hash.hex(),
                    )
                    if name in vectors:
                        record["vector"] = base64.b64encode(vectors[name]).decode("ascii")
                    else:
                        record["text"] = texts[name]
                yield record
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=self.layout.glob_prefix + "dec:*", count=1000):
            batch.append(key)
            if len(batch) == 1000:
                yield from self._unindexed(batch)
                batch = []
        yield from self._unindexed(batch)

    def _unindexed(self, keys: list[bytes]) -> Iterator[dict[str, Any]]:
        if not keys:
            return
        for value in self._call(self.client.mget, keys):
            stored = parse_decision(value) if value else None
            if stored is not None and stored.current is None:
                yield {"decision": stored.decision.to_dict(), "digest": stored.decision.digest}

    def restore(self, records: Iterable[dict[str, Any]], batch: int = 512) -> int:
        """Write exported records into this (empty) index, numbering the indexed
        documents again in their order; returns how many records were written. An export
        holds the texts themselves: they are packed here as any texts this index writes
        (its own dictionary, trained on the first of them)."""
        if int(self._call(self.client.get, self.layout.seq) or 0):
            raise ConfigError(f"index {self.namespace!r} is not empty: import into a new one")
        count = 0
        chunk: list[dict[str, Any]] = []
        for record in records:
            chunk.append(record)
            if len(chunk) == batch:
                count += self._restore(chunk)
                chunk = []
        return count + self._restore(chunk)

    def _restore(self, records: list[dict[str, Any]]) -> int:
        if not records:
            return 0
        items, dhs = [], []
        for r in records:
            d = Decision.from_dict(r["decision"], digest=r.get("digest", ""))
            indexed = "text" in r or "vector" in r
            vector = base64.b64decode(r["vector"]) if "vector" in r else None
            entry = (
                Entry(r["id"], r["space"], d.fingerprint, "", r.get("text", ""), vector)
                if indexed
                else None
            )
            items.append(Commit(d, entry))
            dhs.append(bytes.fromhex(r["digest_hash"]) if indexed else b"")
        self._mark = int(self._call(self.client.get, self.layout.seq) or 0)
        if self._commit(items, dhs).done != len(items):
            raise BackendUnavailable(
                "the index changed during the import: import into an index nobody writes to"
            )
        return len(items)

    # ------------------------------------------------------------------ keys

    def keys(self) -> Iterator[bytes]:
        """Every key of the index: the coordinator's, then the shards' (on every node)."""
        for pattern in self.layout.patterns:
            yield from self.client.scan_iter(match=pattern, count=10_000)

    def drop(self) -> int:
        """Delete the whole index; returns the number of keys deleted."""
        keys = list(self.keys())
        for at in range(0, len(keys), 1000):  # a cluster client splits the UNLINK by slot
            self._call(self.client.unlink, *keys[at : at + 1000])
        return len(keys)

    def stats(self) -> dict[str, int]:
        """What the index holds now and how it got there, from counts its scripts keep
        with every change (keys.py), so at any size in one round trip: `documents`, the
        versions a lookup can find (with --keep-old-versions, the earlier ones kept too);
        `committed`, every version ever numbered; `replaced`, `deleted` and `expired`,
        those gone by each cause since the counts began (at the index's first commit, or
        at the upgrade of an index made before them, which is counted here once);
        `evicted`, the bucket entries --max-bucket pushed out of the lookups' reads; the id
        of the text dictionary (index.texts; 0 before the index has one). And the
        server's memory (every primary of a cluster); the index's own is `memory()`."""
        counts = self._counts()
        if counts.get("counted") != "all" and int(counts["committed"]):
            while not int(self._eval(lua.COUNT_IDS, COUNT_HASHES)):
                pass
            counts = self._counts()
        client: Any = self.client
        if isinstance(client, RedisCluster):  # one answer per primary
            info = self._call(lambda: client.info("memory", target_nodes=RedisCluster.PRIMARIES))
            used = sum(int(v["used_memory"]) for v in info.values())
        else:
            used = int(self._call(client.info, "memory")["used_memory"])
        return {
            **{k: int(counts.get(k) or 0) for k in COUNTS},
            "evicted": self._evicted(),
            "text_dictionary": int(counts["text_dictionary"]),
            "server_used_memory": used,
        }

    def _evicted(self) -> int:
        """Bucket entries pushed out of the lookups' reads by --max-bucket, every shard's."""
        batch = self._batch()
        for shard in range(SHARDS):
            key = self.layout.evicted(shard)
            batch.add(key, "GET", key)
        return sum(int(v or 0) for v in self._call(batch.execute))

    def _counts(self) -> dict[str, str]:
        """The counts, and `committed` (seq) read after them: never fewer than them; and
        the id of the text dictionary (0: none yet)."""
        batch = self._batch()  # in order, on the coordinator
        batch.add(self.layout.counts, "HGETALL", self.layout.counts)
        batch.add(self.layout.seq, "GET", self.layout.seq)
        batch.add(self.layout.txdict, "GETRANGE", self.layout.txdict, 4, 7)
        counts, seq, dictionary = self._call(batch.execute)
        return {
            **{k.decode(): v.decode() for k, v in counts.items()},
            "committed": (seq or b"0").decode(),
            "text_dictionary": str(int.from_bytes(dictionary, "little")),
        }

    def memory(
        self, exact: bool = False, progress: Callable[[int], None] | None = None
    ) -> footprint.Footprint:
        """The bytes of the index's keys by family (footprint.py): every key weighed
        (`exact`, O(keys)), or a sample of each primary's keys."""
        return footprint.weigh(self.client, self.layout, self._call, exact, progress=progress)
