"""The index interface, once, over both implementations: the in-memory index of `neardup
detect` and the Redis index of `neardup serve` (on the real server). Whatever one answers
the other must answer too; a Detector over either decides the sample identically.
Then the one thing only Redis has: other writers, so the commit's conflict check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index import Commit, Entry, Found, Index, Query
from detector.index import memory as memory_module
from detector.index import redis as redis_module
from detector.index.memory import MemoryIndex
from detector.index.redis import RedisIndex
from detector.records import Decision
from detector.settings import EngineSettings

from .kit import (
    SAMPLE,
    cluster_client,
    decide_in_batches,
    drop_index,
    index_keys,
    redis_client,
    unique,
    verdict,
)

DEFAULT = EngineSettings().scheme  # what serve and detect use
SCHEMES = {spec: BlockScheme.parse(spec) for spec in (DEFAULT, "manku-4", "k7-b4-m1")}
u64 = st.integers(min_value=0, max_value=2**64 - 1)
MakeIndex = Callable[..., Index]
Near = tuple[int, str, int]  # distance, id, fingerprint


@pytest.fixture(params=["memory", "redis", "cluster"])
def make_index(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[MakeIndex]:
    """A factory of fresh, empty indexes of one kind: in memory, on the Redis server, on
    the Redis Cluster. The memory index merges its unsorted tail into the block tables
    every 3 fingerprints here (4,096 by default), so that the small examples reach its
    tables. Every Redis index made is deleted at the end."""
    made: list[str] = []
    rclient: Any = None
    if request.param == "memory":
        monkeypatch.setattr(memory_module, "TAIL", 3)
    else:
        rclient = redis_client() if request.param == "redis" else cluster_client()

    def make(
        scheme: BlockScheme = SCHEMES[DEFAULT], name: str | None = None, max_bucket: int = 1024
    ) -> Index:
        name = name or unique("index")
        if request.param == "memory":
            return MemoryIndex(scheme, name, max_bucket=max_bucket)
        made.append(name)
        return RedisIndex(rclient, scheme, name, max_bucket=max_bucket)

    yield make
    for name in made:
        drop_index(rclient, name)
        assert not index_keys(rclient, name)
    if rclient is not None:
        rclient.close()


def entry(
    doc_id: str, fp: int, digest: str | None = None, text: str = "", space: str = "t"
) -> Entry:
    return Entry(doc_id, space, fp, digest or f"digest-{doc_id}", text or f"text of {doc_id}")


def add(index: Index, entries: list[Entry]) -> None:
    """Index entries the way the pipeline does: look them up, then commit them."""
    index.lookup([Query(e.space, e.fingerprint, e.digest) for e in entries])
    committed = index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in entries])
    assert committed.done == len(entries)
    assert committed.stored == {}


def brute_force(stored: list[Entry], query: int, k: int, space: str = "t") -> list[Near]:
    """(distance, id, fingerprint) of every stored entry within k, nearest first."""
    return sorted(
        ((e.fingerprint ^ query).bit_count(), e.id, e.fingerprint)
        for e in stored
        if e.space == space and (e.fingerprint ^ query).bit_count() <= k
    )


def candidates(found: Found) -> list[Near]:
    return [(c.distance, c.id, c.fingerprint) for c in found.candidates]


@st.composite
def clustered(draw: st.DrawFn, k: int, max_size: int) -> list[int]:
    """Base fingerprints with variants 0..k+2 bits away (near pairs, just beyond k, and
    equal fingerprints), plus loners."""
    out: list[int] = []
    for base in draw(st.lists(u64, min_size=1, max_size=4)):
        out.append(base)
        for flips in draw(st.lists(st.integers(0, k + 2), max_size=6)):
            bits = draw(st.lists(st.integers(0, 63), min_size=flips, max_size=flips, unique=True))
            out.append(base ^ sum(1 << b for b in bits))
    out += draw(st.lists(u64, max_size=4))
    return out[:max_size]


def one_table_variants(scheme: BlockScheme, base: int) -> list[int]:
    """For each table, base with k bits flipped outside that table's key, spread over
    every block the table leaves out: only that one table can find it."""
    out = []
    for runs in scheme.tables:
        kept = {s + i for s, w in runs for i in range(w)}
        rest = [b for b in range(64) if b not in kept]
        flips = [rest[j * len(rest) // scheme.k] for j in range(scheme.k)]
        out.append(base ^ sum(1 << b for b in flips))
    return out


# ------------------------------------------------------------------------------ lookup


@pytest.mark.parametrize("spec", list(SCHEMES))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_lookup_returns_exactly_the_fingerprints_within_k(
    make_index: MakeIndex, spec: str, data: st.DataObject
) -> None:
    scheme = SCHEMES[spec]
    index = make_index(scheme)
    stored = data.draw(clustered(scheme.k, 30), label="stored")
    queries = data.draw(clustered(scheme.k, 12), label="queries") + stored[:4]
    entries = [entry(f"s{i:02d}", fp) for i, fp in enumerate(stored)]
    # in a few commits, each after its lookup, as consecutive batches would be
    cuts = sorted(data.draw(st.lists(st.integers(0, len(entries)), max_size=2), label="cuts"))
    for lo, hi in pairwise([0, *cuts, len(entries)]):
        if hi > lo:
            add(index, entries[lo:hi])
    found = index.lookup([Query("t", q, "no such digest") for q in queries])
    assert len(found) == len(queries)
    for q, f in zip(queries, found, strict=True):
        assert f.exact is None
        assert candidates(f) == brute_force(entries, q, scheme.k), f"query {q:016x}"


@pytest.mark.parametrize("spec", list(SCHEMES))
@pytest.mark.parametrize("base", [0, 2**64 - 1, 0x0123456789ABCDEF, 0xF0F0F0F00F0F0F0F])
def test_lookup_finds_pairs_that_only_one_table_can_find(
    make_index: MakeIndex, spec: str, base: int
) -> None:
    """At distance exactly k, found by a single table; one bit further, by none."""
    scheme = SCHEMES[spec]
    index = make_index(scheme)
    near = one_table_variants(scheme, base)
    assert all((v ^ base).bit_count() == scheme.k for v in near)
    far = [v ^ (1 << next(b for b in range(64) if not (v ^ base) >> b & 1)) for v in near]
    entries = [entry(f"n{i:03d}", v) for i, v in enumerate(near)]
    entries += [entry(f"f{i:03d}", v) for i, v in enumerate(far)]
    add(index, entries)
    queries = [base, *near[:3], *far[:3]]
    for q, f in zip(queries, index.lookup([Query("t", q, "none") for q in queries]), strict=True):
        assert candidates(f) == brute_force(entries, q, scheme.k)
    assert {c.id for c in index.lookup([Query("t", base, "none")])[0].candidates} == {
        e.id for e in entries[: len(near)]
    }


def test_documents_sharing_a_fingerprint_are_all_candidates_and_spaces_never_meet(
    make_index: MakeIndex,
) -> None:
    index = make_index()
    fp = 0xDEADBEEFCAFEF00D
    add(index, [entry("a", fp), entry("b", fp), entry("c", fp ^ 1)])
    add(index, [entry("v", fp, space="v3"), entry("w", fp ^ 3, space="v3")])
    text, vector, other = index.lookup(
        [Query("t", fp, "none"), Query("v3", fp, "none"), Query("v4", fp, "none")]
    )
    assert candidates(text) == [(0, "a", fp), (0, "b", fp), (1, "c", fp ^ 1)]
    assert candidates(vector) == [(0, "v", fp), (2, "w", fp ^ 3)]
    assert candidates(other) == []
    assert index.lookup([]) == []
    assert index.commit([]).done == 0
    assert index.texts([]) == {}
    assert index.decisions([]) == {}


def test_exact_copies_are_found_by_digest_and_name_the_first(make_index: MakeIndex) -> None:
    index = make_index()
    a, b = entry("a", 1, digest="9" * 32), entry("b", 2**63, digest="9" * 32)
    add(index, [a, b])  # the same token stream twice in one batch: the first one counts
    # later: an exact copy is decided, not indexed (no entry)
    far = 0x7FFFFFFFFFFFFFFE  # 63 bits from both
    copy = Decision("c", "a", far, 0, 1.0, exact=True)
    index.lookup([Query("t", far, a.digest)])
    assert index.commit([Commit(copy, None)]).done == 1
    found = index.lookup(
        [Query("t", 2**40, a.digest), Query("t", 2**40, "8" * 32), Query("t", far, "9" * 31)]
    )
    assert [f.exact for f in found] == ["a", None, None]
    assert index.lookup([Query("t", far, "x" * 32)])[0].candidates == []
    assert index.decisions(["c"])["c"].to_dict() == copy.to_dict()


# ------------------------------------------------------------------- texts and decisions

TEXTS = {
    "ascii": "the quick brown fox jumps over the lazy dog",
    "mixed": "中文 日本語のテキスト straße ﬁ ελληνικά العربية 🙂",
    "empty": "",
    "big": "lorem ipsum dolor sit amet " * 40_000,  # about 1 MB
    "id with: {braces} and spaces": "keys are built from ids",
}


def test_texts_round_trip_and_missing_ids_are_left_out(make_index: MakeIndex) -> None:
    index = make_index()
    add(index, [Entry(i, "t", n * 7919, f"d{n}", t) for n, (i, t) in enumerate(TEXTS.items())])
    assert index.texts([*TEXTS, "missing"]) == TEXTS


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(st.text(st.characters(exclude_categories=["Cs"])), min_size=1, max_size=8))
def test_any_text_round_trips(make_index: MakeIndex, texts: list[str]) -> None:
    index = make_index()
    add(index, [Entry(f"t{n}", "t", n, f"d{n}", t) for n, t in enumerate(texts)])
    assert index.texts([f"t{n}" for n in range(len(texts))]) == {
        f"t{n}": t for n, t in enumerate(texts)
    }


def test_decisions_round_trip(make_index: MakeIndex) -> None:
    index = make_index()
    made = [
        Decision("u", None, 2**64 - 1, features="f1", namespace="ns", detector="0.1.0"),
        Decision("d", "u", 0xABC, 3, 0.8125, features="f1", namespace="ns", detector="0.1.0"),
        Decision("e", "u", 0, 0, 1.0, exact=True, features="f1", namespace="ns"),
        Decision("ünï {c}:ø", "d", 42, 6, 0.9),
    ]
    index.lookup([Query("t", 2**64 - 1, "du"), Query("t", 0xABC, "dd")])
    items = [
        Commit(made[0], entry("u", 2**64 - 1)),
        Commit(made[1], entry("d", 0xABC)),
        Commit(made[2], None),
        Commit(made[3], None),
    ]
    assert index.commit(items).done == 4
    got = index.decisions([d.id for d in made] + ["never"])
    assert set(got) == {d.id for d in made}
    for d in made:
        assert got[d.id].to_dict() == d.to_dict()
        assert got[d.id].decision == d.decision


def test_commit_of_a_decided_id_answers_with_the_stored_decision(make_index: MakeIndex) -> None:
    """Every delivery of a record gets one decision: a second commit for an id already
    decided writes nothing and reports the stored decision."""
    index = make_index()
    first = Decision("a", None, 0x1111, features="f")
    add_first = [Commit(first, entry("a", 0x1111, text="first text"))]
    index.lookup([Query("t", 0x1111, "digest-a")])
    assert index.commit(add_first).done == 1

    other = Decision("a", "z", 0xFFFF0000FFFF0000, 2, 0.9)
    fresh = Decision("b", None, 0x2222)
    index.lookup([Query("t", 0xFFFF0000FFFF0000, "other-digest"), Query("t", 0x2222, "db")])
    committed = index.commit(
        [
            Commit(other, Entry("a", "t", 0xFFFF0000FFFF0000, "other-digest", "second text")),
            Commit(fresh, entry("b", 0x2222)),
        ]
    )
    assert committed.done == 2
    assert set(committed.stored) == {0}
    assert committed.stored[0].to_dict() == first.to_dict()
    assert index.decisions(["a"])["a"].to_dict() == first.to_dict()
    assert index.texts(["a"]) == {"a": "first text"}
    again = index.lookup([Query("t", 0xFFFF0000FFFF0000, "other-digest")])[0]
    assert again.exact is None
    assert candidates(again) == []  # the second entry was not indexed
    assert index.decisions(["b"])["b"].to_dict() == fresh.to_dict()


def test_bind_refuses_another_fingerprint_version(make_index: MakeIndex) -> None:
    index = make_index()
    index.bind("v1")
    index.bind("v1")
    with pytest.raises(ConfigError):
        index.bind("v2")


def test_redis_bind_is_shared_by_every_process_of_an_index(backend: Any) -> None:
    name = unique("index")
    try:
        RedisIndex(backend, SCHEMES[DEFAULT], name).bind("v1")
        RedisIndex(backend, SCHEMES[DEFAULT], name).bind("v1")
        with pytest.raises(ConfigError):
            RedisIndex(backend, SCHEMES[DEFAULT], name).bind("v2")
        with pytest.raises(ConfigError):  # another block scheme cannot read the tables
            RedisIndex(backend, SCHEMES["manku-4"], name).bind("v1")
        with pytest.raises(ConfigError):
            RedisIndex(backend, SCHEMES[DEFAULT], "bad:{name}")
    finally:
        drop_index(backend, name)


# ------------------------------------------------------------------------ the detector


def test_a_detector_over_either_index_decides_the_sample_identically(
    make_index: MakeIndex,
) -> None:
    import gzip

    with gzip.open(SAMPLE, "rb") as f:
        raw = [line.rstrip(b"\n") for line in f if line.strip()]
    reference = decide_in_batches(MemoryIndex(SCHEMES[DEFAULT], "reference"), raw)
    index = make_index(SCHEMES[DEFAULT])
    got = decide_in_batches(index, raw)
    assert [d.id for d in got] == [d.id for d in reference]
    differ = [
        (r.id, verdict(r.to_dict()), verdict(g.to_dict()))
        for r, g in zip(reference, got, strict=True)
        if verdict(r.to_dict()) != verdict(g.to_dict())
    ]
    assert not differ, f"{len(differ)} decisions differ from the memory index's: {differ[:5]}"
    assert sum(d.duplicate_of is not None for d in got) >= 10
    # the sample once more, through the same index: every record gets its decision again
    replayed = decide_in_batches(index, raw)
    assert [d.to_dict() for d in replayed] == [d.to_dict() for d in got]


# ---------------------------------------------------------- Redis: concurrent writers


def two_writers(backend: Any) -> tuple[RedisIndex, RedisIndex, str]:
    name = unique("index")
    a = RedisIndex(backend, SCHEMES[DEFAULT], name)
    b = RedisIndex(backend, SCHEMES[DEFAULT], name)
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
        fp_x = fp_c ^ ((1 << (SCHEMES[DEFAULT].k + 1)) - 1)
        a.lookup([Query("t", fp_c, "dc")])
        b.lookup([Query("t", fp_x, "dx")])
        assert b.commit([Commit(Decision("X", None, fp_x), entry("X", fp_x, digest="dx"))]).done
        assert a.commit([Commit(Decision("C", None, fp_c), entry("C", fp_c, digest="dc"))]).done
    finally:
        drop_index(backend, name)


# ------------------------------------------------------------------ delete, hot buckets


def test_a_deleted_document_is_no_longer_a_candidate_nor_an_exact_copy(
    make_index: MakeIndex,
) -> None:
    index = make_index()
    fp = 0x0123456789ABCDEF
    add(index, [entry("a", fp, digest="da"), entry("b", fp ^ 0b101, digest="db")])
    add(index, [entry("c", fp ^ 0b11, digest="dc")])
    assert index.delete(["a", "nobody", "a"]) == ["a"]
    assert index.delete(["a"]) == []
    found = index.lookup([Query("t", fp, "da"), Query("t", fp, "db")])
    assert [c.id for c in found[0].candidates] == ["b", "c"]
    assert found[0].exact is None
    assert found[1].exact == "b"
    assert index.texts(["a", "b"]) == {"b": "text of b"}
    assert set(index.decisions(["a", "b", "c"])) == {"b", "c"}
    # a record with that id, delivered again, is decided and indexed afresh
    add(index, [entry("a", fp ^ (1 << 63), digest="da2")])
    assert [c.id for c in index.lookup([Query("t", fp, "x")])[0].candidates] == ["a", "b", "c"]


def test_a_hot_bucket_gives_only_its_newest_entries(make_index: MakeIndex) -> None:
    """A flood of variants into the same buckets: a lookup sees the newest max_bucket of
    each bucket, so its work stays bounded however many arrive."""
    scheme = SCHEMES["manku-4"]  # a table per 16-bit block: variants in block 3 share 3
    index = make_index(scheme, max_bucket=4)
    base = 0x1111222233330000
    flips = [x for x in range(1, 1 << 16) if x.bit_count() <= scheme.k][:23]
    flood = [entry(f"v{i:02d}", base ^ x, digest=f"dv{i}") for i, x in enumerate(flips)]
    for at in range(0, len(flood), 5):  # several commits: the buckets are cut back
        add(index, flood[at : at + 5])
    got = [c.id for c in index.lookup([Query("t", base, "none")])[0].candidates]
    newest = {e.id for e in flood[-4:]}
    assert newest <= set(got)
    if isinstance(index, RedisIndex):
        assert set(got) == newest
        sizes = [backend_strlen(index, scheme, base, t) for t in range(3)]
        assert max(sizes) <= 6 * 12, "a bucket grew past 1.5 x max_bucket entries"
    else:
        assert len(got) <= 4 + memory_module.TAIL
    # a fingerprint far from the flood is found as before
    far = entry("far", 0xFEDCBA9876543210)
    add(index, [far])
    assert [c.id for c in index.lookup([Query("t", far.fingerprint, "x")])[0].candidates] == ["far"]


def backend_strlen(index: RedisIndex, scheme: BlockScheme, fp: int, table: int) -> int:
    key = index._bucket("t", table, scheme.keys([fp])[0][table])
    return int(index.client.strlen(key))


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
        assert all(backend_strlen(b, b.scheme, fp, t) == 12 for t in range(len(b.scheme.tables)))
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
    import gzip

    with gzip.open(SAMPLE, "rb") as f:
        raw = [line.rstrip(b"\n") for line in f if line.strip()]
    source, copy = unique("index"), unique("index")
    try:
        a = RedisIndex(backend, SCHEMES[DEFAULT], source)
        decide_in_batches(a, raw[:250])
        exported = list(a.documents())
        assert len(exported) == 250
        indexed = [r for r in exported if "text" in r]
        assert 200 < len(indexed) < 250
        b = RedisIndex(backend, SCHEMES[DEFAULT], copy)
        b.bind(EngineSettings().engine().version)
        assert b.restore(iter(exported)) == 250
        with pytest.raises(ConfigError):
            b.restore(iter(exported))  # only into an empty index

        def by_id(records: list[dict[str, Any]]) -> dict[str, Any]:
            return {r["decision"]["id"]: r for r in records}

        assert by_id(list(b.documents())) == by_id(exported)
        later_a = decide_in_batches(a, raw[250:])
        later_b = decide_in_batches(b, raw[250:])
        assert [verdict(d.to_dict()) for d in later_a] == [verdict(d.to_dict()) for d in later_b]
        assert sum(d.duplicate_of is not None for d in later_b) >= 3
    finally:
        drop_index(backend, source)
        drop_index(backend, copy)
