"""detector.index.redis.bulk on the Redis server and on the Redis Cluster: a bulk load
leaves the very keys the commits of the same documents leave (but the log), and the
normal path then works on the index as on any other: lookups find what brute force finds,
stats counts, export lists, a commit numbers on, a delete forgets."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector import __version__
from detector.errors import ConfigError
from detector.index import Commit, Entry, Query
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis.bulk import load
from detector.index.redis.keys import parse_decision, record_body
from detector.index.texts import SAMPLE_TEXTS
from detector.pipeline import Limits, prepare
from detector.records import Decision
from detector.settings import EngineSettings

from ..helpers import STREAM_2K, read_lines
from ..index.contract import fixtured
from .admin import index_keys, index_names, unique  # noqa: F401 - the `names` fixture

SCHEME = EngineSettings().block_scheme()
ENGINE = EngineSettings().engine()
WHEN = datetime(2026, 1, 2, tzinfo=UTC).isoformat()


@dataclass
class Docs:
    ids: list[str]
    fps: np.ndarray
    digests: list[str]
    texts: dict[int, str]


@cache
def real(count: int) -> tuple[tuple[str, int, str, str], ...]:
    """(id, fingerprint, digest, normalized text) of the first records of STREAM_2K."""
    batch = prepare(ENGINE, [(r, {}) for r in read_lines(STREAM_2K)[:count]], Limits(10**7))
    return tuple(
        (d.id, p.fingerprint, p.digest, p.text)
        for d, p in zip(batch.docs, batch.prints, strict=True)
    )


def documents(random: int, records: int, near: int = 0, seed: int = 7) -> Docs:
    """`records` real records with their texts among `random` random fingerprints (no
    text), and `near` fingerprints that differ from one another only in their top byte (so
    that they share most tables' buckets)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**63, random, dtype=np.uint64).tolist()
    base = int(rng.integers(0, 2**56))
    fps += [base | (int(b) << 56) for b in rng.choice(256, near, replace=False)]
    rows: list[tuple[str, int, str, str | None]] = [
        (f"r{i}", fp, f"dg-{i}", None) for i, fp in enumerate(fps)
    ]
    for n, row in enumerate(real(records)):
        rows.insert(min(2 * n, len(rows)), row)
    ids, fps, digests = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    texts = {at: r[3] for at, r in enumerate(rows) if r[3] is not None}
    return Docs(ids, np.array(fps, np.uint64), digests, texts)


def committed(index: RedisIndex, docs: Docs, size: int = 64) -> None:
    """The documents the normal way: a lookup, then a commit, a batch at a time."""
    items = []
    for at, doc_id in enumerate(docs.ids):
        fp = int(docs.fps[at])
        decision = Decision(
            doc_id,
            None,
            fp,
            features=ENGINE.version,
            namespace=index.namespace,
            detector=__version__,
            decided_at=WHEN,
            digest=docs.digests[at],
        )
        text = docs.texts.get(at, "")
        items.append(Commit(decision, Entry(doc_id, "t", fp, docs.digests[at], text)))
    for at in range(0, len(items), size):
        part = items[at : at + size]
        index.lookup([Query("t", i.decision.fingerprint, i.decision.digest) for i in part])
        assert index.commit(part).done == len(part)


def _unnamed(value: bytes, doc_id: str) -> Any:
    """A decision record with its index's name taken out: its head as stored, its body
    parsed (the body is deflated, so the name is not there to cut out)."""
    stored = parse_decision(value, doc_id)
    return value[: len(value) - len(record_body(stored.decision))], replace(
        stored, decision=replace(stored.decision, namespace="")
    )


def state(client: Any, name: str) -> dict[bytes, Any]:
    """Every key of an index by its name with the index's name taken out, with its value;
    the texts unpacked (what a reader gets), the log and its base and the recent writes
    (rd, rw, rtrim: the commits' bridge to the shards, which a bulk load leaves empty)
    left out."""
    index = RedisIndex.open(client, name)
    out: dict[bytes, Any] = {}
    for key in index_keys(client, name):
        family = index.layout.family(key)
        if family in ("log", "logbase", "rd", "rw", "rtrim"):
            continue
        kind = client.type(key)
        value: Any
        if kind == b"hash":
            value = client.hgetall(key)
            if family == "dc":  # decision records name their index, in a deflated body
                value = {f: _unnamed(v, f.decode()) for f, v in value.items()}
        elif kind == b"set":
            value = client.smembers(key)
        elif family == "tx":
            value = index.texts([key.split(b":tx:", 1)[1].decode()])
            if not any(value.values()):
                continue  # committed without a text: what a bulk load writes no key for
        else:
            value = client.get(key).replace(f'"index":"{name}"'.encode(), b"")
        out[key.replace(name.encode(), b"NAME")] = value
    return out


def bulk_index(
    backend: Any, names: list[str], docs: Docs, chunk: int = 500, **options: Any
) -> RedisIndex:
    name = unique("bulk")
    names.append(name)
    index = RedisIndex(backend, SCHEME, name, **options)
    loaded = load(
        index,
        ENGINE.version,
        docs.ids,
        docs.fps,
        docs.digests,
        docs.texts,
        decided_at=WHEN,
        chunk=chunk,
        progress=lambda _: None,
    )
    assert loaded.documents == len(docs.ids)
    return index


def test_bulk_load_leaves_the_keys_that_committing_leaves(backend: Any, names: list[str]) -> None:
    # enough texts for a dictionary; a flood of near fingerprints into a few buckets,
    # past --max-bucket, so that buckets are cut back and entries counted as evicted
    docs = documents(random=300, records=SAMPLE_TEXTS + 50, near=40)
    # every document with a text, as every document a consumer commits has one
    docs.texts |= {at: f"text of {i}" for at, i in enumerate(docs.ids) if at not in docs.texts}
    bulk = bulk_index(backend, names, docs, max_bucket=4)
    normal_name = unique("normal")
    names.append(normal_name)
    normal = RedisIndex(backend, SCHEME, normal_name, max_bucket=4)
    normal.bind(ENGINE.version)
    committed(normal, docs)

    got, want = state(backend, bulk.namespace), state(backend, normal_name)
    assert set(got) == set(want)
    assert [k for k in got if got[k] != want[k]] == []
    assert normal.stats()["evicted"] > 0
    assert bulk.stats() | {"server_used_memory": 0} == normal.stats() | {"server_used_memory": 0}
    assert bulk.stats()["text_dictionary"] != 0
    assert int(backend.get(bulk.layout.logbase)) == len(docs.ids)


@pytest.fixture
def loaded(backend: Any, names: list[str]) -> tuple[RedisIndex, Docs]:
    docs = documents(random=3000, records=200, near=12)
    return bulk_index(backend, names, docs, chunk=1 << 24), docs  # the default: one chunk


@settings(fixtured(max_examples=12), derandomize=True)  # the same examples every run
@given(data=st.data())
def test_lookup_after_bulk_load_finds_what_brute_force_finds(
    loaded: tuple[RedisIndex, Docs], data: st.DataObject
) -> None:
    index, docs = loaded
    at = data.draw(st.integers(0, len(docs.ids) - 1))
    flips = data.draw(st.sets(st.integers(0, 63), max_size=SCHEME.k))
    fp = int(docs.fps[at]) ^ sum(1 << b for b in flips)
    exact = data.draw(st.booleans())
    found = index.lookup([Query("t", fp, docs.digests[at] if exact else "unseen")])[0]
    distances = np.bitwise_count(docs.fps ^ np.uint64(fp))
    want = {docs.ids[i]: int(distances[i]) for i in np.flatnonzero(distances <= SCHEME.k)}
    assert {c.id: c.distance for c in found.candidates} == want
    # the first copy of a digest is the one a digest field names
    assert found.exact == (docs.ids[docs.digests.index(docs.digests[at])] if exact else None)


def test_the_normal_path_carries_on_after_a_bulk_load(
    loaded: tuple[RedisIndex, Docs], backend: Any
) -> None:
    index, docs = loaded
    n = len(docs.ids)
    stats = index.stats()
    assert (stats["documents"], stats["committed"], stats["deleted"]) == (n, n, 0)
    exported = list(maintenance.documents(index))
    assert sorted(r["decision"]["id"] for r in exported) == sorted(docs.ids)
    with_text = {r["id"]: r["text"] for r in exported if "text" in r}
    assert with_text == {docs.ids[at]: text for at, text in docs.texts.items()}

    fp = 0x0123456789ABCDEF
    assert index.lookup([Query("t", fp, "new")])[0].candidates == []
    index.commit(
        [Commit(Decision("new", None, fp, digest="new"), Entry("new", "t", fp, "new", "x"))]
    )
    number = n + 1
    assert backend.hget(index.layout.ids(number // 128), number % 128) == b"new"
    assert [c.id for c in index.lookup([Query("t", fp ^ 1, "q")])[0].candidates] == ["new"]

    gone = docs.ids[5]
    assert index.delete([gone]) == [gone]
    near = index.lookup([Query("t", int(docs.fps[5]), docs.digests[5])])[0]
    assert gone not in [c.id for c in near.candidates] and near.exact != gone
    stats = index.stats()
    assert (stats["documents"], stats["committed"], stats["deleted"]) == (n, n + 1, 1)


def test_bulk_load_refuses_an_index_that_has_documents(
    loaded: tuple[RedisIndex, Docs], backend: Any, names: list[str]
) -> None:
    index, _ = loaded
    with pytest.raises(ConfigError, match="already has documents"):
        load(index, ENGINE.version, ["x"], np.array([1], np.uint64))
    name = unique("bulk")
    names.append(name)
    with pytest.raises(ConfigError, match="retention"):
        load(RedisIndex(backend, SCHEME, name, retention=60), ENGINE.version, ["x"], np.ones(1))
    with pytest.raises(ConfigError, match="distinct"):
        load(RedisIndex(backend, SCHEME, name), ENGINE.version, ["x", "x"], np.ones(2))
    RedisIndex(backend, SCHEME, name).bind("another engine")
    with pytest.raises(ConfigError, match="fingerprints of"):  # bound as the normal path is
        load(RedisIndex(backend, SCHEME, name), ENGINE.version, ["x"], np.ones(1))
