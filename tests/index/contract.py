"""The index contract: what every implementation of detector.index.Index must answer, written
once. pytest does not collect this module; a suite runs it by subclassing IndexContract
in a test module that provides three fixtures:

  make_index  a factory of fresh, empty indexes: make_index(scheme=DEFAULT, max_bucket=...,
              vectors=None, text_window=None), vectors: the scheme of vector spaces (None:
              the default), text_window: the newest texts with a sketch that keep their text
  scheme      the BlockScheme of the lookup tests (parametrize it over what to check)
  unmerged    how many entries a lookup may read beyond a bucket's newest max_bucket (the
              memory index's unsorted tail, which is scanned whole); 0 for Redis

tests/index/test_memory.py runs it over the memory index, tests/integration/
test_redis_index.py over the Redis server and the Redis Cluster. Whatever one answers the
others must answer too; a Detector over any of them decides the sample alike.

make_index is a function-scoped fixture on purpose in the hypothesis tests: one factory
for every example, and each example makes its own fresh index with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index import Commit, Entry, Found, Index, Query
from detector.index.memory import MemoryIndex
from detector.index.texts import SAMPLE_TEXTS
from detector.records import Decision
from detector.settings import EngineSettings
from detector.sketch import SketchShape, sketches
from detector.vectors import default_vector_scheme, pack, units

from ..helpers import (
    SAMPLE,
    adversarial_flips,
    decide_in_batches,
    flip,
    read_lines,
    stream_texts,
    verdict,
)
from ..strategies import clustered, u64

DEFAULT = EngineSettings().block_scheme()  # what serve and detect use
MANKU_4 = BlockScheme.parse("manku-4")  # a table per 16-bit block
MakeIndex = Callable[..., Index]
Near = tuple[int, str, int]  # distance, id, fingerprint


def fixtured(max_examples: int | None = None) -> settings:
    """Hypothesis settings for a test that takes make_index (see the module docstring);
    without max_examples, the profile's (tests/conftest.py)."""
    checks = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
    if max_examples is None:
        return settings(deadline=None, suppress_health_check=checks)
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=checks)


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


# Variants of a fingerprint in its lowest 16-bit block: under manku-4 they share the keys
# of the other three tables with it, and each other.
LOW_BLOCK_FLIPS = [x for x in range(1, 1 << 16) if x.bit_count() <= MANKU_4.k][:40]

TEXTS = {
    "ascii": "the quick brown fox jumps over the lazy dog",
    "mixed": "中文 日本語のテキスト straße ﬁ ελληνικά العربية 🙂",
    "empty": "",
    "big": "lorem ipsum dolor sit amet " * 40_000,  # about 1 MB
    "id with: {braces} and spaces": "keys are built from ids",
}


class IndexContract:
    """The tests every index must pass (not collected: its name does not start with Test)."""

    # -------------------------------------------------------------------------- lookup

    @fixtured(max_examples=25)
    @given(data=st.data())
    def test_lookup_returns_exactly_the_fingerprints_within_k(
        self, make_index: MakeIndex, scheme: BlockScheme, data: st.DataObject
    ) -> None:
        stored = data.draw(clustered(scheme.k), label="stored")
        # the queries include stored fingerprints themselves and near variants of them
        queries = data.draw(clustered(scheme.k, max_size=20), label="queries") + stored[:5]
        entries = [entry(f"s{i:02d}", fp) for i, fp in enumerate(stored)]
        # In a few commits, each after its lookup, as consecutive batches would be (or all
        # in one); and when that was one commit, once more into another index in two
        # halves: the tables must hold across commits, not only within one.
        drawn = data.draw(st.lists(st.integers(0, len(entries)), max_size=2), label="cuts")
        splits = [sorted(drawn)]
        if not any(0 < cut < len(entries) for cut in drawn):
            splits.append([len(entries) // 2])
        for cuts in splits:
            index = make_index(scheme)
            for lo, hi in pairwise([0, *cuts, len(entries)]):
                if hi > lo:
                    add(index, entries[lo:hi])
            found = index.lookup([Query("t", q, "no such digest") for q in queries])
            assert len(found) == len(queries)
            for q, f in zip(queries, found, strict=True):
                assert f.exact is None
                # every document of a fingerprint within k, each once, with its fingerprint
                # and distance, nearest first (then by id)
                assert candidates(f) == brute_force(entries, q, scheme.k), (
                    f"query {q:016x}, scheme {scheme.name}, commits cut at {cuts}"
                )

    @fixtured(max_examples=20)
    @given(data=st.data())
    def test_a_wider_query_finds_what_its_probes_reach_within_its_k(
        self, make_index: MakeIndex, scheme: BlockScheme, data: st.DataObject
    ) -> None:
        """A short text's query, its k past the scheme's (detector.radius): every candidate
        is within that k, and every stored fingerprint within it that some table's key
        holds within one probe bit more than the scheme's is a candidate."""
        k = data.draw(st.integers(scheme.k + 1, scheme.k + 5), label="k")
        stored = data.draw(clustered(k), label="stored")
        queries = data.draw(clustered(k, max_size=10), label="queries") + stored[:3]
        entries = [entry(f"s{i:02d}", fp) for i, fp in enumerate(stored)]
        index = make_index(scheme)
        add(index, entries)
        wide = scheme.widened(k)
        found = index.lookup([Query("t", q, "no such digest", k) for q in queries])
        for q, f in zip(queries, found, strict=True):
            got, within = candidates(f), brute_force(entries, q, k)
            assert set(got) <= set(within) and got == sorted(got)
            reached = [n for n in within if wide.reaches(q, n[2])]
            assert set(reached) <= set(got), f"query {q:016x}, {wide.name} to k {k}"

    @pytest.mark.parametrize("base", [0, 2**64 - 1, 0x0123456789ABCDEF, 0xF0F0F0F00F0F0F0F])
    def test_lookup_finds_pairs_that_only_one_table_can_find(
        self, make_index: MakeIndex, scheme: BlockScheme, base: int
    ) -> None:
        """At distance exactly k, found by a single table; one bit further, by none."""
        index = make_index(scheme)
        near = one_table_variants(scheme, base)
        assert all((v ^ base).bit_count() == scheme.k for v in near)
        far = [v ^ (1 << next(b for b in range(64) if not (v ^ base) >> b & 1)) for v in near]
        entries = [entry(f"n{i:03d}", v) for i, v in enumerate(near)]
        entries += [entry(f"f{i:03d}", v) for i, v in enumerate(far)]
        add(index, entries)
        queries = [base, *near[:3], *far[:3]]
        found = index.lookup([Query("t", q, "none") for q in queries])
        for q, f in zip(queries, found, strict=True):
            assert candidates(f) == brute_force(entries, q, scheme.k)
        assert {c.id for c in index.lookup([Query("t", base, "none")])[0].candidates} == {
            e.id for e in entries[: len(near)]
        }

    @fixtured(max_examples=4)
    @given(base=u64)
    def test_lookup_finds_the_pairs_each_table_alone_shares_a_key_with(
        self, make_index: MakeIndex, scheme: BlockScheme, base: int
    ) -> None:
        """Variants of a base that share a key with it in as few tables as possible (the
        greedy construction of test_blocks, one per table of the scheme), plus each of them
        one bit further away (beyond k or not)."""
        variants = [flip(base, positions) for positions in adversarial_flips(scheme)]
        variants += [v ^ (1 << (i % 64)) for i, v in enumerate(variants)]
        index = make_index(scheme)
        entries = [entry(f"v{i:03d}", v, digest=f"d{i}") for i, v in enumerate(variants)]
        add(index, entries)
        queries = [base, *variants[:3]]
        found = index.lookup([Query("t", q, "none") for q in queries])
        for q, f in zip(queries, found, strict=True):
            assert candidates(f) == brute_force(entries, q, scheme.k), f"query {q:016x}"

    def test_documents_sharing_a_fingerprint_are_all_candidates_and_spaces_never_meet(
        self, make_index: MakeIndex
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

    @pytest.mark.parametrize("spec", ["k3-b4", "k6-b8", "k0-b1"])
    @fixtured()
    @given(data=st.data())
    def test_spaces_never_meet(self, make_index: MakeIndex, spec: str, data: st.DataObject) -> None:
        """Text fingerprints and vector fingerprints of each dimension are separate spaces."""
        scheme = BlockScheme.parse(spec)
        stored = data.draw(clustered(scheme.k, max_size=20))
        index = make_index(scheme, vectors=scheme)
        add(index, [entry(f"t{i}", fp, digest=f"d{i}") for i, fp in enumerate(stored)])
        found = index.lookup([Query("v8", fp, "x") for fp in stored])
        assert all(f.candidates == [] for f in found)
        vectors = [entry(f"v{i}", fp, digest=f"e{i}", space="v8") for i, fp in enumerate(stored)]
        add(index, vectors)
        found = index.lookup([Query("v8", fp, "x") for fp in stored])
        assert all(c.id.startswith("v") for f in found for c in f.candidates)
        assert all(f.candidates for f in found)
        for fp, f in zip(stored, found, strict=True):
            assert candidates(f) == brute_force(vectors, fp, scheme.k, space="v8")

    @fixtured(max_examples=10)
    @given(data=st.data())
    def test_vector_spaces_have_their_own_tables(
        self, make_index: MakeIndex, data: st.DataObject
    ) -> None:
        """Text within the text scheme's k, vectors within the vector scheme's (wider)."""
        text, vectors = MANKU_4, default_vector_scheme()
        stored = data.draw(clustered(vectors.k, max_size=30))
        index = make_index(text, vectors=vectors)
        entries = [entry(f"t{i}", fp) for i, fp in enumerate(stored)]
        entries += [entry(f"v{i}", fp, space="v3") for i, fp in enumerate(stored)]
        add(index, entries)
        found = index.lookup([Query(s, fp, "x") for s in ("t", "v3") for fp in stored])
        for (s, fp), f in zip([(s, fp) for s in ("t", "v3") for fp in stored], found, strict=True):
            k = vectors.k if s == "v3" else text.k
            assert candidates(f) == brute_force(entries, fp, k, space=s)

    def test_vectors_are_kept_instead_of_texts_and_forgotten_with_them(
        self, make_index: MakeIndex
    ) -> None:
        index = make_index()
        rng = np.random.default_rng(3)
        unit = units(rng.standard_normal((3, 384)))
        entries = [
            Entry(f"v{i}", "v384", i, f"vd{i}", "", pack(v, form))
            for i, (v, form) in enumerate(zip(unit, ("int8", "float16", "int8"), strict=True))
        ]
        add(index, entries)
        got = index.vectors(["v0", "v1", "v2", "nope"])
        assert sorted(got) == ["v0", "v1", "v2"]
        for i, v in enumerate(unit):
            assert got[f"v{i}"].dtype == np.float32
            assert abs(float(np.linalg.norm(got[f"v{i}"])) - 1) < 1e-5
            assert float(got[f"v{i}"] @ v) > 0.9999
        assert index.texts(["v0", "v1"]) == {}  # a vector, not a text, is what is kept
        assert index.delete(["v1"]) == ["v1"]
        assert sorted(index.vectors(["v0", "v1", "v2"])) == ["v0", "v2"]
        (found,) = index.lookup([Query("v384", 1, "vd1")])
        assert found.exact is None and {c.id for c in found.candidates} == {"v0", "v2"}

    def test_an_empty_index_answers_empty(self, make_index: MakeIndex) -> None:
        index = make_index()
        assert index.lookup([]) == []
        assert index.commit([]).done == 0
        (found,) = index.lookup([Query("t", 0, "d")])
        assert found.candidates == [] and found.exact is None
        assert index.texts(["a"]) == {}
        assert index.decisions(["a"]) == {}

    @pytest.mark.parametrize("spec", [DEFAULT.name, MANKU_4.name])
    def test_exact_copies_are_found_by_digest_and_name_the_first(
        self, make_index: MakeIndex, spec: str
    ) -> None:
        index = make_index(BlockScheme.parse(spec))
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

    # -------------------------------------------------------------- texts and decisions

    def test_texts_round_trip_and_missing_ids_are_left_out(self, make_index: MakeIndex) -> None:
        index = make_index()
        add(index, [Entry(i, "t", n * 7919, f"d{n}", t) for n, (i, t) in enumerate(TEXTS.items())])
        assert index.texts([*TEXTS, "missing"]) == TEXTS
        assert index.stats()["documents"] == len(TEXTS)

    @fixtured(max_examples=10)
    @given(
        texts=st.lists(st.text(st.characters(exclude_categories=["Cs"])), min_size=1, max_size=8)
    )
    def test_any_text_round_trips(self, make_index: MakeIndex, texts: list[str]) -> None:
        index = make_index()
        add(index, [Entry(f"t{n}", "t", n, f"d{n}", t) for n, t in enumerate(texts)])
        assert index.texts([f"t{n}" for n in range(len(texts))]) == {
            f"t{n}": t for n, t in enumerate(texts)
        }

    def test_the_text_dictionary_is_made_once_the_index_wrote_its_sample(
        self, make_index: MakeIndex
    ) -> None:
        """The texts are packed with a dictionary trained on the first SAMPLE_TEXTS
        texts the index writes (vectors keep no text: they do not count), made then and
        once; every text reads back exactly, before it, at it and after it."""
        index = make_index()
        rng = np.random.default_rng(5)
        vectors = [
            Entry(f"v{i}", "v384", i, f"vd{i}", "", pack(v, "int8"))
            for i, v in enumerate(units(rng.standard_normal((3, 384))))
        ]
        add(index, vectors)
        texts = stream_texts()[: SAMPLE_TEXTS + 40]
        entries = [
            Entry(f"s{n}", "t", (n * 0x9E3779B97F4A7C15) % 2**64, f"d{n}", t)
            for n, t in enumerate(texts)
        ]
        for lo, hi in pairwise([0, 500, SAMPLE_TEXTS - 1]):
            add(index, entries[lo:hi])
        assert index.stats()["text_dictionary"] == 0
        add(index, entries[SAMPLE_TEXTS - 1 : SAMPLE_TEXTS])
        made = index.stats()["text_dictionary"]
        assert made != 0
        add(index, entries[SAMPLE_TEXTS:])
        assert index.stats()["text_dictionary"] == made
        assert index.texts([e.id for e in entries]) == {e.id: e.text for e in entries}
        assert sorted(index.vectors([v.id for v in vectors])) == ["v0", "v1", "v2"]

    def test_decisions_round_trip(self, make_index: MakeIndex) -> None:
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

    def test_commit_of_a_decided_id_answers_with_the_stored_decision(
        self, make_index: MakeIndex
    ) -> None:
        """Every delivery of a record gets one decision: a second commit for an id already
        decided writes nothing and reports the stored decision."""
        index = make_index()
        first = Decision("a", None, 0x1111, features="f")
        add_first = [Commit(first, entry("a", 0x1111, text="first text"))]
        index.lookup([Query("t", 0x1111, "digest-a")])
        assert index.commit(add_first).done == 1
        assert index.decisions(["a", "b"]) == {"a": first}

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
        assert committed.stored == {0: first}
        assert committed.stored[0].to_dict() == first.to_dict()
        assert index.decisions(["a"])["a"].to_dict() == first.to_dict()
        assert index.texts(["a"]) == {"a": "first text"}
        again = index.lookup([Query("t", 0xFFFF0000FFFF0000, "other-digest")])[0]
        assert again.exact is None
        assert candidates(again) == []  # the second entry was not indexed
        assert index.decisions(["b"])["b"].to_dict() == fresh.to_dict()

    def test_bind_refuses_another_fingerprint_version(self, make_index: MakeIndex) -> None:
        index = make_index()
        index.bind("v1")
        index.bind("v1")
        with pytest.raises(ConfigError):
            index.bind("v2")

    # -------------------------------------------------------------- delete, hot buckets

    @pytest.mark.parametrize("spec", [DEFAULT.name, MANKU_4.name])
    def test_a_deleted_document_is_no_candidate_no_exact_copy_no_decision(
        self, make_index: MakeIndex, spec: str
    ) -> None:
        index = make_index(BlockScheme.parse(spec))
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
        assert index.decisions(["a"]) == {}
        assert set(index.decisions(["a", "b", "c"])) == {"b", "c"}
        # a record with that id, delivered again, is decided and indexed afresh
        add(index, [entry("a", fp ^ (1 << 63), digest="da2")])
        assert [c.id for c in index.lookup([Query("t", fp, "x")])[0].candidates] == [
            "a",
            "b",
            "c",
        ]

    @pytest.mark.parametrize("shared", [True, False], ids=["one-fingerprint", "variants"])
    @fixtured(max_examples=20)
    @given(
        count=st.integers(1, len(LOW_BLOCK_FLIPS)),
        cap=st.integers(1, 8),
        batch=st.sampled_from([1, 5, len(LOW_BLOCK_FLIPS)]),
    )
    @example(count=23, cap=4, batch=5)
    def test_a_hot_bucket_gives_only_its_newest_entries(
        self,
        make_index: MakeIndex,
        unmerged: int,
        shared: bool,
        count: int,
        cap: int,
        batch: int,
    ) -> None:
        """A flood into the same buckets: a lookup sees the newest max_bucket entries of
        each bucket (a fingerprint, its newest max_bucket documents), so its work stays
        bounded however many arrive."""
        index = make_index(MANKU_4, max_bucket=cap)
        base = 0x1111222233330000
        flood = [
            entry(f"v{i:02d}", base if shared else base ^ x, digest=f"dv{i}")
            for i, x in enumerate(LOW_BLOCK_FLIPS[:count])
        ]
        for at in range(0, len(flood), batch):  # in one commit or several
            add(index, flood[at : at + batch])
        got = [c.id for c in index.lookup([Query("t", base, "none")])[0].candidates]
        assert len(got) == len(set(got)), "a candidate twice"
        newest = {e.id for e in flood[-cap:]}
        assert newest <= set(got) <= {e.id for e in flood}
        assert len(got) <= cap + (0 if shared else unmerged), got
        # a fingerprint far from the flood is found as before
        far = entry("far", 0xFEDCBA9876543210)
        add(index, [far])
        found = index.lookup([Query("t", far.fingerprint, "x")])[0]
        assert [c.id for c in found.candidates] == ["far"]

    # --------------------------------------------------------------------- the detector

    @pytest.fixture(scope="class")
    @classmethod
    def sample_reference(cls) -> list[Decision]:
        """The sample decided over a memory index with its default settings (class-scoped:
        made before any function-scoped fixture patches the memory index)."""
        return decide_in_batches(MemoryIndex(DEFAULT, "reference"), read_lines(SAMPLE))

    def test_a_detector_over_the_index_decides_the_sample_like_the_memory_index(
        self, make_index: MakeIndex, sample_reference: list[Decision]
    ) -> None:
        raw = read_lines(SAMPLE)
        reference = sample_reference
        index = make_index(DEFAULT)
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

    # ------------------------------------------------------------- the window of texts

    def test_a_window_keeps_the_newest_texts_and_every_sketch(self, make_index: MakeIndex) -> None:
        """With --text-window 20, the newest 20 texts written with a sketch keep their
        text (give or take the batch that crossed the window, on Redis, which trims as it
        writes), the oldest lose it first, and every document keeps its sketch, bit for
        bit; a text without a sketch (a short one) is kept whatever its age. A deleted
        document's sketch goes with it."""
        index = make_index(text_window=20)
        shape = SketchShape()
        texts = [f"document {n} " + " ".join(f"w{n}x{j}" for j in range(80)) for n in range(100)]
        made = sketches([np.arange(n, n + 90, dtype=np.uint64) for n in range(100)], shape)
        entries = [
            replace(entry(f"d{n}", n * 0x9E3779B97F4A7C15 % 2**64, text=texts[n]), sketch=made[n])
            for n in range(100)
        ]
        short = entry("short", 12345, text="a short text")
        add(index, [short])
        for at in range(0, 100, 5):
            add(index, entries[at : at + 5])
        trim = getattr(index, "trim_texts", None)
        if trim is not None:
            trim()
        ids = [e.id for e in entries]
        kept = index.texts(ids)
        assert 15 <= len(kept) <= 20
        assert set(kept) == set(ids[-len(kept) :])  # the oldest went first
        assert all(kept[i] == texts[int(i[1:])] for i in kept)
        assert index.sketches(ids) == {e.id: e.sketch for e in entries}
        assert index.texts(["short"]) == {"short": "a short text"}
        assert index.delete(["d0"]) == ["d0"]
        assert "d0" not in index.sketches(["d0"])

    def test_a_window_of_none_keeps_no_text_with_a_sketch(self, make_index: MakeIndex) -> None:
        index = make_index(text_window=0)
        sketch = sketches([np.arange(100, dtype=np.uint64)])[0]
        add(index, [replace(entry("long", 1, text="a long text"), sketch=sketch)])
        add(index, [entry("short", 2**40, text="a short text")])
        assert index.texts(["long", "short"]) == {"short": "a short text"}
        assert index.sketches(["long", "short"]) == {"long": sketch}
