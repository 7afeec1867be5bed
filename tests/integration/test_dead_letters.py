"""Bad input on the topic: every bad record lands on the dead-letter topic with its reason,
its raw bytes and where it came from; the good records around it are decided; the
consumer keeps going."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from ..helpers import SAMPLE, read_jsonl
from .admin import committed_offset, create_topics
from .processes import Names, Serve, logs
from .readers import DecisionReader, Producer, TopicReader

PARTITIONS = 3
MAX_BYTES = 2000

# (name, raw value, reason); the names are unique so that a failure says which one.
BAD: list[tuple[str, bytes | None, str]] = [
    ("not json", b"this is not JSON {", "invalid_json"),
    ("truncated json", b'{"id": "trunc", "text": "abc', "invalid_json"),
    ("empty value", b"", "invalid_json"),
    # Tombstones: test_refetch_serve.py (a keyed one deletes its id; one without a key is a
    # dead letter, tombstone_without_key, but kafka-python cannot send that)
    ("invalid utf-8", b'{"id": "latin1", "text": "caf\xe9 cr\xe8me"}', "invalid_utf8"),
    ("json array", b'[{"id": "in-array", "text": "x"}]', "not_an_object"),
    ("json string", b'"just a string"', "not_an_object"),
    ("json null", b"null", "not_an_object"),
    ("nested too deeply", b"[" * 1990, "invalid_json"),
    # `\ud800` is valid JSON in valid UTF-8, but decodes to a lone surrogate: no character
    ("lone surrogate in text", b'{"id": "sur-text", "text": "a \\ud800 b"}', "invalid_unicode"),
    ("lone surrogate in id", b'{"id": "sur\\udc00id", "text": "text"}', "invalid_unicode"),
    ("missing id", b'{"text": "a text without an id"}', "missing_id"),
    ("id not a string", b'{"id": 17, "text": "numeric id"}', "bad_id"),
    ("empty id", b'{"id": "", "text": "empty id"}', "bad_id"),
    ("id too long", json.dumps({"id": "i" * 600, "text": "long id"}).encode(), "bad_id"),
    ("missing text", b'{"id": "no-text"}', "missing_text"),
    ("null text", b'{"id": "null-text", "text": null}', "missing_text"),
    ("text not a string", b'{"id": "list-text", "text": ["a", "b"]}', "bad_text"),
    ("url not a string", b'{"id": "bad-url", "text": "t", "url": 5}', "bad_url"),
    ("meta not an object", b'{"id": "bad-meta", "text": "t", "meta": [1]}', "bad_meta"),
    ("embedding of strings", b'{"id": "e1", "text": "t", "embedding": ["a"]}', "bad_embedding"),
    ("empty embedding", b'{"id": "e2", "text": "t", "embedding": []}', "bad_embedding"),
    ("NaN in embedding", b'{"id": "e3", "text": "t", "embedding": [1, NaN]}', "embedding_nan"),
    ("inf in embedding", b'{"id": "e4", "text": "t", "embedding": [1e999]}', "embedding_infinite"),
    ("zero embedding", b'{"id": "e8", "text": "t", "embedding": [0, 0.0]}', "embedding_zero"),
    (
        "huge integer in embedding",
        b'{"id": "e7", "text": "t", "embedding": [1%s]}' % (b"0" * 400),
        "embedding_infinite",
    ),
    ("bool in embedding", b'{"id": "e5", "text": "t", "embedding": [true]}', "bad_embedding"),
    ("embedding object", b'{"id": "e6", "text": "t", "embedding": {"x": 1}}', "bad_embedding"),
    (
        "over the size limit",
        json.dumps({"id": "too-big", "text": "word " * 1000}).encode()[:4990] + b'"}' + b" " * 8,
        "too_large",
    ),
]
BAD_IDS = {"trunc", "latin1", "in-array", "no-text", "null-text", "list-text", "bad-url"}
BAD_IDS |= {"bad-meta", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "too-big", "sur-text"}


def good_records(count: int, tag: str) -> list[dict[str, Any]]:
    """Short (well under MAX_BYTES) distinct records from the sample."""
    out = []
    for r in read_jsonl(SAMPLE)[: count * 2 : 2]:
        text = r["text"][:900]
        out.append({"id": f"{tag}-{r['id']}", "text": text})
        assert len(json.dumps(out[-1], ensure_ascii=False).encode()) < MAX_BYTES
    return out


def test_every_class_of_bad_record_is_dead_lettered_and_the_consumer_goes_on(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
) -> None:
    assert len(BAD[-1][1] or b"") == 5000
    create_topics({names.input: PARTITIONS})
    server = serve(["--max-bytes", str(MAX_BYTES)])
    good = good_records(len(BAD) + 5, "good")

    sent: dict[str, tuple[bytes, Any]] = {}  # name -> (raw, metadata of the send)
    with Producer() as producer:
        futures = []
        for n, (name, raw, _reason) in enumerate(BAD):
            partition = n % PARTITIONS
            future = producer.send(names.input, raw, partition=partition)
            futures.append((name, raw, future))
            producer.send_record(names.input, good[n], partition=partition)
        producer.flush()
        for name, raw, future in futures:
            sent[name] = (raw or b"", future.get(timeout=10))
        # and after all of them, more good records: the consumer is still going
        for r in good[len(BAD) :]:
            producer.send_record(names.input, r)
        producer.flush()

    good_ids = [r["id"] for r in good]
    missing = decisions.wait_for(good_ids, timeout=60, idle=1.0)
    assert not missing, f"good records undecided: {missing}\n{logs([server])}"
    assert dead_letters.until(lambda r: len(r.records) >= len(BAD), timeout=30, idle=1.0), (
        f"{len(dead_letters.records)} dead letters of {len(BAD)}\n{logs([server])}"
    )
    assert server.alive(), logs([server])

    assert {d["id"] for d in decisions.records} == set(good_ids), "a bad record was decided"
    assert not BAD_IDS & {d["id"] for d in decisions.records}
    by_place = {(d["partition"], d["offset"]): d for d in dead_letters.records}
    assert len(by_place) == len(dead_letters.records) == len(BAD), dead_letters.records
    for name, _raw, reason in BAD:
        raw, meta = sent[name]
        letter = by_place.get((meta.partition, meta.offset))
        assert letter is not None, f"{name}: no dead letter at {meta.partition}/{meta.offset}"
        assert letter["reason"] == reason, f"{name}: {letter}"
        assert letter["topic"] == names.input, f"{name}: {letter}"
        assert base64.b64decode(letter["raw_base64"]) == raw, f"{name}: raw bytes differ"
        assert letter.get("raw_bytes", len(raw)) == len(raw), f"{name}: {letter}"
        assert isinstance(letter.get("detail", ""), str)
    assert server.stop() == 0, logs([server])


def test_texts_without_words_are_dead_letters_never_duplicates(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
) -> None:
    """An empty text, markup alone or punctuation is an `empty_text` dead letter, the
    second one as much as the first (it used to be the first's exact copy); an id
    re-fetched without words keeps its indexed version, which a later copy duplicates; an
    empty text with an embedding is decided on its vector."""
    create_topics({names.input: 1})
    server = serve()
    text = good_records(1, "t")[0]["text"]
    steps: list[dict[str, Any]] = [
        {"id": "page", "text": text},
        {"id": "empty-1", "text": ""},
        {"id": "markup", "text": " <p> <br> </p> "},
        {"id": "page", "text": "..."},  # the re-fetch lost its words
        {"id": "empty-2", "text": ""},
        {"id": "copy", "text": text},
        {"id": "vector", "text": "", "embedding": [0.25, -1, 2]},
    ]
    with Producer() as producer:
        for r in steps:
            producer.send_record(names.input, r)
        producer.flush()
    assert not decisions.wait_for(["page", "copy", "vector"], timeout=60), logs([server])
    assert dead_letters.until(lambda r: len(r.records) >= 4, timeout=30, idle=1.0)
    letters = [(d["offset"], d["reason"], d["detail"]) for d in dead_letters.records]
    words = "no words once normalized"
    assert sorted(letters) == [(n, "empty_text", words) for n in (1, 2, 3, 4)], letters
    got = decisions.by_id()
    assert set(got) == {"page", "copy", "vector"}
    assert len(got["page"]) == 1 and got["page"][0]["decision"] == "unique"
    (copy,) = got["copy"]
    assert (copy["duplicate_of"], copy["exact"]) == ("page", True)
    assert "duplicate_of_revision" not in copy, "the version indexed first is still there"
    assert got["vector"][0]["space"] == "v3"
    assert server.stop() == 0, logs([server])


BIG = 800_000  # under the broker's 1 MB message limit; its base64 is not


@pytest.mark.parametrize(
    ("reason", "extra", "raw"),
    [
        (
            "too_large",
            ["--max-bytes", str(MAX_BYTES)],
            json.dumps({"id": "huge", "text": "x" * BIG}).encode(),
        ),
        ("invalid_json", [], b"{" + b"garbage " * (BIG // 8)),
    ],
    ids=["too_large", "invalid_json"],
)
def test_a_large_bad_record_is_dead_lettered_too(
    reason: str,
    extra: list[str],
    raw: bytes,
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
) -> None:
    """A bad record the input topic took (about 800 kB) must not vanish: it gets its dead
    letter (the raw bytes may be cut short, their count not), the good records around it
    get their decisions, and no offset is committed before that is acknowledged."""
    create_topics({names.input: 1})
    server = serve(extra)
    good = good_records(5, "good")
    with Producer() as producer:
        producer.send_record(names.input, good[0])
        producer.flush()
        assert not decisions.wait_for([good[0]["id"]], timeout=30), logs([server])
        future = producer.send(names.input, raw)
        producer.send_record(names.input, good[1])
        producer.flush()
        where = future.get(timeout=10)
        time.sleep(2)  # a later batch, after the bad record's
        for r in good[2:]:
            producer.send_record(names.input, r)
        end = producer.flush()[-1].offset + 1

    missing = decisions.wait_for([r["id"] for r in good], timeout=20, idle=1.0)
    dead_letters.until(lambda r: bool(r.records), timeout=5, idle=1.0)
    letters = [d for d in dead_letters.records if d["offset"] == where.offset]
    committed = committed_offset(names.group, names.input)
    problems = []
    if not letters:
        problems.append(
            f"the {len(raw)}-byte bad record (offset {where.offset}) got no dead letter"
        )
    if missing:
        problems.append(f"{len(missing)} good records got no decision: {missing}")
    if problems and committed is not None and committed > where.offset:
        problems.append(f"yet the group committed offset {committed} (of {end}): lost for good")
    assert not problems, "\n".join(problems) + "\n" + logs([server])
    assert server.alive(), logs([server])
    letter = letters[0]
    assert letter["reason"] == reason
    assert letter["raw_bytes"] == len(raw)
    assert raw.startswith(base64.b64decode(letter["raw_base64"]))
    assert server.stop() == 0, logs([server])


MiB = 1024 * 1024
# kafka-python's consumer drops a fetch response frame over its receive_message_max_bytes
# (100,000,000 by default, whatever the fetch sizes) and fetches it again, forever; serve
# raises it to MAX_FETCH_FRAME.
FRAME_LIMIT = 100_000_000


def wait_for_commit(group: str, topic: str, end: int, timeout: float) -> int | None:
    """Until the group has committed offset `end` of partition 0; the last one read."""
    deadline = time.monotonic() + timeout
    committed = committed_offset(group, topic)
    while committed != end and time.monotonic() < deadline:
        time.sleep(0.5)
        committed = committed_offset(group, topic)
    return committed


def oversized(kind: str) -> bytes:
    if kind == "million_tokens":  # 2 MB, under serve's default max_bytes (4 MiB)
        return json.dumps({"id": "million", "text": "a " * 1_000_000}).encode()
    size = {"50MiB": 50 * MiB, "over_the_frame_limit": FRAME_LIMIT + 200_000}[kind]
    return b'{"id": "huge", "text": "' + b"x" * (size - 26) + b'"}'


@pytest.mark.parametrize(
    ("kind", "reason", "wait"),
    [
        # above the consumer's max_partition_fetch_bytes (8 MiB) and fetch_max_bytes (50 MiB):
        # the broker sends it anyway (fetch v3+, KIP-74)
        ("50MiB", "too_large", 60),
        ("million_tokens", "too_many_tokens", 60),
        # above kafka-python's default frame limit, below serve's MAX_FETCH_FRAME
        ("over_the_frame_limit", "too_large", 20),
    ],
)
def test_an_oversized_record_is_dead_lettered_and_its_partition_goes_on(
    kind: str,
    reason: str,
    wait: float,
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    dead_letters: TopicReader,
) -> None:
    """With serve's default limits: the record gets its dead letter with its reason, the
    records after it on the same partition are decided, and the offset commit reaches the
    end of the partition (nothing stalls behind the big record)."""
    raw = oversized(kind)
    # A batch must fit in a log segment as well, and the stack's segments are 16 MiB.
    configs = {"max.message.bytes": str(128 * MiB), "segment.bytes": str(256 * MiB)}
    create_topics({names.input: 1}, configs)
    server = serve()
    good = good_records(6, "after")
    with Producer(max_request_size=128 * MiB) as producer:
        producer.send_record(names.input, good[0])
        producer.flush()
        assert not decisions.wait_for([good[0]["id"]], timeout=30), logs([server])
        future = producer.send(names.input, raw)
        for r in good[1:]:
            producer.send_record(names.input, r)
        end = producer.flush(timeout=120)[-1].offset + 1
        where = future.get(timeout=10)

    missing = decisions.wait_for([r["id"] for r in good], timeout=wait, idle=1.0)
    assert not missing, f"records after the big one undecided: {missing}\n{logs([server])}"
    dead_letters.until(lambda r: bool(r.records), timeout=10, idle=1.0)
    letters = [d for d in dead_letters.records if d["offset"] == where.offset]
    assert len(letters) == len(dead_letters.records) == 1, dead_letters.records
    letter = letters[0]
    assert (letter["reason"], letter["partition"], letter["topic"]) == (reason, 0, names.input)
    assert letter["raw_bytes"] == len(raw)
    assert letter["raw_truncated"] is (len(raw) > 256 * 1024)
    assert raw.startswith(base64.b64decode(letter["raw_base64"]))
    if reason == "too_many_tokens":
        assert letter["detail"] == "1000000 tokens, the limit is 200000"
    committed = wait_for_commit(names.group, names.input, end, timeout=30)
    assert committed == end, f"committed {committed}, the partition ends at {end}"
    assert {d["id"] for d in decisions.records} == {r["id"] for r in good}
    assert server.alive(), logs([server])
    assert server.stop() == 0, logs([server])
