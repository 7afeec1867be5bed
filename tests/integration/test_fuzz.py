"""Hostile input through the whole consumer path: hypothesis-made batches of raw values
(bytes, any JSON, record-like objects with adversarial text, tombstones) on the input
topic of one `neardup serve`. Every record gets exactly one decision (by its id) or one
dead letter (by its topic, partition and offset), the consumer stays alive, and the
committed offsets reach the end of every partition."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detector.engine import Engine
from detector.extract import Extractor
from detector.index.memory import MemoryIndex
from detector.pipeline import Limits, prepare
from detector.records import DEFAULT_MAX_BYTES
from detector.settings import EngineSettings

from ..strategies import json_values, records
from .admin import committed_offset, create_topics
from .processes import Names, Serve, logs
from .readers import DecisionReader, Producer, TopicReader

PARTITIONS = 2
MARK = "\0ID\0"  # in front of a record's string id, replaced by a unique prefix
MARK_JSON = json.dumps(MARK)[1:-1].encode()


@st.composite
def values(draw: st.DrawFn) -> bytes | None:
    """A record's value: None (a tombstone, sent with a key), bytes, any JSON, or a
    record-like object."""
    kind = draw(st.sampled_from(["tombstone", "bytes", "json", "record", "record", "record"]))
    if kind == "tombstone":
        return None
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    value = draw(json_values if kind == "json" else records)
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        value["id"] = MARK + value["id"]
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def unique_ids(raws: list[bytes | None], tag: str) -> list[bytes | None]:
    """Each string id prefixed by the example's tag and the record's position: examples
    never collide, and no two records of one example share an id."""
    return [
        raw if raw is None else raw.replace(MARK_JSON, f"{tag}-{n}-".encode(), 1)
        for n, raw in enumerate(raws)
    ]


@dataclass
class Stream:
    """What the examples of one test share: the input topic and its consumer."""

    server: Serve
    engine: Engine
    extractor: Extractor  # whether a page has words depends on the text extracted from it
    ids: set[str] = field(default_factory=set)  # every id sent to be decided
    examples: int = 0

    def accepted_id(self, raw: bytes) -> str | None:
        """The id serve must decide the record under, or None for a dead letter: what
        prepare() says with serve's defaults."""
        got = prepare(self.engine, [(raw, {})], Limits(DEFAULT_MAX_BYTES), self.extractor)
        return got.docs[0].id if got.docs else None


@pytest.fixture
def stream(names: Names, serve: Callable[..., Serve]) -> Stream:
    create_topics({names.input: PARTITIONS})
    settings = EngineSettings()
    extractor = settings.extractor(MemoryIndex(settings.block_scheme()))
    return Stream(serve(), settings.engine(), extractor)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # on purpose: one consumer for all examples
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(batch=st.lists(values(), min_size=10, max_size=40))
def test_every_record_gets_one_decision_or_one_dead_letter(
    batch: list[bytes | None],
    stream: Stream,
    names: Names,
    decisions: DecisionReader,
    dead_letters: TopicReader,
) -> None:
    stream.examples += 1
    raws = unique_ids(batch, f"ex{stream.examples}")
    # a tombstone (a null value) has a key of its own: it deletes that id and is forwarded
    keys = [
        f"ex{stream.examples}-{n}-gone".encode() if raw is None else None
        for n, raw in enumerate(raws)
    ]
    with Producer() as producer:
        for n, (raw, key) in enumerate(zip(raws, keys, strict=True)):
            producer.send(names.input, raw, key=key, partition=n % PARTITIONS)
        places = [(m.partition, m.offset) for m in producer.flush()]
    expected = [None if raw is None else stream.accepted_id(raw) for raw in raws]
    wanted_ids = {i for i in expected if i is not None}
    wanted_places = {p for p, i, k in zip(places, expected, keys, strict=True) if i is k is None}
    wanted_tombstones = {k for k in keys if k is not None}
    stream.ids |= wanted_ids

    def complete(_: TopicReader) -> bool:
        decisions.poll(timeout_ms=100)
        decided = {d["id"] for d in decisions.records}
        lettered = {(d["partition"], d["offset"]) for d in dead_letters.records}
        forwarded = {t["_key"] for t in decisions.tombstones}
        return (
            wanted_ids <= decided and wanted_places <= lettered and wanted_tombstones <= forwarded
        )

    done = dead_letters.until(complete, timeout=60, idle=1.0)
    decisions.until(lambda r: True, timeout=2, idle=0.5)  # late extras, to be counted
    assert done, f"missing decisions or dead letters\n{logs([stream.server])}"

    # Exactly one of the two for every record, and nothing for anything never sent.
    by_id: dict[str, list[dict[str, Any]]] = {}
    for d in decisions.records:
        by_id.setdefault(d["id"], []).append(d)
    assert set(by_id) <= stream.ids, f"decisions of ids never sent: {set(by_id) - stream.ids}"
    by_place: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for d in dead_letters.records:
        assert d["topic"] == names.input, d
        by_place.setdefault((d["partition"], d["offset"]), []).append(d)
    forwarded = [t["_key"] for t in decisions.tombstones]
    for raw, place, doc_id, key in zip(raws, places, expected, keys, strict=True):
        letters = by_place.get(place, [])
        if key is not None:
            assert not letters, f"a tombstone was dead-lettered: {letters}"
            assert forwarded.count(key) == 1, f"tombstone {key!r} forwarded {forwarded.count(key)}x"
        elif doc_id is None:
            assert len(letters) == 1, f"{place}: {len(letters)} dead letters of {raw!r:.300}"
            assert letters[0]["reason"] and isinstance(letters[0]["detail"], str)
            assert base64.b64decode(letters[0]["raw_base64"]) == (raw or b"")[: 256 * 1024]
        else:
            assert not letters, f"{doc_id!r} was decided and dead-lettered: {letters}"
            assert len(by_id[doc_id]) == 1, f"{doc_id!r}: {by_id[doc_id]}"
            assert by_id[doc_id][0]["_key"] == doc_id.encode()

    ends = {p: 1 + max(o for q, o in places if q == p) for p, _ in places}
    committed: dict[int, int | None] = {}
    deadline = time.monotonic() + 30
    while committed != ends and time.monotonic() < deadline:
        time.sleep(0.3)
        committed = {p: committed_offset(names.group, names.input, p) for p in ends}
    assert committed == ends, f"committed {committed}, the partitions end at {ends}"
    assert stream.server.alive(), logs([stream.server])
