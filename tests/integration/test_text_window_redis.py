"""The window of texts kept (--text-window) on a Redis index, on the server and on the
cluster: two consumers deciding at once keep the index to its window, a consumer started
again keeps it there, the texts' memory comes back when they leave it, and every indexed
document keeps its sketch (keys.py: tx, tq; RedisIndex.trim_texts)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
from redis.cluster import RedisCluster

from detector.errors import ConfigError
from detector.index.redis import RedisIndex, maintenance
from detector.index.texts import split
from detector.pipeline import Limits, prepare
from detector.settings import EngineSettings

from ..helpers import STREAM_2K, read_lines, verdict
from .admin import index_keys, index_names, unique
from .endpoints import cluster_client, redis_client

names = index_names  # the index suites' fixture: every index named is deleted at the end
BATCH = 100


def consumer(backend: Any, name: str, window: int | None, retention: int = 0) -> Any:
    """A detector over its own connection to the index, as another process would have."""
    client = cluster_client() if isinstance(backend, RedisCluster) else redis_client()
    settings = replace(EngineSettings(), text_window=window)
    index = RedisIndex(
        client,
        settings.block_scheme(),
        name,
        retention=retention,
        vectors=settings.vector_block_scheme(),
        text_window=window,
    )
    return settings.detector(index)


def decide(detector: Any, raw: list[bytes]) -> None:
    """Decide records a batch at a time, as serve does."""
    for at in range(0, len(raw), BATCH):
        batch = prepare(detector.engine, [(r, {}) for r in raw[at : at + BATCH]], Limits(10**7))
        detector.process(batch.docs, batch.prints)


def tx_values(backend: Any, name: str) -> dict[bytes, bytes]:
    keys = [k for k in index_keys(backend, name) if b"}:tx:" in k]
    return {k: backend.get(k) for k in keys}


def sketch_fields(backend: Any, name: str) -> dict[bytes, bytes]:
    """The sketches whose texts have gone: the fields of the sketch hashes (keys.py: sk)."""
    out = {}
    for key in index_keys(backend, name):
        if b"}:sk:" in key:
            out.update(backend.hgetall(key))
    return out


def windowed(backend: Any, name: str) -> tuple[int, int]:
    """(texts kept beside their sketch, sketches)."""
    parts = [split(v) for v in tx_values(backend, name).values()]
    alone = len(sketch_fields(backend, name))
    return sum(1 for s, t in parts if s and t), sum(1 for s, _ in parts if s) + alone


def test_two_consumers_at_once_and_one_started_again_keep_the_index_to_its_window(
    backend: Any, names: list[str]
) -> None:
    raw = read_lines(STREAM_2K)
    name = unique("window")
    names.append(name)
    window = 300
    first, second = consumer(backend, name, window), consumer(backend, name, window)
    with ThreadPoolExecutor(2) as pool:
        halves = [raw[0:800:2], raw[1:800:2]]
        list(pool.map(decide, (first, second), halves))
    # each consumer trims every window // 16 texts it writes: the index's upkeep (serve's,
    # once a second) brings it back to the window whoever wrote last
    first.index.trim_texts()
    kept, sketches = windowed(backend, name)
    assert window - BATCH <= kept <= window, (kept, sketches)
    assert first.index.stats()["windowed_texts"] == kept  # index stats counts them
    assert sketches >= 700
    # started again: a new process with no state of its own keeps the same window
    again = consumer(backend, name, window)
    decide(again, raw[800:1600])
    again.index.trim_texts()
    kept, later = windowed(backend, name)
    assert window - BATCH <= kept <= window
    assert again.index.stats()["windowed_texts"] == kept
    assert later >= sketches + 700


def test_texts_leaving_the_window_give_their_memory_back_and_keep_their_sketch(
    backend: Any, names: list[str]
) -> None:
    raw = read_lines(STREAM_2K)[:1000]
    name = unique("window")
    names.append(name)
    wide = consumer(backend, name, 1000)
    decide(wide, raw)
    before = tx_values(backend, name)
    kept, sketches = windowed(backend, name)
    assert kept == sketches > 800  # nothing has left a window of 1,000 yet

    def weight() -> int:
        keys = [k for k in index_keys(backend, name) if b"}:tx:" in k or b"}:sk:" in k]
        return sum(int(backend.memory_usage(k, samples=0)) for k in keys)

    full = weight()
    # an operator narrows the window: the consumers stopped, the index's meta set, and a
    # consumer of the new window started; one of the old is refused
    backend.hset(wide.index.layout.meta, "text_window", "50")
    with pytest.raises(ConfigError, match="keeps the texts of its newest 50 documents"):
        consumer(backend, name, 1000)
    narrow = consumer(backend, name, 50)
    trimmed = narrow.index.trim_texts()
    assert trimmed == kept - 50
    assert windowed(backend, name) == (50, sketches)
    had = {k.partition(b"}:tx:")[2].decode(): split(v)[0] for k, v in before.items()}
    had = {i: s for i, s in had.items() if s is not None}  # not the short texts: no sketch
    assert narrow.index.sketches(list(had)) == had
    texts = sum(len(split(v)[1] or b"") for v in before.values())
    # what is left is the sketches and 50 texts: most of the texts' bytes came back
    assert weight() < full - 0.8 * texts


@pytest.mark.parametrize("window", [-1])
def test_a_negative_window_or_one_with_a_text_ttl_is_refused(backend: Any, window: int) -> None:
    """And a consumer without a window on an index that keeps one (it would write texts
    without sketches, never trimmed) is refused, naming both."""
    scheme = EngineSettings().block_scheme()
    with pytest.raises(ConfigError, match="text-window"):
        RedisIndex(backend, scheme, unique("window"), text_window=window)
    with pytest.raises(ConfigError, match="--text-ttl and --text-window"):
        RedisIndex(backend, scheme, unique("window"), text_ttl=60, text_window=10)


def test_an_export_carries_the_sketches_and_an_import_keeps_texts_where_they_were_kept(
    backend: Any, names: list[str]
) -> None:
    """A document whose text had left the window is exported with its sketch alone, and
    imported so: the new index judges it on its sketch as the old one did."""
    raw = read_lines(STREAM_2K)
    a_name, b_name = unique("window"), unique("window")
    names += [a_name, b_name]
    a = consumer(backend, a_name, 100)
    decide(a, raw[:600])
    a.index.trim_texts()
    exported = list(maintenance.documents(a.index))
    sketched = {r["id"] for r in exported if "sketch" in r}
    texts = {r["id"]: r["text"] for r in exported if "text" in r}
    assert len(sketched) > 500
    assert len(sketched - set(texts)) >= len(sketched) - 100  # most sketches stand alone
    b = consumer(backend, b_name, 100)
    b.index.bind(b.engine.version)
    assert maintenance.restore(b.index, iter(exported)) == len(exported)
    assert b.index.sketches(list(sketched)) == a.index.sketches(list(sketched))
    assert b.index.texts(list(texts)) == texts

    def later(detector: Any) -> list[Any]:
        prepared = prepare(detector.engine, [(r, {}) for r in raw[600:900]], Limits(10**7))
        return [
            (verdict(d.to_dict()), d.evidence)
            for d in detector.process(prepared.docs, prepared.prints)
        ]

    assert later(a) == later(b)


def test_with_retention_a_sketch_stays_in_its_text_key_and_keeps_its_ttl(
    backend: Any, names: list[str]
) -> None:
    """A hash field cannot expire in Redis 7.0: where documents expire, the sketch of a
    text that left the window stays alone in its tx key, with the key's TTL."""
    raw = read_lines(STREAM_2K)[:300]
    name = unique("window")
    names.append(name)
    detector = consumer(backend, name, 20, retention=3600)
    decide(detector, raw)
    detector.index.trim_texts()
    assert not sketch_fields(backend, name)
    values = tx_values(backend, name)
    kept, sketches = windowed(backend, name)
    assert kept == 20 and sketches > 250
    assert all(0 < backend.ttl(k) <= 3600 + 36 for k in values)


def test_a_consumer_of_another_window_is_refused_and_index_commands_open_it_with_its_own(
    backend: Any, names: list[str]
) -> None:
    """Every consumer keeps the index's window; `index export` and `index delete` open
    the index with it (RedisIndex.open), so they read and drop the sketches in hashes."""
    raw = read_lines(STREAM_2K)[:400]
    name = unique("window")
    names.append(name)
    decide(consumer(backend, name, 30), raw)
    with pytest.raises(ConfigError, match=r"keeps the texts of its newest 30 .* not every text"):
        consumer(backend, name, None)
    opened = RedisIndex.open(backend, name)
    assert opened.text_window == 30
    exported = list(maintenance.documents(opened))
    sketched = [r["id"] for r in exported if "sketch" in r]
    assert len(sketched) > 300
    assert opened.delete(sketched) == sketched
    assert not sketch_fields(backend, name)
    assert opened.stats()["windowed_texts"] == 0


@pytest.mark.parametrize("window", [None, 0], ids=["texts", "sketches"])
def test_a_text_two_consumers_wrote_at_once_stays_with_the_one_that_committed(
    backend: Any, names: list[str], window: int | None
) -> None:
    """Two consumers decide one record at once (a rebalance): the first to write its text
    (SET NX, or HSETNX for a sketch alone) is the second to commit, and meets the other's
    commit. The text it wrote is the committed document's: it stays."""
    name = unique("window")
    names.append(name)
    a, b = consumer(backend, name, window), consumer(backend, name, window)
    batch = prepare(a.engine, [(r, {}) for r in read_lines(STREAM_2K)[:1]], Limits(10**7))
    write = a.index._write_texts
    calls = []

    def first_then_the_other(indexing: Any) -> set[int]:
        written: set[int] = write(indexing)
        if not calls:  # its first attempt's write went in first; the other commits now
            assert written
            b.process(batch.docs, batch.prints)
        calls.append(written)
        return written

    a.index._write_texts = first_then_the_other  # type: ignore[method-assign]
    got = a.process(batch.docs, batch.prints)
    version = batch.docs[0].id
    assert got[0].decided_at == b.index.decisions([version])[version].decided_at
    if window is None:
        assert a.index.texts([version]) == {version: batch.prints[0].text}
    else:
        assert version in a.index.sketches([version])
