"""The decision record of layout 4 (keys.record): what is packed is what is read back,
for any decision, digest and kept versions; layout 3's JSON-headed form reads the same;
and a record is a fraction of the JSON form it replaces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from detector.index import version_id
from detector.index.redis.keys import (
    RECORD,
    Stored,
    Version,
    pack_digest,
    parse_decision,
    record,
    unpack_digest,
)
from detector.records import Decision

from ..helpers import layout3_value

ids = st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), min_size=1, max_size=30)
u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(1, 2**32 - 1)
digests = st.one_of(
    st.just(""),
    st.binary(min_size=1, max_size=32).map(bytes.hex),
    st.text(min_size=1, max_size=40),
)
hashes = st.binary(min_size=16, max_size=16)
spaces = st.sampled_from(["t", "v384", "v1024"])


@st.composite
def stored(draw: st.DrawFn) -> Stored:
    doc_id, revision = draw(ids), draw(st.integers(0, 5))
    dup = draw(st.one_of(st.none(), ids))
    d = Decision(
        doc_id,
        dup,
        draw(u64),
        distance=None if dup is None else draw(st.integers(0, 64)),
        similarity=None if dup is None else draw(st.floats(0, 1).map(lambda x: round(x, 4))),
        features="words-5",
        namespace=draw(st.sampled_from(["default", "ïndex"])),
        detector="0.1.0",
        revision=revision,
        previous_fingerprint=draw(u64) if revision else None,
        url=draw(st.one_of(st.none(), st.just(f"https://example.org/{doc_id}"))),
        version=draw(st.one_of(st.none(), st.floats(0, 1e12, allow_nan=False))),
        origin=draw(st.one_of(st.none(), st.just({"topic": "in", "partition": 3, "offset": 9}))),
        digest=draw(digests),
    )
    current = None
    if draw(st.booleans()):
        current = Version(
            version_id(doc_id, revision),
            draw(u32),
            draw(spaces),
            draw(hashes),
            d.fingerprint,
        )
    kept = tuple(
        Version(version_id(doc_id, r), draw(u32), draw(spaces), draw(hashes), draw(u64))
        for r in range(draw(st.integers(0, 3)))
    )
    return Stored(d, current, kept)


@given(stored())
def test_a_record_reads_back_as_what_was_packed(s: Stored) -> None:
    value = record(s)
    assert value[:1] == RECORD
    back = parse_decision(value, s.decision.id)
    assert back == s
    assert back.decision.to_json() == s.decision.to_json()


@given(digests)
def test_a_packed_digest_unpacks_to_itself(digest: str) -> None:
    assert unpack_digest(pack_digest(digest)) == digest
    if digest and all(c in "0123456789abcdef" for c in digest) and len(digest) % 2 == 0:
        assert len(pack_digest(digest)) == 1 + len(digest) // 2


@given(stored())
def test_layout_3s_form_reads_as_the_record_does(s: Stored) -> None:
    old = layout3_value(s)
    assert parse_decision(old, s.decision.id) == parse_decision(record(s), s.decision.id)


def test_a_record_is_much_smaller_than_the_json_form() -> None:
    d = Decision(
        "https://example.org/docs/page-000123.html",
        None,
        0x0123456789ABCDEF,
        features="words-cjk2.builtin-sqrtlen1+u14.0.0+hyperplanes-s0",
        namespace="default",
        detector="0.1.0",
        decided_at="2026-12-05T09:04:40.917277+00:00",
        digest="00112233445566778899aabbccddeeff",
    )
    s = Stored(d, Version(d.id, 123_456, "t", bytes(range(16)), d.fingerprint))
    assert len(record(s)) <= 0.6 * len(layout3_value(s))
