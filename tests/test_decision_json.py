"""A decision's JSON from the native encoder (native/src/json.rs, Decision.encode_many)
against the reference, to_json's bytes: equal byte for byte on generated decisions of
every optional field, on any Unicode and float, and on the bundled samples' decisions;
a value the encoder does not take is to_json's (or raises what to_json raises)."""

from __future__ import annotations

import enum
import io
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from detector import records
from detector.pipeline import Limits, prepare
from detector.records import ORIGIN, Decision
from detector.stream.files import JsonlSink

from .helpers import EMBED_SAMPLE, HTML_SAMPLE, SAMPLE, make_detector, read_lines

NATIVE = records._NATIVE_JSON
pytestmark = pytest.mark.skipif(NATIVE is None, reason="detector._native was not built")


def reference(decisions: list[Decision]) -> list[bytes]:
    return [d.to_json().encode() for d in decisions]


def native(decisions: list[Decision]) -> list[bytes | None]:
    assert NATIVE is not None
    out: list[bytes | None] = NATIVE(list(map(records._JSON_FIELDS, decisions)))
    return out


# Any character but a lone surrogate, and more often what json escapes: the quote, the
# backslash, every control character, and what it does not (DEL, U+2028, non-BMP).
TEXT = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.characters(max_codepoint=0x20),
        st.sampled_from('"\\/\x7f\u2028\u2029\ufeff\U0001f600\U0010ffff'),
    ),
    max_size=30,
)
# Floats of every magnitude, and decimals at and about a half of round(..., 4)'s last place
TRICKY = [0.03125, 0.00005, 0.99995, 0.12345, 2.00005, 1e-05, 1e16, 1e15, 0.0001]
FLOAT = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(0, 1),
    st.sampled_from(TRICKY + [-x for x in TRICKY] + [0.0, -0.0, 5e-324, 1.7976931348623157e308]),
    st.integers(0, 10**5).map(lambda i: i / 10**4 + 0.00005),
    st.builds(math.ldexp, st.integers(2**52, 2**53), st.integers(-60, 0)),  # repr's ties
)
UINT64 = st.integers(0, 2**64 - 1)
INT = st.one_of(st.integers(0, 40), st.integers(-(2**63), 2**64 - 1))
SCALAR = st.one_of(st.none(), st.booleans(), INT, FLOAT, TEXT)


@st.composite
def origins(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return draw(st.sampled_from([None, {}]))
    keys = draw(st.permutations([*ORIGIN, "key"]))[: draw(st.integers(1, 4))]
    kafka = {"topic": TEXT, "partition": st.integers(0, 2**31), "offset": INT}
    return {k: draw(st.one_of(kafka.get(k, SCALAR), SCALAR)) for k in keys}


DECISIONS = st.builds(
    Decision,
    id=TEXT,
    duplicate_of=st.none() | TEXT,
    fingerprint=UINT64,
    distance=st.none() | INT,
    similarity=st.none() | FLOAT,
    exact=st.booleans(),
    features=TEXT,
    namespace=TEXT,
    detector=TEXT,
    decided_at=TEXT,
    revision=st.sampled_from([0, 0, 1, 7, 2**40]),
    previous_fingerprint=st.none() | UINT64,
    duplicate_of_revision=st.sampled_from([0, 0, 3]),
    url=st.none() | TEXT,
    version=st.none() | FLOAT,
    origin=origins(),
    extraction=st.none() | TEXT,
    space=st.none() | TEXT,
    k=st.none() | st.integers(0, 64),
    evidence=st.none() | st.sampled_from(["digest", "text", "sketch", "vector", "fingerprint"]),
    cluster=st.just("") | TEXT,
)


@settings(max_examples=500)
@given(st.lists(DECISIONS, max_size=6))
@example([Decision('a\x00\x1f"\\é\U0001f600', "b", 2**64 - 1, similarity=1958182951947437.2)])
def test_the_native_json_is_to_jsons_bytes(decisions: list[Decision]) -> None:
    assert native(decisions) == reference(decisions)
    assert Decision.encode_many(decisions) == reference(decisions)


def test_the_samples_decisions_are_to_jsons_bytes() -> None:
    """Texts, pages (urls) and vectors (space, k, cosines), with a Kafka record's origin."""
    for path in (SAMPLE, HTML_SAMPLE, EMBED_SAMPLE):
        raw = read_lines(path)
        detector = make_detector()
        decisions: list[Decision] = []
        for at in range(0, len(raw), 64):
            where = {"topic": "in", "partition": 3}
            kafka = [
                (r, {**where, "offset": 2**40 + at + i}) for i, r in enumerate(raw[at : at + 64])
            ]
            batch = prepare(detector.engine, kafka, Limits(10**7))
            decisions += detector.process(batch.docs, batch.prints)
        assert native(decisions) == reference(decisions)
        assert any(d.similarity is not None for d in decisions)
        assert all(d.origin for d in decisions)


class Kind(enum.IntEnum):
    ONE = 1


# Decisions the encoder leaves to to_json: what to_json writes otherwise than it would
# (a NaN, a subclass's rounding or repr), an int beyond 64 bits, or what to_json refuses.
DECLINED = {
    "lone surrogate": Decision("a", None, 1, url="\udc80"),
    "NaN": Decision("a", None, 1, similarity=math.nan),
    "infinite version": Decision("a", None, 1, version=-math.inf),
    "numpy float": Decision("a", "b", 1, similarity=np.float64(0.123456)),
    "numpy int": Decision("a", "b", 1, distance=np.int64(3)),
    "int enum": Decision("a", "b", 1, distance=Kind.ONE),
    "int similarity": Decision("a", "b", 1, similarity=1),
    "fingerprint beyond 64 bits": Decision("a", None, 2**64),
    "negative fingerprint": Decision("a", None, -1),
    "offset beyond 64 bits": Decision("a", None, 1, origin={"offset": 2**64}),
    "origin a list": Decision("a", None, 1, origin=[1]),  # type: ignore[arg-type]
    "origin value a list": Decision("a", None, 1, origin={"topic": ["t"]}),
    "id a bytes": Decision(b"a", None, 1),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_what_the_native_json_declines_is_to_jsons(case: str) -> None:
    d = DECLINED[case]
    assert native([d]) == [None]
    try:
        expected: Any = reference([d])
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        with pytest.raises(type(exc)):
            Decision.encode_many([d])
    else:  # and the others of its batch are still the native encoder's
        plain = Decision("b", None, 2)
        assert Decision.encode_many([plain, d]) == reference([plain]) + expected


def test_the_jsonl_sink_writes_the_lines_it_wrote_without_the_native_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decisions = [Decision("a", None, 1), Decision("é\n", "a", 2, 3, 0.5, url="\U0001f600")]
    out = io.StringIO()
    JsonlSink(out, io.StringIO()).decisions(decisions)
    assert out.getvalue() == "".join(d.to_json() + "\n" for d in decisions)
    monkeypatch.setattr(records, "_NATIVE_JSON", None)
    python = io.StringIO()
    JsonlSink(python, io.StringIO()).decisions(decisions)
    JsonlSink(python, io.StringIO()).decisions([])
    assert python.getvalue() == out.getvalue()
