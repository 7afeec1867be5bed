"""Hostile input, fuzzed: arbitrary bytes, arbitrary JSON and record-like objects with
adversarial text go through prepare(), Detector.process() and run(). Nothing escapes, and
every record gets exactly one decision or one error record. The @example inputs are what
the fuzzing (or a look at the code it drew attention to) found."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector.engine import Engine
from detector.pipeline import Limits, prepare, run
from detector.records import DEFAULT_MAX_BYTES, DEFAULT_MAX_TOKENS, Document, RawRecord
from detector.stream.memory import ListSink

from .helpers import make_detector
from .strategies import hostile_text, json_values, records


@st.composite
def raw_values(draw: st.DrawFn) -> bytes:
    """One input record's bytes: anything, any JSON, or an object that looks like a record,
    written with escapes (lone surrogates as \\udXXX) or raw (those as invalid UTF-8)."""
    kind = draw(st.sampled_from(["bytes", "json", "record", "record"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    value = draw(json_values if kind == "json" else records)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


batches = st.lists(raw_values(), max_size=16)
limits = st.sampled_from([DEFAULT_MAX_TOKENS, 8])  # 8: too_many_tokens is drawn often
engines = st.sampled_from(
    [
        {},
        {"features": "shingles", "shingle_size": 3},
        {"cjk_ngram": 1},
        {"cjk_ngram": 4, "literal_shingle": 1},
        {"scheme": "manku-4", "threshold": 0.0},
    ]
)
# Each example takes a few milliseconds: more of them than the suite's default, still
# well under 20 s for the file (and more again under HYPOTHESIS_PROFILE=thorough).
many = settings(max_examples=max(300, settings().max_examples))


def numbered(raws: list[bytes]) -> list[RawRecord]:
    return [(raw, {"line": n}) for n, raw in enumerate(raws)]


def accepted_ids(raws: list[bytes], error_lines: set[int]) -> list[str]:
    """The ids of the records that got no error record, in input order."""
    return [json.loads(raw)["id"] for n, raw in enumerate(raws) if n not in error_lines]


def check_errors(errors: list[dict[str, Any]], raws: list[bytes]) -> set[int]:
    lines = [int(e["line"]) for e in errors]
    assert len(set(lines)) == len(lines), "one error record per bad record"
    for e in errors:
        assert isinstance(e["reason"], str) and e["reason"]
        assert isinstance(e["detail"], str)
        raw = raws[int(e["line"])]
        assert base64.b64decode(e["raw_base64"]) == raw and e["raw_bytes"] == len(raw)
        json.dumps(e)  # a sink can write it as it is
    return set(lines)


# html.unescape raised ValueError on it (int() of more than 4,300 digits): a crash.
LONG_DECIMAL_REF = json.dumps({"id": "ref", "text": "<p>&#" + "1" * 5000 + ";</p>"}).encode()
# Random hyperplanes for 20,000 dimensions, cached per dimension: memory without bound.
HUGE_EMBEDDING = b'{"id": "e", "text": "t", "embedding": [%s]}' % b",".join([b"0"] * 20_000)


@many
@given(raws=batches, max_tokens=limits, options=engines)
@example(raws=[LONG_DECIMAL_REF], max_tokens=DEFAULT_MAX_TOKENS, options={})
@example(
    raws=[b'{"id": "x", "text": "\\ud800"}', b'{"id": "x", "text": "a"}'], max_tokens=8, options={}
)
@example(raws=[HUGE_EMBEDDING, HUGE_EMBEDDING.replace(b"[", b"[1,")], max_tokens=8, options={})
def test_prepare_then_process_decides_or_rejects_every_record(
    raws: list[bytes], max_tokens: int, options: dict[str, Any]
) -> None:
    detector = make_detector(**options)
    batch = prepare(detector.engine, numbered(raws), Limits(DEFAULT_MAX_BYTES, max_tokens))
    assert batch.size == len(raws) == len(batch.docs) + len(batch.errors)
    bad = check_errors(batch.errors, raws)
    decisions = detector.process(batch.docs, batch.prints) if batch.docs else []
    assert [d.id for d in decisions] == accepted_ids(raws, bad)
    for d in decisions:
        json.loads(d.to_json())


@many
@given(raws=batches, batch_size=st.sampled_from([1, 3, 64]), max_tokens=limits)
@example(raws=[LONG_DECIMAL_REF], batch_size=1, max_tokens=DEFAULT_MAX_TOKENS)
def test_run_publishes_one_decision_or_one_error_per_record(
    raws: list[bytes], batch_size: int, max_tokens: int
) -> None:
    sink = ListSink()
    counts = run(
        make_detector(),
        numbered(raws),
        sink,
        batch_size,
        Limits(DEFAULT_MAX_BYTES, max_tokens),
    )
    assert counts.records == len(raws) == len(sink.out) + len(sink.errors)
    assert counts.errors == len(sink.errors) == sum(counts.reasons.values())
    assert counts.unique + counts.duplicates == len(sink.out)
    bad = check_errors(sink.errors, raws)
    assert [d.id for d in sink.out] == accepted_ids(raws, bad)


@given(text=hostile_text, others=st.lists(hostile_text, max_size=4))
@example(text="<p>&#" + "7" * 4400 + ";", others=[])
def test_fingerprinting_is_deterministic(text: str, others: list[str]) -> None:
    """The same text gets the same fingerprint and digest: twice in one batch, from a
    fresh engine, and after other texts have filled the engine's token table."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # records reject surrogates
    others = [t.encode("utf-8", "replace").decode("utf-8") for t in others]
    warm = Engine()
    warm.fingerprint([Document(str(i), t) for i, t in enumerate(others)])
    batch = [Document("a", text), *(Document(str(i), t) for i, t in enumerate(others))]
    prints = [
        *warm.fingerprint([*batch, Document("b", text)]),
        Engine().fingerprint([Document("c", text)])[0],
    ]
    first, again, fresh = prints[0], prints[-2], prints[-1]
    for p in (again, fresh):
        assert (p.fingerprint, p.digest, p.text) == (first.fingerprint, first.digest, first.text)
        assert list(p.shingles) == list(first.shingles)


def test_the_limits_are_errors_not_exceptions() -> None:
    """The limits only ever surface as error records (reasons a sink can count)."""
    batch = numbered(
        [
            json.dumps({"id": "big", "text": "x" * 200}).encode(),
            json.dumps({"id": "many", "text": "a " * 50}).encode(),
        ]
    )
    out = prepare(Engine(), batch, Limits(max_bytes=150, max_tokens=49))
    assert [e["reason"] for e in out.errors] == ["too_large", "too_many_tokens"]
    assert out.errors[1]["detail"] == "50 tokens, the limit is 49"
    assert not out.docs
