"""A record too large for its topic, through every producer of the project, on the real
broker: `neardup produce` names each record the topic refuses and exits 1 (it used to
count them as sent); serve's decisions and dead letters are fitted to their topics'
max.message.bytes, and a dead-letter topic too small for any dead letter stops serve
before it commits, so the record is not lost; and a topic that `produce` creates takes a
record of --max-bytes from end to end."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from .admin import committed_offset, create_topics
from .processes import Names, Serve, logs, neardup
from .readers import DecisionReader, Producer, TopicReader

DEFAULT_LIMIT = 1_048_588  # the broker's default max.message.bytes


def produce(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return neardup(["produce", str(path), *args])


def write(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def end_offset(topic: str) -> int:
    reader = TopicReader(topic)
    try:
        return sum(reader.consumer.end_offsets(reader.partitions).values())
    finally:
        reader.close()


def test_produce_names_every_record_the_topic_refuses(names: Names, tmp_path: Path) -> None:
    create_topics({names.input: 1})
    records = [
        {"id": "small-1", "text": "a record the topic takes"},
        {"id": "big", "text": "x " * 750_000},  # 1.5 MB: over the default 1 MB
        {"id": "small-2", "text": "another record the topic takes"},
        {"id": "huge", "text": "y " * 2_500_000},  # 5 MB
    ]
    done = produce(write(tmp_path / "in.jsonl", records), "--topic", names.input)
    assert done.returncode == 1, done.stderr
    assert f"2 of 4 records sent to {names.input}; 2 not sent" in done.stderr, done.stderr
    # each line longer than the topic takes is read no further than that, and named
    assert "line 2: 1,500,0" in done.stderr, done.stderr
    assert "line 4: 5,000,0" in done.stderr, done.stderr
    assert f"({DEFAULT_LIMIT:,} bytes, its max.message.bytes)" in done.stderr
    assert end_offset(names.input) == 2

    missing = produce(tmp_path / "in.jsonl", "--topic", names.input + "-nope")
    assert missing.returncode == 2, missing.stderr
    assert "does not exist" in missing.stderr and "--partitions" in missing.stderr


def test_a_topic_produce_makes_takes_records_of_max_bytes_end_to_end(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    tmp_path: Path,
) -> None:
    """--max-bytes 3 MiB, given to produce and serve alike (NEARDUP_MAX_BYTES would do):
    a 2.5 MB record reaches serve and is decided, not refused anywhere on the way."""
    text = " ".join(f"w{n % 997}x{n}" for n in range(230_000))
    record = {"id": "large", "text": text}
    assert 2_000_000 < len(json.dumps(record)) < 3 * 1024 * 1024
    path = write(tmp_path / "large.jsonl", [record])
    done = produce(path, "--topic", names.input, "--partitions", "2", "--max-bytes", "3145728")
    assert done.returncode == 0, done.stderr
    assert "1 records sent" in done.stderr, done.stderr
    server = serve(["--max-bytes", "3145728", "--max-tokens", "300000"])
    assert not decisions.wait_for(["large"], timeout=90), logs([server])
    assert decisions.first()["large"]["decision"] == "unique"
    assert server.stop() == 0, logs([server])


def test_serve_fits_decisions_and_dead_letters_to_their_topics(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
) -> None:
    """A decision over its output topic's limit (its record's 300 kB url is copied into
    it) becomes a decision_too_large dead letter that carries it; a bad record whose dead
    letter is over the dead-letter topic's limit loses its longest field, not the record;
    the records around them are decided, and serve goes on."""
    output, dead_letter = names.output + "-small", names.dead_letter + "-small"
    create_topics({names.input: 1})
    create_topics({output: 1}, {"max.message.bytes": "200000"})
    create_topics({dead_letter: 1}, {"max.message.bytes": "120000"})
    server = serve(["--output-topic", output, "--dead-letter-topic", dead_letter])
    url = "https://example.org/" + "a" * 300_000
    with Producer() as producer:
        producer.send_record(names.input, {"id": "before", "text": "a record before them"})
        producer.send_record(names.input, {"id": "long-url", "text": "a page", "url": url})
        producer.send(names.input, b"{ not json " + b"z" * 200_000)
        producer.send_record(names.input, {"id": "after", "text": "and one after them"})
        producer.flush()
    out = DecisionReader(output)
    letters = TopicReader(dead_letter)
    try:
        assert not out.wait_for(["before", "after"], timeout=60, idle=1), logs([server])
        assert letters.until(lambda r: len(r.records) >= 2, timeout=30), logs([server])
        assert "long-url" not in out.first()
        by_reason = {r["reason"]: r for r in letters.records}
        assert set(by_reason) == {"decision_too_large", "invalid_json"}, letters.records
        big = by_reason["decision_too_large"]
        assert big["id"] == "long-url" and big["offset"] == 1, big
        assert big["decision"]["decision"] == "unique" and big["decision"]["id"] == "long-url"
        assert "takes at most 200,000" in big["detail"], big
        bad = by_reason["invalid_json"]
        assert bad["raw_truncated"] and bad["cut"] == ["raw_base64"], bad
        assert bad["raw_bytes"] == 200_011 and bad["offset"] == 2, bad
        assert server.alive(), logs([server])
    finally:
        out.close()
        letters.close()
    assert server.stop() == 0, logs([server])


def test_a_dead_letter_topic_too_small_for_any_dead_letter_stops_serve_losing_nothing(
    names: Names, serve: Callable[..., Serve]
) -> None:
    dead_letter = names.dead_letter + "-tiny"
    create_topics({names.input: 1})
    create_topics({dead_letter: 1}, {"max.message.bytes": "300"})
    with Producer() as producer:
        producer.send(names.input, b"not json " * 100)
        producer.flush()
    server = serve(["--dead-letter-topic", dead_letter])
    assert server.wait(60) == 2, logs([server])
    assert f"topic {dead_letter!r} takes records of at most 300 bytes" in server.log(), server.log()
    assert committed_offset(names.group, names.input) is None  # it comes again, whole
