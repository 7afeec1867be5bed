"""`neardup index migrate`: an index of key layout 2, 3 or 4 into layout 5 (keys.py), in
place, offline: its consumers must be stopped (one of an old layout that keeps writing
puts entries or records where the new one does not look; one of layout 5 refuses the index
until the meta says 5).

Layout 2 kept each bucket in its own string (b:{SPACE}:{T}:{KEY}); layout 3 made them
fields of hashes (bh:{SPACE}:{T}:{G}). Layout 4 kept each decision as a binary record
(keys.record) instead of a JSON header and the decision's JSON. Layout 5 moves the
decisions and the id map out of the coordinator's slot into the shards: decisions as
fields of 65,536 decision hashes (or keys of their own where they expire), the id map's
hashes by number, and the counts with them.

From layout 2 the block tables are rebuilt from what the coordinator holds, not from the
old strings: the id map names every version a lookup can find, and its decision record
gives that version's number, space and fingerprint (keys.parse_decision). Each rebuilt
bucket holds its versions in number order, the newest --max-bucket of them (what a lookup
read of the old one, less the entries of versions the id map no longer names). The
digests, texts and the shards' `evicted` counters keep their keys and values, the
decisions their expiries: `index stats` says after what it said before.

The order, so that an interrupted run leaves an index a second run completes:
  1. (from 2) delete the bucket hashes an interrupted run may have left, then write them
     all (beside the old strings: their names differ), and each shard's set of spaces;
  2. (from 2) apply what committers left pending: the digests of its numbers (HSETNX, as
     APPLY_SHARD), then APPLIED takes the range off the pending list;
  3. move every decision key into its shard as a layout-5 record (write number 0: any
     later write is newer), its expiry kept, then delete the key;
  4. move every id hash into its shard, then delete it; then count each shard's id map
     (HSET, so a second run counts again, not twice), and the coordinator's counts
     become `numbered` (every number of an old layout was a version);
  5. set meta layout to 5: from here consumers of layout 5 take the index;
  6. delete the old bucket strings (a SCAN of every primary).
A run on an index already in layout 5 does steps 3, 4 and 6 only (what an interrupted
run left)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError
from .. import DEFAULT_MAX_BUCKET, record_of
from . import lua
from .cluster import Batch
from .index import LOG_KEEP, MIGRATES_FROM, RECENT_KEEP, TRIM_CHUNK, RedisIndex
from .keys import (
    ENTRY,
    IDS_PER_HASH,
    LAYOUT,
    SHARDS,
    Layout,
    Version,
    fields,
    pack_entries,
    parse_decision,
    record,
)
from .maintenance import bucket_hashes

ID_HASHES = 64  # id hashes read a round trip
WRITES = 5_000  # commands a round trip
OLD_BUCKETS = "b"  # layout 2's bucket strings: nd:{NAME/S}:b:{SPACE}:{T}:{KEY}


@dataclass(frozen=True)
class Migrated:
    versions: int  # versions whose entries were written
    buckets: int  # buckets written
    pending: int  # pending ranges applied
    deleted: int  # old bucket strings deleted
    already: bool  # the index was in layout 5 already (steps 3, 4 and 6 only)
    moved: int = 0  # decisions moved into the shards


def migrate(
    client: Any,
    namespace: str,
    max_bucket: int = DEFAULT_MAX_BUCKET,
    progress: Callable[[str], None] | None = None,
) -> Migrated:
    """Migrate index `namespace` to key layout 5 (the module's docstring)."""
    say = progress or _stderr
    meta = RedisIndex.stored_meta(client, namespace)
    layout = meta.get("layout", "1")
    if layout not in (*MIGRATES_FROM, LAYOUT):
        raise ConfigError(
            f"index {namespace!r} is in key layout {layout}: `index migrate` takes layouts "
            f"{', '.join(MIGRATES_FROM)} across; index its documents again under a new "
            "--index name"
        )
    index = RedisIndex.of_meta(client, namespace, meta, max_bucket=max_bucket)
    if layout == LAYOUT:
        moved = _move_decisions(index, say)
        _move_ids(index, say, count=False)
        deleted = _delete_old(index, say)
        say(
            f"index {namespace!r} is in key layout {LAYOUT} already; {moved} decisions "
            f"moved into the shards, {deleted} old keys deleted"
        )
        return Migrated(0, 0, 0, deleted, True, moved)
    say(f"index {namespace!r}: key layout {layout} -> {LAYOUT} (its consumers must be stopped)")
    versions, buckets, pending = [], 0, 0
    if layout == "2":
        versions = list(_versions(index, say))
        say(f"{len(versions):,} versions to enter in the block tables")
        buckets = _write_tables(index, versions, say)
        pending = _apply_pending(index, {v.num: v for v in versions})
        if pending:
            say(f"{pending} pending ranges applied")
    moved = _move_decisions(index, say)
    say(f"{moved:,} decisions moved into the shards")
    _move_ids(index, say)
    index.store.call(client.hset, index.layout.meta, "layout", LAYOUT)
    say(f"meta: layout {LAYOUT}")
    deleted = _delete_old(index, say)
    say(f"done: {buckets:,} buckets written, {deleted:,} old bucket strings deleted")
    return Migrated(len(versions), buckets, pending, deleted, False, moved)


def _versions(index: RedisIndex, say: Callable[[str], None]) -> Iterator[Version]:
    """Every version the id map names, with its decision key's header, by number."""
    store, layout, client = index.store, index.layout, index.client
    seq = int(store.call(client.get, layout.seq) or 0)
    last = seq // IDS_PER_HASH
    for start in range(0, last + 1, ID_HASHES):
        batch = store.batch()
        hashes = range(start, min(start + ID_HASHES, last + 1))
        for j in hashes:
            batch.add(layout.old_ids(j), "HGETALL", layout.old_ids(j))
        named = sorted(
            (j * IDS_PER_HASH + int(f), v.decode())
            for j, got in zip(hashes, store.call(batch.execute), strict=True)
            for f, v in got.items()
        )
        if not named:
            continue
        ids = list(dict.fromkeys(record_of(name)[0] for _, name in named))
        values = store.call(client.mget, [layout.old_decision(i) for i in ids])
        values = _moved_decisions(index, ids, values)
        known: dict[tuple[int, str], Version] = {}
        for doc_id, value in zip(ids, values, strict=True):
            if value:
                for v in parse_decision(value, doc_id).versions:
                    known[(v.num, v.name)] = v
        for num, name in named:
            if (num, name) in known:  # else its decision expired: no lookup finds it
                yield known[(num, name)]
        if start % (ID_HASHES * 16) == 0:
            say(f"read the id map to number {min(seq, (start + ID_HASHES) * IDS_PER_HASH):,}")


def _moved_decisions(index: RedisIndex, ids: list[str], values: list[Any]) -> list[Any]:
    """`values` with the decisions a run cut short already moved into the shards (step
    3) read from there."""
    missing = [at for at, v in enumerate(values) if not v]
    if not missing:
        return values
    batch = index.store.batch()
    for at in missing:
        _, hashed, key, field = index.layout.decisions(ids[at])
        args = lua.decisions_args([(hashed, key, field)])
        batch.add(args.key, *args.command())
    out = list(values)
    for at, raw in zip(missing, index.store.call(batch.execute), strict=True):
        in_hash, own = lua.decisions_reply(raw)[0]
        out[at] = in_hash or own
    return out


def _write_tables(index: RedisIndex, versions: list[Version], say: Callable[[str], None]) -> int:
    """Step 1: every bucket's newest max_bucket versions, in number order, as fields of
    freshly written bucket hashes; returns the number of buckets written."""
    layout, keep = index.layout, index.max_bucket
    by_space: dict[str, list[Version]] = {}
    for v in sorted(versions, key=lambda v: v.num):
        by_space.setdefault(v.space, []).append(v)
    spaces = set(by_space) | _spaces(index)
    batch = Batch(index.client)  # what an interrupted run left
    for space in sorted(spaces):
        for name in bucket_hashes(index, space)[0]:
            batch.add(name, "UNLINK", name)
    _run(index, batch)
    written = 0
    for space, vs in by_space.items():
        entries = np.zeros(len(vs), ENTRY)
        entries["fp"] = [v.fingerprint for v in vs]
        entries["num"] = [v.num for v in vs]
        keys = index.scheme_for(space).key_array(entries["fp"].tolist())
        touched: set[int] = set()
        for table in range(keys.shape[1]):
            column = keys[:, table].astype(np.uint64)
            order = np.argsort(column, kind="stable")  # stable: number order within
            sorted_keys = column[order]
            starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
            ends = np.r_[starts[1:], len(order)]
            buckets = sorted_keys[starts]
            names, shards = layout.buckets(
                [space] * len(buckets), np.full(len(buckets), table, np.int64), buckets
            )
            at = fields(buckets)
            raw = pack_entries(
                index.scheme_for(space),
                table,
                entries["fp"][order],
                entries["num"][order],
                index.entry_bytes,
            ).tobytes()
            size = index.entry_bytes
            groups: dict[Any, list[int]] = {}
            for i, name in enumerate(names):
                groups.setdefault(name, []).append(i)
            batch = Batch(index.client)
            for name, group in groups.items():
                pairs = []
                for i in group:
                    first = max(int(starts[i]), int(ends[i]) - keep)
                    pairs += [at[i], raw[first * size : int(ends[i]) * size]]
                batch.add(name, "HSET", name, *pairs)
            _run(index, batch)
            touched.update(np.unique(shards).tolist())
            written += len(names)
        batch = Batch(index.client)
        for shard in sorted(touched):
            batch.add(layout.spaces(shard), "SADD", layout.spaces(shard), space)
        _run(index, batch)
        say(f"space {space}: {len(vs):,} versions in {keys.shape[1]} tables")
    return written


def _spaces(index: RedisIndex) -> set[str]:
    """The spaces the shards' sets name (an interrupted run's)."""
    batch = index.store.batch()
    for shard in range(SHARDS):
        batch.add(index.layout.spaces(shard), "SMEMBERS", index.layout.spaces(shard))
    return {sp.decode() for got in index.store.call(batch.execute) for sp in got}


def _apply_pending(index: RedisIndex, versions: dict[int, Version]) -> int:
    """Step 2: the ranges committers left unapplied. Their entries are in the tables
    already (step 1); their digests go in, then APPLIED takes each off pending."""
    store, layout = index.store, index.layout
    members = [
        m.decode() for m in store.call(index.client.zrange, layout.prefix + "pending", 0, -1)
    ]
    for member in members:
        first, last, _ = (int(x) for x in member.split(":"))
        batch = store.batch()
        for num in range(first, last + 1):
            v = versions.get(num)
            if v is not None:
                key = layout.digest(v.digest_hash)
                batch.add(key, "HSETNX", key, v.digest_hash[2:], num)
        if batch.commands:
            store.call(batch.execute)
        store.eval(lua.applied_args(layout, member, LOG_KEEP, RECENT_KEEP, TRIM_CHUNK))
    return len(members)


def _move_decisions(index: RedisIndex, say: Callable[[str], None]) -> int:
    """Step 3: every decision key of the coordinator into its shard, as a record of
    write number 0, its expiry kept; returns how many."""
    layout, client, done = index.layout, index.client, 0
    for chunk in _scanned(index, layout.glob_prefix + "dec:*"):
        batch = index.store.batch()
        for k in chunk:
            batch.add(k, "GET", k)
            batch.add(k, "PTTL", k)
        got = index.store.call(batch.execute)
        writes = Batch(client)
        for at, k in enumerate(chunk):
            value, pttl = got[2 * at], int(got[2 * at + 1])
            if not value or pttl == -2:
                continue  # expired meanwhile
            doc_id = layout.old_decision_id(k)
            _, hashed, key, field = layout.decisions(doc_id)
            moved = record(parse_decision(value, doc_id), write=0)
            if pttl > 0:
                writes.add(key, "SET", key, moved, "PX", pttl)
            else:
                writes.add(hashed, "HSET", hashed, field, moved)
        _run(index, writes)
        index.store.call(client.unlink, *chunk)
        done += len(chunk)
        if done % 100_000 < len(chunk):
            say(f"{done:,} decisions moved into the shards")
    return done


def _move_ids(index: RedisIndex, say: Callable[[str], None], count: bool = True) -> None:
    """Step 4: the coordinator's id hashes into the shards, then (`count`) each shard's
    counts of its id map and the coordinator's `numbered`."""
    store, layout, client = index.store, index.layout, index.client
    seq = int(store.call(client.get, layout.seq) or 0)
    last = seq // IDS_PER_HASH
    for start in range(0, last + 1, ID_HASHES):
        hashes = range(start, min(start + ID_HASHES, last + 1))
        batch = store.batch()
        for j in hashes:
            batch.add(layout.old_ids(j), "HGETALL", layout.old_ids(j))
        writes = Batch(client)
        for j, got in zip(hashes, store.call(batch.execute), strict=True):
            if got:
                writes.add(
                    layout.ids(j), "HSET", layout.ids(j), *(a for p in got.items() for a in p)
                )
        _run(index, writes)
        olds = [layout.old_ids(j) for j in hashes]
        store.call(client.unlink, *olds)
        if start % (ID_HASHES * 64) == 0:
            say(f"id map moved to number {min(seq, (start + ID_HASHES) * IDS_PER_HASH):,}")
    if not count:
        return
    old = {
        k.decode(): int(v)
        for k, v in store.call(client.hgetall, layout.counts).items()
        if k != b"counted"
    }
    documents = [0] * SHARDS
    for start in range(0, last + 1, WRITES):
        hashes = range(start, min(start + WRITES, last + 1))
        batch = store.batch()
        for j in hashes:
            batch.add(layout.ids(j), "HLEN", layout.ids(j))
        for j, n in zip(hashes, store.call(batch.execute), strict=True):
            documents[j % SHARDS] += int(n)
    batch = store.batch()
    for shard in range(SHARDS):
        key = layout.shard_counts(shard)
        causes = (
            {c: old.get(c, 0) for c in ("replaced", "deleted", "expired")} if shard == 0 else {}
        )
        batch.add(
            key, "HSET", key, "documents", documents[shard], *(a for p in causes.items() for a in p)
        )
    store.call(batch.execute)
    batch = store.batch()
    batch.add(
        layout.counts,
        "HDEL",
        layout.counts,
        "documents",
        "counted",
        "replaced",
        "deleted",
        "expired",
    )
    batch.add(layout.counts, "HSET", layout.counts, "numbered", seq)
    batch.add(layout.rtrim, "SET", layout.rtrim, seq)
    store.call(batch.execute)


def _delete_old(index: RedisIndex, say: Callable[[str], None]) -> int:
    """Step 6: layout 2's bucket strings, on every primary; returns how many."""
    deleted = 0
    for chunk in _scanned(index, _old_pattern(index.layout)):
        index.store.call(index.client.unlink, *chunk)  # a cluster client splits it by slot
        deleted += len(chunk)
        if deleted % 100_000 == 0:
            say(f"{deleted:,} old bucket strings deleted")
    return deleted


def _scanned(index: RedisIndex, pattern: str) -> Iterator[list[bytes]]:
    """The keys of every primary that match `pattern`, a thousand at a time."""
    chunk = []
    for key in index.client.scan_iter(match=pattern, count=10_000):
        chunk.append(key)
        if len(chunk) == 1000:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _old_pattern(layout: Layout) -> str:
    """SCAN's pattern of layout 2's bucket strings: nd:{NAME/*}:b:*."""
    return f"{layout.patterns[1][:-1]}*}}:{OLD_BUCKETS}:*"


def _run(index: RedisIndex, batch: Batch) -> None:
    """A batch in round trips of WRITES commands."""
    for at in range(0, len(batch.commands), WRITES):
        part = Batch(batch.client)
        part.commands = batch.commands[at : at + WRITES]
        index.store.call(part.execute)


def _stderr(message: str) -> None:
    print(f"neardup: migrate: {message}", file=sys.stderr, flush=True)
