"""The text dictionary of a Redis index (index.texts, keys.py: txdict), on the server and on
the cluster: consumers starting at once end with one dictionary; a consumer reads what any
other wrote, fetching the dictionary a text names; a restarted consumer packs with the same
one; LZ4 texts of older indexes still read; a lost dictionary is given back by a consumer
that has it; deletes and retention leave it alone; export and import carry the texts."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from redis.cluster import RedisCluster

from detector.blocks import BlockScheme
from detector.index import Commit, Entry, Query
from detector.index.redis import RedisIndex, maintenance
from detector.index.texts import SAMPLE_TEXTS, Codec, MissingDictionary, frame_dictionary
from detector.records import Decision
from detector.settings import EngineSettings

from ..helpers import STREAM_2K, decide_in_batches, read_lines, stream_texts, verdict
from .admin import drop_index, index_keys, unique
from .endpoints import cluster_client, redis_client

SCHEME = BlockScheme.parse(EngineSettings().scheme)


def entries(texts: tuple[str, ...], prefix: str, start: int = 0) -> list[Entry]:
    """Documents of these texts, each with its own digest and a random fingerprint (the
    texts repeat: reposts), so that no two are near each other."""
    rng = random.Random(f"{prefix}{start}")
    return [
        Entry(f"{prefix}{n}", "t", rng.getrandbits(64), f"{prefix}{n}", t)
        for n, t in enumerate(texts, start)
    ]


def add(index: RedisIndex, docs: list[Entry], batch: int = 100) -> None:
    """As a consumer indexes them: a lookup, then the commit, a batch at a time."""
    for at in range(0, len(docs), batch):
        part = docs[at : at + batch]
        index.lookup([Query(e.space, e.fingerprint, e.digest) for e in part])
        done = index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in part])
        assert done.done == len(part)


def stored_forms(client: Any, name: str) -> dict[str, bytes]:
    """Every text key of the index and the bytes it holds."""
    keys = [k for k in index_keys(client, name) if b"}:tx:" in k]
    return {k.decode(): client.get(k) for k in keys}


def same_client(backend: Any) -> Any:
    """Another connection to the same servers, as another process would have."""
    return cluster_client() if isinstance(backend, RedisCluster) else redis_client()


@pytest.fixture
def name(backend: Any) -> Iterator[str]:
    n = unique("texts")
    yield n
    drop_index(backend, n)
    assert not index_keys(backend, n)  # the dictionary too


def test_two_consumers_starting_at_once_end_with_one_dictionary(backend: Any, name: str) -> None:
    """Each fills its sample at the same moment (a barrier before its last batch), trains
    and offers its dictionary; one offer wins, and the other packs with it, its sample
    packed again too: every text of the index names the one dictionary."""
    texts = stream_texts()[: 2 * SAMPLE_TEXTS]
    mine = [entries(texts[0::2], "a"), entries(texts[1::2], "b")]
    barrier = threading.Barrier(2, timeout=120)
    indexes: list[RedisIndex] = []

    def consumer(docs: list[Entry]) -> RedisIndex:
        index = RedisIndex(same_client(backend), SCHEME, name)
        add(index, docs[: SAMPLE_TEXTS - 100])
        barrier.wait()
        add(index, docs[SAMPLE_TEXTS - 100 :])
        barrier.wait()
        index.lookup([Query("t", 0, "next batch")])  # a consumer's next lookup
        return index

    with ThreadPoolExecutor(2) as pool:
        indexes = list(pool.map(consumer, mine))
    data = backend.get(f"nd:{{{name}}}:txdict")
    made = int.from_bytes(data[4:8], "little")
    assert made and [i.codec.dictionary_id for i in indexes] == [made, made]
    assert sum(i.made_dictionary for i in indexes) == 1
    assert [i.stats()["text_dictionary"] for i in indexes] == [made, made]

    forms = stored_forms(backend, name)
    assert len(forms) == len(texts)
    named = [frame_dictionary(v) for v in forms.values()]
    assert set(named) <= {0, made}
    assert named.count(made) >= 0.98 * len(texts), "the samples were not packed again"
    reader = RedisIndex(same_client(backend), SCHEME, name)  # has loaded nothing
    every = [e for docs in mine for e in docs]
    assert reader.texts([e.id for e in every]) == {e.id: e.text for e in every}
    assert reader.codec.missing(forms.values()) == set()


def test_a_restarted_consumer_reads_what_was_written_and_packs_with_the_same_dictionary(
    backend: Any, name: str
) -> None:
    first = RedisIndex(backend, SCHEME, name)
    before = entries(stream_texts()[: SAMPLE_TEXTS + 50], "s")
    add(first, before)
    made = first.codec.dictionary_id
    assert made and first.made_dictionary

    again = RedisIndex(same_client(backend), SCHEME, name)  # the process restarted
    assert again.codec.dictionary_id == 0
    assert again.texts([e.id for e in before]) == {e.id: e.text for e in before}
    later = entries(stream_texts()[SAMPLE_TEXTS + 50 : SAMPLE_TEXTS + 150], "s", 5000)
    add(again, later)
    assert again.codec.dictionary_id == made and not again.made_dictionary
    forms = stored_forms(backend, name)
    assert {frame_dictionary(forms[again.layout.text(e.id)]) for e in later} == {made}
    assert first.texts([e.id for e in later]) == {e.id: e.text for e in later}


def test_lz4_texts_of_an_older_index_read_beside_zstd_ones(backend: Any, name: str) -> None:
    """An index written before zstd holds LZ4 texts: they are read as they are, and what
    is written from then on is zstd, with the dictionary once the sample is full."""
    older = RedisIndex(backend, SCHEME, name, codec=Codec("lz4"))
    old = entries(stream_texts()[:300], "old")
    add(older, old)
    forms = stored_forms(backend, name)
    assert all(frame_dictionary(v) is None for v in forms.values())

    newer = RedisIndex(same_client(backend), SCHEME, name)
    assert newer.texts([e.id for e in old]) == {e.id: e.text for e in old}
    new = entries(stream_texts()[300 : 300 + SAMPLE_TEXTS + 10], "new")
    add(newer, new)
    made = newer.codec.dictionary_id
    assert made
    forms = stored_forms(backend, name)
    assert {frame_dictionary(forms[newer.layout.text(e.id)]) for e in old} == {None}
    assert {frame_dictionary(forms[newer.layout.text(e.id)]) for e in new[-5:]} == {made}
    both = old + new
    assert newer.texts([e.id for e in both]) == {e.id: e.text for e in both}
    assert older.texts([e.id for e in both]) == {e.id: e.text for e in both}


def test_a_lost_dictionary_is_given_back_and_a_text_without_its_dictionary_says_so(
    backend: Any, name: str
) -> None:
    writer = RedisIndex(backend, SCHEME, name)
    docs = entries(stream_texts()[: SAMPLE_TEXTS + 20], "s")
    add(writer, docs)
    key = writer.layout.txdict
    kept = backend.get(key)
    backend.delete(key)  # lost: deleted by hand, or a failover before it reached a replica

    stranger = RedisIndex(same_client(backend), SCHEME, name)
    with pytest.raises(MissingDictionary) as caught:
        stranger.texts([docs[-1].id])
    assert caught.value.dictionary == writer.codec.dictionary_id
    writer.lookup([Query("t", 1, "next batch")])  # the writer sees it gone, and gives it back
    assert backend.get(key) == kept
    assert stranger.texts([e.id for e in docs]) == {e.id: e.text for e in docs}


def test_deletes_and_retention_leave_the_dictionary_and_repacked_texts_keep_their_ttl(
    backend: Any, name: str
) -> None:
    index = RedisIndex(backend, SCHEME, name, retention=600)
    index.bind("v1")
    docs = entries(stream_texts()[: SAMPLE_TEXTS + 10], "s")
    add(index, docs)
    made = index.stats()["text_dictionary"]
    assert made
    key = index.layout.txdict
    assert backend.ttl(key) == -1  # the texts expire; the dictionary they name does not
    first = index.layout.text(docs[0].id)  # of the sample, packed again
    assert frame_dictionary(backend.get(first)) == made
    assert 0 < backend.ttl(first) <= 600 + index.granularity
    assert maintenance.memory(index, exact=True).keys["txdict"] == 1

    assert len(index.delete([e.id for e in docs])) == len(docs)
    maintenance.sweep(index)
    assert index.stats()["text_dictionary"] == made
    assert stored_forms(backend, name) == {}
    add(index, entries(stream_texts()[SAMPLE_TEXTS + 10 : SAMPLE_TEXTS + 20], "t"))
    assert {frame_dictionary(v) for v in stored_forms(backend, name).values()} == {made}


def test_an_export_carries_the_texts_and_an_import_packs_them_again(
    backend: Any, name: str
) -> None:
    """Exported as text, whatever their form; the import packs them for the new index,
    which trains its own dictionary on them; both then decide alike."""
    raw = read_lines(STREAM_2K)
    copy = unique("texts")
    try:
        a = RedisIndex(backend, SCHEME, name)
        decide_in_batches(a, raw[:1400])
        assert a.stats()["text_dictionary"]
        exported = list(maintenance.documents(a))
        texts = {r["id"]: r["text"] for r in exported if "text" in r}
        assert len(texts) > SAMPLE_TEXTS
        assert a.texts(list(texts)) == texts

        b = RedisIndex(same_client(backend), SCHEME, copy)
        b.bind(EngineSettings().engine().version)
        assert maintenance.restore(b, iter(exported)) == len(exported)
        assert b.texts(list(texts)) == texts
        assert b.stats()["text_dictionary"]  # trained on the import's first texts

        def by_id(records: list[dict[str, Any]]) -> dict[str, Any]:
            return {r["decision"]["id"]: r for r in records}

        assert by_id(list(maintenance.documents(b))) == by_id(exported)

        def later(index: RedisIndex) -> list[Any]:
            return [verdict(d.to_dict()) for d in decide_in_batches(index, raw[1400:])]

        assert later(a) == later(b)
    finally:
        drop_index(backend, copy)
