"""Retention on the real Redis: a deleted record or one older than the horizon is no
longer a candidate, nor an exact copy, nor a remembered decision, and the memory its keys
held comes back."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from detector.blocks import BlockScheme
from detector.index import Commit, Entry, Query
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis.keys import entry_bytes, unpack_entries
from detector.records import Decision
from detector.settings import EngineSettings

from .admin import drop_index, index_keys, unique

SCHEME = BlockScheme.parse(EngineSettings().scheme)
TEXT = "a literal text kept for the second pass, long enough to weigh something " * 20


def entries(prefix: str, count: int, seed: int) -> list[Entry]:
    rng = random.Random(seed)
    return [
        Entry(f"{prefix}{i:04d}", "t", rng.getrandbits(64), f"{prefix}-digest-{i}", TEXT)
        for i in range(count)
    ]


def add(index: RedisIndex, docs: list[Entry], batch: int = 100) -> None:
    for at in range(0, len(docs), batch):
        part = docs[at : at + batch]
        index.lookup([Query(e.space, e.fingerprint, e.digest) for e in part])
        done = index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in part])
        assert done.done == len(part)


def weight(client: Any, name: str, buckets: bool = True) -> int:
    """Bytes of every key of the index (MEMORY USAGE): what the index holds, whatever else
    the shared server holds; without its bucket hashes and its log unless `buckets` (the
    log is bounded by LOG_KEEP whatever the index holds, and every write, a delete too,
    appends to it)."""
    keys = [
        k
        for k in index_keys(client, name)
        if buckets or (b"}:bh:" not in k and not k.endswith(b"}:log"))
    ]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return sum(int(size or 0) for size in pipe.execute())


def entries_held(client: Any, name: str) -> int:
    """The entries in the index's bucket hashes."""
    keys = [k for k in index_keys(client, name) if b"}:bh:" in k]
    size, each = sum(len(v) for k in keys for v in client.hvals(k)), entry_bytes(SCHEME)
    assert size % each == 0
    return size // each


def visible(index: RedisIndex, docs: list[Entry]) -> list[str]:
    """The documents a lookup of their own fingerprint and digest still finds."""
    found = index.lookup([Query(e.space, e.fingerprint, e.digest) for e in docs])
    return [
        e.id
        for e, f in zip(docs, found, strict=True)
        if f.exact == e.id or e.id in {c.id for c in f.candidates}
    ]


@pytest.fixture
def name(backend: Any) -> Iterator[str]:
    n = unique("index")
    yield n
    drop_index(backend, n)


def test_deleted_records_are_gone_and_their_memory_comes_back(backend: Any, name: str) -> None:
    index = RedisIndex(backend, SCHEME, name)
    # The coordinator keeps the newest RECENT_KEEP writes' records and notes below the
    # applied mark, for the commits of consumers that read before them; here none, so
    # that their memory comes back with each apply. What stays of a deleted record is its
    # tombstone in the decision hash (5 bytes and the id).
    index.recent_keep = 0
    index.bind("v1")
    docs = entries("d", 400, seed=1)
    add(index, docs)
    assert visible(index, docs) == [e.id for e in docs]
    full = weight(backend, name, buckets=False)
    assert entries_held(backend, name) == len(docs) * len(SCHEME.tables)

    gone, kept = docs[:300], docs[300:]
    assert sorted(index.delete([e.id for e in gone])) == [e.id for e in gone]
    assert visible(index, gone) == []
    assert visible(index, kept) == [e.id for e in kept]
    assert index.texts([e.id for e in gone]) == {}
    assert index.decisions([e.id for e in gone]) == {}
    # the bucket hashes keep only the entries of the records kept (a hash stays while
    # any of its buckets holds one: 1,792 of them hold these 400 records' entries)
    assert entries_held(backend, name) == len(kept) * len(SCHEME.tables)
    after = weight(backend, name, buckets=False)
    assert after < full * 0.4, f"{full} bytes before deleting 3/4 of the records, {after} after"
    # deleted records are not even in the buckets any more
    for e in gone[:20]:
        for t, key in enumerate(SCHEME.keys([e.fingerprint])[0]):
            value = backend.hget(*index.layout.bucket("t", t, key)) or b""
            rests, _ = unpack_entries(np.frombuffer(value, np.uint8), index.entry_bytes)
            held = SCHEME.compose(t, np.full(len(rests), key, np.uint64), rests)
            assert e.fingerprint not in held.tolist()


def test_records_past_the_horizon_age_out_and_their_memory_comes_back(
    backend: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the id map swept in many small scripts, as a sweep long put off is
    monkeypatch.setattr(maintenance, "SWEEP_HASHES", 1)
    # A horizon long enough for a slow machine to index and weigh 400 records inside it.
    index = RedisIndex(backend, SCHEME, name, retention=5)
    index.recent_keep = 0  # as above
    index.bind("v1")
    old = entries("o", 400, seed=2)
    add(index, old)
    # Each record's keys expire `keep` (the horizon and its 1 s window) after its own
    # commit, so the wait counts from the last commit: on a loaded machine the 400 take
    # a good part of a second, and a wait from the first left the last batch's keys.
    committed = time.monotonic()
    assert visible(index, old) == [e.id for e in old]
    full = weight(backend, name, buckets=False)
    assert maintenance.sweep(index) == 0  # nothing is old yet

    time.sleep(max(0.0, committed + index.keep + 0.5 - time.monotonic()))
    young = entries("y", 50, seed=3)
    add(index, young)
    # aged out at once for lookups, before any memory is given back
    assert visible(index, old) == []
    assert visible(index, young) == [e.id for e in young]
    assert index.decisions([e.id for e in old]) == {}  # their keys expired with them
    assert index.texts([e.id for e in old]) == {}
    stats = index.stats()  # counted until swept
    assert (stats["documents"], stats["committed"], stats["expired"]) == (450, 450, 0)

    removed = maintenance.sweep(index)
    assert removed >= len(old), removed  # their digests; their buckets expired
    stats = index.stats()
    assert (stats["documents"], stats["committed"], stats["expired"]) == (50, 450, 400)
    # the bucket hashes keep only the young records' entries (SWEEP_BUCKETS), though
    # nearly all of them stay, holding those
    assert entries_held(backend, name) == len(young) * len(SCHEME.tables)
    after = weight(backend, name, buckets=False)
    assert after < full * 0.3, f"{full} bytes before the horizon, {after} after the sweep"
    assert visible(index, young) == [e.id for e in young]
    assert maintenance.sweep(index) == 0


def test_an_idle_index_ages_too(backend: Any, name: str) -> None:
    """Each commit marks its time (one mark per 1 s window, the window's last), so the
    documents of an index that then goes idle age out on time: not before the horizon,
    and at most one window after it, with no later commit needed."""
    index = RedisIndex(backend, SCHEME, name, retention=4)
    index.bind("v1")
    docs = entries("i", 30, seed=4)
    add(index, docs[:10])
    add(index, docs[10:])
    committed = time.monotonic()
    time.sleep(1.0)
    assert visible(index, docs) == [e.id for e in docs]  # younger than the horizon
    time.sleep(max(0.0, committed + 5.2 - time.monotonic()))  # horizon + window, and slack
    assert visible(index, docs) == []
    assert maintenance.sweep(index) >= 30


def test_every_process_of_an_index_must_use_its_retention(backend: Any, name: str) -> None:
    from detector.errors import ConfigError

    RedisIndex(backend, SCHEME, name, retention=3600).bind("v1")
    with pytest.raises(ConfigError, match="retention"):
        RedisIndex(backend, SCHEME, name).bind("v1")
