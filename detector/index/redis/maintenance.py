"""What the index commands do to a Redis index besides deciding, as functions of a
RedisIndex: sweep what retention aged out, export its documents and import them into
another, list and drop its keys, and weigh them. (Deleting documents and the counts of
`stats` are the index interface's own: RedisIndex.delete and RedisIndex.stats.)"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ...errors import BackendUnavailable, ConfigError
from ...records import Decision
from .. import Commit, Entry, record_of
from . import footprint, lua
from .index import RedisIndex
from .keys import FIELD_BITS, IDS_PER_HASH, SHARDS, parse_decision

SWEEP_HASHES = 1024  # id hashes a round trip of SWEEP_IDS scripts deletes


# ---------------------------------------------------------------------- retention


def sweep(index: RedisIndex, shards: int | None = None) -> int:
    """Give back the memory of documents past the retention horizon; lookups ignore
    them already. Their texts and decisions expire, and so does a bucket hash once its
    newest entry is past the horizon; a bucket appended to drops its entries past it
    (APPLY_SHARD). What is left is cut here: the id map, and the digest hashes and
    bucket hashes of `shards` of the SHARDS (None: all), round robin from the index's
    `swept_to`, one script per shard for the digests and one per bucket hash, so that
    the work per call is bounded by a shard's share of the index. Returns the number of
    digests removed."""
    if not index.retention:
        return 0
    store, layout = index.store, index.layout
    cutoff = store.snapshot(index.retention).cutoff
    if not cutoff:
        return 0
    _sweep_ids(index, cutoff)
    count = SHARDS if shards is None else min(shards, SHARDS)
    swept = [at % SHARDS for at in range(index.swept_to, index.swept_to + count)]
    _sweep_buckets(index, swept, cutoff)
    batch = store.batch()
    for at in range(index.swept_to, index.swept_to + count):
        # a shard's digest hashes: those whose first byte is the shard modulo SHARDS
        keys = [
            layout.digest(bytes((high, low)))
            for high in range(at % SHARDS, 256, SHARDS)
            for low in range(256)
        ]
        digests = lua.sweep_digests_args(keys, cutoff)
        batch.add(digests.key, *digests.command())
    index.swept_to = (index.swept_to + count) % SHARDS
    return sum(lua.sweep_digests_reply(r) for r in store.call(batch.execute))


def _sweep_ids(index: RedisIndex, cutoff: int) -> None:
    """The id map of the numbers at or below the cutoff (every shard's, SWEEP_HASHES id
    hashes a round trip), then the epochs before the cutoff's and meta's `swept`."""
    store, layout = index.store, index.layout
    swept = int(store.call(index.client.hget, layout.meta, "swept") or 0)
    if cutoff <= swept:
        return
    hashes = list(range((swept + 1) // IDS_PER_HASH, cutoff // IDS_PER_HASH + 1))
    for at in range(0, len(hashes), SWEEP_HASHES):
        by_shard: dict[int, list[int]] = {}
        for j in hashes[at : at + SWEEP_HASHES]:
            by_shard.setdefault(j % SHARDS, []).append(j)
        batch = store.batch()
        for shard, group in by_shard.items():
            args = lua.sweep_ids_args(
                [layout.ids(j) for j in group],
                [j * IDS_PER_HASH for j in group],
                layout.shard_counts(shard),
                cutoff,
            )
            batch.add(args.key, *args.command())
        store.call(batch.execute)
    rank = store.call(index.client.zrank, layout.epochs, cutoff)
    if rank:
        store.call(index.client.zremrangebyrank, layout.epochs, 0, rank - 1)
    store.call(index.client.hset, layout.meta, "swept", cutoff)


def _sweep_buckets(index: RedisIndex, shards: list[int], cutoff: int) -> int:
    """The entries past the horizon out of the bucket hashes of `shards`, for every
    space they hold (their sets of spaces); returns the number removed."""
    store, layout = index.store, index.layout
    batch = store.batch()
    for shard in shards:
        batch.add(layout.spaces(shard), "SMEMBERS", layout.spaces(shard))
    wanted = set(shards)
    spaces = {sp.decode() for got in store.call(batch.execute) for sp in got}
    batch = store.batch()
    for space in sorted(spaces):
        names, at = bucket_hashes(index, space)
        for name, shard in zip(names, at.tolist(), strict=True):
            if shard in wanted:
                args = lua.sweep_buckets_args([name], cutoff, index.entry_bytes)
                batch.add(args.key, *args.command())
    if not batch.commands:
        return 0
    return sum(lua.sweep_buckets_reply(r) for r in store.call(batch.execute))


def bucket_hashes(index: RedisIndex, space: str) -> tuple[list[Any], np.ndarray]:
    """Every bucket hash a space's block tables can have: names and shards."""
    tables, groups = [], []
    for t, key_bits in enumerate(index.scheme_for(space).key_bits()):
        count = 1 << max(0, key_bits - FIELD_BITS)
        tables.append(np.full(count, t, np.int64))
        groups.append(np.arange(count, dtype=np.uint64) << np.uint64(FIELD_BITS))
    all_tables, all_keys = np.concatenate(tables), np.concatenate(groups)
    return index.layout.buckets([space] * len(all_keys), all_tables, all_keys)


# ---------------------------------------------------------------------- export


def documents(index: RedisIndex) -> Iterator[dict[str, Any]]:
    """Every decision of the index, the indexed documents first in number order with
    what rebuilding them takes (fingerprint space, digest hash, text)."""
    store, layout = index.store, index.layout
    seq = int(store.call(index.client.get, layout.seq) or 0)
    cutoff = store.snapshot(index.retention).cutoff
    for j in range(cutoff // IDS_PER_HASH, seq // IDS_PER_HASH + 1):
        got = store.call(index.client.hgetall, layout.ids(j))
        nums = sorted((j * IDS_PER_HASH + int(f), v.decode()) for f, v in got.items())
        ids = [i for n, i in nums if n > cutoff]
        if not ids:
            continue
        _, records = index.records([record_of(name)[0] for name in ids])
        texts = index.texts(ids)
        sketches = index.sketches(ids)
        vectors = index.packed_vectors(ids)
        for name in ids:
            value = records.get(record_of(name)[0])
            stored = parse_decision(value, record_of(name)[0]) if value else None
            if stored is None or stored.current is None or stored.current.name != name:
                continue  # a version kept as a candidate: not exported
            record: dict[str, Any] = {
                "decision": stored.decision.to_dict(),
                "digest": stored.decision.digest,
            }
            # else its text (or vector) expired: it can no longer be verified
            if name in texts or name in vectors or name in sketches:
                record.update(
                    id=name,
                    space=stored.current.space,
                    digest_hash=stored.current.digest_hash.hex(),
                )
                if name in vectors:
                    record["vector"] = base64.b64encode(vectors[name]).decode("ascii")
                elif name in texts:
                    record["text"] = texts[name]
                if name in sketches:  # beside its text, or alone once the text left
                    record["sketch"] = base64.b64encode(sketches[name]).decode("ascii")
            yield record
    # the decisions of documents not indexed: in the shards' decision hashes and keys
    glob = layout.patterns[1][: -len("*")]
    for pattern in (glob + "*}:dc:*", glob + "*}:dk:*"):
        for key in index.client.scan_iter(match=pattern, count=1000):
            if b"}:dc:" in key:
                pairs = index.store.call(index.client.hgetall, key).items()
            else:
                pairs = [(layout.decision_id(key), index.store.call(index.client.get, key))]
            ids = [
                k.decode("utf-8", "surrogatepass") if isinstance(k, bytes) else k for k, _ in pairs
            ]
            _, records = index.records(ids)
            for i in ids:
                value = records.get(i)
                stored = parse_decision(value, i) if value else None
                if stored is not None and stored.current is None:
                    yield {"decision": stored.decision.to_dict(), "digest": stored.decision.digest}


# ---------------------------------------------------------------------- import


def restore(index: RedisIndex, records: Iterable[dict[str, Any]], batch: int = 512) -> int:
    """Write exported records into this (empty) index, numbering the indexed
    documents again in their order; returns how many records were written. An export
    holds the texts themselves: they are packed here as any texts this index writes
    (its own dictionary, trained on the first of them)."""
    if int(index.store.call(index.client.get, index.layout.seq) or 0):
        raise ConfigError(f"index {index.namespace!r} is not empty: import into a new one")
    count = 0
    chunk: list[dict[str, Any]] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == batch:
            count += _restore(index, chunk)
            chunk = []
    return count + _restore(index, chunk)


def _restore(index: RedisIndex, records: list[dict[str, Any]]) -> int:
    if not records:
        return 0
    items, dhs = [], []
    for r in records:
        d = Decision.from_dict(r["decision"], digest=r.get("digest", ""))
        indexed = "text" in r or "vector" in r or "sketch" in r
        vector = base64.b64decode(r["vector"]) if "vector" in r else None
        sketch = base64.b64decode(r["sketch"]) if "sketch" in r else b""
        entry = (
            Entry(r["id"], r["space"], d.fingerprint, "", r.get("text", ""), vector, sketch)
            if indexed
            else None
        )
        items.append(Commit(d, entry))
        dhs.append(bytes.fromhex(r["digest_hash"]) if indexed else b"")
    # no lookup came first: the commit checks against what is there now
    index.decisions([i.decision.id for i in items])
    index.mark = int(index.store.call(index.client.get, index.layout.seq) or 0)
    if index.commit(items, dhs).done != len(items):
        raise BackendUnavailable(
            "the index changed during the import: import into an index nobody writes to"
        )
    return len(items)


# ---------------------------------------------------------------------- keys


def keys(index: RedisIndex) -> Iterator[bytes]:
    """Every key of the index: the coordinator's, then the shards' (on every node)."""
    for pattern in index.layout.patterns:
        yield from index.client.scan_iter(match=pattern, count=10_000)


def drop(index: RedisIndex) -> int:
    """Delete the whole index; returns the number of keys deleted."""
    every = list(keys(index))
    for at in range(0, len(every), 1000):  # a cluster client splits the UNLINK by slot
        index.store.call(index.client.unlink, *every[at : at + 1000])
    return len(every)


def memory(
    index: RedisIndex, exact: bool = False, progress: Callable[[int], None] | None = None
) -> footprint.Footprint:
    """The bytes of the index's keys by family (footprint.py): every key weighed
    (`exact`, O(keys)), or a sample of each primary's keys."""
    return footprint.weigh(index.client, index.layout, index.store.call, exact, progress=progress)
