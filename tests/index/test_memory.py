"""detector.index.memory: the index contract (contract.py), with the unsorted tail merged at
once, after 3 fingerprints and at its default size; then what only the memory index has:
its tail, and commits with no lookup before them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector.blocks import BlockScheme
from detector.index import DEFAULT_MAX_BUCKET, Commit, Entry, Index, Query
from detector.index import memory as memory_module
from detector.index.memory import MemoryIndex
from detector.records import Decision

from ..helpers import ALL_SPECS, PROBE_SPECS, SCHEMES, adversarial_flips, flip
from .contract import DEFAULT, LOW_BLOCK_FLIPS, MANKU_4, IndexContract, MakeIndex

# The memory index keeps recent fingerprints in an unsorted tail that it scans by brute
# force, and merges them into the block tables when the tail reaches TAIL entries. With
# the default (4096) the contract's small examples would never reach the tables: it runs
# with the tail at 1 (every fingerprint merged at once) and 3 (tables plus a tail) too.
TAILS = [1, 3, None]


@pytest.fixture(params=TAILS, ids=["tail1", "tail3", "tail-default"])
def make_index(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> MakeIndex:
    """A factory of fresh, empty memory indexes, with TAIL patched as the param says."""
    if request.param is not None:
        monkeypatch.setattr(memory_module, "TAIL", request.param)
    if request.param == 3:  # and tables read through their key offsets, however small
        monkeypatch.setattr(memory_module, "DIRECT_ROWS", 0)

    def make(
        scheme: BlockScheme = DEFAULT,
        max_bucket: int = DEFAULT_MAX_BUCKET,
        vectors: BlockScheme | None = None,
        text_window: int | None = None,
    ) -> Index:
        return MemoryIndex(
            scheme, "contract", max_bucket=max_bucket, vectors=vectors, text_window=text_window
        )

    return make


@pytest.fixture
def unmerged(make_index: MakeIndex) -> int:
    """The tail holds fewer than TAIL fingerprints after a commit, and is scanned whole."""
    return memory_module.TAIL - 1


@pytest.fixture(params=ALL_SPECS + PROBE_SPECS)
def scheme(request: pytest.FixtureRequest) -> BlockScheme:
    """Every block scheme offered, and the multi-probe ones."""
    return SCHEMES[request.param]


class TestMemoryIndex(IndexContract):
    """The index contract, over the memory index."""


# ------------------------------------------------------------------ the unsorted tail


def commit(index: MemoryIndex, entries: list[Entry]) -> None:
    """Index entries with a commit alone, no lookup before it: the memory index has no
    other writer to conflict with."""
    committed = index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in entries])
    assert committed.done == len(entries)


def brute_force(stored: list[int], query: int, k: int) -> dict[int, int]:
    return {fp: (fp ^ query).bit_count() for fp in stored if (fp ^ query).bit_count() <= k}


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
    commit(index, [Entry(f"s{i}", "t", fp, f"d{i}", "") for i, fp in enumerate(stored)])
    queries = [base, *variants[:4], *filler[:3]]
    for q, f in zip(queries, index.lookup([Query("t", q, "none") for q in queries]), strict=True):
        assert {c.fingerprint: c.distance for c in f.candidates} == brute_force(stored, q, scheme.k)


@pytest.mark.parametrize("shared", [True, False], ids=["one-fingerprint", "variants"])
@settings(max_examples=20)
@given(count=st.integers(1, 40), cap=st.integers(1, 8))
def test_the_tail_caps_a_fingerprint_and_is_scanned_whole(
    shared: bool, count: int, cap: int
) -> None:
    """Unmerged, a fingerprint still contributes its newest `max_bucket` documents, but
    the variants of a hot bucket are all found: the tail is scanned whole."""
    assert count < memory_module.TAIL  # the default: nothing below is merged
    base = 0x1111222233330000
    index = MemoryIndex(MANKU_4, max_bucket=cap)
    docs = [
        Entry(f"d{i:02d}", "t", base if shared else base ^ x, f"g{i}", "")
        for i, x in enumerate(LOW_BLOCK_FLIPS[:count])
    ]
    commit(index, docs)
    got = {c.id for c in index.lookup([Query("t", base, "x")])[0].candidates}
    if shared:
        assert got == {e.id for e in docs[-cap:]}
    else:
        assert got == {e.id for e in docs}


# -------------------------------------------------------------------- memory only


def test_entries_past_a_buckets_cap_are_counted_once_merged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """23 variants of one fingerprint share its key in three of MANKU_4's tables: once
    merged, 19 of each of those three runs are past a cap of 4 and never read (the
    fourth table, keyed by the block they differ in, keeps them apart)."""
    base = 0x1111222233330000
    index = MemoryIndex(MANKU_4, max_bucket=4)
    docs = [
        Entry(f"d{i:02d}", "t", base ^ x, f"g{i}", "") for i, x in enumerate(LOW_BLOCK_FLIPS[:23])
    ]
    commit(index, docs)
    assert index.evicted == 0 and index.stats()["evicted"] == 0  # the tail is read whole
    monkeypatch.setattr(memory_module, "TAIL", 1)
    commit(index, [Entry("far", "t", 0xFEDCBA9876543210, "gfar", "")])  # merges
    assert index.evicted == index.stats()["evicted"] == 3 * 19


def test_texts_round_trip_compressed_or_not() -> None:
    for compress in (True, False):
        index = MemoryIndex(BlockScheme.parse("k3-b4"), compress=compress)
        texts = {"a": "hello world", "b": "中文 日本語のテキスト straße ﬁ", "c": ""}
        commit(index, [Entry(i, "t", n, f"d{i}", t) for n, (i, t) in enumerate(texts.items())])
        assert index.texts(["a", "b", "c", "zz"]) == texts
        assert index.stats()["documents"] == 3


def test_a_commit_with_no_lookup_keeps_the_first_decision() -> None:
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
