"""Documents, decisions and error records, and their JSON forms (the contracts)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import numpy as np

from .errors import BadRecord

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
# Tokens of a record's normalized text. The dev stream's largest record has 7,607 (p99
# 3,167, median 372); a record of 200,000 (about 1.2 MB of English) still fingerprints in
# tens of milliseconds, while 4 MiB of one-letter words would make 2 million.
DEFAULT_MAX_TOKENS = 200_000
# An input's bytes and where they came from (Kafka: topic, partition, offset, key, headers;
# a file: source, line). A Kafka tombstone is b"" with where["tombstone"] set; a line too
# long to be held is its first bytes only, with where[CUT] set to its size.
RawRecord = tuple[bytes, dict[str, object]]
CUT = "cut"
MAX_ID_CHARS = 512
# The index names a document's later versions id + VERSION_MARK + revision, so an id may
# not hold it (a NUL has no business in a URL or a key anyway).
VERSION_MARK = "\x00"
# Embedding models give at most a few thousand dimensions; the random hyperplanes of a
# dimension cost 64 * 8 bytes per dimension (a 4 MiB list of a million zeros: 512 MB).
MAX_EMBEDDING_DIM = 16_384


@dataclass
class Document:
    id: str
    text: str  # "" for a record with only an embedding
    url: str | None = None
    embedding: np.ndarray | list[float] | None = None  # parsed: float64
    meta: dict[str, Any] | None = None
    # `version` (a number) or `fetched_at` (ISO 8601), as seconds: a record older than the
    # stored one of its id is stale. None: every record is newer than the last.
    version: float | None = None
    origin: dict[str, Any] | None = None  # Kafka: topic, partition, offset (audit fields)
    extraction: str | None = None  # how an HTML page's text was had (detector.extract)


@dataclass(frozen=True)
class Tombstone:
    """A Kafka record with a key and no value: that id is gone."""

    id: str
    origin: dict[str, Any] | None = None


def parse_document(raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """One input record (a JSONL line or a Kafka value) -> Document, or BadRecord."""
    if len(raw) > max_bytes:
        raise too_large(len(raw), max_bytes)
    strict = True  # orjson refuses lone surrogate escapes: its strings are all characters
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:  # the standard parser says why, as it always did
        body, strict = _standard_json(raw), False
    if not isinstance(body, dict):
        raise BadRecord("not_an_object", f"got a JSON {type(body).__name__}")
    doc_id, text = body.get("id"), body.get("text")
    if doc_id is None:
        raise BadRecord("missing_id")
    if not isinstance(doc_id, str) or not doc_id or len(doc_id) > MAX_ID_CHARS:
        raise BadRecord(
            "bad_id",
            f"id must be a non-empty string of at most {MAX_ID_CHARS} "
            f"characters, got {type(doc_id).__name__}",
        )
    if VERSION_MARK in doc_id:
        raise BadRecord("bad_id", "id must not contain a NUL character")
    url, embedding, meta = body.get("url"), body.get("embedding"), body.get("meta")
    if text is None and embedding is None:
        raise BadRecord("missing_text", "a record needs a text, an embedding or both")
    if text is not None and not isinstance(text, str):
        raise BadRecord("bad_text", f"text must be a string, got {type(text).__name__}")
    # A record with only an embedding is decided on its vector, as one with both is.
    text = text or ""
    if not strict:
        for name, value in (("id", doc_id), ("text", text)):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a JSON escape of a lone surrogate: not a character
                raise BadRecord("invalid_unicode", f"{name} holds a lone surrogate") from None
    if url is not None and not isinstance(url, str):
        raise BadRecord("bad_url", "url must be a string")
    if meta is not None and not isinstance(meta, dict):
        raise BadRecord("bad_meta", "meta must be an object")
    if embedding is not None:
        embedding = _embedding(embedding)
    return Document(doc_id, text, url, embedding, meta, _version(body))


def too_large(size: int, max_bytes: int) -> BadRecord:
    return BadRecord("too_large", f"{size} bytes, the limit is {max_bytes}")


def _standard_json(raw: bytes) -> Any:
    """The standard library's reading of a record orjson refused: the same reasons for
    bad input, and what it accepts beyond strict JSON (NaN and Infinity, which become
    their own dead letters; integers beyond 64 bits; lone surrogate escapes, refused
    below; deep nesting up to the interpreter's limit)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRecord("invalid_utf8", str(exc)) from None
    except ValueError as exc:
        raise BadRecord("invalid_json", str(exc)) from None
    except RecursionError:
        raise BadRecord("invalid_json", "nested too deeply") from None


def _version(body: dict[str, Any]) -> float | None:
    version, fetched = body.get("version"), body.get("fetched_at")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int | float):
            raise BadRecord("bad_version", "version must be a number")
        try:
            value = float(version)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise BadRecord("bad_version", "version must be a finite number")
        return value
    if fetched is not None:
        if not isinstance(fetched, str):
            raise BadRecord("bad_version", "fetched_at must be an ISO 8601 string")
        try:
            when = datetime.fromisoformat(fetched)
        except ValueError:
            raise BadRecord(
                "bad_version", f"fetched_at is not ISO 8601: {fetched[:64]!r}"
            ) from None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None


def _embedding(value: object) -> np.ndarray:
    """The components as float64, checked: a list of numbers, finite, not all zero."""
    import numpy as np  # here: the options module reads this one's limits, without numpy

    kinds = set(map(type, value)) if isinstance(value, list) else set()
    if not isinstance(value, list) or not kinds or not kinds <= {float, int}:
        raise BadRecord("bad_embedding", "embedding must be a non-empty list of numbers")
    if len(value) > MAX_EMBEDDING_DIM:
        raise BadRecord(
            "bad_embedding", f"{len(value)} dimensions, the limit is {MAX_EMBEDDING_DIM}"
        )
    try:
        v = np.array(value, np.float64)
    except OverflowError:  # an integer literal beyond any float
        at = next(i for i, x in enumerate(value) if abs(x) > 2**1024)
        raise BadRecord("embedding_infinite", f"component {at} is beyond any float") from None
    finite = np.isfinite(v)
    if not finite.all():
        # JSON has no NaN or infinity, but Python's parser (and so many producers) writes them
        at = int(np.argmin(finite))
        if np.isnan(v[at]):
            raise BadRecord("embedding_nan", f"component {at} is NaN")
        raise BadRecord("embedding_infinite", f"component {at} is {v[at]}")
    if not v.any():
        raise BadRecord("embedding_zero", "every component is 0: a zero vector has no direction")
    return v


ORIGIN = ("topic", "partition", "offset")  # where a Kafka record came from
# One encoder for every decision: json.dumps with an option makes a new one each call.
_DECISION_JSON = json.JSONEncoder(ensure_ascii=False)
try:  # as kernels.native_module finds it, without importing numpy with the kernels
    from ._native import decision_json as _NATIVE_JSON  # type: ignore[import-not-found]
except ImportError:  # not built, or built before it had decision_json
    _NATIVE_JSON = None


@dataclass
class Decision:
    id: str
    duplicate_of: str | None
    fingerprint: int
    distance: int | None = None
    similarity: float | None = None
    exact: bool = False
    features: str = ""
    namespace: str = ""
    detector: str = ""
    decided_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    # Re-fetches: a changed record of a known id is revision 1, 2...; the fingerprint of
    # the version it replaced. duplicate_of_revision: the revision of the record it names.
    revision: int = 0
    previous_fingerprint: int | None = None
    duplicate_of_revision: int = 0
    url: str | None = None  # passed through from the record
    version: float | None = None  # the record's version (or fetched_at), when it had one
    origin: dict[str, Any] | None = None  # Kafka topic, partition and offset of the record
    extraction: str | None = None  # an HTML page's: main:SHARE, body:SHARE, stripped[:reason]
    # A record with an embedding: its space (v + dimension) and the Hamming radius of its
    # candidates; its similarity is then the cosine.
    space: str | None = None
    k: int | None = None
    # What decided it (decide.py): digest, text, sketch, vector or fingerprint
    evidence: str | None = None
    # The first document of its duplicate chain when it was decided: itself for a unique,
    # else its partner's cluster (decide.py). Unset, it is the partner, or itself.
    cluster: str = ""
    # Not published: the digest of the content decided on, so that a record of this id
    # delivered again is told apart from a changed one.
    digest: str = ""

    @property
    def decision(self) -> str:
        return "unique" if self.duplicate_of is None else "duplicate"

    def __post_init__(self) -> None:
        self.cluster = self.cluster or self.duplicate_of or self.id

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "decision": self.decision,
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "fingerprint": f"{self.fingerprint:016x}",
            "exact": self.exact,
            "cluster": self.cluster,
        }
        if self.evidence is not None:
            out["evidence"] = self.evidence
        # The optional fields only when set: a plain record's decision stays as it was.
        if self.duplicate_of_revision:
            out["duplicate_of_revision"] = self.duplicate_of_revision
        if self.revision:
            out["revision"] = self.revision
            out["previous_fingerprint"] = (
                None if self.previous_fingerprint is None else f"{self.previous_fingerprint:016x}"
            )
        if self.url is not None:
            out["url"] = self.url
        if self.version is not None:
            out["version"] = self.version
        if self.origin:
            out.update({k: self.origin[k] for k in ORIGIN if k in self.origin})
        if self.extraction is not None:
            out["extraction"] = self.extraction
        if self.space is not None:
            out["space"], out["k"] = self.space, self.k
        out.update(
            {
                "features": self.features,
                "index": self.namespace,
                "detector": self.detector,
                "decided_at": self.decided_at,
            }
        )
        return out

    def to_json(self) -> str:
        return _DECISION_JSON.encode(self.to_dict())

    @staticmethod
    def encode_many(decisions: list[Decision]) -> list[bytes]:
        """Each decision's JSON as UTF-8, the bytes of to_json, for a batch's sends. The
        native encoder writes them in a fifth of the time (bench/decision_json.py); a
        decision it declines (a value of a type it does not know, a str that is no
        UTF-8) is to_json's, which raises what it raises."""
        if _NATIVE_JSON is None:
            return [d.to_json().encode() for d in decisions]
        encoded = _NATIVE_JSON(list(map(_JSON_FIELDS, decisions)))
        return [
            d.to_json().encode() if e is None else e
            for d, e in zip(decisions, encoded, strict=True)
        ]

    @classmethod
    def from_dict(cls, d: dict[str, Any], digest: str = "") -> Decision:
        previous = d.get("previous_fingerprint")
        origin = {k: d[k] for k in ORIGIN if k in d}
        return cls(
            id=d["id"],
            duplicate_of=d["duplicate_of"],
            fingerprint=int(d["fingerprint"], 16),
            distance=d.get("distance"),
            similarity=d.get("similarity"),
            exact=d.get("exact", False),
            features=d.get("features", ""),
            namespace=d.get("index", ""),
            detector=d.get("detector", ""),
            decided_at=d.get("decided_at", ""),
            revision=d.get("revision", 0),
            previous_fingerprint=None if previous is None else int(previous, 16),
            duplicate_of_revision=d.get("duplicate_of_revision", 0),
            url=d.get("url"),
            version=d.get("version"),
            origin=origin or None,
            extraction=d.get("extraction"),
            space=d.get("space"),
            k=d.get("k"),
            evidence=d.get("evidence"),
            cluster=d.get("cluster") or "",
            digest=digest,
        )


# What the native encoder (native/src/json.rs, Decision::new) takes of a decision: its
# fields in the dataclass's order, the origin last, the digest not (it is not published).
_JSON_FIELDS = attrgetter(
    *(f.name for f in fields(Decision) if f.name not in ("origin", "digest")), "origin"
)


# What an error record keeps of a record's bytes. A dead letter on Kafka keeps much of
# it, as the dead-letter topic is where a bad record is mended and sent again: base64 of
# this stays well under Kafka's default 1 MB message.
RAW_KEPT = 256 * 1024
# An error line of `detect` keeps enough to recognize the record: its line number points
# at the whole of it, and a 5 MB record would otherwise make a 7 MB line of stderr.
LINE_RAW_KEPT = 4 * 1024


def error_record(
    reason: str,
    detail: str,
    raw: bytes,
    *,
    kept: int = RAW_KEPT,
    size: int | None = None,
    **where: Any,
) -> dict[str, Any]:
    """A bad input's report: where it came from, why, and its bytes (base64). A record
    larger than `kept` keeps its first `kept` bytes (`raw_truncated`); the whole of it
    stays at its source offset or line. `size`: the record's size when `raw` is already
    only its first bytes (a line too long to be read whole)."""
    size = len(raw) if size is None else size
    shown = raw[:kept]
    return {
        **where,
        "reason": reason,
        "detail": detail,
        "raw_base64": base64.b64encode(shown).decode("ascii"),
        "raw_bytes": size,
        "raw_truncated": size > len(shown),
    }
