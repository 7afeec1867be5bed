"""The key layout of a Redis index: every key name, which slot it lives in, and what the
values hold. Layout 5, for index NAME:

The keys the commit must read and write atomically share the hash tag {NAME}, one slot
(the coordinator); everything that grows with the index is spread over SHARDS hash tags
{NAME/0} .. {NAME/63}, which a Redis Cluster spreads over its primaries. On a single
server the keys are the same. What the coordinator keeps is bounded whatever N is: the
log (LOG_KEEP entries), the recent writes (RECENT_KEEP) and the pending ranges.

  coordinator, nd:{NAME}:
    meta              hash    layout, fingerprint version, block schemes (text, vectors),
                              retention; swept, the number the id map is swept to
    counts            hash    numbered: the versions ever numbered (stats' `committed`);
                              the other counts live in the shards (ct)
    seq               string  number of the last write: every write of a decision (indexed
                              or not) and every delete takes one, so that the shards can
                              tell an older write of an id from a newer one
    log               string  LOG entries (fingerprint, digest hash, space) of writes
                              logbase+1 .. seq (zero for a write that indexed nothing):
                              the recent ones, read by lookups until the shards have them
                              and by commits to check for conflicts
    logbase           string
    pending           zset    committed ranges "first:last:time" not yet applied to the
                              shards, scored by first
    epochs            zset    member seq, score the time of the commit that numbered it: one
                              per window of `granularity` seconds, the window's last commit
    rd                hash    id -> its latest record or tombstone (RECORD below), for the
    rw                hash    write number -> its note (keys.Note: the name it maps to, the
                              versions it took out of the lookups): the recent writes, which
                              COMMIT and DELETE read instead of the shards (a script cannot
                              read another slot) and APPLY_SHARD carries into the shards.
                              APPLIED trims both below applied - RECENT_KEEP, TRIM_CHUNK
                              numbers at a time, and moves
    rtrim             string  to the number they are trimmed to: a reader whose view of an
                              id is older than it must read again ('relookup'). A reader
                              calls RECENT (the mark and rd's values) before it reads the
                              shards, so that a write applied between its two reads is in
                              one of them; the newest write number of the two wins
    repair:{FIRST}    string  a consumer's claim to apply the pending range FIRST:...
    txdict            string  the zstd dictionary the texts are packed with (index.texts),
                              its id in bytes 4..7: trained by the first consumer to have
                              written texts.SAMPLE_TEXTS texts, and set only if absent
                              (SET NX), so an index has one for good; no TTL. SNAPSHOT
                              answers its id, so every consumer learns of it at a lookup
                              (and one that packs with it sets it again if it was lost)
  shard S, nd:{NAME/S}:
    bh:{SPACE}:{T}:{G}    hash    the buckets KEY of block table T with KEY >> FIELD_BITS = G
                                  (hex), FIELD_BITS = 10: field KEY & 1023 (decimal, which
                                  a listpack keeps as a 1- or 2-byte integer), value the
                                  bucket's entries, oldest first: the fingerprint's bits
                                  the table's key does not hold (BlockScheme.rest_array,
                                  little endian, in as many bytes as the index's
                                  narrowest key leaves: 6 for 16-bit keys), then the
                                  number (4, little endian): entry_bytes() each.
                                  Per-key overhead (~90 B) is spread over a hash's
                                  buckets: a 16-bit table is 64 hashes. Small (<= 512
                                  fields of <= 256 bytes: the server settings
                                  hash-max-listpack-entries and -value, which the index
                                  checks at start) a hash is a listpack; past that a
                                  hashtable, whose field still costs less than a key.
                                  The shard is computed from (SPACE, T, G). Named bh,
                                  not b as layout 2's bucket strings (b:{SPACE}:{T}:
                                  {KEY}), so that `index migrate` can write them beside
                                  those before it deletes them (migrate.py)
    sp                    set     the spaces with bucket hashes in the shard (a sweep
                                  walks their hashes)
    id:{J}            hash    in shard J % 64: N & 127 -> the version that number N = J * 128
                              + field is (its id, or for revision r >= 1 id NUL r:
                              index.version_id), for the numbers a lookup can still find
    ct                hash    documents (the numbers the shard's id map names), replaced,
                              deleted, expired (those it stopped naming, by cause):
                              APPLY_SHARD and the sweep change them with the id map
    dc:{G}            hash    id -> its decision record (RECORD below), in 2^DECISION_BITS
                              hashes by G = the id's xxh3 >> 48 (hex), shard G % 64: a
                              listpack of ~150 fields at 10^7 ids, so no key overhead an id
    dk:{ID}           string  the record instead, when retention is on: a key of its own
                              for its TTL (Redis 7.0 has no field expiry)
    evicted           string  entries its buckets pushed out of a lookup's reads (the newest
                              --max-bucket are read): what `index stats` sums as evicted
    dg:{H[:2]}        hash    H[2:] -> number; H is the 16-byte hash of a token-stream digest
    tx:{VERSION}      string  the normalized text (literal pass), by version name, packed
                              (index.texts): a zstd frame that names its dictionary (txdict)
                              or none, or LZ4 as written before zstd; all are read.
                              With a window of texts kept (--text-window): the text's
                              shingle sketch and the packed text, or the sketch alone once
                              the text left the window (texts.join)
    sk:{G}            hash    with a window and no retention: version name -> its sketch
                              (135 B), once its text has left the window (or at once with
                              --text-window 0): in the shard of its text, 2^SKETCH_BITS
                              hashes a shard by G = the name's xxh3 >> 54 (hex), 65,536
                              in all, listpacks of ~150 fields at 10^7, where a key of its
                              own would cost ~80 B more. With retention the sketch stays
                              in its tx key instead (SET KEEPTTL), whose TTL a hash field
                              could not have
    tq                zset    with a window: the versions of the shard whose tx keys hold a
                              text and a sketch, scored by the write number the writer had
                              last read (about when it was written): the oldest leave the
                              window first (RedisIndex.trim_texts, TRIM_TEXTS)
    vx:{VERSION}      string  a record's vector instead (vectors.pack: int8 or float16), in
                              the shard of its text; the same expiry and deletes
    tp:{HOST}         string  a bitmap of (URL, line) pairs counted (templates.pair_bit) and
    tc:{HOST}         hash    line key (8 bytes) -> URLs it was counted on: the site-template
                              model of HOST (xxh3 hex of the host name); index.redis.templates

The Lua scripts (scripts/*.lua) name the coordinator's keys themselves, from its prefix.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import xxhash

from ...blocks import BlockScheme
from ...errors import ConfigError
from ...hashing import fmix64
from ...kernels import native_module
from ...names import index_name_problem
from ...records import Decision
from .. import record_of, version_id

LAYOUT = "5"
# 2^FIELD_BITS buckets of a table share one hash (the docstring)
FIELD_BITS = 10
FIELD_MASK = (1 << FIELD_BITS) - 1
SHARDS = 64
_NATIVE = native_module()  # bucket names by the thousand
# a document's (fingerprint, number) as the bulk paths hold them; a bucket stores them
# packed per table (pack_entries)
ENTRY = np.dtype([("fp", "<u8"), ("num", "<u4")])
LOG = np.dtype([("fp", "<u8"), ("dh", "V16"), ("space", "S8")])
IDS_PER_HASH = 128  # stays within Redis's compact listpack encoding of small hashes
DECISION_BITS = 16  # decisions in 65,536 hashes: per-key overhead spread, shards even
SKETCH_BITS = DECISION_BITS - 6  # a shard's sketch hashes: 1,024 of its 64


def digest_hash(digest: str) -> bytes:
    """16 bytes for any digest string, so log entries and digest fields have one size."""
    return xxhash.xxh3_128_digest(digest.encode("utf-8", "surrogatepass"))


def entry_bytes(*schemes: BlockScheme) -> int:
    """The bytes of a bucket entry of an index with these block schemes: the rest of a
    fingerprint beyond its narrowest table key, and the 4-byte number."""
    narrowest = min(min(s.key_bits()) for s in schemes)
    return (64 - narrowest + 7) // 8 + 4


def pack_entries(
    scheme: BlockScheme, table: int, fps: np.ndarray, nums: np.ndarray, size: int
) -> np.ndarray:
    """The entries of documents (fingerprints, numbers) in `table`: rows of `size` bytes."""
    rest = scheme.rest_array(fps, table).astype("<u8")
    out = np.empty((len(rest), size), np.uint8)
    out[:, : size - 4] = rest.view(np.uint8).reshape(-1, 8)[:, : size - 4]
    out[:, size - 4 :] = np.asarray(nums).astype("<u4").view(np.uint8).reshape(-1, 4)
    return out


def unpack_entries(raw: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(rests, numbers) of entries: `raw` the bytes (uint8) of whole entries."""
    rows = raw.reshape(-1, size)
    wide = np.zeros((len(rows), 8), np.uint8)
    wide[:, : size - 4] = rows[:, : size - 4]
    nums = np.ascontiguousarray(rows[:, size - 4 :]).view("<u4").ravel()
    return wide.view("<u8").ravel(), nums


def fields(keys: np.ndarray) -> list[int]:
    """The fields of buckets `keys` in their hashes (Layout.buckets)."""
    out: list[int] = (np.asarray(keys).astype(np.uint64) & np.uint64(FIELD_MASK)).tolist()
    return out


def text_shard(doc_id: str) -> int:
    return zlib.crc32(doc_id.encode("utf-8", "surrogatepass")) % SHARDS


class Layout:
    """The key names of one index."""

    def __init__(self, namespace: str) -> None:
        if problem := index_name_problem(namespace):
            raise ConfigError(f"index name {namespace!r} {problem}")
        self.namespace = namespace
        self.prefix = f"nd:{{{namespace}}}:"  # the coordinator's
        self._prefix_bytes = self.prefix.encode("utf-8", "surrogatepass")
        self.meta = self.prefix + "meta"
        self.seq = self.prefix + "seq"
        self.log = self.prefix + "log"
        self.logbase = self.prefix + "logbase"
        self.epochs = self.prefix + "epochs"
        self.counts = self.prefix + "counts"
        self.txdict = self.prefix + "txdict"
        self.recent = self.prefix + "rd"
        self.notes = self.prefix + "rw"
        self.rtrim = self.prefix + "rtrim"
        self._shards_head = f"nd:{{{namespace}/".encode("utf-8", "surrogatepass")
        # for SCAN: a name may hold glob characters (*?[]\), to be matched as themselves
        glob = re.sub(r"([*?\[\]\\])", r"\\\1", namespace)
        self.glob_prefix = f"nd:{{{glob}}}:"  # the coordinator's, as a pattern
        self.patterns = (f"{self.glob_prefix}*", f"nd:{{{glob}/*")  # every key

    def family(self, key: bytes) -> str | None:
        """The family of one of the index's keys (what follows its hash tag: meta, id,
        dec, b, tx, ...); None for a key of something else."""
        if key.startswith(self._prefix_bytes):
            rest = key[len(self._prefix_bytes) :]
        elif key.startswith(self._shards_head):
            rest = key.partition(b"}:")[2]
        else:
            return None
        return rest.partition(b":")[0].decode("utf-8", "replace")

    def ids(self, j: int) -> str:
        """The id map of the numbers j * IDS_PER_HASH .. (j + 1) * IDS_PER_HASH - 1."""
        return f"{self.shard_prefix(j % SHARDS)}id:{j}"

    def shard_counts(self, shard: int) -> str:
        return f"{self.shard_prefix(shard)}ct"

    def decisions(self, doc_id: str) -> tuple[int, str, str, bytes]:
        """Where an id's decision lives: its shard, its decision hash (field: the id) and
        the key of one that expires; and the field."""
        raw = doc_id.encode("utf-8", "surrogatepass")
        group = xxhash.xxh3_64_intdigest(raw) >> (64 - DECISION_BITS)
        shard = group % SHARDS
        at = self.shard_prefix(shard)
        return shard, f"{at}dc:{group:x}", f"{at}dk:{doc_id}", raw

    def old_ids(self, j: int) -> str:
        """Layouts 2-4: the id map in the coordinator's slot (`index migrate`)."""
        return f"{self.prefix}id:{j}"

    def old_decision(self, doc_id: str) -> str:
        """Layouts 2-4: a decision key in the coordinator's slot (`index migrate`)."""
        return f"{self.prefix}dec:{doc_id}"

    def old_decision_id(self, key: bytes) -> str:
        """The id of a decision key of layouts 2-4."""
        return key[len(self._prefix_bytes) + 4 :].decode("utf-8", "surrogatepass")

    def decision_id(self, key: bytes) -> str:
        """The id of a decision key that expires (dk:{ID})."""
        return key.partition(b"}:dk:")[2].decode("utf-8", "surrogatepass")

    def repair(self, first: int) -> str:
        return f"{self.prefix}repair:{first}"

    def shard_prefix(self, shard: int) -> str:
        return f"nd:{{{self.namespace}/{shard}}}:"

    def bucket(self, space: str, table: int, key: int) -> tuple[str, int]:
        """The hash of bucket (space, table, key) and its field there."""
        names, _ = self.buckets([space], np.array([table]), np.array([key], np.uint64))
        name = names[0]
        name = name.decode("utf-8", "surrogatepass") if isinstance(name, bytes) else name
        return name, key & FIELD_MASK

    def buckets(
        self, spaces: Sequence[str], tables: np.ndarray, keys: np.ndarray
    ) -> tuple[list[Any], np.ndarray]:
        """Names (str, or bytes from the native kernels) and shards of the hashes that hold
        the buckets (space, table, key), pair by pair (their fields: `fields(keys)`). The
        shard is a hash of the space, table and key >> FIELD_BITS, computed for a whole
        batch at once: a batch names some 7,000 buckets twice, and hashing each name's
        text cost a quarter of serve's time."""
        keys = np.asarray(keys).astype(np.uint64) >> np.uint64(FIELD_BITS)
        salt = {
            sp: np.uint64(zlib.crc32(sp.encode("utf-8", "surrogatepass"))) for sp in set(spaces)
        }
        with np.errstate(over="ignore"):
            mixed = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            mixed ^= tables.astype(np.uint64) << np.uint64(56)
            if len(salt) == 1:
                mixed ^= next(iter(salt.values()))
            else:
                mixed ^= np.array([salt[sp] for sp in spaces], np.uint64)
        shards = fmix64(mixed) % np.uint64(SHARDS)
        if _NATIVE is not None:  # the same names as bytes, without a format per bucket
            order = {sp: n for n, sp in enumerate(salt)}
            at = np.array([order[sp] for sp in spaces], np.uint32) if len(order) > 1 else 0
            which = (at * SHARDS + shards).astype(np.uint32)
            flat = [p for sp in salt for p in self._bucket_prefix_bytes(sp)]
            tables64 = np.ascontiguousarray(tables, np.int64)
            return _NATIVE.bucket_names(
                flat, which, tables64, np.ascontiguousarray(keys, np.uint64)
            ), shards
        prefixes = {sp: self._bucket_prefixes(sp) for sp in salt}
        names = [
            prefixes[sp][s] + f"{t}:{k:x}"
            for sp, s, t, k in zip(
                spaces, shards.tolist(), tables.tolist(), keys.tolist(), strict=True
            )
        ]
        return names, shards

    @functools.lru_cache(maxsize=64)  # noqa: B019 - an index lives for the whole run
    def _bucket_prefixes(self, space: str) -> list[str]:
        return [f"{self.shard_prefix(s)}bh:{space}:" for s in range(SHARDS)]

    @functools.lru_cache(maxsize=64)  # noqa: B019 - as above
    def _bucket_prefix_bytes(self, space: str) -> list[bytes]:
        return [p.encode("utf-8", "surrogatepass") for p in self._bucket_prefixes(space)]

    def spaces(self, shard: int) -> str:
        return f"{self.shard_prefix(shard)}sp"

    def evicted(self, shard: int) -> str:
        return f"{self.shard_prefix(shard)}evicted"

    def digest(self, dh: bytes) -> str:
        """The hash of a digest's field: one of 65,536, by its first two bytes."""
        return f"{self.shard_prefix(dh[0] % SHARDS)}dg:{dh[:2].hex()}"

    def template(self, host: str) -> tuple[str, str]:
        """A host's template model: its pair bitmap and its line counts, in one shard."""
        h = xxhash.xxh3_64_hexdigest(host.encode("utf-8", "surrogatepass"))
        at = self.shard_prefix(int(h, 16) % SHARDS)
        return f"{at}tp:{h}", f"{at}tc:{h}"

    def text(self, doc_id: str) -> str:
        return f"{self.shard_prefix(text_shard(doc_id))}tx:{doc_id}"

    def vector(self, doc_id: str) -> str:
        return f"{self.shard_prefix(text_shard(doc_id))}vx:{doc_id}"

    def text_queue(self, shard: int) -> str:
        return f"{self.shard_prefix(shard)}tq"

    def sketch(self, doc_id: str) -> str:
        """The hash of a version's sketch once its text has left the window: in its text's
        shard (one slot with its tx key), one of the shard's 2^SKETCH_BITS by the name's
        xxh3: 2^DECISION_BITS in all, as the decisions."""
        group = xxhash.xxh3_64_intdigest(doc_id.encode("utf-8", "surrogatepass")) >> (
            64 - SKETCH_BITS
        )
        return f"{self.shard_prefix(text_shard(doc_id))}sk:{group:x}"


@dataclass(frozen=True)
class Version:
    """An indexed version of a record, as its decision record names it."""

    name: str  # version_id(id, revision)
    num: int
    space: str
    digest_hash: bytes
    fingerprint: int


@dataclass(frozen=True)
class Stored:
    """What a decision key holds: the decision (with the digest and version it was made
    on), its current version if indexed, and the earlier versions kept as candidates."""

    decision: Decision
    current: Version | None
    kept: tuple[Version, ...] = ()
    write: int = 0  # the number of the write that stored it (0: before layout 5)

    @property
    def versions(self) -> tuple[Version, ...]:
        return (*self.kept, *((self.current,) if self.current else ()))


# A decision record (layout 5), little endian; COMMIT composes it from the head and body
# the caller packs, the numbers it gives and the kept versions it carries over:
#   RECORD, w u32 (the write's number: every write of a decision or a delete takes one),
#   n u32 (the current version's number, 0: not indexed), head, count u16 and that many
#   kept versions (n u32, r u32, space, dh 16, fp 8), body
#   head: flags u8 (1: indexed, space and dh follow), r u32 (the revision), fp 8 (the
#         decision's fingerprint), dg (the digest decided on: pack_digest), [space, dh 16]
#   body: the decision's JSON without what the key and head give (id, decision,
#         fingerprint, revision), nor its cluster when that is its partner or itself,
#         without spaces
# A delete leaves a tombstone: TOMBSTONE and w u32, in the recent writes, and in the
# decision hash while an older write of the id may still be applied late (so that it
# cannot bring the decision back). A short string (space, dg) is a length byte and its
# bytes. parse_decision reads layout 4's record (RECORD_4: no w) and layout 3's form, a
# '#' and a JSON header line before the decision JSON, for `index migrate`, which
# rewrites every decision as a record (the scripts read layout 5's only).
# The body is raw deflate (a 1 KB window, fresh for each record) primed with BODY_DICT:
# what most bodies repeat (keys, nulls, the feature strings, the date's shape), so that a
# 225-byte body takes about 41 and a record stays within a listpack's 256-byte values. 12
# us to pack, 3 to unpack. BODY_DICT is part of layout 5's format: never change it.
RECORD = b"\x03"
RECORD_4 = b"\x01"
TOMBSTONE = b"\x00"
_IN_HEAD = ("id", "decision", "fingerprint", "revision")
BODY_WINDOW = 10
BODY_DICT = (
    b'"url":"https://www.","version":"","extraction":"","space":"t","k":,'
    b'"duplicate_of_revision":,"previous_fingerprint":null,'
    b'"features":"html-main.words-cjk2.builtin-sqrtlen1+u14.0.0+hyperplanes-s0",'
    b'"features":"vectors-e0+hyperplanes-s0","detector":"0.1.0","index":"default",'
    b'"decided_at":"2026-12-05T00:00:00.000000+00:00"}{"duplicate_of":null,'
    b'"distance":null,"similarity":null,"exact":false,'
    b'"features":"words-cjk2.builtin-sqrtlen1+u14.0.0+hyperplanes-s0","index":"'
)


def pack_digest(digest: str) -> bytes:
    """A digest as records keep it (and COMMIT compares it): its bytes behind 1 when it
    is lowercase hex, else its text behind 2; b'' for none."""
    if not digest:
        return b""
    if len(digest) % 2 == 0 and re.fullmatch(r"[0-9a-f]+", digest):
        return b"\x01" + bytes.fromhex(digest)
    return b"\x02" + digest.encode("utf-8", "surrogatepass")


def unpack_digest(packed: bytes) -> str:
    if not packed:
        return ""
    if packed[:1] == b"\x01":
        return packed[1:].hex()
    return packed[1:].decode("utf-8", "surrogatepass")


def _short(raw: bytes) -> bytes:
    if len(raw) > 255:
        raise ValueError(f"{raw[:20]!r}... is longer than 255 bytes")
    return bytes((len(raw),)) + raw


def record_head(decision: Decision, entry_space: str | None, dh: bytes | None) -> bytes:
    """The head of a decision record (what follows its number)."""
    indexed = entry_space is not None and dh is not None
    out = (
        struct.pack("<BI", 1 if indexed else 0, decision.revision)
        + decision.fingerprint.to_bytes(8, "little")
        + _short(pack_digest(decision.digest))
    )
    if indexed:
        out += _short(entry_space.encode()) + dh  # type: ignore[union-attr, operator]
    return out


def record_body(decision: Decision) -> bytes:
    """The body of a layout-5 record: the JSON, deflated with BODY_DICT."""
    body = {k: v for k, v in decision.to_dict().items() if k not in _IN_HEAD}
    if body["cluster"] == (decision.duplicate_of or decision.id):
        del body["cluster"]  # what a record without one reads as (Decision.cluster)
    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )
    packer = zlib.compressobj(6, zlib.DEFLATED, -BODY_WINDOW, 1, zlib.Z_DEFAULT_STRATEGY, BODY_DICT)
    return packer.compress(raw) + packer.flush()


def _body_json(packed: bytes) -> bytes:
    unpacker = zlib.decompressobj(-BODY_WINDOW, zdict=BODY_DICT)
    return unpacker.decompress(packed) + unpacker.flush()


def record(stored: Stored, write: int | None = None) -> bytes:
    """The record of `stored`, as COMMIT composes it (bulk loads and migrations write it),
    written by write number `write` (default: its own)."""
    d, current = stored.decision, stored.current
    head = record_head(
        d, current.space if current else None, current.digest_hash if current else None
    )
    kept = b"".join(
        struct.pack("<II", v.num, record_of(v.name)[1])
        + _short(v.space.encode())
        + v.digest_hash
        + v.fingerprint.to_bytes(8, "little")
        for v in stored.kept
    )
    return (
        RECORD
        + struct.pack(
            "<II", stored.write if write is None else write, current.num if current else 0
        )
        + head
        + struct.pack("<H", len(stored.kept))
        + kept
        + record_body(d)
    )


def parse_decision(value: bytes, doc_id: str) -> Stored:
    """A decision key's value, a record of any layout's format, of id `doc_id`."""
    if value[:1] == RECORD:
        (write,) = struct.unpack_from("<I", value, 1)
        return replace(_parse_record(value[4:], doc_id, _body_json), write=write)
    if value[:1] == RECORD_4:
        return _parse_record(value, doc_id, bytes)
    head, _, body = value.partition(b"\n") if not value.startswith(b"{") else (b"", b"", value)
    if head.startswith(b"#"):
        h = json.loads(head[1:])
        d = Decision.from_dict(json.loads(body), digest=h.get("dg", ""))
        d.version = h.get("v")
        kept = h.get("k") or []
        return Stored(
            d,
            _version(d.id, h) if h.get("n") else None,
            tuple(_version(d.id, k) for k in kept if isinstance(k, dict)),
        )
    d = Decision.from_dict(json.loads(body))
    if not head:
        return Stored(d, None)
    num, space, dh = head.decode().split(" ")
    return Stored(d, Version(d.id, int(num), space, bytes.fromhex(dh), d.fingerprint))


@dataclass(frozen=True)
class Note:
    """What a write did, as the coordinator keeps it (rw) until the shards have it: the
    name its number maps to when it indexed a version (else the id), and the versions it
    took out of the lookups: (number, name, cause 'r' replaced or 'd' deleted)."""

    indexed: bool
    name: str
    gone: tuple[tuple[int, str, str], ...] = ()


def parse_note(raw: bytes) -> Note:
    """A note as versions.lua's `note` packs it."""
    flags, size = struct.unpack_from("<BH", raw, 0)
    name = raw[3 : 3 + size].decode("utf-8", "surrogatepass")
    at = 3 + size
    (count,) = struct.unpack_from("<H", raw, at)
    at += 2
    gone = []
    for _ in range(count):
        num, cause, size = struct.unpack_from("<IcH", raw, at)
        at += 7
        gone.append((num, raw[at : at + size].decode("utf-8", "surrogatepass"), cause.decode()))
        at += size
    return Note(bool(flags & 1), name, tuple(gone))


def write_of(value: bytes) -> int:
    """The write number of a record or a tombstone of layout 5."""
    if value[:1] not in (RECORD, TOMBSTONE):
        return -1
    return int(struct.unpack_from("<I", value, 1)[0])


def _parse_record(value: bytes, doc_id: str, body: Callable[[bytes], bytes]) -> Stored:
    """A record of layout 4's form (its number from byte 1), its body's JSON `body(...)` of
    what follows the kept versions."""
    num, flags, revision = struct.unpack_from("<IBI", value, 1)
    fp = int.from_bytes(value[10:18], "little")
    dg, at = _read_short(value, 18)
    space, dh = "", b""
    if flags & 1:
        raw, at = _read_short(value, at)
        space, dh, at = raw.decode(), value[at : at + 16], at + 16
    (count,) = struct.unpack_from("<H", value, at)
    at += 2
    kept = []
    for _ in range(count):
        n, r = struct.unpack_from("<II", value, at)
        raw, at = _read_short(value, at + 8)
        kfp = int.from_bytes(value[at + 16 : at + 24], "little")
        kept.append(Version(version_id(doc_id, r), n, raw.decode(), value[at : at + 16], kfp))
        at += 24
    fields = {"id": doc_id, "fingerprint": f"{fp:016x}", "revision": revision}
    d = Decision.from_dict({**fields, **json.loads(body(value[at:]))}, digest=unpack_digest(dg))
    current = Version(version_id(doc_id, revision), num, space, dh, fp) if num else None
    return Stored(d, current, tuple(kept))


def _read_short(value: bytes, at: int) -> tuple[bytes, int]:
    end = at + 1 + value[at]
    return value[at + 1 : end], end


def _version(doc_id: str, h: dict[str, Any]) -> Version:
    revision = int(h.get("r") or 0)
    return Version(
        version_id(doc_id, revision), int(h["n"]), h["s"], bytes.fromhex(h["dh"]), int(h["fp"], 16)
    )
