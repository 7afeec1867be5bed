"""Bulk load: many documents into an empty Redis index of key layout 5 (keys.py), decided
"unique", without the COMMIT and APPLY scripts, into the state that committing them one
batch at a time would have left, but for the log: the commits would keep up to 2 x 65,536
recent entries in it (APPLIED trims it only now and then) and the newest writes' records
and notes, the load leaves them empty with logbase = rtrim = seq, which lookups and
commits read as "nothing recent" (SNAPSHOT, COMMIT):

  coordinator  meta (bound through RedisIndex.bind), seq = logbase = rtrim = N, no log,
               pending or recent writes, counts {numbered: N}, and the text dictionary
               when the texts fill a sample (texts.Sample: the first ones are packed
               without it, then again with it where that is smaller, as a consumer does)
  shards       bucket entries in number order (cut back and counted in `evicted` exactly
               as APPLY_SHARD does at --max-bucket), the digest fields (the first copy
               of a digest is the one named), the id map and its counts, each
               document's decision record (written by write number = its number) in its
               decision hash, and the texts of the documents that have one

Fast: a chunk of documents at a time, each block table's entries grouped by bucket with
one numpy sort, and one HSET per bucket hash per chunk (after an HMGET of what the
hash's buckets held, past the first chunk); the decisions by one HSET per decision hash
a step.
It is for filling an index nobody else writes to (a benchmark, a rebuild): it refuses an
index that already has documents, and an index with a retention (its decisions, texts and
buckets would need the commit times it has none of)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ... import __version__
from ...errors import ConfigError
from ...records import Decision
from ..texts import Sample
from .cluster import Batch
from .index import RedisIndex
from .keys import (
    ENTRY,
    IDS_PER_HASH,
    SHARDS,
    Stored,
    Version,
    digest_hash,
    fields,
    pack_entries,
    record,
)

# Documents a chunk. Each bucket is written once a chunk, its value allocated to its
# size: 10^7 documents in one chunk of 16-bit tables take some 1 GB of keys and entries
# on the client.
CHUNK = 1 << 24
STEP = 1 << 16  # documents a round trip of decisions, ids and digests (a multiple of 128)
PIPELINE = 20_000  # commands a round trip
TEXT_SPACE = "t"  # engine.TEXT_SPACE (not imported: the engine is not the index's business)


@dataclass(frozen=True)
class Loaded:
    documents: int
    seconds: float
    appends: int  # buckets written: one per bucket per chunk
    evicted: int  # entries pushed out of the lookups' reads by --max-bucket
    cut: int  # buckets cut back to their newest --max-bucket entries


def load(
    index: RedisIndex,
    version: str,
    ids: Sequence[str],
    fingerprints: np.ndarray,
    digests: Sequence[str] | None = None,
    texts: Mapping[int, str] | None = None,
    space: str = TEXT_SPACE,
    decided_at: str | None = None,
    chunk: int = CHUNK,
    progress: Callable[[str], None] | None = None,
) -> Loaded:
    """Index documents ids[i] (numbered i + 1) with fingerprints[i] (uint64) in `space`,
    each decided unique. `version`: the fingerprints' (engine.version; the index is bound
    to it, and the decisions name it as their features). `digests[i]`: the digest of its
    token stream; without them, each document gets a digest of its own. `texts`: by
    position, the normalized texts of the documents that have one (a document without is
    found but cannot be verified by the literal pass). `progress` is told of each chunk
    (by default on stderr)."""
    started = time.perf_counter()
    n = len(ids)
    fps = np.ascontiguousarray(fingerprints, np.uint64)
    _check(index, ids, fps, digests, space, chunk)
    say = progress or _stderr
    client = index.client
    layout = index.layout
    seq = int(client.get(layout.seq) or 0)
    if seq:
        raise ConfigError(
            f"index {index.namespace!r} already has documents: bulk load only into an empty one"
        )
    index.bind(version)
    if not n:
        return Loaded(0, time.perf_counter() - started, 0, 0, 0)

    def digest(at: int) -> str:
        return digests[at] if digests is not None else f"bulk:{ids[at]}"

    # 16 bytes a document in one array (a list of bytes objects would take 50)
    dhs = np.empty((n, 16), np.uint8)
    for at in range(n):
        dhs[at] = np.frombuffer(digest_hash(digest(at)), np.uint8)
    named = _first_copies(dhs)
    when = decided_at or datetime.now(UTC).isoformat()

    def decision(at: int, fp: int) -> bytes:  # the record COMMIT writes of a unique one
        d = Decision(
            ids[at],
            None,
            fp,
            features=version,
            namespace=index.namespace,
            detector=__version__,
            decided_at=when,
            digest=digest(at),
        )
        current = Version(ids[at], at + 1, space, dhs[at].tobytes(), fp)
        return record(Stored(d, current, write=at + 1))

    scheme = index.scheme_for(space)
    _write_texts(index, ids, texts or {})

    appends = evicted = cut = 0
    width = max(scheme.key_bits())
    key_type = np.uint16 if width <= 16 else np.uint32 if width <= 32 else np.uint64
    for first in range(0, n, chunk):
        last = min(n, first + chunk)
        entries = np.empty(last - first, ENTRY)
        entries["fp"] = fps[first:last]
        entries["num"] = np.arange(first + 1, last + 1, dtype=np.uint32)
        # every table's keys of the chunk, in as few bytes as they need
        keys = np.empty((last - first, len(scheme.key_bits())), key_type)
        for at in range(first, last, STEP):
            part = fps[at : min(last, at + STEP)]
            keys[at - first : at - first + len(part)] = scheme.key_array(part)
        for table in range(keys.shape[1]):
            packed = pack_entries(scheme, table, entries["fp"], entries["num"], index.entry_bytes)
            got = _append_table(index, space, table, keys[:, table].astype(np.uint64), packed)
            appends += got[0]
            evicted += got[1]
            cut += got[2]
        del keys, entries, packed
        say(f"bulk load: the block tables of {last:,} of {n:,} documents written")
        for at in range(first, last, STEP):
            batch = Batch(client)
            upto = min(last, at + STEP)
            hashes: dict[str, list[Any]] = {}
            for i, fp in enumerate(fps[at:upto].tolist(), at):
                _, hashed, _, field = layout.decisions(ids[i])
                hashes.setdefault(hashed, []).extend((field, decision(i, fp)))
            for hashed, pairs in hashes.items():
                batch.add(hashed, "HSET", hashed, *pairs)
            mapped: dict[int, int] = {}
            for j in range((at + 1) // IDS_PER_HASH, upto // IDS_PER_HASH + 1):
                lo, hi = max(at + 1, j * IDS_PER_HASH), min(upto, (j + 1) * IDS_PER_HASH - 1)
                fields = [
                    v for num in range(lo, hi + 1) for v in (num % IDS_PER_HASH, ids[num - 1])
                ]
                if fields:  # a hash that spans two steps gets an HSET from each
                    batch.add(layout.ids(j), "HSET", layout.ids(j), *fields)
                    mapped[j % SHARDS] = mapped.get(j % SHARDS, 0) + len(fields) // 2
            for shard, count in mapped.items():
                key = layout.shard_counts(shard)
                batch.add(key, "HINCRBY", key, "documents", count)
            by_key: dict[str, list[Any]] = {}
            for i in range(at, upto):
                if named[i]:
                    dh = dhs[i].tobytes()
                    by_key.setdefault(layout.digest(dh), []).extend((dh[2:], i + 1))
            for key, fields in by_key.items():
                batch.add(key, "HSET", key, *fields)
            _run(batch)
        batch = Batch(client)
        batch.add(layout.counts, "HINCRBY", layout.counts, "numbered", last - first)
        batch.add(layout.seq, "SET", layout.seq, last)
        batch.add(layout.logbase, "SET", layout.logbase, last)
        batch.add(layout.rtrim, "SET", layout.rtrim, last)
        _run(batch)
        seconds = time.perf_counter() - started
        say(f"bulk load: {last:,} of {n:,} documents, {last / seconds:,.0f} docs/s")
    if cut:
        say(f"bulk load: {cut} bucket(s) reached --max-bucket {index.max_bucket} and were cut")
    return Loaded(n, time.perf_counter() - started, appends, evicted, cut)


def _check(
    index: RedisIndex,
    ids: Sequence[str],
    fps: np.ndarray,
    digests: Sequence[str] | None,
    space: str,
    chunk: int,
) -> None:
    if index.retention:
        raise ConfigError("bulk load writes no commit times: it needs an index without retention")
    if fps.ndim != 1 or len(fps) != len(ids):
        raise ConfigError(f"{len(ids)} ids but {fps.shape} fingerprints")
    if digests is not None and len(digests) != len(ids):
        raise ConfigError(f"{len(ids)} ids but {len(digests)} digests")
    if len(set(ids)) != len(ids):
        raise ConfigError("bulk load: the ids must be distinct (one version of each record)")
    if not 0 < len(space.encode()) <= 8:
        raise ConfigError(f"fingerprint space {space!r} must be 1 to 8 bytes")
    if chunk < 1:
        raise ConfigError("bulk load: chunk must be >= 1")


def _first_copies(dhs: np.ndarray) -> np.ndarray:
    """Whether each digest hash (a row of 16 bytes) is the first copy of its value (the
    one a digest field names: APPLY_SHARD sets it only if absent)."""
    out = np.zeros(len(dhs), bool)
    if not len(dhs):
        return out
    raw = np.ascontiguousarray(dhs).view(np.uint64)
    order = np.lexsort((np.arange(len(dhs)), raw[:, 1], raw[:, 0]))  # by value, then position
    s = raw[order]
    new = np.ones(len(dhs), bool)
    new[1:] = np.any(s[1:] != s[:-1], axis=1)
    out[order[new]] = True
    return out


def _append_table(
    index: RedisIndex, space: str, table: int, keys: np.ndarray, entries: np.ndarray
) -> tuple[int, int, int]:
    """One table's entries of a chunk (rows of packed entries, keys.pack_entries), each
    bucket written once; then APPLY_SHARD's cap:
    a bucket past 1.5 x max_bucket entries ends as that script's appends one by one
    would leave it. (buckets written, evicted, cut)."""
    order = np.argsort(keys, kind="stable")  # stable: a bucket's entries in number order
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    added = np.diff(np.r_[starts, len(keys)])
    buckets = sorted_keys[starts]
    names, shards = index.layout.buckets(
        [space] * len(buckets), np.full(len(buckets), table, np.int64), buckets
    )
    at = fields(buckets)
    groups: dict[Any, list[int]] = {}  # a bucket hash's buckets, in key order
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    old: list[bytes] = [b""] * len(names)
    batch = Batch(index.client)  # what earlier chunks left in them
    for name, group in groups.items():
        batch.add(name, "HMGET", name, *(at[i] for i in group))
    for group, got in zip(groups.values(), _run(batch), strict=True):
        for i, value in zip(group, got, strict=True):
            old[i] = value or b""
    raw = entries[order].tobytes()
    size = index.entry_bytes
    bounds = (np.r_[starts, len(keys)] * size).tolist()
    values = [old[i] + raw[bounds[i] : bounds[i + 1]] for i in range(len(names))]
    lengths = np.array([len(v) for v in values], np.int64) // size

    keep = index.max_bucket  # entries, as RedisIndex._apply's limit and keep in bytes
    limit = index.max_bucket * size * 3 // 2 // size
    pushed = np.clip(np.minimum(added, lengths - keep), 0, None)
    over = np.flatnonzero(lengths > limit)
    if len(over):
        # past `limit`, each append cuts the bucket back to `keep`: it cycles keep .. limit
        beyond = lengths[over] - limit
        final = keep + (beyond - 1) % (limit - keep + 1)
        for i, f in zip(over.tolist(), final.tolist(), strict=True):
            values[i] = values[i][-f * size :]
    batch = Batch(index.client)
    for name, group in groups.items():
        batch.add(name, "HSET", name, *(a for i in group for a in (at[i], values[i])))
    for shard in np.unique(shards).tolist():
        batch.add(index.layout.spaces(shard), "SADD", index.layout.spaces(shard), space)
    if pushed.any():
        per_shard = np.bincount(shards.astype(np.int64), weights=pushed, minlength=SHARDS)
        for shard in np.flatnonzero(per_shard).tolist():
            key = index.layout.evicted(shard)
            batch.add(key, "INCRBY", key, int(per_shard[shard]))
    _run(batch)
    return len(names), int(pushed.sum()), len(over)


def _write_texts(index: RedisIndex, ids: Sequence[str], texts: Mapping[int, str]) -> None:
    """The texts, packed as the index's consumers pack them: the first ones (a Sample)
    without a dictionary, then, once they fill it, the dictionary trained on them is the
    index's (SET NX: one it already has wins) and every text is packed with it, the
    sampled ones only where that is smaller (texts.Sample.repacked)."""
    codec = index.codec
    positions = sorted(texts)
    sample = Sample() if codec.with_dictionary else None
    packed: dict[int, bytes] = {}
    at = 0
    if sample is not None:
        while at < len(positions) and not sample.full:
            p = positions[at]
            packed[p] = codec.pack(texts[p])
            sample.add(ids[p], texts[p], packed[p])
            at += 1
        if sample.full:
            data = sample.train(codec.level)
            if data is not None:
                index.client.set(index.layout.txdict, data, nx=True)
                codec.use(index.client.get(index.layout.txdict))  # type: ignore[arg-type]
                again = {name: value for name, _, value in sample.repacked(codec)}
                for p in positions[:at]:
                    packed[p] = again.get(ids[p], packed[p])
    batch = Batch(index.client)
    for n, p in enumerate(positions):
        key = index.layout.text(ids[p])
        value = packed[p] if p in packed else codec.pack(texts[p])
        batch.add(key, "SET", key, value)
        if len(batch.commands) == PIPELINE or n == len(positions) - 1:
            _run(batch)
            batch = Batch(index.client)


def _run(batch: Batch) -> list[Any]:
    """A batch in round trips of PIPELINE commands."""
    out: list[Any] = []
    commands = batch.commands
    for at in range(0, len(commands), PIPELINE):
        part = Batch(batch.client)
        part.commands = commands[at : at + PIPELINE]
        out += part.execute()
    return out


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
