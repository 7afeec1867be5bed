"""Documents, decisions and error records, and their JSON forms (the contracts)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import BadRecord

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
# Tokens of a record's normalized text. The dev stream's largest record has 7,607 (p99
# 3,167, median 372); a record of 200,000 (about 1.2 MB of English) still fingerprints in
# tens of milliseconds, while 4 MiB of one-letter words would make 2 million.
DEFAULT_MAX_TOKENS = 200_000
RawRecord = tuple[bytes, dict[str, object]]  # an input's bytes and where they came from
MAX_ID_CHARS = 512
# Embedding models give at most a few thousand dimensions; the random hyperplanes of a
# dimension cost 64 * 8 bytes per dimension (a 4 MiB list of a million zeros: 512 MB).
MAX_EMBEDDING_DIM = 16_384


@dataclass
class Document:
    id: str
    text: str
    url: str | None = None
    embedding: list[float] | None = None
    meta: dict[str, Any] | None = None


def parse_document(raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """One input record (a JSONL line or a Kafka value) -> Document, or BadRecord."""
    if len(raw) > max_bytes:
        raise BadRecord("too_large", f"{len(raw)} bytes, the limit is {max_bytes}")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRecord("invalid_utf8", str(exc)) from None
    except ValueError as exc:
        raise BadRecord("invalid_json", str(exc)) from None
    except RecursionError:
        raise BadRecord("invalid_json", "nested too deeply") from None
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
    if text is None:
        raise BadRecord("missing_text")
    if not isinstance(text, str):
        raise BadRecord("bad_text", f"text must be a string, got {type(text).__name__}")
    for name, value in (("id", doc_id), ("text", text)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a JSON escape of a lone surrogate: not a character
            raise BadRecord("invalid_unicode", f"{name} holds a lone surrogate") from None
    url, embedding, meta = body.get("url"), body.get("embedding"), body.get("meta")
    if url is not None and not isinstance(url, str):
        raise BadRecord("bad_url", "url must be a string")
    if meta is not None and not isinstance(meta, dict):
        raise BadRecord("bad_meta", "meta must be an object")
    if embedding is not None:
        embedding = _embedding(embedding)
    return Document(id=doc_id, text=text, url=url, embedding=embedding, meta=meta)


def _embedding(value: object) -> list[float]:
    if isinstance(value, list) and len(value) > MAX_EMBEDDING_DIM:
        raise BadRecord(
            "bad_embedding", f"{len(value)} dimensions, the limit is {MAX_EMBEDDING_DIM}"
        )
    if isinstance(value, list) and value:
        try:
            floats = [
                float(x) for x in value if isinstance(x, int | float) and not isinstance(x, bool)
            ]
        except OverflowError:  # an integer literal beyond any float
            floats = []
        if len(floats) == len(value) and all(math.isfinite(x) for x in floats):
            return floats
    raise BadRecord("bad_embedding", "embedding must be a non-empty list of finite numbers")


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

    @property
    def decision(self) -> str:
        return "unique" if self.duplicate_of is None else "duplicate"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "decision": self.decision,
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "fingerprint": f"{self.fingerprint:016x}",
            "exact": self.exact,
            "features": self.features,
            "index": self.namespace,
            "detector": self.detector,
            "decided_at": self.decided_at,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decision:
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
        )


RAW_KEPT = 256 * 1024  # base64 of this stays well under Kafka's default 1 MB message


def error_record(reason: str, detail: str, raw: bytes, **where: Any) -> dict[str, Any]:
    """A bad input's report: where it came from, why, and its bytes (base64). A record
    larger than RAW_KEPT keeps its first RAW_KEPT bytes (`raw_truncated`); the whole of it
    stays at its source offset."""
    return {
        **where,
        "reason": reason,
        "detail": detail,
        "raw_base64": base64.b64encode(raw[:RAW_KEPT]).decode("ascii"),
        "raw_bytes": len(raw),
        "raw_truncated": len(raw) > RAW_KEPT,
    }
