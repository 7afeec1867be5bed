"""detector.index.redis: the index contract (tests/index/contract.py) on the Redis server
and on the Redis Cluster, the same tests the memory index passes; then what only Redis has:
other processes on one index (a shared bind, the commit's conflict check with concurrent
writers, a dead committer's range repaired), a bucket cut back on the server, the log
trimmed, and export and restore."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index import DEFAULT_MAX_BUCKET, Commit, Entry, Index, Query, version_id
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis import index as redis_module
from detector.index.redis.keys import LAYOUT, parse_decision, record
from detector.records import Decision
from detector.settings import EngineSettings

from ..helpers import decide_in_batches, read_lines, verdict
from ..index.contract import DEFAULT, LOW_BLOCK_FLIPS, MANKU_4, IndexContract, MakeIndex, add, entry
from .admin import drop_index, index_keys, unique
from .endpoints import cluster_client, redis_client

SCHEMES = {s.name: s for s in (DEFAULT, MANKU_4, BlockScheme.parse("k7-b4-m1"))}


@pytest.fixture(params=["server", "cluster"])
def make_index(request: pytest.FixtureRequest) -> Iterator[MakeIndex]:
    """A factory of fresh, empty indexes on the Redis server, then on the Redis Cluster;
    every index made is deleted at the end."""
    made: list[str] = []
    client: Any = redis_client() if request.param == "server" else cluster_client()

    def make(
        scheme: BlockScheme = DEFAULT,
        max_bucket: int = DEFAULT_MAX_BUCKET,
        vectors: BlockScheme | None = None,
        text_window: int | None = None,
    ) -> Index:
        name = unique("index")
        made.append(name)
        return RedisIndex(
            client, scheme, name, max_bucket=max_bucket, vectors=vectors, text_window=text_window
        )

    try:
        yield make
    finally:
        for name in made:
            drop_index(client, name)
            assert not index_keys(client, name)
        client.close()


@pytest.fixture
def unmerged() -> int:
    """A lookup reads the newest max_bucket entries of a bucket, never more."""
    return 0


@pytest.fixture(params=list(SCHEMES))
def scheme(request: pytest.FixtureRequest) -> BlockScheme:
    """The default scheme, a table per 16-bit block, and a multi-probe one."""
    return SCHEMES[request.param]


class TestRedisIndex(IndexContract):
    """The index contract, on the Redis server and on the Redis Cluster."""


# ------------------------------------------------------------- Redis: every process


def test_redis_bind_is_shared_by_every_process_of_an_index(backend: Any) -> None:
    name = unique("index")
    try:
        RedisIndex(backend, DEFAULT, name).bind("v1")
        RedisIndex(backend, DEFAULT, name).bind("v1")
        with pytest.raises(ConfigError):
            RedisIndex(backend, DEFAULT, name).bind("v2")
        with pytest.raises(ConfigError):  # another block scheme cannot read the tables
            RedisIndex(backend, MANKU_4, name).bind("v1")
        with pytest.raises(ConfigError):
            RedisIndex(backend, DEFAULT, "bad:{name}")
    finally:
        drop_index(backend, name)


def test_bind_completes_a_meta_another_process_is_still_writing(backend: Any) -> None:
    """Two consumers starting at once on a new index: one has written some of the meta's
    fields when the other reads it. The second writes what is missing (HSETNX) instead of
    taking an absent field for another value ('retention None, not 0')."""
    name = unique("index")
    try:
        first = RedisIndex(backend, DEFAULT, name)
        for field, value in (("layout", LAYOUT), ("version", "v1"), ("scheme", DEFAULT.name)):
            backend.hset(first.layout.meta, field, value)
        backend.hset(first.layout.meta, "vectors", first.vector_scheme.name)
        RedisIndex(backend, DEFAULT, name).bind("v1")  # retention still missing
        first.bind("v1")
        assert first.meta()["retention"] == "0"
        with pytest.raises(ConfigError, match="retention"):
            RedisIndex(backend, DEFAULT, name, retention=60).bind("v1")
    finally:
        drop_index(backend, name)


# ---------------------------------------------------------- Redis: concurrent writers


def two_writers(backend: Any) -> tuple[RedisIndex, RedisIndex, str]:
    name = unique("index")
    a = RedisIndex(backend, DEFAULT, name)
    b = RedisIndex(backend, DEFAULT, name)
    return a, b, name


def test_commit_conflicts_with_a_near_document_indexed_since_the_lookup(
    backend: Any,
) -> None:
    a, b, name = two_writers(backend)
    try:
        fp_a = 0x0123456789ABCDEF
        fp_b = fp_a ^ 0b1011  # distance 3, within k
        assert a.lookup([Query("t", fp_a, "da")])[0].candidates == []
        assert b.lookup([Query("t", fp_b, "db")])[0].candidates == []
        done_b = b.commit([Commit(Decision("B", None, fp_b), entry("B", fp_b, digest="db"))])
        assert done_b.done == 1

        mine = Commit(Decision("A", None, fp_a), entry("A", fp_a, digest="da"))
        conflict = a.commit([mine])
        assert conflict.done == 0, "A committed although B indexed a near-duplicate first"
        assert conflict.stored == {}
        assert a.decisions(["A"]) == {}
        assert a.texts(["A"]) == {}

        seen = a.lookup([Query("t", fp_a, "da")])[0]
        assert [(c.id, c.distance) for c in seen.candidates] == [("B", 3)]
        # decided again against that lookup (here: a duplicate of B), the commit goes in
        dup = Commit(Decision("A", "B", fp_a, 3, 0.9), entry("A", fp_a, digest="da"))
        assert a.commit([dup]).done == 1
        assert a.decisions(["A"])["A"].duplicate_of == "B"
    finally:
        drop_index(backend, name)


def test_commit_conflicts_with_an_exact_copy_and_stops_at_the_first_conflict(
    backend: Any,
) -> None:
    """A batch commits its prefix up to the first conflicting item; far documents and an
    exact copy's digest are checked too."""
    a, b, name = two_writers(backend)
    try:
        far, near = 0x1, 0xFFFFFFFF00000000
        copy_fp = 0x5555555555555555
        a.lookup([Query("t", f, d) for f, d in ((far, "d1"), (near, "d2"), (copy_fp, "dc"))])
        b.lookup([Query("t", 0xAAAAAAAAAAAAAAAA, "dc")])
        # B indexes a document with a far fingerprint but the digest of A's third item
        assert (
            b.commit(
                [
                    Commit(
                        Decision("B", None, 0xAAAAAAAAAAAAAAAA),
                        Entry("B", "t", 0xAAAAAAAAAAAAAAAA, "dc", "same tokens"),
                    )
                ]
            ).done
            == 1
        )
        items = [
            Commit(Decision("A1", None, far), entry("A1", far, digest="d1")),
            Commit(Decision("A2", None, near), entry("A2", near, digest="d2")),
            Commit(Decision("A3", None, copy_fp), Entry("A3", "t", copy_fp, "dc", "same tokens")),
        ]
        committed = a.commit(items)
        assert committed.done == 2, "the exact copy indexed by B since the lookup went unseen"
        assert set(a.decisions(["A1", "A2", "A3"])) == {"A1", "A2"}
        assert a.lookup([Query("t", copy_fp, "dc")])[0].exact == "B"
    finally:
        drop_index(backend, name)


def test_far_documents_of_another_writer_do_not_conflict(backend: Any) -> None:
    a, b, name = two_writers(backend)
    try:
        fp_a, fp_b = 0x0F0F0F0F0F0F0F0F, 0xF0F0F0F0F0F0F0F0  # 64 bits apart
        a.lookup([Query("t", fp_a, "da")])
        b.lookup([Query("t", fp_b, "db")])
        assert b.commit([Commit(Decision("B", None, fp_b), entry("B", fp_b, digest="db"))]).done
        assert a.commit([Commit(Decision("A", None, fp_a), entry("A", fp_a, digest="da"))]).done
        # nor does one just beyond k
        fp_c = 0x00FF00FF00FF00FF
        fp_x = fp_c ^ ((1 << (DEFAULT.k + 1)) - 1)
        a.lookup([Query("t", fp_c, "dc")])
        b.lookup([Query("t", fp_x, "dx")])
        assert b.commit([Commit(Decision("X", None, fp_x), entry("X", fp_x, digest="dx"))]).done
        assert a.commit([Commit(Decision("C", None, fp_c), entry("C", fp_c, digest="dc"))]).done
    finally:
        drop_index(backend, name)


# ---------------------------------------------------------------- Redis: hot buckets


def test_the_commit_writes_the_record_keys_record_packs(backend: Any) -> None:
    """COMMIT composes a decision record in Lua (commit.lua) from the head and body the
    caller packs and the versions it carries over: byte for byte keys.record's, through a
    revision that keeps the version it replaces and one that keeps both; the caller's
    apply writes the same bytes into the shard's decision hash."""
    index = RedisIndex(backend, DEFAULT, unique("index"))
    try:
        fps = [0x0123456789ABCDEF, 0x0F0F0F0F0F0F0F0F, 0x7777777700000000]
        before = None
        for r, fp in enumerate(fps):
            d = Decision("Ü/1", None, fp, revision=r, digest=f"{r:032x}", version=float(r))
            if r:
                d.previous_fingerprint = fps[r - 1]
            index.lookup([Query("t", fp, d.digest)])
            e = entry(version_id("Ü/1", r), fp, digest=d.digest)
            done = index.commit([Commit(d, e, previous=before, keep_previous=True)])
            assert done.done == 1
            before = d
            _, hashed, _, field = index.layout.decisions("Ü/1")
            value = backend.hget(hashed, field)
            stored = parse_decision(value, "Ü/1")
            assert value == record(stored)
            assert backend.hget(index.layout.recent, "Ü/1") == value
            assert stored.write == r + 1
            assert stored.decision.to_json() == d.to_json()
            assert [v.fingerprint for v in stored.versions] == fps[: r + 1]
            assert [v.name for v in stored.versions] == [version_id("Ü/1", i) for i in range(r + 1)]
    finally:
        drop_index(backend, index.namespace)


def test_a_hot_bucket_is_cut_back_on_the_server(
    backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood of variants into the same buckets, in several commits: a lookup sees the
    newest max_bucket entries, and the bucket's key holds no more than 1.5 x as many;
    every entry pushed out of the reads is counted (19 in each of the three buckets the
    variants share with base), and each cut is logged with its table and key."""
    name = unique("index")
    caplog.set_level("WARNING", "neardup.index")
    try:
        index = RedisIndex(backend, MANKU_4, name, max_bucket=4)
        base = 0x1111222233330000
        flood = [
            entry(f"v{i:02d}", base ^ x, digest=f"dv{i}")
            for i, x in enumerate(LOW_BLOCK_FLIPS[:23])
        ]
        for at in range(0, len(flood), 5):  # several commits: the buckets are cut back
            add(index, flood[at : at + 5])
        got = [c.id for c in index.lookup([Query("t", base, "none")])[0].candidates]
        assert set(got) == {e.id for e in flood[-4:]}
        # every table: the three whose key the variants share with base, and the other
        sizes = [backend_strlen(index, MANKU_4, base, t) for t in range(len(MANKU_4.tables))]
        each = index.entry_bytes
        assert max(sizes) <= 6 * each, "a bucket grew past 1.5 x max_bucket entries"
        assert index.evicted == 3 * 19 and index.stats()["evicted"] == 3 * 19
        shared = [t for t in range(4) if sizes[t] > each]
        assert len(shared) == 3 and index.cuts >= 3
        keys = MANKU_4.keys([base])[0]
        for t in shared:
            assert f"space t table {t} key {keys[t]:#x}" in caplog.text, caplog.text
        other = RedisIndex(backend, MANKU_4, name)  # another process: its total is the index's
        assert other.evicted == 0 and other.stats()["evicted"] == 3 * 19
    finally:
        drop_index(backend, name)


def test_keys_narrower_than_a_field_are_looked_up(backend: Any) -> None:
    """A scheme of 8-bit table keys (k7-b8): a key fits in its field, no bits above it name
    the bucket hash; lookups find what the commits indexed, the near and the exact."""
    scheme = BlockScheme.parse("k7-b8")
    name = unique("index")
    try:
        index = RedisIndex(backend, scheme, name)
        base = 0x0123456789ABCDEF
        add(index, [entry("a", base, digest="da"), entry("far", ~base & (2**64 - 1), digest="df")])
        near, exact = index.lookup([Query("t", base ^ 0b101, "none"), Query("t", 7, "da")])
        assert [c.id for c in near.candidates] == ["a"] and near.candidates[0].distance == 2
        assert exact.exact == "a"
    finally:
        drop_index(backend, name)


def backend_strlen(index: RedisIndex, scheme: BlockScheme, fp: int, table: int) -> int:
    key, field = index.layout.bucket("t", table, scheme.keys([fp])[0][table])
    return int(index.client.hstrlen(key, str(field)))


# ----------------------------------------------- Redis: the log, a dead committer, export


def test_a_range_left_unapplied_by_a_dead_consumer_stays_visible_and_is_repaired(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, name = two_writers(backend)
    try:
        fp = 0x0123456789ABCDEF
        a.lookup([Query("t", fp, "da")])
        # A commits, then dies before it writes its documents into the shards
        monkeypatch.setattr(a, "_apply", lambda docs, member: None)
        assert a.commit([Commit(Decision("A", None, fp), entry("A", fp, digest="da"))]).done == 1
        assert backend.zcard(f"nd:{{{name}}}:pending") == 1
        assert all(backend_strlen(b, b.scheme, fp, t) == 0 for t in range(len(b.scheme.tables)))
        # B finds it in the log at once, as a candidate and as an exact copy
        found = b.lookup([Query("t", fp ^ 1, "da")])[0]
        assert found.exact == "A" and [c.id for c in found.candidates] == ["A"]
        # once the range is old enough, B applies it itself
        monkeypatch.setattr(redis_module, "REPAIR_AFTER", 0.0)
        found = b.lookup([Query("t", fp ^ 1, "da")])[0]
        assert found.exact == "A" and [c.id for c in found.candidates] == ["A"]
        assert backend.zcard(f"nd:{{{name}}}:pending") == 0
        assert all(
            backend_strlen(b, b.scheme, fp, t) == b.entry_bytes for t in range(len(b.scheme.tables))
        )
        assert [c.id for c in b.lookup([Query("t", fp, "x")])[0].candidates] == ["A"]
    finally:
        drop_index(backend, name)


def test_the_log_is_trimmed_and_a_commit_too_stale_for_it_is_decided_again(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_module, "LOG_KEEP", 3)
    a, b, name = two_writers(backend)
    try:
        b.lookup([Query("t", 0xABCDEF, "db")])  # B's mark: 0
        docs = [entry(f"a{i:02d}", (i + 1) * 0x0F0F0F0F0F0F0F0F % 2**64) for i in range(20)]
        for at in range(0, 20, 2):
            add(a, docs[at : at + 2])
        assert int(backend.get(f"nd:{{{name}}}:logbase") or 0) > 0
        assert backend.strlen(f"nd:{{{name}}}:log") <= 32 * 3 * 3
        mine = Commit(Decision("B", None, 0xABCDEF), entry("B", 0xABCDEF, digest="db"))
        assert b.commit([mine]).done == 0  # cannot check what the log no longer holds
        assert b.texts(["B"]) == {}
        b.lookup([Query("t", 0xABCDEF, "db")])
        assert b.commit([mine]).done == 1
        for e in docs:
            got = b.lookup([Query("t", e.fingerprint, "x")])[0]
            assert e.id in [c.id for c in got.candidates]
    finally:
        drop_index(backend, name)


def test_an_exported_index_restored_under_another_name_decides_alike(
    backend: Any,
) -> None:
    raw = read_lines()
    source, copy = unique("index"), unique("index")
    try:
        a = RedisIndex(backend, DEFAULT, source)
        decide_in_batches(a, raw[:250])
        exported = list(maintenance.documents(a))
        assert len(exported) == 250
        indexed = [r for r in exported if "text" in r]
        assert 200 < len(indexed) < 250
        b = RedisIndex(backend, DEFAULT, copy)
        b.bind(EngineSettings().engine().version)
        assert maintenance.restore(b, iter(exported)) == 250
        with pytest.raises(ConfigError):
            maintenance.restore(b, iter(exported))  # only into an empty index

        def by_id(records: list[dict[str, Any]]) -> dict[str, Any]:
            return {r["decision"]["id"]: r for r in records}

        assert by_id(list(maintenance.documents(b))) == by_id(exported)
        later_a = decide_in_batches(a, raw[250:])
        later_b = decide_in_batches(b, raw[250:])
        assert [verdict(d.to_dict()) for d in later_a] == [verdict(d.to_dict()) for d in later_b]
        assert sum(d.duplicate_of is not None for d in later_b) >= 3
    finally:
        drop_index(backend, source)
        drop_index(backend, copy)


def test_an_index_whose_name_holds_glob_characters_keeps_to_its_own_keys(
    backend: Any,
) -> None:
    """SCAN patterns (keys, drop, export) match the name as it is written: `name?` and
    `name[x]` are not `namex`."""
    name = unique("glob")
    globbed = [RedisIndex(backend, DEFAULT, name + suffix) for suffix in ("?", "[x]", "*")]
    plain = RedisIndex(backend, DEFAULT, name + "x")
    try:
        for n, index in enumerate([*globbed, plain]):
            index.bind("v1")
            add(index, [entry(f"doc{n}", n * 0x1234567)])
        theirs = set(index_keys(backend, plain.namespace))
        for n, index in enumerate(globbed):
            mine = set(maintenance.keys(index))
            assert mine and not mine & theirs
            assert [r["decision"]["id"] for r in maintenance.documents(index)] == [f"doc{n}"]
            maintenance.drop(index)
        assert set(index_keys(backend, plain.namespace)) == theirs
    finally:
        for index in (*globbed, plain):
            maintenance.drop(index)


# ---------------------------------------------------------------- Redis: encodings


def test_a_small_indexs_bucket_hashes_are_listpacks_and_a_hot_one_a_hashtable(
    backend: Any,
) -> None:
    """Key layout 3 relies on the listpack encoding of small hashes (keys.py): 300
    documents leave every bucket hash a listpack (a few buckets of one entry each).
    A bucket past hash-max-listpack-value (256 bytes: 26 entries of 10 bytes) turns its
    whole hash into a hashtable, whose fields still cost less than a key each (as a large index's
    hashes are: past 512 buckets or with a hot one)."""
    name = unique("encoding")
    try:
        index = RedisIndex(backend, DEFAULT, name)
        index.bind("v1")
        add(index, [entry(f"d{i}", fp=(i * 0x9E3779B97F4A7C15) % 2**64) for i in range(300)])
        hashes = [k for k in index_keys(backend, name) if b"}:bh:" in k]
        assert len(hashes) > 100
        assert {backend.object("encoding", k) for k in hashes} == {b"listpack"}

        # 26 documents in the same bucket of table 0 (and others): 260 bytes
        base = 0x5555_5555_5555_5555
        add(index, [entry(f"hot{i}", fp=base ^ (1 << (16 + i))) for i in range(25)])
        key, field = index.layout.bucket("t", 0, DEFAULT.keys([base])[0][0])
        assert index.entry_bytes == 10
        assert backend.hstrlen(key, str(field)) == 25 * 10
        assert backend.object("encoding", key) == b"listpack"
        add(index, [entry("hot25", fp=base ^ (1 << 41))])
        assert backend.object("encoding", key) == b"hashtable"
    finally:
        drop_index(backend, name)


@pytest.mark.exclusive  # the server's settings, which every index bound meanwhile checks
def test_the_index_refuses_a_server_whose_listpack_limits_are_too_low(
    backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    if isinstance(backend, RedisCluster):
        pytest.skip("the server's settings: one server is enough")
    name = unique("encoding")
    before = backend.config_get("hash-max-listpack-value")["hash-max-listpack-value"]
    try:
        backend.config_set("hash-max-listpack-value", 32)
        with pytest.raises(ConfigError, match=r"hash-max-listpack-value 32; .* at least 256"):
            RedisIndex(backend, DEFAULT, name).bind("v1")
        backend.config_set("hash-max-listpack-value", 1024)  # more is fine
        RedisIndex(backend, DEFAULT, name).bind("v1")
    finally:
        backend.config_set("hash-max-listpack-value", before)
        drop_index(backend, name)
    # where CONFIG is not permitted, a warning says what could not be checked
    with caplog.at_level("WARNING", logger="neardup.index"):
        redis_module.check_encodings(NoConfig())
    assert "could not check" in caplog.text and "hash-max-listpack-entries 512" in caplog.text


class NoConfig:
    """A client whose ACL denies CONFIG, as a managed service's."""

    def config_get(self, pattern: str) -> dict[str, str]:
        raise redis.exceptions.NoPermissionError("this user has no permissions to run 'config'")
