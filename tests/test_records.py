"""detector.records: every class of bad input is a BadRecord with its reason; the JSON
forms of decisions and error records."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detector.errors import BadRecord, DetectorError
from detector.records import (
    DEFAULT_MAX_BYTES,
    MAX_EMBEDDING_DIM,
    MAX_ID_CHARS,
    Decision,
    Document,
    error_record,
    parse_document,
)

GOOD = {"id": "doc-1", "text": "some text"}


def line(**fields: object) -> bytes:
    return json.dumps({**GOOD, **fields}).encode()


def without(key: str) -> bytes:
    body = dict(GOOD)
    del body[key]
    return json.dumps(body).encode()


# (raw line, expected reason)
BAD_LINES = {
    "not json": (b"this is not json", "invalid_json"),
    "truncated json": (b'{"id": "a", "text": "b"', "invalid_json"),
    "trailing garbage": (b'{"id": "a", "text": "b"} x', "invalid_json"),
    "single quotes": (b"{'id': 'a', 'text': 'b'}", "invalid_json"),
    "invalid utf-8": (b'{"id": "a", "text": "caf\xe9"}', "invalid_utf8"),
    "utf-16": ('{"id": "a", "text": "b"}'.encode("utf-16"), "invalid_utf8"),
    "array": (b'[{"id": "a", "text": "b"}]', "not_an_object"),
    "number": (b"42", "not_an_object"),
    "string": (b'"a string"', "not_an_object"),
    "null": (b"null", "not_an_object"),
    "bool": (b"true", "not_an_object"),
    "missing id": (without("id"), "missing_id"),
    "null id": (line(id=None), "missing_id"),
    "numeric id": (line(id=17), "bad_id"),
    "list id": (line(id=["a"]), "bad_id"),
    "empty id": (line(id=""), "bad_id"),
    "long id": (line(id="x" * (MAX_ID_CHARS + 1)), "bad_id"),
    "missing text": (without("text"), "missing_text"),
    "null text": (line(text=None), "missing_text"),
    "numeric text": (line(text=3.5), "bad_text"),
    "object text": (line(text={"a": 1}), "bad_text"),
    "list text": (line(text=["a", "b"]), "bad_text"),
    "embedding of strings": (line(embedding=["0.1", "0.2"]), "bad_embedding"),
    "embedding with NaN": (b'{"id": "a", "text": "b", "embedding": [0.1, NaN]}', "embedding_nan"),
    "embedding with Infinity": (
        b'{"id": "a", "text": "b", "embedding": [Infinity]}',
        "embedding_infinite",
    ),
    "embedding with -Infinity": (
        b'{"id": "a", "text": "b", "embedding": [0.5, -Infinity]}',
        "embedding_infinite",
    ),
    "embedding overflowing to inf": (
        b'{"id": "a", "text": "b", "embedding": [1e999]}',
        "embedding_infinite",
    ),
    "zero embedding": (line(embedding=[0, 0.0, -0.0]), "embedding_zero"),
    "empty embedding": (line(embedding=[]), "bad_embedding"),
    "embedding of bools": (line(embedding=[True, False]), "bad_embedding"),
    "embedding not a list": (line(embedding=0.5), "bad_embedding"),
    "embedding object": (line(embedding={"x": 1.0}), "bad_embedding"),
    "nested embedding": (line(embedding=[[0.1, 0.2]]), "bad_embedding"),
    "embedding with null": (line(embedding=[0.1, None]), "bad_embedding"),
    "meta a list": (line(meta=["a"]), "bad_meta"),
    "meta a string": (line(meta="x"), "bad_meta"),
    "url a number": (line(url=5), "bad_url"),
    "url an object": (line(url={"href": "x"}), "bad_url"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_input_is_a_bad_record_with_its_reason(case: str) -> None:
    raw, reason = BAD_LINES[case]
    with pytest.raises(BadRecord) as info:
        parse_document(raw)
    assert info.value.reason == reason
    assert isinstance(info.value, DetectorError)


def test_a_record_with_only_an_embedding_is_a_document_without_text() -> None:
    """The README's "Dense embeddings": such a record is decided on its vector."""
    for raw in (
        b'{"id": "v", "embedding": [0.5, 1]}',
        b'{"id": "v", "text": null, "embedding": [0.5, 1]}',
    ):
        doc = parse_document(raw)
        assert doc.text == ""
        assert doc.embedding is not None and doc.embedding.tolist() == [0.5, 1.0]


@pytest.mark.parametrize(
    ("embedding", "reason"),
    [
        (b"[0.5, NaN]", "embedding_nan"),
        (b"[Infinity, 1]", "embedding_infinite"),
        (b"[0, 0.0]", "embedding_zero"),
        (b"[]", "bad_embedding"),
        (b'["0.5"]', "bad_embedding"),
    ],
)
def test_a_bad_embedding_without_a_text_is_refused_for_its_embedding(
    embedding: bytes, reason: str
) -> None:
    """Not `missing_text`: the record has what it needs (a vector), only a bad one."""
    with pytest.raises(BadRecord) as info:
        parse_document(b'{"id": "v", "embedding": %s}' % embedding)
    assert info.value.reason == reason


def test_a_record_with_neither_text_nor_embedding_is_missing_its_text() -> None:
    for raw in (b'{"id": "v"}', b'{"id": "v", "text": null, "embedding": null}'):
        with pytest.raises(BadRecord) as info:
            parse_document(raw)
        assert info.value.reason == "missing_text"
        assert "embedding" in info.value.detail


def test_embedding_with_an_integer_too_large_for_a_float() -> None:
    """JSON integers are unbounded: 1 followed by 400 zeros is a valid JSON number that no
    float can hold. It is an infinite component, not an OverflowError that stops the run."""
    raw = b'{"id": "a", "text": "b", "embedding": [1' + b"0" * 400 + b"]}"
    with pytest.raises(BadRecord) as info:
        parse_document(raw)
    assert info.value.reason == "embedding_infinite"


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"id": "a", "text": "b", "meta": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"}",
    ],
)
def test_deeply_nested_json_is_a_bad_record(raw: bytes) -> None:
    """Well under the size limit, but deeper than the JSON parser's recursion limit: a
    RecursionError must not escape (it would stop `neardup detect` and a consumer)."""
    assert len(raw) < DEFAULT_MAX_BYTES
    with pytest.raises(BadRecord):
        parse_document(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "a", "text": "x \\ud800 y"}',
        b'{"id": "\\udc00", "text": "hello"}',
    ],
)
def test_lone_surrogate_escapes_do_not_make_an_unencodable_document(raw: bytes) -> None:
    """JSON may spell a lone surrogate ("\\ud800"), which is not Unicode text: such a record
    is either rejected as a BadRecord or parsed into a Document whose strings can be
    written out as UTF-8 again (the index stores the text, the sink writes the id)."""
    try:
        doc = parse_document(raw)
    except BadRecord:
        return
    doc.id.encode("utf-8")
    doc.text.encode("utf-8")


def test_size_limit() -> None:
    raw = line(text="x" * 100)
    assert parse_document(raw, max_bytes=len(raw)).text == "x" * 100
    with pytest.raises(BadRecord) as info:
        parse_document(raw, max_bytes=len(raw) - 1)
    assert info.value.reason == "too_large"
    # The limit is checked before parsing: a huge non-JSON line is too_large, not invalid.
    with pytest.raises(BadRecord) as info:
        parse_document(b"x" * 101, max_bytes=100)
    assert info.value.reason == "too_large"


def test_good_records_parse_with_all_optional_fields() -> None:
    doc = parse_document(
        json.dumps(
            {
                "id": "é-1",
                "text": "",
                "url": "https://example.com/a",
                "embedding": [1, 2.5, -3e-5],
                "meta": {"source": "crawler", "n": [1, 2]},
                "extra": "ignored",
            }
        ).encode()
    )
    assert isinstance(doc.embedding, np.ndarray) and doc.embedding.dtype == np.float64
    assert doc.embedding.tolist() == [1.0, 2.5, -3e-5]
    doc.embedding = None  # an array has no truth value for the comparison
    assert doc == Document(
        "é-1", "", "https://example.com/a", None, {"source": "crawler", "n": [1, 2]}
    )
    assert parse_document(b'  {"id":"a","text":"b"}  ').id == "a"
    assert parse_document(line(id="x" * MAX_ID_CHARS)).id == "x" * MAX_ID_CHARS


@given(
    doc_id=st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
        min_size=1,
        max_size=40,
    ),
    text=st.text(st.characters(exclude_categories=("Cs",)), max_size=200),
)
def test_any_string_id_and_text_round_trip(doc_id: str, text: str) -> None:
    raw = json.dumps({"id": doc_id, "text": text}, ensure_ascii=False).encode()
    doc = parse_document(raw)
    assert (doc.id, doc.text) == (doc_id, text)


def test_an_id_with_a_nul_is_a_bad_id() -> None:
    """The index names an id's later versions id NUL revision (index.version_id)."""
    with pytest.raises(BadRecord) as info:
        parse_document(json.dumps({"id": "a\x00b", "text": "t"}).encode())
    assert info.value.reason == "bad_id"


@pytest.mark.parametrize(
    ("fields", "version"),
    [
        ({}, None),
        ({"version": 3}, 3.0),
        ({"version": 2.5}, 2.5),
        ({"fetched_at": "2026-12-03T12:00:00+00:00"}, 1796299200.0),
        ({"fetched_at": "2026-12-03T12:00:00"}, 1796299200.0),  # no zone: UTC
        ({"version": 7, "fetched_at": "2026-12-03T12:00:00Z"}, 7.0),  # version wins
    ],
)
def test_a_record_may_carry_a_version_or_a_fetch_time(
    fields: dict[str, object], version: float | None
) -> None:
    doc = parse_document(json.dumps({"id": "a", "text": "t", **fields}).encode())
    assert doc.version == version


@pytest.mark.parametrize(
    "fields",
    [
        {"version": "3"},
        {"version": True},
        {"version": 1e400},
        {"fetched_at": 5},
        {"fetched_at": "soon"},
    ],
)
def test_a_bad_version_is_a_bad_record(fields: dict[str, object]) -> None:
    raw = json.dumps({"id": "a", "text": "t", **fields}).encode().replace(b"Infinity", b"1e400")
    with pytest.raises(BadRecord) as info:
        parse_document(raw)
    assert info.value.reason == "bad_version"


@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_give_a_document_or_a_bad_record(raw: bytes) -> None:
    try:
        doc = parse_document(raw)
    except BadRecord as bad:
        assert bad.reason in {
            "invalid_json",
            "invalid_utf8",
            "not_an_object",
            "missing_id",
            "bad_id",
            "missing_text",
            "bad_text",
            "bad_url",
            "bad_meta",
            "bad_embedding",
            "embedding_nan",
            "embedding_infinite",
            "embedding_zero",
            "too_large",
        }
    else:
        assert isinstance(doc.id, str) and isinstance(doc.text, str)


# --- decisions and error records ---------------------------------------------------------


def test_decision_json_contract() -> None:
    d = Decision(
        "b",
        "a",
        0x00FF_0000_0000_0001,
        distance=2,
        similarity=0.912345,
        exact=False,
        features="f",
        namespace="ns",
        detector="0.1.0",
    )
    body = json.loads(d.to_json())
    assert body["id"] == "b"
    assert body["decision"] == "duplicate"
    assert body["duplicate_of"] == "a"
    assert body["distance"] == 2
    assert body["similarity"] == 0.9123
    assert body["fingerprint"] == "00ff000000000001"
    assert body["exact"] is False
    assert {"features", "index", "detector", "decided_at"} <= set(body)
    back = Decision.from_dict(body)
    assert (back.id, back.duplicate_of, back.fingerprint, back.distance) == (
        "b",
        "a",
        d.fingerprint,
        2,
    )
    unique = json.loads(Decision("c", None, 0).to_json())
    assert (
        unique["decision"],
        unique["duplicate_of"],
        unique["distance"],
        unique["similarity"],
        unique["fingerprint"],
    ) == ("unique", None, None, None, "0" * 16)


def test_error_record_keeps_the_bytes_and_the_place() -> None:
    raw = b'{"id": 1, \xff}'
    rec = error_record("invalid_utf8", "detail", raw, source="in.jsonl", line=7)
    assert rec["reason"] == "invalid_utf8" and rec["line"] == 7 and rec["source"] == "in.jsonl"
    assert base64.b64decode(rec["raw_base64"]) == raw
    assert rec["raw_bytes"] == len(raw)
    json.dumps(rec)  # serializable as is


def test_an_error_record_keeps_what_its_sink_keeps_and_says_the_true_size() -> None:
    raw = bytes(range(256)) * 40
    full = error_record("invalid_json", "", raw)  # a dead letter keeps 256 KiB
    assert base64.b64decode(full["raw_base64"]) == raw and full["raw_truncated"] is False
    short = error_record("invalid_json", "", raw, kept=4096, line=3)
    assert base64.b64decode(short["raw_base64"]) == raw[:4096]
    assert (short["raw_bytes"], short["raw_truncated"], short["line"]) == (10240, True, 3)
    # the first bytes of a record whose source did not hold it whole
    cut = error_record("too_large", "", raw[:100], kept=4096, size=5 * 10**6)
    assert base64.b64decode(cut["raw_base64"]) == raw[:100]
    assert (cut["raw_bytes"], cut["raw_truncated"]) == (5 * 10**6, True)


def test_embedding_dimensions_are_limited() -> None:
    """Hyperplanes cost 512 bytes per dimension: a 4 MiB record of a million zeros would
    make 512 MB of them."""
    ok = parse_document(line(embedding=[0.5] * MAX_EMBEDDING_DIM))
    assert ok.embedding is not None and len(ok.embedding) == MAX_EMBEDDING_DIM
    with pytest.raises(BadRecord) as info:
        parse_document(line(embedding=[1] * (MAX_EMBEDDING_DIM + 1)))
    assert info.value.reason == "bad_embedding"
    assert info.value.detail == f"{MAX_EMBEDDING_DIM + 1} dimensions, the limit is 16384"
