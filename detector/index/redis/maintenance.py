"""What the index commands do to a Redis index besides deciding: delete documents, sweep
what retention aged out, export and import, list and drop its keys, and its stats. A
mixin of RedisIndex, which provides the round trips and the decide path it works with."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis
from redis.cluster import RedisCluster

from ...blocks import BlockScheme
from ...errors import BackendUnavailable, ConfigError
from ...records import Decision
from .. import Commit, Committed, Entry
from . import lua
from .keys import IDS_PER_HASH, SHARDS, Layout, parse_decision

if TYPE_CHECKING:
    from .cluster import Batch
    from .index import Snapshot


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

    # ------------------------------------------------------------------ retention

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Forget documents. The coordinator first (their numbers lose their ids, so no
        lookup returns them from then on), then the shards give back the memory."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        replies = self._eval(lua.DELETE, *ids)
        gone = [(i, r) for i, r in zip(ids, replies, strict=True) if r]
        batch = self._batch()
        for doc_id, value in gone:
            text = self.layout.text(doc_id)
            batch.add(text, "DEL", text)
            stored = parse_decision(value)[1]
            if stored is None:
                continue
            fp = stored.decision.fingerprint
            for t, key in enumerate(self.scheme.keys([fp])[0]):
                bucket = self.layout.bucket(stored.space, t, key)
                batch.add(bucket, "EVAL", lua.FILTER_BUCKET, 1, bucket, stored.num)
            dh = stored.digest_hash
            digests = self.layout.digest(dh)
            batch.add(digests, "EVAL", lua.FORGET_DIGEST, 1, digests, dh[2:], stored.num)
        self._call(batch.execute)
        return [i for i, _ in gone]

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
        meta = self.layout.meta
        swept = int(self._call(self.client.hget, meta, "swept") or 0)
        if cutoff <= swept:
            return
        batch = self._batch()  # every key here is the coordinator's
        for j in range(swept // IDS_PER_HASH, cutoff // IDS_PER_HASH):
            batch.add(meta, "DEL", self.layout.ids(j))
        last = cutoff // IDS_PER_HASH
        fields = [n % IDS_PER_HASH for n in range(max(swept, last * IDS_PER_HASH), cutoff + 1)]
        if fields:
            batch.add(meta, "HDEL", self.layout.ids(last), *fields)
        batch.add(meta, "HSET", meta, "swept", cutoff)
        batch.add(meta, "ZRANK", self.layout.epochs, cutoff)
        rank = self._call(batch.execute)[-1]
        if rank:  # the epochs before the one that makes the cutoff
            self._call(self.client.zremrangebyrank, self.layout.epochs, 0, rank - 1)

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
            values = self._call(self.client.mget, [self.layout.decision(i) for i in ids])
            texts = self.texts(ids)
            for doc_id, value in zip(ids, values, strict=True):
                if not value:
                    continue
                decision, stored = parse_decision(value)
                if stored is None:
                    continue
                if doc_id not in texts:  # its text expired: it can no longer be verified
                    yield {"decision": decision.to_dict()}
                    continue
                yield {
                    "id": doc_id,
                    "space": stored.space,
                    "digest_hash": stored.digest_hash.hex(),
                    "text": texts[doc_id],
                    "decision": decision.to_dict(),
                }
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=self.layout.decision("*"), count=1000):
            batch.append(key)
            if len(batch) == 1000:
                yield from self._unindexed(batch)
                batch = []
        yield from self._unindexed(batch)

    def _unindexed(self, keys: list[bytes]) -> Iterator[dict[str, Any]]:
        if not keys:
            return
        for value in self._call(self.client.mget, keys):
            if value and value.startswith(b"{"):
                yield {"decision": parse_decision(value)[0].to_dict()}

    def restore(self, records: Iterable[dict[str, Any]], batch: int = 512) -> int:
        """Write exported records into this (empty) index, numbering the indexed
        documents again in their order; returns how many records were written."""
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
            d = Decision.from_dict(r["decision"])
            indexed = "text" in r
            entry = Entry(d.id, r["space"], d.fingerprint, "", r["text"]) if indexed else None
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
        """Documents indexed, and the memory of the server (every primary of a cluster)."""
        client: Any = self.client
        if isinstance(client, RedisCluster):  # one answer per primary
            info = self._call(lambda: client.info("memory", target_nodes=RedisCluster.PRIMARIES))
            used = sum(int(v["used_memory"]) for v in info.values())
        else:
            used = int(self._call(client.info, "memory")["used_memory"])
        return {
            "documents": int(self._call(self.client.get, self.layout.seq) or 0),
            "used_memory": used,
        }
