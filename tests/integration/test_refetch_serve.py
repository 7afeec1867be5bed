"""Crawler feeds through `neardup serve`, on the Redis server and on the cluster: records
keyed by URL and fetched again (unchanged, changed, stale), Kafka tombstones, and the
audit fields (the record's headers, topic, partition and offset, its url)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..helpers import words_text
from .admin import create_topics, wait_for_group
from .processes import Names, Serve, logs, produce_keyless_tombstone
from .readers import DecisionReader, Producer, TopicReader

TRACE = ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")


def send_all(topic: str, steps: list[tuple[str, dict[str, Any] | None]]) -> list[Any]:
    """Records (a value, or None for a tombstone) keyed by id, in order, on partition 0,
    each with a traceparent header; returns their RecordMetadata."""
    with Producer() as producer:
        for key, record in steps:
            value = None if record is None else json.dumps(record).encode()
            producer.send(topic, value, key=key.encode(), partition=0, headers=[TRACE])
        return producer.flush()


def test_refetches_tombstones_and_audit_fields_through_serve(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
    index_at: dict[str, str],
) -> None:
    create_topics({names.input: 1})
    old, new, other = words_text(11), words_text(12), words_text(13)
    url = "https://docs.example/page"
    steps: list[tuple[str, dict[str, Any] | None]] = [
        ("page", {"id": "page", "text": old, "url": url, "version": 1}),  # 0 new
        ("page", {"id": "page", "text": old, "url": url, "version": 2}),  # 1 unchanged
        ("page", {"id": "page", "text": new, "url": url, "version": 3}),  # 2 changed
        ("copy-new", {"id": "copy-new", "text": new}),  # 3 a copy of the new content
        ("copy-old", {"id": "copy-old", "text": old}),  # 4 a copy of the old content
        ("page", {"id": "page", "text": old, "url": url, "version": 2}),  # 5 stale
        ("gone", {"id": "gone", "text": other}),  # 6
        ("gone", None),  # 7 a tombstone
        ("copy-gone", {"id": "copy-gone", "text": other}),  # 8 a copy of what was deleted
        ("gone", {"id": "gone", "text": other}),  # 9 the id again: decided afresh
    ]
    server = serve(env=index_at)
    sent = send_all(names.input, steps)
    produce_keyless_tombstone(names.input, [TRACE])  # no key and no value: a dead letter
    assert decisions.until(lambda r: len(r.records) >= 9 and r.tombstones, 90, idle=1.0), (
        f"{len(decisions.records)} decisions, {decisions.tombstones}\n{logs([server])}"
    )
    assert dead_letters.until(lambda r: len(r.records) >= 1, 30), logs([server])
    out = {(d["_offset"], d["id"]): d for d in decisions.records}
    by_step = [out.get((meta.offset, key)) for meta, (key, _) in zip(sent, steps, strict=True)]
    new0, unchanged, changed, copy_new, copy_old, stale, gone, _, copy_gone, again = by_step

    def verdict(d: dict[str, Any] | None) -> Any:
        assert d is not None
        return {k: v for k, v in d.items() if not k.startswith("_") and k != "offset"}

    assert new0 is not None and new0["decision"] == "unique" and new0["url"] == url
    assert verdict(unchanged) == verdict(new0), "an unchanged re-fetch: the same decision"
    assert changed is not None and changed["revision"] == 1
    assert changed["previous_fingerprint"] == new0["fingerprint"]
    assert changed["decision"] == "unique" and changed["version"] == 3
    assert copy_new is not None and (copy_new["duplicate_of"], copy_new["exact"]) == ("page", True)
    assert copy_new["duplicate_of_revision"] == 1
    assert copy_old is not None and copy_old["decision"] == "unique", "the old version is gone"
    assert verdict(stale) == verdict(changed), "stale: the stored decision republished"
    assert gone is not None and gone["decision"] == "unique"
    assert [t["_key"] for t in decisions.tombstones] == [b"gone"], "the tombstone forwarded"
    assert copy_gone is not None and copy_gone["decision"] == "unique", "deleted: no candidate"
    assert again is not None and "revision" not in again, "deleted: the id starts afresh"

    for step, d in enumerate(by_step):
        if d is None:
            continue
        assert d["_headers"] == [TRACE], f"step {step}: the record's headers are copied"
        assert (d["topic"], d["partition"]) == (names.input, 0)
        if step not in (1, 5):  # a replay republishes the decision of the first delivery
            assert d["offset"] == sent[step].offset
    assert decisions.tombstones[0]["_headers"] == [TRACE]
    letter = dead_letters.records[0]
    assert (letter["reason"], letter["offset"]) == ("tombstone_without_key", len(steps))
    assert letter["_headers"] == [TRACE]
    assert server.stop() == 0, logs([server])


def test_tombstones_can_be_ignored(
    names: Names, serve: Callable[..., Serve], decisions: DecisionReader
) -> None:
    create_topics({names.input: 1})
    text = words_text(21)
    server = serve(["--tombstones", "ignore"])
    send_all(
        names.input,
        [("a", {"id": "a", "text": text}), ("a", None), ("b", {"id": "b", "text": text})],
    )
    assert decisions.until(lambda r: len(r.records) >= 2, 60, idle=2.0), logs([server])
    b = next(d for d in decisions.records if d["id"] == "b")
    assert b["duplicate_of"] == "a", "the tombstone was ignored: a stays indexed"
    assert not decisions.tombstones
    assert server.stop() == 0, logs([server])


def test_a_changed_record_and_a_copy_of_its_new_content_on_two_partitions_at_once(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    index_at: dict[str, str],
) -> None:
    """Two consumers, one partition each: every page is first indexed, then its changed
    version goes to one partition and a copy of the new content to the other in the same
    burst. Whatever the interleaving, the two are never both unique."""
    pages = 30
    create_topics({names.input: 2})
    servers = [serve(env=index_at), serve(env=index_at)]
    wait_for_group(names.group, 2, why=lambda: logs(servers))
    olds = {f"p{i}": words_text(300 + i) for i in range(pages)}
    news = {f"p{i}": words_text(400 + i) for i in range(pages)}
    with Producer() as producer:
        for page, text in olds.items():
            producer.send_record(names.input, {"id": page, "text": text}, partition=0)
        producer.flush()
    assert not decisions.wait_for(list(olds), timeout=60), logs(servers)
    with Producer() as producer:
        for page, text in news.items():
            producer.send_record(names.input, {"id": page, "text": text}, partition=0)
            producer.send_record(names.input, {"id": f"copy-{page}", "text": text}, partition=1)
        producer.flush()
    copies = [f"copy-{p}" for p in news]
    assert not decisions.wait_for(copies, timeout=90), logs(servers)
    assert decisions.until(lambda r: len(r.records) >= 3 * pages, 60), logs(servers)
    latest = {}
    for d in decisions.records:
        latest[d["id"]] = d
    for page in news:
        revised, copy = latest[page], latest[f"copy-{page}"]
        assert revised.get("revision") == 1, revised
        assert (revised["decision"], copy["decision"]) != ("unique", "unique"), (revised, copy)
        if copy["decision"] == "duplicate":
            assert (copy["duplicate_of"], copy["duplicate_of_revision"]) == (page, 1)
        else:
            assert revised["duplicate_of"] == f"copy-{page}"
    for s in servers:
        assert s.stop() == 0, logs(servers)
