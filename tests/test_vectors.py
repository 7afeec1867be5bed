"""Records with an embedding: decided by the exact cosine of their vectors, with block
tables whose Hamming radius follows from the cosine threshold (detector.vectors)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector.cli import main
from detector.errors import ConfigError
from detector.index.memory import MemoryIndex
from detector.records import Decision, Document
from detector.settings import EngineSettings
from detector.simhash import hyperplanes, simhash_vectors
from detector.vectors import (
    binomial_cdf,
    default_vector_scheme,
    hamming_radius,
    pack,
    pack_rows,
    units,
    unpack,
    vector_scheme,
)

from .helpers import words_text


def detector(**options: object) -> object:
    settings = EngineSettings(**options)  # type: ignore[arg-type]
    index = MemoryIndex(
        settings.block_scheme(),
        vectors=settings.vector_block_scheme(),
        text_window=settings.text_window,
    )
    return settings.detector(index)


def decide(docs: list[Document], batch_size: int = 64, **options: object) -> list[Decision]:
    d = detector(**options)
    out: list[Decision] = []
    for at in range(0, len(docs), batch_size):
        out += d.process(docs[at : at + batch_size])  # type: ignore[attr-defined]
    return out


def near(v: np.ndarray, cosine: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector at exactly `cosine` from the unit vector v."""
    other = rng.standard_normal(len(v))
    other -= (other @ v) * v
    other /= np.linalg.norm(other)
    return cosine * v + math.sqrt(1 - cosine**2) * other


# ------------------------------------------------------------------ the example


@pytest.mark.parametrize("window", [None, 0], ids=["every-text", "text-window-0"])
def test_near_vectors_with_other_texts_are_duplicates_by_their_cosine(window: int | None) -> None:
    """And with --text-window 0 (no text kept, the literal cache bounded to nothing): the
    vectors read back from the index serve their batch."""
    rng = np.random.default_rng(1)
    base = units(rng.standard_normal((1, 384)))[0]
    vectors = [near(base, 0.999, rng) for _ in range(5)]
    for batch in (1, 5):
        texts = [
            Document(f"a{i}", words_text(8 + i), embedding=v.tolist())
            for i, v in enumerate(vectors)
        ]
        out = decide(texts, batch, text_window=window)
        assert [d.decision for d in out] == ["unique"] + ["duplicate"] * 4
        assert all(d.duplicate_of is not None and d.duplicate_of < d.id for d in out[1:])
        assert all(
            not d.exact and d.similarity is not None and d.similarity > 0.99 for d in out[1:]
        )
        assert all(d.space == "v384" and d.k == default_vector_scheme().k for d in out)
        # one text, five different vectors: not exact copies of each other
        same = [Document(f"b{i}", "one text", embedding=v.tolist()) for i, v in enumerate(vectors)]
        out = decide(same, batch, text_window=window)
        assert [d.exact for d in out] == [False] * 5
        assert [d.decision for d in out] == ["unique"] + ["duplicate"] * 4


def test_an_exact_copy_is_the_same_vector_whatever_its_text() -> None:
    v = units(np.random.default_rng(2).standard_normal((1, 64)))[0]
    docs = [
        Document("a", "first", embedding=v.tolist()),
        Document("b", "second", embedding=v.tolist()),
        Document("c", "first", embedding=(-v).tolist()),  # the same text, the opposite vector
        Document("d", "third", embedding=(3.0 * v).tolist()),  # the same direction, rounded
    ]
    out = decide(docs)
    assert (out[1].exact, out[1].duplicate_of, out[1].distance, out[1].similarity) == (
        True,
        "a",
        0,
        1.0,
    )
    assert out[2].decision == "unique"
    assert out[3].duplicate_of == "a" and out[3].similarity == pytest.approx(1.0, abs=1e-4)


def test_a_vector_below_the_cosine_is_unique_even_within_k() -> None:
    rng = np.random.default_rng(3)
    v = units(rng.standard_normal((1, 384)))[0]
    w = near(v, 0.85, rng)
    out = decide(
        [Document("a", "x", embedding=v.tolist()), Document("b", "x", embedding=w.tolist())]
    )
    assert out[1].decision == "unique"
    looser = decide(
        [Document("a", "x", embedding=v.tolist()), Document("b", "x", embedding=w.tolist())],
        cosine=0.8,
        vector_recall=0.5,
    )
    fp = simhash_vectors(np.array([v, w]), hyperplanes(384, 0))
    if int(fp[0] ^ fp[1]).bit_count() <= vector_scheme(0.8, 0.5).k:
        assert looser[1].decision == "duplicate"
        assert looser[1].similarity == pytest.approx(0.85, abs=0.01)


def test_mixed_streams_keep_their_spaces_apart() -> None:
    rng = np.random.default_rng(4)
    v = units(rng.standard_normal((1, 32)))[0]
    text = words_text(40)
    docs = [
        Document("t1", text),
        Document("v1", text, embedding=v.tolist()),  # its text is a copy of t1's: no matter
        Document("t2", text),  # a copy of t1, not of v1
        Document("w1", text, embedding=np.concatenate([v, [0.0]]).tolist()),  # 33 dimensions
        Document("v2", "other", embedding=near(v, 0.99, rng).tolist()),
    ]
    for batch in (1, 5):
        out = {d.id: d for d in decide(docs, batch)}
        assert out["v1"].decision == "unique"
        assert (out["t2"].duplicate_of, out["t2"].exact) == ("t1", True)
        assert out["t2"].space is None  # a text's decision is as it always was
        assert out["w1"].decision == "unique" and out["w1"].space == "v33"
        assert out["v2"].duplicate_of == "v1"


def test_records_with_only_an_embedding_are_decided_on_their_vectors(tmp_path: Path) -> None:
    """Through `neardup detect` on the memory index: an embedding without a text is
    decided, a near copy of it (without a text too) is its duplicate, an exact copy of its
    vector with a text is its exact copy, and a NaN embedding without a text is refused
    for its NaN."""
    rng = np.random.default_rng(8)
    v = units(rng.standard_normal((1, 48)))[0]
    lines = [
        {"id": "a", "embedding": v.tolist()},
        {"id": "b", "embedding": near(v, 0.99, rng).tolist()},
        {"id": "c", "text": words_text(9), "embedding": v.tolist()},
        {"id": "d", "embedding": units(rng.standard_normal((1, 48)))[0].tolist()},
    ]
    stream = tmp_path / "s.jsonl"
    body = "".join(json.dumps(r) + "\n" for r in lines)
    stream.write_text(body + '{"id": "nan", "embedding": [0.5, NaN]}\n{"id": "none"}\n')
    out, errors = tmp_path / "d.jsonl", tmp_path / "e.jsonl"
    args = ["detect", str(stream), "-o", str(out), "--errors", str(errors), "--no-progress"]
    assert main(args) == 0
    got = {d["id"]: d for d in map(json.loads, out.read_text().splitlines())}
    assert list(got) == ["a", "b", "c", "d"]
    assert (got["a"]["decision"], got["a"]["space"]) == ("unique", "v48")
    assert got["b"]["duplicate_of"] == "a" and got["b"]["similarity"] == pytest.approx(0.99, 1e-2)
    assert (got["c"]["duplicate_of"], got["c"]["exact"]) == ("a", True)
    assert got["d"]["decision"] == "unique"
    refused = [json.loads(e) for e in errors.read_text().splitlines()]
    assert [(e["line"], e["reason"]) for e in refused] == [
        (5, "embedding_nan"),
        (6, "missing_text"),
    ]


# ------------------------------------------------------------------ the cosine pass


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_cosine_pass_decides_as_brute_force(data: st.DataObject) -> None:
    """Every record against every earlier one it could meet: within k of Hamming in its
    space, the exact cosine with the stored (int8) vector at or above the threshold."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    count = data.draw(st.integers(1, 40), label="records")
    cosine = data.draw(st.sampled_from([0.8, 0.9, 0.95]), label="cosine")
    batch = data.draw(st.sampled_from([1, 7, 64]), label="batch")
    rng = np.random.default_rng(seed)
    centers = units(rng.standard_normal((3, 48)))
    raw = []
    for _ in range(count):
        c = centers[rng.integers(3)]
        if raw and rng.random() < 0.15:
            raw.append(raw[rng.integers(len(raw))])  # an exact copy
        else:
            raw.append(near(c, rng.uniform(0.75, 1.0), rng))
    docs = [Document(f"d{i:03d}", "t", embedding=v.tolist()) for i, v in enumerate(raw)]
    out = decide(docs, batch, cosine=cosine)

    vecs = units(np.array(raw))
    fps = simhash_vectors(vecs, hyperplanes(48, 0))
    k = vector_scheme(cosine, 0.75).k
    stored = [unpack(pack(v)) for v in vecs]
    first_of: dict[bytes, int] = {}
    for i, d in enumerate(out):
        key = vecs[i].tobytes()
        if key in first_of:
            assert (d.exact, d.duplicate_of) == (True, f"d{first_of[key]:03d}")
            continue
        # candidates: earlier indexed records (not exact copies) within k
        sims = {  # the new vector, exact, against the stored form of the earlier ones
            j: float(vecs[i] @ stored[j])
            for j in indexed_before(i, out)
            if int(fps[i] ^ fps[j]).bit_count() <= k
        }
        best = max(sims.values(), default=-2.0)
        assert (d.decision == "duplicate") == (best >= cosine), (i, sims, d)
        if d.decision == "duplicate":
            assert d.similarity == pytest.approx(best, abs=1e-6)
            assert sims[int(d.duplicate_of[1:])] == pytest.approx(best, abs=1e-6)  # type: ignore[index]
        first_of[key] = i


def indexed_before(i: int, out: list[Decision]) -> set[int]:
    return {j for j in range(i) if not out[j].exact}


# ------------------------------------------------------------------ k from the threshold


def test_hamming_radius_is_the_binomial_quantile() -> None:
    for cosine in (0.8, 0.9, 0.95, 0.98):
        for recall in (0.5, 0.75, 0.9, 0.99):
            k = hamming_radius(cosine, recall)
            p = math.acos(cosine) / math.pi
            assert binomial_cdf(k, 64, p) >= recall
            assert k == 0 or binomial_cdf(k - 1, 64, p) < recall
    assert hamming_radius(0.9, 0.75) == 11  # the default: 64 * acos(0.9) / pi = 9.2 expected
    assert hamming_radius(0.95, 0.75) == 8 and hamming_radius(0.98, 0.75) == 5


@pytest.mark.parametrize("cosine", [0.9, 0.95, 0.98])
def test_hamming_radius_finds_its_share_of_simulated_pairs(cosine: float) -> None:
    """Pairs at exactly the threshold, random hyperplanes: the share within k is the
    binomial's (within 4 standard errors), and so at least the wanted recall."""
    rng = np.random.default_rng(int(cosine * 100))
    pairs, dim, recall = 3000, 96, 0.75
    k = hamming_radius(cosine, recall)
    within = []
    for seed in range(pairs // 100):
        planes = hyperplanes(dim, seed)
        u = units(rng.standard_normal((100, dim)))
        v = np.array([near(x, cosine, rng) for x in u])
        d = np.bitwise_count(simhash_vectors(u, planes) ^ simhash_vectors(v, planes))
        within += (d <= k).tolist()
    share = float(np.mean(within))
    expected = binomial_cdf(k, 64, math.acos(cosine) / math.pi)
    error = 4 * math.sqrt(expected * (1 - expected) / pairs)
    assert abs(share - expected) < error
    assert share > recall - error


def test_vector_scheme_finds_every_pair_within_its_k() -> None:
    rng = np.random.default_rng(5)
    for cosine in (0.9, 0.95, 0.98):
        scheme = vector_scheme(cosine, 0.75)
        for _ in range(200):
            a = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(2))
            flips = rng.choice(64, scheme.k, replace=False)
            b = a ^ sum(1 << int(f) for f in flips)
            probes = set(scheme.probes([a])[0])
            assert any((t, key) in probes for t, key in enumerate(scheme.keys([b])[0]))


def test_bad_vector_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="cosine"):
        EngineSettings(cosine=1.5).vector_block_scheme()
    with pytest.raises(ConfigError, match="radius"):
        vector_scheme(0.3, 0.99)
    with pytest.raises(ConfigError, match="storage"):
        EngineSettings(vector_storage="bits").engine()


# ------------------------------------------------------------------ stored vectors


@pytest.mark.parametrize(
    ("form", "size", "error"), [("int8", 5 + 384, 2e-3), ("float16", 1 + 768, 1e-4)]
)
def test_stored_vectors_are_compact_and_close(form: str, size: int, error: float) -> None:
    rng = np.random.default_rng(6)
    vecs = units(rng.standard_normal((200, 384)))
    for v, w in zip(vecs, vecs[::-1], strict=True):
        blob = pack(v, form)
        assert len(blob) == size
        back = unpack(blob)
        assert abs(float(back @ w) - float(v @ w)) < error


@pytest.mark.parametrize("form", ["int8", "float16"])
def test_a_batch_is_packed_as_each_vector_is_and_read_back_bit_for_bit(form: str) -> None:
    """The cosine pass compares with a batch's own stored forms and with the index's:
    they must be the same floats, or a decision would depend on where a vector came from."""
    rng = np.random.default_rng(8)
    rows = units(rng.standard_normal((50, 384)) * rng.uniform(0.01, 100, (50, 1)))
    blobs, stored = pack_rows(rows, form)
    assert blobs == [pack(r, form) for r in rows]
    assert all(np.array_equal(unpack(b), s) for b, s in zip(blobs, stored, strict=True))


def test_the_cli_scores_a_cosine_truth_and_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(7)
    base = units(rng.standard_normal((20, 16)))
    vecs = list(base) + [near(v, 0.97, rng) for v in base[:10]]
    stream = tmp_path / "s.jsonl"
    stream.write_text(
        "".join(
            json.dumps({"id": f"e{i:02d}", "text": "t", "embedding": v.tolist()}) + "\n"
            for i, v in enumerate(vecs)
        )
    )
    unit = units(np.array(vecs))
    truth = tmp_path / "truth.jsonl"
    with truth.open("w") as f:
        for i in range(len(unit)):
            best = max((float(unit[i] @ unit[j]), j) for j in range(i)) if i else (-1.0, None)
            earlier = None if best[1] is None else f"e{best[1]:02d}"
            line = {"id": f"e{i:02d}", "max_cosine_earlier": best[0], "max_jaccard_earlier": 0.0}
            f.write(json.dumps(line | {"most_similar_earlier": earlier}) + "\n")
    out = tmp_path / "d.jsonl"
    assert main(["detect", str(stream), "-o", str(out), "--no-progress"]) == 0
    assert "vectors: 30 lookups" in capsys.readouterr().err
    assert main(["eval", str(out), str(truth), "--json", "--report", str(tmp_path / "r.png")]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["truth"] == "max_cosine_earlier >= 0.9"
    assert scores["true_duplicates"] == 10 and scores["precision"] == 1.0
    assert (tmp_path / "r.png").stat().st_size > 10_000
    assert main(["eval", str(out), str(truth), "--json", "--measure", "jaccard"]) == 0
    assert json.loads(capsys.readouterr().out)["true_duplicates"] == 0
