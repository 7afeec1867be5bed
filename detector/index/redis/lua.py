"""The index's Lua scripts, read once from the package's scripts/ directory, each with a
typed pair beside it: a builder of its KEYS and ARGV (`<script>_args`, an `Args`: one
EVAL) and a parser of its reply (`<Script>Reply.parse`, or `<script>_reply` for a plain
number), so that no caller packs ARGV or decodes a reply by hand. Each script's header
says what its KEYS and ARGV are and what it answers; its pair follows it field by field.

The coordinator's scripts (store.Store.eval) all take KEYS[1] = C .. 'seq', which routes
them to the coordinator's slot, and ARGV[1] = C, its prefix; the shards' run one EVAL per
shard in a cluster.Batch, routed by their first key (`Args.key`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Literal

import numpy as np

from .. import Commit, Entry
from .keys import LOG, Layout, Stored, pack_digest, parse_decision, record_body, record_head


def _script(name: str, *before: str) -> str:
    """A script, after the shared parts it names (Redis has no includes)."""
    return "\n".join(
        (files(__package__) / "scripts" / f"{part}.lua").read_text(encoding="utf-8")
        for part in (*before, name)
    )


# the coordinator's (store.Store.eval)
SNAPSHOT = _script("snapshot")
RECENT = _script("recent")
NAMES = _script("names", "versions")
COMMIT = _script("commit", "versions")
APPLIED = _script("applied")
DELETE = _script("delete", "versions")
# a shard's (one EVAL per shard in a Batch)
APPLY_SHARD = _script("apply_shard")
DECISIONS = _script("decisions")
SWEEP_IDS = _script("sweep_ids")
FILTER_BUCKET = _script("filter_bucket")
SWEEP_BUCKETS = _script("sweep_buckets")
FORGET_DIGEST = _script("forget_digest")
SWEEP_DIGESTS = _script("sweep_digests")
LEARN_TEMPLATE = _script("learn_template")
REPACK = _script("repack")
TRIM_TEXTS = _script("trim_texts")


@dataclass(frozen=True)
class Args:
    """One EVAL of a script: its KEYS and ARGV, in the order its header gives them."""

    script: str
    keys: tuple[Any, ...]
    argv: tuple[Any, ...]

    @property
    def key(self) -> Any:
        """The key that routes it (a cluster.Batch's `add`)."""
        return self.keys[0]

    def command(self) -> tuple[Any, ...]:
        return ("EVAL", self.script, len(self.keys), *self.keys, *self.argv)


def _coordinator(script: str, layout: Layout, *argv: Any) -> Args:
    return Args(script, (layout.seq,), (layout.prefix, *argv))


def _log(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, LOG)


# ---------------------------------------------------------------------- the coordinator's


def snapshot_args(layout: Layout, retention: int) -> Args:
    return _coordinator(SNAPSHOT, layout, retention)


@dataclass(frozen=True)
class Snapshot:
    """SNAPSHOT's reply: what a lookup reads before the shards."""

    seq: int  # the lookup's mark: a commit checks what was committed after it
    log: np.ndarray = field(compare=False)  # LOG entries numbered first+1 .. seq
    first: int
    cutoff: int  # numbers at or below it are older than the retention horizon
    oldest_pending: str  # the oldest pending range "first:last:time", or ''
    dictionary: int  # the id of the index's text dictionary, 0 before it has one

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> Snapshot:
        seq, first, log, cutoff, oldest, dictionary = raw
        return cls(
            int(seq),
            _log(log),
            int(first),
            int(cutoff),
            oldest.decode(),
            int.from_bytes(dictionary, "little"),
        )


Kind = Literal["e", "x", "r"]  # to index, a decision only, a replay (commit.lua)


@dataclass(frozen=True)
class CommitItem:
    """One item of a COMMIT: its 9 ARGV, in order (commit.lua)."""

    id: str
    name: str  # the version's name the id map gets
    kind: Kind
    head: bytes  # keys.record_head()
    body: bytes  # keys.record_body()
    entry: bytes  # kind 'e': its LOG entry; otherwise b''
    prev: bytes  # the digest of the decision it revises, b'' for an id found undecided
    mine: bytes  # the digest of the content decided on (both keys.pack_digest)
    old: bytes  # the record the caller read for the id (RedisIndex.decisions), b'' for none

    @classmethod
    def of(cls, item: Commit, entry: Entry | None, dh: bytes, old: bytes) -> CommitItem:
        """`item`, indexed as `entry` (None: not indexed) under the digest hash `dh`, of
        an id whose record the caller read as `old`."""
        d = item.decision
        kind: Kind = "r" if item.replay else ("e" if entry is not None else "x")
        name, log = d.id, b""
        if entry is not None:
            name = entry.id
            log = (
                entry.fingerprint.to_bytes(8, "little") + dh + entry.space.encode().ljust(8, b"\0")
            )
        head = record_head(d, entry.space if entry else None, dh if entry else None)
        prev = pack_digest(item.previous.digest) if item.previous is not None else b""
        body = record_body(d)
        return cls(d.id, name, kind, head, body, log, prev, pack_digest(d.digest), old)


def commit_args(
    layout: Layout,
    upto: int,
    seen: int,
    items: Sequence[CommitItem],
    keep: int,
    granularity: int,
    keep_old: bool,
) -> Args:
    fixed = (upto, seen, len(items), keep, granularity, "1" if keep_old else "0")
    per_item = (
        a
        for i in items
        for a in (i.id, i.name, i.kind, i.head, i.body, i.entry, i.prev, i.mine, i.old)
    )
    return _coordinator(COMMIT, layout, *fixed, *per_item)


@dataclass(frozen=True)
class Outcome:
    """What COMMIT did with one item: wrote it by write `write` (indexed under that
    number when `indexed`, with the kept versions `kept` as its record packs them), or
    left the id's `stored` decision as it was (decided meanwhile on this content), or
    neither (a replay)."""

    write: int = 0
    indexed: bool = False
    kept: bytes = b""
    stored: Stored | None = None

    @property
    def number(self) -> int:
        """The number the document is indexed under (0: not indexed)."""
        return self.write if self.indexed else 0


@dataclass(frozen=True)
class CommitReply:
    """COMMIT's reply: 'ok' (written), 'stale' (seq moved: the `log` of what came
    meanwhile, up to `seq`), 'moved' (item `moved` + 1 met a conflict on its id) or
    'relookup' (the log no longer reaches back to the lookup)."""

    status: Literal["ok", "stale", "moved", "relookup"]
    seq: int = 0
    log: np.ndarray = field(default_factory=lambda: _log(b""), compare=False)
    moved: int = 0
    outcomes: tuple[Outcome, ...] = ()
    member: str = ""  # the pending range to apply, '' when nothing was numbered
    replaced: tuple[Stored | None, ...] = ()  # per item: the decision that left the index

    @classmethod
    def parse(cls, raw: Sequence[Any], ids: Sequence[str]) -> CommitReply:
        """The reply to a COMMIT of items of `ids`, in order."""
        status = raw[0].decode()
        if status == "stale":
            return cls("stale", seq=int(raw[1]), log=_log(raw[2]))
        if status == "moved":
            return cls("moved", moved=int(raw[1]))
        if status != "ok":
            return cls("relookup")
        return cls(
            "ok",
            outcomes=tuple(_outcome(o, i) for o, i in zip(raw[1], ids, strict=True)),
            member=raw[2].decode(),
            replaced=tuple(
                parse_decision(v, i) if v else None for v, i in zip(raw[3], ids, strict=True)
            ),
        )


def _outcome(raw: Sequence[Any], doc_id: str) -> Outcome:
    tag = raw[0]
    if tag == b"s":
        return Outcome(stored=parse_decision(raw[1], doc_id))
    if tag in (b"n", b"x"):
        return Outcome(write=int(raw[1]), indexed=tag == b"n", kept=raw[2])
    return Outcome()


def recent_args(layout: Layout, ids: Sequence[str]) -> Args:
    return _coordinator(RECENT, layout, *ids)


@dataclass(frozen=True)
class Recent:
    """RECENT's reply: the applied mark, and per id its recent record (None: none)."""

    applied: int
    values: tuple[bytes | None, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> Recent:
        return cls(int(raw[0]), tuple(raw[1]))


def names_args(layout: Layout, numbers: Sequence[int]) -> Args:
    return _coordinator(NAMES, layout, *numbers)


def names_reply(raw: Sequence[bytes], numbers: Sequence[int]) -> dict[int, str]:
    """The numbers that still name a version a lookup may return, and the names."""
    return {n: v.decode() for n, v in zip(numbers, raw, strict=True) if v}


def applied_args(layout: Layout, member: str, keep: int, recent: int, chunk: int) -> Args:
    return _coordinator(APPLIED, layout, member, keep, recent, chunk)


def applied_reply(raw: Any) -> int:
    """The applied mark: every document numbered at or below it is in the shards."""
    return int(raw)


def delete_args(layout: Layout, seen: int, ids: Sequence[str], old: Sequence[bytes]) -> Args:
    return _coordinator(
        DELETE, layout, seen, *(a for pair in zip(ids, old, strict=True) for a in pair)
    )


@dataclass(frozen=True)
class DeleteReply:
    """DELETE's reply: 'relookup' (read again), or 'ok' with the pending range to apply
    ('' when no id was known) and per id the record deleted (None: unknown id)."""

    status: Literal["ok", "relookup"]
    member: str = ""
    deleted: tuple[Stored | None, ...] = ()
    values: tuple[bytes, ...] = ()  # the records deleted as stored

    @classmethod
    def parse(cls, raw: Sequence[Any], ids: Sequence[str]) -> DeleteReply:
        if raw[0] != b"ok":
            return cls("relookup")
        values = tuple(bytes(v) for v in raw[2])
        return cls(
            "ok",
            raw[1].decode(),
            tuple(parse_decision(v, i) if v else None for v, i in zip(values, ids, strict=True)),
            values,
        )


# ---------------------------------------------------------------------- a shard's


@dataclass
class ShardPart:
    """A shard's part of applying writes (APPLY_SHARD), gathered by the caller."""

    bucket_positions: list[int] = field(default_factory=list)  # in the caller's order
    buckets: list[Any] = field(default_factory=list)  # bucket hashes, one per entry
    bucket_fields: list[int] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)
    spaces: set[str] = field(default_factory=set)
    digests: list[str] = field(default_factory=list)  # digest hashes, one per field
    digest_fields: list[tuple[bytes, int]] = field(default_factory=list)  # field, number
    id_hashes: list[str] = field(default_factory=list)  # one per id-map change
    id_changes: list[tuple[int, str, str]] = field(default_factory=list)  # field, name, op
    decision_keys: list[tuple[str, str]] = field(default_factory=list)  # hash, key
    decisions: list[tuple[bytes, bytes, int]] = field(default_factory=list)  # id, value, ttl


def apply_shard_args(
    part: ShardPart,
    evicted: str,
    spaces: str,
    counts: str,
    size: int,
    limit: int,
    keep: int,
    ttl: int,
    cutoff: int = 0,
) -> Args:
    """A shard's part of writes: `part`; `evicted`, `spaces` and `counts` its counter,
    set of spaces and counts."""
    bucket_spaces = sorted(part.spaces)
    return Args(
        APPLY_SHARD,
        (
            *part.buckets,
            *part.digests,
            *part.id_hashes,
            *(k for pair in part.decision_keys for k in pair),
            evicted,
            spaces,
            counts,
        ),
        (
            len(part.buckets),
            len(part.digests),
            len(part.id_hashes),
            len(part.decisions),
            size,
            limit,
            keep,
            ttl,
            cutoff,
            len(bucket_spaces),
            *(a for pair in zip(part.bucket_fields, part.entries, strict=True) for a in pair),
            *bucket_spaces,
            *(a for f in part.digest_fields for a in f),
            *(a for c in part.id_changes for a in c),
            *(a for d in part.decisions for a in d),
        ),
    )


def decisions_args(read: Sequence[tuple[str, str, bytes]]) -> Args:
    """A shard's ids to read, each as its decision hash, its key and its field."""
    return Args(
        DECISIONS,
        tuple(k for hashed, key, _ in read for k in (hashed, key)),
        tuple(f for *_, f in read),
    )


def decisions_reply(raw: Sequence[Any]) -> list[tuple[bytes | None, bytes | None]]:
    """Per id, in the order asked: the value in its decision hash and its key's."""
    return list(zip(raw[::2], raw[1::2], strict=True))


def sweep_ids_args(
    id_hashes: Sequence[str], firsts: Sequence[int], counts: str, cutoff: int
) -> Args:
    """A shard's id hashes (`firsts`: the first number of each) up to `cutoff`."""
    return Args(SWEEP_IDS, (*id_hashes, counts), (cutoff, *firsts))


def sweep_ids_reply(raw: Any) -> int:
    """The names swept."""
    return int(raw)


@dataclass(frozen=True)
class ApplyShardReply:
    evicted: int  # entries pushed out of the lookups' reads
    cut: tuple[int, ...]  # positions (from 0) in `buckets` of the buckets cut back

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> ApplyShardReply:
        evicted, *cut = raw
        return cls(int(evicted), tuple(int(c) - 1 for c in cut))


def filter_bucket_args(bucket: Any, field: int, num: int, size: int) -> Args:
    return Args(FILTER_BUCKET, (bucket,), (field, num, size))


def filter_bucket_reply(raw: Any) -> bool:
    """The bucket held the number."""
    return bool(int(raw))


def sweep_buckets_args(buckets: Sequence[Any], cutoff: int, size: int) -> Args:
    return Args(SWEEP_BUCKETS, tuple(buckets), (cutoff, size))


def sweep_buckets_reply(raw: Any) -> int:
    """The number of entries removed."""
    return int(raw)


def forget_digest_args(digests: str, field: bytes, num: int) -> Args:
    return Args(FORGET_DIGEST, (digests,), (field, num))


def forget_digest_reply(raw: Any) -> bool:
    """The field named the number, and was removed."""
    return bool(int(raw))


def sweep_digests_args(digests: Sequence[str], cutoff: int) -> Args:
    return Args(SWEEP_DIGESTS, tuple(digests), (cutoff,))


def sweep_digests_reply(raw: Any) -> int:
    """The number of fields removed."""
    return int(raw)


def learn_template_args(
    pairs: str,
    counts: str,
    max_lines: int,
    threshold: int,
    ttl: int,
    lines: Sequence[tuple[int, bytes]],
) -> Args:
    """`lines`: (URL, line) bit and line key of each line of the page."""
    return Args(
        LEARN_TEMPLATE,
        (pairs, counts),
        (max_lines, threshold, ttl, *(a for line in lines for a in line)),
    )


def learn_template_reply(raw: Any) -> int:
    """The lines counted (those not yet counted for this URL)."""
    return int(raw)


def repack_args(texts: Sequence[str], forms: Sequence[tuple[bytes, bytes]]) -> Args:
    """`forms[i]`: the form `texts[i]` was written with, and the one to replace it with."""
    return Args(REPACK, tuple(texts), tuple(a for f in forms for a in f))


def repack_reply(raw: Any) -> int:
    """How many texts were replaced."""
    return int(raw)


def trim_texts_args(
    queue: str, texts: Sequence[str], sketches: Sequence[str], names: Sequence[str]
) -> Args:
    """`texts[i]`: the text key of the queue's member `names[i]`; `sketches[i]`: the sketch
    hash its sketch moves to (none: it stays in the text key)."""
    return Args(TRIM_TEXTS, (queue, *texts, *sketches), (len(texts), *names))


def trim_texts_reply(raw: Any) -> int:
    """How many texts were trimmed to their sketches."""
    return int(raw)
