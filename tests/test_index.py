"""detector.index.memory: lookups against brute force, for every block scheme offered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index import Commit, Entry, Query
from detector.index import memory as memory_module
from detector.index.memory import MemoryIndex
from detector.records import Decision

from .test_blocks import ALL_SPECS, PROBE_SPECS, SCHEMES, adversarial_flips, flip

u64 = st.integers(min_value=0, max_value=2**64 - 1)


@st.composite
def clustered(draw: st.DrawFn, k: int, max_size: int = 40) -> list[int]:
    """Random base fingerprints, each with variants at 0..k+2 flipped bits, plus loners:
    near pairs (within k and just beyond it) occur in every example."""
    out: list[int] = []
    for base in draw(st.lists(u64, min_size=1, max_size=5)):
        out.append(base)
        for flips in draw(st.lists(st.integers(0, k + 2), max_size=8)):
            positions = draw(
                st.lists(st.integers(0, 63), min_size=flips, max_size=flips, unique=True)
            )
            v = base
            for p in positions:
                v ^= 1 << p
            out.append(v)
    out += draw(st.lists(u64, max_size=5))
    return out[:max_size]


# The memory index keeps recent fingerprints in an unsorted tail that it scans by brute
# force, and merges them into the block tables when the tail reaches TAIL entries. With
# the default (4096) the small examples below would never reach the tables: the tests run
# with the tail at 1 (every fingerprint merged at once) and 3 (tables plus a tail) too.
TAILS = [1, 3, None]


@contextmanager
def _patched(tail: int | None) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if tail is not None:
            mp.setattr(memory_module, "TAIL", tail)
        yield


def add(index: MemoryIndex, entries: list[Entry]) -> None:
    """Index entries through the interface the pipeline uses: commit."""
    committed = index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in entries])
    assert committed.done == len(entries)


def brute_force(stored: list[int], query: int, k: int) -> dict[int, int]:
    return {fp: (fp ^ query).bit_count() for fp in stored if (fp ^ query).bit_count() <= k}


@pytest.mark.parametrize("tail", TAILS, ids=["tail1", "tail3", "tail-default"])
@pytest.mark.parametrize("spec", ALL_SPECS + PROBE_SPECS)
@settings(max_examples=25)
@given(data=st.data())
def test_lookup_returns_exactly_the_fingerprints_within_k(
    spec: str, tail: int | None, data: st.DataObject
) -> None:
    scheme = SCHEMES[spec]
    k = scheme.k
    stored = data.draw(clustered(k), label="stored")
    queries = data.draw(clustered(k, max_size=20), label="queries")
    # Queries also include the stored ones themselves and near variants of them.
    queries += stored[:5]
    entries = [Entry(f"id{i}", "t", fp, f"digest{i}", f"text {i}") for i, fp in enumerate(stored)]
    with _patched(tail):
        index = MemoryIndex(scheme)
        # Two commits: the tables must hold across them, not only within one.
        add(index, entries[: len(entries) // 2])
        add(index, entries[len(entries) // 2 :])
        found = index.lookup([Query("t", q, "no such digest") for q in queries])
    assert len(found) == len(queries)
    for q, f in zip(queries, found, strict=True):
        expected = brute_force(stored, q, k)
        got = {c.fingerprint: c.distance for c in f.candidates}
        assert got == expected, f"query {q:016x}, k={k}, scheme {spec}"
        # Every document of a fingerprint within k is a candidate, each once.
        expected_ids = {e.id for e in entries if e.fingerprint in expected}
        assert sorted(c.id for c in f.candidates) == sorted(expected_ids)
        by_id = {e.id: e.fingerprint for e in entries}
        assert all(by_id[c.id] == c.fingerprint for c in f.candidates)
        assert [(c.distance, c.id) for c in f.candidates] == sorted(
            (c.distance, c.id) for c in f.candidates
        ), "candidates must be nearest first"
        assert f.exact is None


@pytest.mark.parametrize("spec", ALL_SPECS)
@settings(max_examples=4)
@given(base=u64)
def test_lookup_finds_pairs_that_only_one_table_can_find(spec: str, base: int) -> None:
    """Variants of a base that share a key with it in as few tables as possible (one per
    table of the scheme), plus each of them one bit further away (beyond k or not)."""
    scheme = SCHEMES[spec]
    variants = [flip(base, positions) for positions in adversarial_flips(scheme)]
    variants += [v ^ (1 << (i % 64)) for i, v in enumerate(variants)]
    with _patched(1):
        index = MemoryIndex(scheme)
        add(index, [Entry(f"v{i}", "t", v, f"d{i}", "") for i, v in enumerate(variants)])
        queries = [base, *variants[:3]]
        found = index.lookup([Query("t", q, "none") for q in queries])
    for query, f in zip(queries, found, strict=True):
        got = {c.fingerprint: c.distance for c in f.candidates}
        assert got == brute_force(variants, query, scheme.k)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_lookup_after_the_default_tail_is_merged(spec: str) -> None:
    """No patching: enough fingerprints (5,000 random ones) to fill the default tail and
    merge it into the block tables, then clustered and adversarial variants on top."""
    scheme = SCHEMES[spec]
    rng = np.random.default_rng(11)
    base = int(rng.integers(0, 2**63)) * 2 + 1
    variants = [flip(base, positions) for positions in adversarial_flips(scheme)]
    filler = [int(x) for x in rng.integers(0, 2**63, 5000, dtype=np.uint64) * 2]
    stored = variants + filler
    index = MemoryIndex(scheme)
    add(index, [Entry(f"s{i}", "t", fp, f"d{i}", "") for i, fp in enumerate(stored)])
    queries = [base, *variants[:4], *filler[:3]]
    for q, f in zip(queries, index.lookup([Query("t", q, "none") for q in queries]), strict=True):
        assert {c.fingerprint: c.distance for c in f.candidates} == brute_force(stored, q, scheme.k)


@pytest.mark.parametrize("spec", ["k3-b4", "k6-b8", "k0-b1"])
@given(data=st.data())
def test_spaces_never_meet(spec: str, data: st.DataObject) -> None:
    """Text fingerprints and vector fingerprints of each dimension are separate spaces."""
    scheme = SCHEMES[spec]
    stored = data.draw(clustered(scheme.k, max_size=20))
    with _patched(1):
        index = MemoryIndex(scheme)
        add(index, [Entry(f"t{i}", "t", fp, f"d{i}", "") for i, fp in enumerate(stored)])
        found = index.lookup([Query("v8", fp, "x") for fp in stored])
        assert all(f.candidates == [] for f in found)
        add(index, [Entry(f"v{i}", "v8", fp, f"e{i}", "") for i, fp in enumerate(stored)])
        found = index.lookup([Query("v8", fp, "x") for fp in stored])
    assert all(c.id.startswith("v") for f in found for c in f.candidates)
    assert all(f.candidates for f in found)


def test_exact_copy_is_found_by_digest_and_names_the_first() -> None:
    index = MemoryIndex(BlockScheme.parse("manku-4"))
    add(index, [Entry("a", "t", 1, "D", "x"), Entry("b", "t", 2**63, "D", "x")])
    found = index.lookup([Query("t", 2**40, "D"), Query("t", 2**40, "E")])
    assert found[0].exact == "a"
    assert found[1].exact is None


def test_texts_round_trip_and_missing_ids_are_left_out() -> None:
    for compress in (True, False):
        index = MemoryIndex(BlockScheme.parse("k3-b4"), compress=compress)
        texts = {"a": "hello world", "b": "中文 日本語のテキスト straße ﬁ", "c": ""}
        add(index, [Entry(i, "t", n, f"d{i}", t) for n, (i, t) in enumerate(texts.items())])
        assert index.texts(["a", "b", "c", "zz"]) == texts
        assert index.stats()["documents"] == 3


def test_bind_refuses_another_fingerprint_version() -> None:
    index = MemoryIndex(BlockScheme.parse("k3-b4"), namespace="ns")
    index.bind("v1")
    index.bind("v1")
    with pytest.raises(ConfigError):
        index.bind("v2")


def test_committed_decisions_keep_the_first() -> None:
    """A second decision for an id already decided is not stored; the commit answers
    with the stored one (every delivery of a record gets one decision)."""
    index = MemoryIndex(BlockScheme.parse("k3-b4"))
    first = Decision("a", None, 5)
    assert index.commit([Commit(first, Entry("a", "t", 5, "d", "x"))]).done == 1
    again = Decision("a", "z", 6)
    committed = index.commit([Commit(again, Entry("a", "t", 6, "e", "y"))])
    assert committed.done == 1
    assert committed.stored == {0: first}
    assert index.decisions(["a", "b"]) == {"a": first}
    assert index.texts(["a"]) == {"a": "x"}


def test_empty_lookup_and_commit() -> None:
    index = MemoryIndex(BlockScheme.parse("k3-b4"))
    assert index.lookup([]) == []
    assert index.commit([]).done == 0
    assert index.lookup([Query("t", 0, "d")])[0].candidates == []


@pytest.mark.parametrize("tail", [1, None], ids=["merged", "tail-default"])
@pytest.mark.parametrize("shared", [True, False], ids=["one-fingerprint", "variants"])
@settings(max_examples=20)
@given(count=st.integers(1, 40), cap=st.integers(1, 8))
def test_a_bucket_gives_its_newest_entries_only(
    tail: int | None, shared: bool, count: int, cap: int
) -> None:
    """Merged into the tables, a key contributes its newest `max_bucket` fingerprints and
    a fingerprint its newest `max_bucket` documents; the unmerged tail is scanned whole."""
    scheme = BlockScheme.parse("manku-4")  # variants in the last block share 3 tables
    base = 0x1111222233330000
    flips = [x for x in range(1, 1 << 16) if x.bit_count() <= scheme.k][:count]
    with _patched(tail):
        index = MemoryIndex(scheme, max_bucket=cap)
        docs = [
            Entry(f"d{i:02d}", "t", base if shared else base ^ x, f"g{i}", "")
            for i, x in enumerate(flips)
        ]
        add(index, docs)
        got = {c.id for c in index.lookup([Query("t", base, "x")])[0].candidates}
    if tail == 1 or shared:
        assert got == {e.id for e in docs[-cap:]}
    else:  # all still in the tail
        assert got == {e.id for e in docs}


def test_a_deleted_document_is_no_candidate_no_exact_copy_no_decision() -> None:
    with _patched(1):
        index = MemoryIndex(BlockScheme.parse("manku-4"))
        add(index, [Entry("a", "t", 1, "D", "x"), Entry("b", "t", 3, "E", "y")])
        assert index.delete(["a", "zz"]) == ["a"]
        found = index.lookup([Query("t", 1, "D")])[0]
    assert found.exact is None
    assert [c.id for c in found.candidates] == ["b"]
    assert index.texts(["a", "b"]) == {"b": "y"}
    assert index.decisions(["a"]) == {}
    assert index.delete(["a"]) == []
