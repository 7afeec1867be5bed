"""detector.decide: decisions in order, exact copies, redeliveries, near duplicates, batch
independence, embeddings; the Detector over a MemoryIndex."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector.decide import Detector
from detector.engine import TEXT_SPACE
from detector.index.memory import MemoryIndex
from detector.records import Decision, Document
from detector.settings import EngineSettings
from detector.simhash import hyperplanes, simhash_vectors
from detector.verify import LiteralCheck, jaccard

from .helpers import (
    SAMPLE,
    decision_verdict,
    edit_words,
    make_detector,
    read_jsonl,
    sample_texts,
    stream_from,
    words_text,
)


def decide(
    docs: list[Document], batch_size: int, detector: Detector | None = None, **options: Any
) -> list[Decision]:
    detector = detector or make_detector(**options)
    out: list[Decision] = []
    for start in range(0, len(docs), batch_size):
        out += detector.process(docs[start : start + batch_size])
    return out


def assert_duplicates_name_earlier(docs: list[Document], decisions: list[Decision]) -> None:
    assert [d.id for d in decisions] == [doc.id for doc in docs], "one decision per record"
    first_seen: dict[str, int] = {}
    for i, doc in enumerate(docs):
        first_seen.setdefault(doc.id, i)
    for i, d in enumerate(decisions):
        if d.duplicate_of is not None:
            assert d.duplicate_of in first_seen, d
            assert first_seen[d.duplicate_of] < i, f"{d.id} names a later record"
            assert d.duplicate_of != d.id


# --- the basic decisions ---------------------------------------------------------------


def test_exact_copy_near_copy_and_unrelated() -> None:
    original = words_text(1)
    docs = [
        Document("orig", original),
        Document("copy", original),
        Document("spaced", "  " + original.replace(" ", "\n\t ") + "\n"),
        Document("near", edit_words(original, 4, seed=2)),
        Document("other", words_text(3)),
    ]
    for batch_size in (1, len(docs)):
        d = {x.id: x for x in decide(docs, batch_size)}
        assert (d["orig"].decision, d["orig"].duplicate_of) == ("unique", None)
        for copy in ("copy", "spaced"):
            assert d[copy].decision == "duplicate"
            assert d[copy].duplicate_of == "orig"
            assert d[copy].exact is True
            assert d[copy].distance == 0 and d[copy].similarity == 1.0
            assert d[copy].fingerprint == d["orig"].fingerprint
        assert d["near"].decision == "duplicate" and d["near"].duplicate_of == "orig"
        assert d["near"].exact is False
        assert d["near"].distance is not None and 0 <= d["near"].distance <= 6
        assert d["near"].similarity is not None and d["near"].similarity >= 0.8
        assert (d["other"].decision, d["other"].duplicate_of) == ("unique", None)
        assert d["other"].distance is None and d["other"].similarity is None


def test_below_the_threshold_is_unique_even_when_the_fingerprint_is_near() -> None:
    """The literal pass decides: a heavily edited copy may keep a near fingerprint, but
    with a threshold of 0.99 it is not a duplicate; with 0.5 it is."""
    original = words_text(4)
    edited = edit_words(original, 6, seed=5)
    docs = [Document("a", original), Document("b", edited)]
    strict = decide(docs, 2, threshold=0.99)[1]
    loose = decide(docs, 2, threshold=0.5)[1]
    assert strict.decision == "unique"
    assert loose.decision == "duplicate" and loose.duplicate_of == "a"
    assert loose.similarity is not None and 0.5 <= loose.similarity < 0.99


def test_decision_carries_audit_fields() -> None:
    detector = make_detector()
    (d,) = detector.process([Document("a", "hello world")])
    body = json.loads(d.to_json())
    assert body["features"] == detector.engine.version
    assert body["index"] == "default"
    assert body["detector"]
    assert body["decided_at"]
    assert len(body["fingerprint"]) == 16


# --- redelivery ---------------------------------------------------------------------


def test_a_repeated_id_gets_the_identical_decision() -> None:
    original = words_text(6)
    docs = [
        Document("a", original),
        Document("b", edit_words(original, 3, seed=1)),
        Document("c", words_text(7)),
        Document("b", edit_words(original, 3, seed=1)),  # redelivered, same batch or not
        Document("a", "  ".join(original.split())),  # re-fetched unchanged (spacing aside)
    ]
    for batch_size in (1, 2, 3, len(docs)):
        out = decide(docs, batch_size)
        assert len(out) == len(docs)
        by_first = {}
        for d in out:
            by_first.setdefault(d.id, d)
            assert asdict(d) == asdict(by_first[d.id]), "including its timestamp"
        assert by_first["b"].duplicate_of == "a"


def test_a_known_id_with_changed_content_is_a_revision_decided_afresh() -> None:
    """Issue 10: the same id with other content is decided again, without its own earlier
    version, which leaves the index: a copy of the new text is a duplicate of it, a copy
    of the old text is not (unless the old versions are kept)."""
    old, new = words_text(6), words_text(7)
    for keep in (False, True):
        for batch_size in (1, 2, 6):
            docs = [
                Document("a", old),
                Document("a", new),  # re-fetched, changed
                Document("b", new),
                Document("c", old),
                Document("a", new),  # redelivered: the revision again
            ]
            out = decide(docs, batch_size, keep_old_versions=keep)
            a0, a1, b, c, again = out
            assert (a0.revision, a0.duplicate_of) == (0, None)
            assert (a1.revision, a1.previous_fingerprint, a1.duplicate_of) == (
                1,
                a0.fingerprint,
                None,
            ), "decided without its own earlier version"
            assert a1.fingerprint != a0.fingerprint
            assert (b.duplicate_of, b.duplicate_of_revision, b.exact) == ("a", 1, True)
            if keep:
                assert (c.duplicate_of, c.duplicate_of_revision) == ("a", 0)
            else:
                assert c.duplicate_of is None, "the old version is gone from the index"
            assert asdict(again) == asdict(a1)


def test_a_stale_record_gets_the_stored_decision_and_changes_nothing() -> None:
    old, new = words_text(6), words_text(7)
    detector = make_detector()
    first = detector.process([Document("a", new, version=20.0)])[0]
    stale = detector.process([Document("a", old, version=10.0), Document("b", old)])
    assert asdict(stale[0]) == asdict(first) and detector.stale == 1
    assert stale[1].duplicate_of is None, "the stale text did not enter the index"
    newer = detector.process([Document("a", old, version=30.0)])[0]
    assert (newer.revision, newer.duplicate_of) == (1, "b")


def test_redelivery_of_a_whole_batch() -> None:
    detector = make_detector()
    docs = [Document(f"r{i}", words_text(i % 3, 80)) for i in range(6)]
    first = detector.process(docs)
    again = detector.process(docs)
    assert [asdict(d) for d in again] == [asdict(d) for d in first]


# --- batches ------------------------------------------------------------------------


@settings(max_examples=8)
@given(seed=st.integers(0, 10**6), batch=st.integers(2, 9))
def test_same_decisions_whatever_the_batch_size(seed: int, batch: int) -> None:
    """Documents of one batch find each other exactly as they find earlier batches: the
    decisions with --batch-size 1, B and everything-at-once are identical."""
    rng = random.Random(seed)
    docs = stream_from(sample_texts()[:120], rng, 40)
    one = [decision_verdict(d) for d in decide(docs, 1)]
    some = [decision_verdict(d) for d in decide(docs, batch)]
    whole = [decision_verdict(d) for d in decide(docs, len(docs))]
    assert one == some == whole
    assert_duplicates_name_earlier(docs, decide(docs, batch))


def test_same_decisions_on_the_sample_with_batch_sizes_1_and_512() -> None:
    docs = [Document(r["id"], r["text"]) for r in read_jsonl(SAMPLE)[:250]]
    one = decide(docs, 1)
    big = decide(docs, 512)
    assert [decision_verdict(d) for d in one] == [decision_verdict(d) for d in big]
    assert_duplicates_name_earlier(docs, big)
    assert sum(d.decision == "duplicate" for d in big) >= 3


@pytest.mark.parametrize("batch_size", [1, 5])
@pytest.mark.parametrize("cache_size", [1, 3])
def test_a_small_literal_cache_changes_nothing(cache_size: int, batch_size: int) -> None:
    """Shingle sets evicted from the literal cache are read back from the index's texts:
    the decisions are those of a cache that holds everything."""
    rng = random.Random(17)
    docs = stream_from(sample_texts()[:80], rng, 60)
    settings = EngineSettings()
    scheme = settings.block_scheme()
    small = Detector(
        settings.engine(),
        MemoryIndex(scheme),
        scheme,
        LiteralCheck(settings.threshold, settings.literal_shingle, cache_size),
        settings.max_candidates,
    )
    got = [decision_verdict(d) for d in decide(docs, batch_size, detector=small)]
    assert got == [decision_verdict(d) for d in decide(docs, batch_size)]
    assert sum(v[1] == "duplicate" for v in got) >= 5


@pytest.mark.parametrize("n", [1, 3, 8])
def test_literal_shingle_size_is_the_same_for_batch_and_index(n: int) -> None:
    rng = random.Random(n)
    docs = stream_from(sample_texts()[:80], rng, 40)
    one = [decision_verdict(d) for d in decide(docs, 1, literal_shingle=n)]
    assert one == [decision_verdict(d) for d in decide(docs, 40, literal_shingle=n)]


NATO = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
)


def test_every_document_sharing_a_fingerprint_is_a_candidate() -> None:
    """Word features are a bag: a text and its words in another order share one
    fingerprint but not their shingles. A third text that copies the second (one word
    added) is its near duplicate, and must be found whether the second arrived in the
    same batch or an earlier one, although the first holds the fingerprint already."""
    words = NATO.split()
    a = Document("A", " ".join(words))
    b = Document("B", " ".join(reversed(words)))
    c = Document("C", " ".join(reversed(words)) + " extra")
    for batch_size in (1, 2, 3):
        out = decide([a, b, c], batch_size)
        assert out[0].fingerprint == out[1].fingerprint, "the premise: a shared fingerprint"
        assert (out[1].fingerprint ^ out[2].fingerprint).bit_count() <= 6, "and C near it"
        assert out[1].decision == "unique"
        assert (out[2].decision, out[2].duplicate_of) == ("duplicate", "B"), batch_size


def test_no_two_near_duplicates_are_both_unique() -> None:
    """The DESIGN invariant, as the detector judges near: fingerprints within k and
    shingle Jaccard >= threshold. Checked over all pairs of unique decisions."""
    rng = random.Random(42)
    docs = stream_from(sample_texts()[:150], rng, 120)
    detector = make_detector()
    out = decide(docs, 16, detector=detector)
    firsts = list({doc.id: doc for doc in reversed(docs)}.values())  # first delivery of each
    prints = {doc.id: p for doc, p in zip(firsts, detector.engine.fingerprint(firsts), strict=True)}
    unique = [d.id for d in dict((d.id, d) for d in out).values() if d.decision == "unique"]
    k = detector.scheme.k
    for i, x in enumerate(unique):
        for y in unique[:i]:
            px, py = prints[x], prints[y]
            if px.space == py.space and (px.fingerprint ^ py.fingerprint).bit_count() <= k:
                assert jaccard(px.shingles, py.shingles) < detector.literal.threshold, (x, y)


# --- embeddings ---------------------------------------------------------------------


def test_records_with_embeddings_get_hyperplane_fingerprints() -> None:
    rng = np.random.default_rng(3)
    v = rng.standard_normal(32)
    docs = [
        Document("a", "text one", embedding=v.tolist()),
        Document("b", "text two", embedding=(-v).tolist()),
    ]
    for seed in (0, 7):
        out = decide(docs, 2, vector_seed=seed)
        planes = hyperplanes(32, seed)
        expected = simhash_vectors(np.array([v, -v]), planes).tolist()
        assert [d.fingerprint for d in out] == expected
        assert (out[0].fingerprint ^ out[1].fingerprint).bit_count() == 64


def test_embedding_prints_live_in_their_own_space() -> None:
    detector = make_detector()
    p = detector.engine.fingerprint([Document("a", "x", embedding=[1.0, 2.0]), Document("b", "x")])
    assert p[0].space != p[1].space
    assert p[1].space == TEXT_SPACE
    assert (
        p[0].space
        == detector.engine.fingerprint([Document("c", "y", embedding=[3.0, -1.0])])[0].space
    )


def test_a_decision_names_the_first_document_of_its_chain_as_its_cluster() -> None:
    """C is nearest B, B a copy of A: C's cluster is A, whether the three come in one batch
    or one a batch. The name stays the cluster's when A is deleted, and B re-fetched with
    other content starts a cluster of its own."""
    a = words_text(1, 120)
    b = edit_words(a, 2, 1)
    c = edit_words(b, 2, 2)
    for batches in ([[a, b, c]], [[a], [b], [c]]):
        detector = EngineSettings().detector(MemoryIndex(EngineSettings().block_scheme()))
        got = {}
        for batch in batches:
            docs = [Document("ABC"[[a, b, c].index(t)], t) for t in batch]
            got.update({d.id: d for d in detector.process(docs)})
        assert [got[i].cluster for i in "ABC"] == ["A", "A", "A"]
        assert (got["B"].duplicate_of, got["C"].duplicate_of) == ("A", "B")
        assert got["C"].to_dict()["cluster"] == "A"
    detector.index.delete(["A"])
    (d,) = detector.process([Document("D", edit_words(c, 2, 3))])
    assert (d.duplicate_of, d.cluster) == ("C", "A")
    new = words_text(99, 120)
    b2, copy = detector.process([Document("B", new), Document("E", edit_words(new, 2, 4))])
    assert (b2.revision, b2.decision, b2.cluster) == (1, "unique", "B")
    assert (copy.duplicate_of, copy.cluster) == ("B", "B")
