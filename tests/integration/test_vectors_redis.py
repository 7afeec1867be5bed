"""Records with an embedding on Redis: the vector index exported and imported, and the
bundled embedding sample through two `neardup serve` consumers (server and cluster), with
the DESIGN invariants and the vector dead letters."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import redis
from redis.cluster import RedisCluster

from detector.index import Query
from detector.index.redis import RedisIndex, maintenance
from detector.records import Document
from detector.settings import EngineSettings

from ..helpers import EMBED_SAMPLE, EMBED_SAMPLE_TRUTH, VERDICT, read_jsonl, write_jsonl
from .admin import create_topics, drop_index, unique
from .invariants import check_invariants
from .processes import Names, Serve, logs, run_detector
from .readers import DecisionReader, Producer, TopicReader, without_notes

SETTINGS = EngineSettings()


def detector_on(client: Any, name: str) -> Any:
    index = RedisIndex(
        client, SETTINGS.block_scheme(), name, vectors=SETTINGS.vector_block_scheme()
    )
    return SETTINGS.detector(index)


def docs(records: list[dict[str, Any]]) -> list[Document]:
    return [Document(r["id"], r["text"], embedding=r["embedding"]) for r in records]


def decided(detector: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for at in range(0, len(records), 64):
        for d in detector.process(docs(records[at : at + 64])):
            out.append({k: v for k, v in asdict(d).items() if k not in ("decided_at", "namespace")})
    return out


def test_a_vector_index_exports_and_imports(backend: redis.Redis | RedisCluster) -> None:
    records = read_jsonl(EMBED_SAMPLE)
    first, rest = records[:200], records[200:]
    names = [unique("vectors"), unique("vectors-copy")]
    try:
        original = detector_on(backend, names[0])
        decided(original, first)
        exported = list(maintenance.documents(original.index))
        indexed = [r for r in exported if "vector" in r]
        assert indexed and all("text" not in r and r["space"] == "v384" for r in indexed)
        copy = detector_on(backend, names[1])
        assert maintenance.restore(copy.index, exported) == len(exported)
        ids = [r["id"] for r in indexed]
        a, b = original.index.vectors(ids), copy.index.vectors(ids)
        assert sorted(a) == sorted(b) == sorted(ids)
        assert all(np.array_equal(a[i], b[i]) for i in ids)
        # and both decide what comes next alike
        assert decided(original, rest) == decided(copy, rest)
        probe = [Query("v384", int(r["decision"]["fingerprint"], 16), "x") for r in indexed[:20]]
        assert original.index.lookup(probe) == copy.index.lookup(probe)
        # a deleted vector is gone from the index and from its lookups
        gone = indexed[0]["id"]
        assert original.index.delete([gone]) == [gone]
        assert gone not in original.index.vectors([gone])
        (found,) = original.index.lookup(probe[:1])
        assert gone not in {c.id for c in found.candidates}
    finally:
        for name in names:
            drop_index(backend, name)


def test_a_stored_vector_lives_as_long_as_the_retention(
    backend: redis.Redis | RedisCluster,
) -> None:
    name = unique("vectors-ttl")
    try:
        index = RedisIndex(
            backend,
            SETTINGS.block_scheme(),
            name,
            retention=3600,
            vectors=SETTINGS.vector_block_scheme(),
        )
        detector = SETTINGS.detector(index)
        records = read_jsonl(EMBED_SAMPLE)[:20]
        decided(detector, records)
        ids = [r["id"] for r in records]
        kept = index.packed_vectors(ids)
        assert kept, "the sample's first records are indexed"
        for i in kept:
            assert 0 < backend.ttl(index.layout.vector(i)) <= index.keep
            assert not backend.exists(index.layout.text(i))  # the vector instead of the text
    finally:
        drop_index(backend, name)


BAD_VECTORS = {
    "nan": (b'{"id": "bad-nan", "text": "t", "embedding": [0.5, NaN]}', "embedding_nan"),
    "inf": (b'{"id": "bad-inf", "text": "t", "embedding": [-Infinity, 1]}', "embedding_infinite"),
    "zero": (b'{"id": "bad-zero", "text": "t", "embedding": [0, 0, 0]}', "embedding_zero"),
}


def test_records_with_only_an_embedding_through_serve(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
    rclient: redis.Redis,
) -> None:
    """A record with an embedding and no text is decided on its vector in Redis as in
    `detect`: a near copy of it is its duplicate, one delivered again gets its decision
    again, the index exports its vector; a NaN embedding without a text is an
    `embedding_nan` dead letter (not `missing_text`), one with neither a `missing_text`."""
    rng = np.random.default_rng(9)
    v = rng.standard_normal(32)
    w = v + 0.05 * rng.standard_normal(32)  # cosine about 0.999
    records = [{"id": "only-v", "embedding": v.tolist()}, {"id": "near-v", "embedding": w.tolist()}]
    create_topics({names.input: 1})
    server = serve()
    with Producer() as producer:
        for r in records:
            producer.send_record(names.input, r)
        producer.send(names.input, b'{"id": "nan-v", "embedding": [0.5, NaN]}')
        producer.send(names.input, b'{"id": "nothing"}')
        producer.send_record(names.input, records[0])  # a redelivery
        producer.flush()
    assert not decisions.wait_for(["only-v", "near-v"], timeout=60), logs([server])
    assert dead_letters.until(lambda r: len(r.records) >= 2, timeout=30, idle=1.0)
    assert decisions.until(lambda r: len(r.records) >= 3, timeout=30, idle=1.0), logs([server])
    first, again = decisions.by_id()["only-v"]
    assert (first["decision"], first["space"]) == ("unique", "v32")
    assert {k: again[k] for k in VERDICT} == {k: first[k] for k in VERDICT}
    near = decisions.first()["near-v"]
    assert (near["decision"], near["duplicate_of"]) == ("duplicate", "only-v")
    assert near["similarity"] > 0.99 and not near["exact"]
    refused = {json.loads(base64.b64decode(d["raw_base64"]))["id"]: d for d in dead_letters.records}
    assert {i: d["reason"] for i, d in refused.items()} == {
        "nan-v": "embedding_nan",
        "nothing": "missing_text",
    }
    assert refused["nan-v"]["detail"] == "component 1 is NaN"
    exported = {r["id"]: r for r in maintenance.documents(RedisIndex.open(rclient, names.index))}
    assert "vector" in exported["only-v"] and "text" not in exported["only-v"]
    assert server.stop() == 0, logs([server])


def test_vectors_through_two_serve_consumers(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
    index_at: dict[str, str],
    tmp_path: Path,
) -> None:
    """The sample's vectors and a few text records on two partitions read by two
    consumers sharing one index: every record decided once, near-duplicates (as `detect`
    judges them on the same file) never both unique, and the bad vectors dead-lettered.
    A passage and its copies share a partition (keyed by their source, as a pipeline keys
    by document), so the truth's "earlier" is each partition's order too."""
    texts = [{"id": f"text-{i}", "text": f"a plain text record number {i} " * 5} for i in range(6)]
    records = [*read_jsonl(EMBED_SAMPLE), *texts]
    create_topics({names.input: 2})
    servers = [serve(env=index_at), serve(env=index_at)]
    source = {t["id"]: t["source_id"] for t in read_jsonl(EMBED_SAMPLE_TRUTH)}
    with Producer() as producer:
        for r in records:
            partition = zlib.crc32(source.get(r["id"], r["id"]).encode()) % 2
            producer.send_record(names.input, r, partition=partition)
        for n, (raw, _) in enumerate(BAD_VECTORS.values()):
            producer.send(names.input, raw, partition=n % 2)
        producer.flush()
    missing = decisions.wait_for([r["id"] for r in records], timeout=120, idle=1.0)
    assert not missing, f"{len(missing)} undecided, e.g. {missing[:3]}\n{logs(servers)}"
    assert dead_letters.until(lambda r: len(r.records) >= len(BAD_VECTORS), 30, idle=1.0)
    assert sorted(d["reason"] for d in dead_letters.records) == sorted(
        reason for _, reason in BAD_VECTORS.values()
    )

    stream = write_jsonl(tmp_path / "stream.jsonl", records)
    run_detector(["detect", str(stream), "-o", str(tmp_path / "detect.jsonl")])
    reference = read_jsonl(tmp_path / "detect.jsonl")
    final = check_invariants(records, decisions.by_id(), reference, threshold=0.9)
    vector_ids = {r["id"] for r in records if "embedding" in r}
    assert all(final[i]["space"] == "v384" for i in vector_ids)
    assert all("space" not in final[t["id"]] for t in texts)
    # serve finds the pairs detect finds
    said = sum(d["decision"] == "duplicate" for d in final.values())
    expected = sum(d["decision"] == "duplicate" for d in reference)
    assert abs(said - expected) <= 0.05 * expected, (said, expected)
    path = write_jsonl(tmp_path / "serve.jsonl", without_notes(list(final.values())))
    out = run_detector(["eval", str(path), str(EMBED_SAMPLE_TRUTH), "--json"])
    scores = json.loads(out.stdout.strip().splitlines()[-1])
    assert scores["precision"] >= 0.97 and scores["recall"] >= 0.95, scores
    for s in servers:
        assert s.stop() == 0, logs(servers)
