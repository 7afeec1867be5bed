"""The Redis index: the interface of the memory index, on a Redis 7 server or a Redis Cluster.

Key layout of index NAME (layout 2). The keys the commit must read and write atomically
share the hash tag {NAME}, one slot (the coordinator); everything that grows with the
index is spread over SHARDS hash tags {NAME/0} .. {NAME/63}, which a Redis Cluster spreads
over its primaries. On a single server the keys are the same.

  coordinator, nd:{NAME}:
    meta              hash    layout, fingerprint version, block scheme, retention
    seq               string  number of the last committed document
    log               string  LOG entries (fingerprint, digest hash, space) of documents
                              logbase+1 .. seq: the recent ones, read by lookups until the
                              shards have them and by commits to check for conflicts
    logbase           string
    pending           zset    committed ranges "first:last:time" not yet applied to the
                              shards, scored by first
    epochs            zset    member seq, score the time of the commit that numbered it: one
                              per window of `granularity` seconds, the window's last commit
    id:{N>>7}         hash    N & 127 -> id of document number N
    dec:{ID}          string  the decision JSON; "N SPACE DIGESTHASH\\n" before it when the
                              document is indexed (what `delete` and `export` need)
  shard S, nd:{NAME/S}:
    b:{SPACE}:{T}:{KEY}   string  bucket KEY of block table T: 12-byte entries (fingerprint
                                  8 little endian, number 4), oldest first
    dg:{H[:2]}        hash    H[2:] -> number; H is the 16-byte hash of a token-stream digest
    tx:{ID}           string  LZ4 of the normalized text (literal pass)

A batch's commit, one consumer:
  1. lookup: the coordinator's snapshot (seq, the log since the shards were last complete,
     the retention cutoff), then the shards' buckets and digests, then ids by number
  2. write the texts of the documents to index (a candidate must be verifiable the moment
     it is committed)
  3. COMMIT script on the coordinator: if seq moved since the lookup, it answers with the
     log entries committed meanwhile; the consumer checks them against its batch (numpy),
     keeps the prefix before the first conflict and asks again. Once nothing new came in,
     the script numbers the documents, appends them to the log, maps numbers to ids and
     stores the decisions, atomically, and records the range as pending
  4. apply the range to the shards (bucket entries, digests), then APPLIED on the
     coordinator takes it off pending and trims the log
A consumer that dies between 3 and 4 leaves its range pending: lookups keep reading those
entries from the log, and after REPAIR_AFTER seconds another consumer applies them.

So every document in a bucket was committed first, every committed document is visible to
a lookup (in the shards, or in the log above the oldest pending range), and the check in 3
sees every document committed after a lookup: two near-duplicates committed at once by two
consumers are never both unique, on a cluster as on one server.
"""

from __future__ import annotations

import functools
import json
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis
import xxhash
from redis.cluster import RedisCluster

from ..blocks import BlockScheme
from ..errors import BackendUnavailable, ConfigError
from ..hashing import fmix64
from ..metrics import REDIS_SECONDS
from ..records import Decision
from . import (
    DEFAULT_MAX_BUCKET,
    Candidate,
    Commit,
    Committed,
    Entry,
    Found,
    Query,
)
from .texts import pack_text, unpack_text

LAYOUT = "2"
SHARDS = 64
ENTRY = np.dtype([("fp", "<u8"), ("num", "<u4")])
LOG = np.dtype([("fp", "<u8"), ("dh", "V16"), ("space", "S8")])
IDS_PER_HASH = 128  # stays within Redis's compact listpack encoding of small hashes
LOG_KEEP = 65_536  # log entries kept below the applied mark, for slow consumers' checks
REPAIR_AFTER = 30.0  # seconds a committed range may stay unapplied before others apply it
COMMIT_ROUNDS = 50  # stale answers in a row before the batch is decided afresh

_SNAPSHOT = r"""
local C, retention = ARGV[1], tonumber(ARGV[2])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
local oldest = redis.call('ZRANGE', C .. 'pending', 0, 0, 'WITHSCORES')
local from = seq
if oldest[1] then from = tonumber(oldest[2]) - 1 end
if from < base then from = base end
local log = ''
if seq > from then
  log = redis.call('GETRANGE', C .. 'log', (from - base) * 32, (seq - base) * 32 - 1)
end
local cutoff = 0
if retention > 0 then
  local now = tonumber(redis.call('TIME')[1])
  local e = redis.call('ZRANGE', C .. 'epochs', now - retention, '-inf', 'BYSCORE', 'REV',
                       'LIMIT', 0, 1)
  if e[1] then cutoff = tonumber(e[1]) end
end
return {seq, from, log, cutoff, oldest[1] or ''}
"""

# Numbers, logs and stores a batch, atomically, unless seq moved since `upto`: then it
# answers with what was committed meanwhile, for the caller to check.
_COMMIT = r"""
local C, upto, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local decision_ttl, keep, granularity = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
if seq ~= upto then
  local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
  if upto < base or seq < upto then return {'relookup'} end
  return {'stale', seq, redis.call('GETRANGE', C .. 'log', (upto - base) * 32,
                                   (seq - base) * 32 - 1)}
end
local now = tonumber(redis.call('TIME')[1])
local function set(key, value, ttl)
  if ttl > 0 then redis.call('SET', key, value, 'EX', ttl) else redis.call('SET', key, value) end
end
local out, log, first, at = {}, {}, seq + 1, 7
for i = 1, n do
  local id, kind, decision, entry = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  at = at + 4
  out[i] = ''
  if kind ~= 'r' then
    local key = C .. 'dec:' .. id
    local earlier = redis.call('GET', key)
    if earlier then
      out[i] = 's' .. earlier
    elseif kind == 'e' then
      seq = seq + 1
      log[#log + 1] = entry
      redis.call('HSET', C .. 'id:' .. math.floor(seq / 128), seq % 128, id)
      set(key, seq .. ' ' .. decision, keep)
      out[i] = 'n' .. seq
    else
      set(key, decision, decision_ttl)
    end
  end
end
local member = ''
if seq >= first then
  redis.call('SET', KEYS[1], seq)
  redis.call('APPEND', C .. 'log', table.concat(log))
  member = first .. ':' .. seq .. ':' .. now
  redis.call('ZADD', C .. 'pending', first, member)
end
if keep > 0 and seq >= first then
  -- Every document numbered up to seq was committed by now. A window keeps only its last
  -- mark, so a document ages out at most one window late, never early.
  local last = redis.call('ZRANGE', C .. 'epochs', -1, -1, 'WITHSCORES')
  if last[1] and math.floor(tonumber(last[2]) / granularity) == math.floor(now / granularity) then
    redis.call('ZREM', C .. 'epochs', last[1])
  end
  redis.call('ZADD', C .. 'epochs', now, seq)
end
return {'ok', out, member}
"""

_APPLIED = r"""
local C, member, keep = ARGV[1], ARGV[2], tonumber(ARGV[3])
redis.call('ZREM', C .. 'pending', member)
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local oldest = redis.call('ZRANGE', C .. 'pending', 0, 0, 'WITHSCORES')
local applied = seq
if oldest[1] then applied = tonumber(oldest[2]) - 1 end
local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
if applied - base > 2 * keep then  -- rewrite the log only now and then
  local floor = applied - keep
  redis.call('SET', C .. 'log', redis.call('GETRANGE', C .. 'log', (floor - base) * 32, -1))
  redis.call('SET', C .. 'logbase', floor)
end
return applied
"""

# One shard's part of a commit: bucket entries (a bucket past `limit` bytes keeps its
# newest `keep` bytes; with retention it expires `ttl` s after its last entry) and digests.
_APPLY_SHARD = r"""
local buckets, limit, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
for i = 1, buckets do
  if redis.call('APPEND', KEYS[i], ARGV[4 + i]) > limit then
    redis.call('SET', KEYS[i], redis.call('GETRANGE', KEYS[i], -keep, -1))
  end
  if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
end
local at = 5 + buckets
for i = buckets + 1, #KEYS do
  redis.call('HSETNX', KEYS[i], ARGV[at], ARGV[at + 1])  -- the first copy is the one named
  at = at + 2
end
return 0
"""

# A deleted document's entry out of a bucket, by its number.
_FILTER_BUCKET = r"""
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local gone = tonumber(ARGV[1])
local kept = {}
for pos = 1, #v - 11, 12 do
  if struct.unpack('<I4', v, pos + 8) ~= gone then
    kept[#kept + 1] = string.sub(v, pos, pos + 11)
  end
end
local out = table.concat(kept)
if #out == #v then return 0 end
if #out == 0 then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], out, 'KEEPTTL') end
return 1
"""

# A deleted document's digest, if the digest still names it.
_FORGET_DIGEST = r"""
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
"""

# The digests numbered at or below a cutoff, out of one shard's digest hashes.
_SWEEP_DIGESTS = r"""
local cutoff, removed = tonumber(ARGV[1]), 0
for k = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= cutoff then
      removed = removed + redis.call('HDEL', KEYS[k], all[i])
    end
  end
end
return removed
"""

_DELETE = r"""
local C, out = ARGV[1], {}
for i = 2, #ARGV do
  local key = C .. 'dec:' .. ARGV[i]
  local v = redis.call('GET', key)
  out[i - 1] = v or ''
  if v then
    redis.call('DEL', key)
    local num = tonumber(string.match(v, '^(%d+) '))
    if num then
      local ids = C .. 'id:' .. math.floor(num / 128)
      if redis.call('HGET', ids, num % 128) == ARGV[i] then redis.call('HDEL', ids, num % 128) end
    end
  end
end
return out
"""


def digest_hash(digest: str) -> bytes:
    """16 bytes for any digest string, so log entries and digest fields have one size."""
    return xxhash.xxh3_128_digest(digest.encode("utf-8", "surrogatepass"))


def _shard(subject: str) -> int:
    return zlib.crc32(subject.encode("utf-8", "surrogatepass")) % SHARDS


def _by_shard(shards: np.ndarray) -> list[list[int]]:
    """Positions grouped by shard, in order within a group."""
    order = np.argsort(shards, kind="stable")
    cuts = np.flatnonzero(np.diff(shards[order])) + 1
    return [g.tolist() for g in np.split(order, cuts)] if len(order) else []


@dataclass(frozen=True)
class Snapshot:
    seq: int  # the lookup's mark: a commit checks what was committed after it
    log: np.ndarray  # LOG entries numbered first+1 .. seq
    first: int
    cutoff: int  # numbers at or below it are older than the retention horizon
    oldest_pending: str


@dataclass(frozen=True)
class Stored:
    """An indexed document as the coordinator knows it, from its decision key."""

    num: int
    space: str
    digest_hash: bytes
    decision: Decision


def _parse_decision(value: bytes) -> tuple[Decision, Stored | None]:
    head, _, body = value.partition(b"\n") if not value.startswith(b"{") else (b"", b"", value)
    decision = Decision.from_dict(json.loads(body))
    if not head:
        return decision, None
    num, space, dh = head.decode().split(" ")
    return decision, Stored(int(num), space, bytes.fromhex(dh), decision)


class Batch:
    """The commands of one round trip, each on the keys of one hash tag (`add` names the
    key that routes it). One server: one pipeline. A cluster: one pipeline per node, each
    command sent to the node that serves its key's slot; redis-py's own cluster pipeline
    refuses the MGET and EVAL that the index needs."""

    def __init__(self, client: redis.Redis | RedisCluster) -> None:
        self.client = client
        self.commands: list[tuple[str | bytes, tuple[Any, ...]]] = []

    def add(self, key: str | bytes, *command: Any) -> None:
        self.commands.append((key, command))

    def execute(self) -> list[Any]:
        if not isinstance(self.client, RedisCluster):
            pipe: Any = self.client.pipeline(transaction=False)
            for _, command in self.commands:
                pipe.execute_command(*command)
            return list(pipe.execute())
        client: Any = self.client  # redis-py's cluster helpers are untyped
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for at, (key, _) in enumerate(self.commands):
            node = client.get_node_from_key(key)
            by_node.setdefault(node.name, (node, []))[1].append(at)
        out: list[Any] = [None] * len(self.commands)
        try:
            for node, positions in by_node.values():
                pipe = client.get_redis_connection(node).pipeline(transaction=False)
                for at in positions:
                    pipe.execute_command(*self.commands[at][1])
                for at, reply in zip(positions, pipe.execute(), strict=True):
                    out[at] = reply
        except (
            redis.exceptions.MovedError,
            redis.exceptions.AskError,
            redis.ConnectionError,
        ) as exc:
            # Slots moved (resharding, failover): learn the new map, and let the caller
            # retry the round trip.
            client.nodes_manager.initialize()
            raise BackendUnavailable(f"Redis Cluster: slots moved ({exc})") from exc
        return out


class RedisIndex:
    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        scheme: BlockScheme,
        namespace: str = "default",
        text_ttl: int = 0,
        decision_ttl: int = 0,
        retention: int = 0,
        max_bucket: int = DEFAULT_MAX_BUCKET,
    ) -> None:
        if not namespace or any(c in namespace for c in "{}:/ "):
            raise ConfigError(
                f"index name {namespace!r} must be non-empty, without {{}}:/ or spaces"
            )
        if retention < 0 or text_ttl < 0 or decision_ttl < 0 or max_bucket < 1:
            raise ConfigError("retention and TTLs must be >= 0 and max_bucket >= 1")
        self.client = client
        self.scheme = scheme
        self.namespace = namespace
        self.prefix = f"nd:{{{namespace}}}:"
        self.retention = retention
        # Commit times are kept per window of `granularity` seconds: a document ages out
        # between `retention` and `retention + granularity` seconds after its commit.
        self.granularity = max(1, retention // 100)
        keep = retention + self.granularity if retention else 0
        self.text_ttl = text_ttl or keep
        self.decision_ttl = decision_ttl
        self.keep = keep  # indexed documents' decisions live as long as their entries
        self.max_bucket = max_bucket
        self._mark = 0
        self._swept_to = 0  # the next shard whose digests the sweep filters

    # ------------------------------------------------------------------ plumbing

    def _shard_prefix(self, shard: int) -> str:
        return f"nd:{{{self.namespace}/{shard}}}:"

    def _bucket(self, space: str, table: int, key: int) -> str:
        names, _ = self._buckets([space], np.array([table]), np.array([key], np.uint64))
        return names[0]

    def _buckets(
        self, spaces: Sequence[str], tables: np.ndarray, keys: np.ndarray
    ) -> tuple[list[str], np.ndarray]:
        """Names and shards of the buckets (space, table, key), pair by pair. The shard is
        a hash of the three, computed for a whole batch at once: a batch names some 7,000
        buckets twice, and hashing each name's text cost a quarter of serve's time."""
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
        return [f"{self._shard_prefix(s)}b:{space}:" for s in range(SHARDS)]

    def _probed_buckets(self, queries: Sequence[Query]) -> tuple[list[str], np.ndarray, int]:
        """The buckets a lookup reads, query by query: their names, shards, and how many
        a query reads."""
        fps = [q.fingerprint for q in queries]
        if self.scheme.radius:  # every key within the radius of each table's own
            rows = self.scheme.probes(fps)
            per = len(rows[0])
            tables = np.array([t for row in rows for t, _ in row])
            keys = np.array([k for row in rows for _, k in row], np.uint64)
        else:
            array = self.scheme.key_array(fps)
            per = array.shape[1]
            tables, keys = np.tile(np.arange(per), len(fps)), array.ravel()
        spaces = [q.space for q in queries for _ in range(per)]
        names, shards = self._buckets(spaces, tables, keys)
        return names, shards, per

    def _digest_key(self, dh: bytes) -> str:
        """The hash of a digest's field: one of 65,536, by its first two bytes."""
        return f"{self._shard_prefix(dh[0] % SHARDS)}dg:{dh[:2].hex()}"

    def _text_key(self, doc_id: str) -> str:
        return f"{self._shard_prefix(_shard(doc_id))}tx:{doc_id}"

    def _batch(self) -> Batch:
        return Batch(self.client)

    def _call(self, fn: Any, *args: Any) -> Any:
        """One round trip: timed, and its failures sorted into the error tree."""
        try:
            with REDIS_SECONDS.time():
                return fn(*args)
        except redis.AuthenticationError as exc:
            raise ConfigError(f"Redis refused the credentials: {exc}") from exc
        except (
            redis.ConnectionError,
            redis.TimeoutError,
            redis.BusyLoadingError,
            redis.exceptions.ClusterError,
            redis.exceptions.TryAgainError,
            redis.exceptions.ReadOnlyError,
        ) as exc:
            raise BackendUnavailable(f"Redis: {exc}") from exc

    def _eval(self, script: str, *args: Any) -> Any:
        """A coordinator script: its first key, seq, routes it to the coordinator's slot.
        EVAL rather than EVALSHA: Redis caches the compiled script either way, and EVAL
        needs no reload after a restart or a failover."""
        return self._call(self.client.eval, script, 1, self.prefix + "seq", self.prefix, *args)

    # ------------------------------------------------------------------ binding

    def bind(self, version: str) -> None:
        meta = self.prefix + "meta"
        want = {
            "layout": LAYOUT,
            "version": version,
            "scheme": self.scheme.name,
            "retention": str(self.retention),
        }
        have = self.meta()
        if have and "layout" not in have:
            raise ConfigError(
                f"index {self.namespace!r} was written in an older key layout; "
                "index its documents again under a new --index name"
            )
        if not have:
            for field, value in want.items():
                self._call(self.client.hsetnx, meta, field, value)
            have = self.meta()
        what = {
            "layout": "key layout",
            "version": "fingerprints of",
            "scheme": "block scheme",
            "retention": "retention (seconds)",
        }
        for field, value in want.items():
            if have.get(field) != value:
                raise ConfigError(
                    f"index {self.namespace!r} uses {what[field]} {have.get(field)}, not {value}"
                )

    def meta(self) -> dict[str, str]:
        """What the index was made with (layout, version, scheme, retention); empty for
        an index nobody has written."""
        got = self._call(self.client.hgetall, self.prefix + "meta")
        return {k.decode(): v.decode() for k, v in got.items()}

    @classmethod
    def open(cls, client: redis.Redis | RedisCluster, namespace: str) -> RedisIndex:
        """An existing index with the block scheme and retention it was made with, for the
        commands that maintain it (export, delete, sweep)."""
        meta = cls(client, BlockScheme.parse("k3-b4"), namespace).meta()
        if not meta:
            raise ConfigError(
                f"there is no index {namespace!r} on this Redis (no nd:{{{namespace}}}:meta)"
            )
        return cls.from_meta(client, namespace, meta)

    @classmethod
    def from_meta(
        cls, client: redis.Redis | RedisCluster, namespace: str, meta: dict[str, Any]
    ) -> RedisIndex:
        """The index that `meta` describes (an index's meta hash, or an export's header):
        its layout, block scheme, retention and fingerprint version, bound."""
        if meta.get("layout") != LAYOUT:
            raise ConfigError(
                f"index {namespace!r} is in key layout {meta.get('layout', '1')}, not {LAYOUT}"
            )
        index = cls(
            client, BlockScheme.parse(meta["scheme"]), namespace, retention=int(meta["retention"])
        )
        index.bind(meta["version"])
        return index

    # ------------------------------------------------------------------ lookup

    def _snapshot(self) -> Snapshot:
        seq, first, log, cutoff, oldest = self._eval(_SNAPSHOT, self.retention)
        return Snapshot(int(seq), np.frombuffer(log, LOG), int(first), int(cutoff), oldest.decode())

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        if not queries:
            return []
        snap = self._snapshot()
        self._mark = snap.seq
        if snap.oldest_pending:
            self._repair(snap.oldest_pending)
        names, shards, per = self._probed_buckets(queries)
        groups = _by_shard(shards)
        dhs = [digest_hash(q.digest) for q in queries]
        batch = self._batch()
        for group in groups:
            keys = [names[i] for i in group]
            batch.add(keys[0], "MGET", *keys)
        for dh in dhs:
            key = self._digest_key(dh)
            batch.add(key, "HGET", key, dh[2:])
        replies = self._call(batch.execute)
        buckets: list[bytes | None] = [None] * len(names)
        for group, got in zip(groups, replies, strict=False):
            for i, v in zip(group, got, strict=True):
                buckets[i] = v
        digests = replies[len(groups) :]

        tail = self.max_bucket * ENTRY.itemsize
        log_nums = np.arange(snap.first + 1, snap.seq + 1, dtype=np.int64)
        near: list[dict[int, int]] = []  # per query: number -> fingerprint
        exact: list[int | None] = []
        for at, (q, dh, dg) in enumerate(zip(queries, dhs, digests, strict=True)):
            found: dict[int, int] = {}
            raw = b"".join(v[-tail:] for v in buckets[at * per : (at + 1) * per] if v)
            if raw:
                e = np.frombuffer(raw, ENTRY)
                keep = (np.bitwise_count(e["fp"] ^ np.uint64(q.fingerprint)) <= self.scheme.k) & (
                    e["num"] > snap.cutoff
                )
                found.update(zip(e["num"][keep].tolist(), e["fp"][keep].tolist(), strict=True))
            ex = int(dg) if dg is not None else None
            if len(snap.log):
                mine = snap.log["space"] == q.space.encode()
                close = mine & (
                    np.bitwise_count(snap.log["fp"] ^ np.uint64(q.fingerprint)) <= self.scheme.k
                )
                found.update(
                    zip(log_nums[close].tolist(), snap.log["fp"][close].tolist(), strict=True)
                )
                same = np.flatnonzero(mine & (snap.log["dh"] == np.void(dh)))
                if len(same):
                    ex = int(log_nums[same[0]])
            near.append({n: fp for n, fp in found.items() if n > snap.cutoff})
            exact.append(ex if ex is not None and ex > snap.cutoff else None)

        ids = self._ids({n for f in near for n in f} | {n for n in exact if n is not None})
        out = []
        for q, f, ex in zip(queries, near, exact, strict=True):
            cands = [
                Candidate(ids[n], fp, (fp ^ q.fingerprint).bit_count())
                for n, fp in f.items()
                if n in ids
            ]
            cands.sort(key=lambda c: (c.distance, c.id))
            out.append(Found(ids.get(ex) if ex is not None else None, cands))
        return out

    def _ids(self, numbers: Iterable[int]) -> dict[int, str]:
        """Ids of committed documents; a deleted one's number has none."""
        groups: dict[int, list[int]] = {}
        for n in numbers:
            groups.setdefault(n // IDS_PER_HASH, []).append(n)
        if not groups:
            return {}
        batch = self._batch()
        for j, nums in groups.items():
            key = f"{self.prefix}id:{j}"
            batch.add(key, "HMGET", key, *(n % IDS_PER_HASH for n in nums))
        out = {}
        for nums, got in zip(groups.values(), self._call(batch.execute), strict=True):
            out.update({n: r.decode() for n, r in zip(nums, got, strict=True) if r is not None})
        return out

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        by_shard: dict[int, list[str]] = {}
        for i in dict.fromkeys(ids):
            by_shard.setdefault(_shard(i), []).append(i)
        batch = self._batch()
        for group in by_shard.values():
            keys = [self._text_key(i) for i in group]
            batch.add(keys[0], "MGET", *keys)
        out = {}
        for group, got in zip(by_shard.values(), self._call(batch.execute), strict=True):
            out.update({i: unpack_text(r) for i, r in zip(group, got, strict=True) if r})
        return out

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        if not ids:
            return {}
        replies = self._call(self.client.mget, [f"{self.prefix}dec:{i}" for i in ids])
        return {i: _parse_decision(r)[0] for i, r in zip(ids, replies, strict=True) if r}

    # ------------------------------------------------------------------ commit

    def commit(self, items: Sequence[Commit]) -> Committed:
        return self._commit(items, [digest_hash(i.entry.digest) if i.entry else b"" for i in items])

    def _commit(self, items: Sequence[Commit], dhs: list[bytes]) -> Committed:
        if not items:
            return Committed(0, {})
        indexing = [i.entry if not i.replay else None for i in items]
        for e in indexing:
            if e is not None and len(e.space.encode()) > 8:
                raise ConfigError(f"fingerprint space {e.space!r} is longer than 8 bytes")
        written = self._write_texts(indexing)
        done, upto, reply = len(items), self._mark, None
        for _ in range(COMMIT_ROUNDS):
            args: list[Any] = [
                upto,
                done,
                self.decision_ttl,
                self.keep,
                self.granularity,
            ]
            for item, e, dh in zip(items[:done], indexing, dhs, strict=False):
                kind = "r" if item.replay else ("e" if e is not None else "x")
                body = item.decision.to_json()
                if e is None:
                    args += [item.decision.id, kind, body, b""]
                else:
                    entry = (
                        e.fingerprint.to_bytes(8, "little") + dh + e.space.encode().ljust(8, b"\0")
                    )
                    args += [item.decision.id, kind, f"{e.space} {dh.hex()}\n{body}", entry]
            reply = self._eval(_COMMIT, *args)
            if reply[0] != b"stale":
                break
            upto = int(reply[1])
            done = min(done, self._first_conflict(indexing[:done], dhs, reply[2]))
            if done == 0:
                break
        else:
            done = 0
        if reply is None or reply[0] != b"ok" or done == 0:
            self._drop_texts([items[i].decision.id for i in written])
            return Committed(0, {})

        stored: dict[int, Decision] = {}
        applied: list[tuple[int, int, str, bytes]] = []
        unindexed = []  # ids whose text must not stay: written by us, or an old orphan
        for i, (item, outcome) in enumerate(zip(items, reply[1], strict=False)):
            if outcome.startswith(b"s"):
                stored[i] = _parse_decision(outcome[1:])[0]
                if i in written:
                    unindexed.append(item.decision.id)
            elif outcome.startswith(b"n"):
                e = indexing[i]
                assert e is not None
                applied.append((int(outcome[1:]), e.fingerprint, e.space, dhs[i]))
            elif not item.replay:
                unindexed.append(item.decision.id)
        unindexed += [items[i].decision.id for i in written if i >= done]
        if applied:
            self._apply(applied, reply[2].decode())
        self._drop_texts(unindexed)
        return Committed(done, stored)

    def _first_conflict(self, indexing: Sequence[Any], dhs: list[bytes], raw: bytes) -> int:
        """Position of the first document to index that one committed meanwhile (in `raw`
        log entries) makes stale: within k in the same space, or the same digest."""
        log = np.frombuffer(raw, LOG)
        if not len(log):
            return len(indexing)
        for i, e in enumerate(indexing):
            if e is None:
                continue
            mine = log["space"] == e.space.encode()
            close = np.bitwise_count(log["fp"] ^ np.uint64(e.fingerprint)) <= self.scheme.k
            if np.any(mine & (close | (log["dh"] == np.void(dhs[i])))):
                return i
        return len(indexing)

    def _write_texts(self, indexing: Sequence[Any]) -> set[int]:
        """Store the texts of the documents about to be indexed; positions actually
        written (a text already there belongs to an earlier decision of that id)."""
        at = [i for i, e in enumerate(indexing) if e is not None]
        if not at:
            return set()
        batch = self._batch()
        expiry = ("EX", self.text_ttl) if self.text_ttl else ()
        for i in at:
            key = self._text_key(indexing[i].id)
            batch.add(key, "SET", key, pack_text(indexing[i].text), "NX", *expiry)
        return {i for i, ok in zip(at, self._call(batch.execute), strict=True) if ok}

    def _drop_texts(self, ids: Sequence[str]) -> None:
        if ids:
            batch = self._batch()
            for i in ids:
                key = self._text_key(i)
                batch.add(key, "DEL", key)
            self._call(batch.execute)

    def _apply(self, docs: Sequence[tuple[int, int, str, bytes]], member: str) -> None:
        """Step 4: the committed documents into the shards, then off the pending set."""
        keys = self.scheme.key_array([fp for _, fp, _, _ in docs])
        per = keys.shape[1]
        spaces = [space for _, _, space, _ in docs for _ in range(per)]
        names, bucket_shards = self._buckets(
            spaces, np.tile(np.arange(per), len(docs)), keys.ravel()
        )
        entries = [fp.to_bytes(8, "little") + num.to_bytes(4, "little") for num, fp, _, _ in docs]
        shards: dict[int, tuple[list[str], list[bytes], list[str], list[Any]]] = {}
        for group in _by_shard(bucket_shards):
            shards[int(bucket_shards[group[0]])] = (
                [names[i] for i in group],
                [entries[i // per] for i in group],
                [],
                [],
            )
        for num, _, _, dh in docs:
            _, _, digests, fields = shards.setdefault(dh[0] % SHARDS, ([], [], [], []))
            digests.append(self._digest_key(dh))
            fields += [dh[2:], num]
        # A bucket is cut back to its newest max_bucket entries once it holds half as many
        # again: rewrites stay rare, and a lookup reads at most 1.5 x max_bucket entries.
        limit = self.max_bucket * ENTRY.itemsize * 3 // 2
        keep = self.max_bucket * ENTRY.itemsize
        batch = self._batch()
        for buckets, values, digests, fields in shards.values():
            batch.add(
                buckets[0] if buckets else digests[0],
                "EVAL",
                _APPLY_SHARD,
                len(buckets) + len(digests),
                *buckets,
                *digests,
                len(buckets),
                limit,
                keep,
                self.keep,
                *values,
                *fields,
            )
        self._call(batch.execute)
        self._eval(_APPLIED, member, LOG_KEEP)

    def _repair(self, member: str) -> None:
        """Apply a range whose committer went away between its commit and its apply."""
        first, last, when = (int(x) for x in member.split(":"))
        if time.time() - when < REPAIR_AFTER:
            return
        claim = f"{self.prefix}repair:{first}"
        if not self._call(lambda: self.client.set(claim, 1, nx=True, ex=60)):
            return  # another consumer is on it
        base = int(self._call(self.client.get, self.prefix + "logbase") or 0)
        start, end = (first - 1 - base) * LOG.itemsize, (last - base) * LOG.itemsize - 1
        raw = self._call(self.client.getrange, self.prefix + "log", start, end)
        log = np.frombuffer(raw, LOG)
        docs = [
            (first + i, int(e["fp"]), bytes(e["space"]).rstrip(b"\0").decode(), bytes(e["dh"]))
            for i, e in enumerate(log)
        ]
        self._apply(docs, member)

    # ------------------------------------------------------------------ retention

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Forget documents. The coordinator first (their numbers lose their ids, so no
        lookup returns them from then on), then the shards give back the memory."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        replies = self._eval(_DELETE, *ids)
        gone = [(i, r) for i, r in zip(ids, replies, strict=True) if r]
        batch = self._batch()
        for doc_id, value in gone:
            text = self._text_key(doc_id)
            batch.add(text, "DEL", text)
            stored = _parse_decision(value)[1]
            if stored is None:
                continue
            fp = stored.decision.fingerprint
            for t, key in enumerate(self.scheme.keys([fp])[0]):
                bucket = self._bucket(stored.space, t, key)
                batch.add(bucket, "EVAL", _FILTER_BUCKET, 1, bucket, stored.num)
            dh = stored.digest_hash
            digests = self._digest_key(dh)
            batch.add(digests, "EVAL", _FORGET_DIGEST, 1, digests, dh[2:], stored.num)
        self._call(batch.execute)
        return [i for i, _ in gone]

    def sweep(self, shards: int | None = None) -> int:
        """Give back the memory of documents past the retention horizon; lookups ignore
        them already. Their texts and decisions expire, and so does a bucket once its
        newest entry is past the horizon (a bucket that keeps getting entries holds at
        most max_bucket of them). What is left is cut here: the id map, and the digest
        hashes of `shards` of the SHARDS (None: all), round robin, one script each, so
        that the work per call is bounded whatever the size of the index. Returns the
        number of digests removed."""
        if not self.retention:
            return 0
        cutoff = self._snapshot().cutoff
        if not cutoff:
            return 0
        self._sweep_coordinator(cutoff)
        count = SHARDS if shards is None else min(shards, SHARDS)
        batch = self._batch()
        for at in range(self._swept_to, self._swept_to + count):
            # a shard's digest hashes: those whose first byte is the shard modulo SHARDS
            keys = [
                self._digest_key(bytes((high, low)))
                for high in range(at % SHARDS, 256, SHARDS)
                for low in range(256)
            ]
            batch.add(keys[0], "EVAL", _SWEEP_DIGESTS, len(keys), *keys, cutoff)
        self._swept_to = (self._swept_to + count) % SHARDS
        return sum(int(r) for r in self._call(batch.execute))

    def _sweep_coordinator(self, cutoff: int) -> None:
        """Id maps of numbers at or below the cutoff, and the epochs before it."""
        meta = self.prefix + "meta"
        swept = int(self._call(self.client.hget, meta, "swept") or 0)
        if cutoff <= swept:
            return
        batch = self._batch()  # every key here is the coordinator's
        for j in range(swept // IDS_PER_HASH, cutoff // IDS_PER_HASH):
            batch.add(meta, "DEL", f"{self.prefix}id:{j}")
        last = cutoff // IDS_PER_HASH
        fields = [n % IDS_PER_HASH for n in range(max(swept, last * IDS_PER_HASH), cutoff + 1)]
        if fields:
            batch.add(meta, "HDEL", f"{self.prefix}id:{last}", *fields)
        batch.add(meta, "HSET", meta, "swept", cutoff)
        batch.add(meta, "ZRANK", self.prefix + "epochs", cutoff)
        rank = self._call(batch.execute)[-1]
        if rank:  # the epochs before the one that makes the cutoff
            self._call(self.client.zremrangebyrank, self.prefix + "epochs", 0, rank - 1)

    # ------------------------------------------------------------------ export

    def documents(self) -> Iterator[dict[str, Any]]:
        """Every decision of the index, the indexed documents first in number order with
        what rebuilding them takes (fingerprint space, digest hash, text)."""
        seq = int(self._call(self.client.get, self.prefix + "seq") or 0)
        cutoff = self._snapshot().cutoff
        for j in range(cutoff // IDS_PER_HASH, seq // IDS_PER_HASH + 1):
            got = self._call(self.client.hgetall, f"{self.prefix}id:{j}")
            nums = sorted((j * IDS_PER_HASH + int(f), v.decode()) for f, v in got.items())
            ids = [i for n, i in nums if n > cutoff]
            if not ids:
                continue
            values = self._call(self.client.mget, [f"{self.prefix}dec:{i}" for i in ids])
            texts = self.texts(ids)
            for doc_id, value in zip(ids, values, strict=True):
                if not value:
                    continue
                decision, stored = _parse_decision(value)
                if stored is None:
                    continue
                if doc_id not in texts:  # its text expired: it can no longer be verified
                    yield {"decision": decision.to_dict()}
                    continue
                yield {
                    "id": doc_id,
                    "space": stored.space,
                    "digest_hash": stored.digest_hash.hex(),
                    "text": texts[doc_id],
                    "decision": decision.to_dict(),
                }
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=f"{self.prefix}dec:*", count=1000):
            batch.append(key)
            if len(batch) == 1000:
                yield from self._unindexed(batch)
                batch = []
        yield from self._unindexed(batch)

    def _unindexed(self, keys: list[bytes]) -> Iterator[dict[str, Any]]:
        if not keys:
            return
        for value in self._call(self.client.mget, keys):
            if value and value.startswith(b"{"):
                yield {"decision": _parse_decision(value)[0].to_dict()}

    def restore(self, records: Iterable[dict[str, Any]], batch: int = 512) -> int:
        """Write exported records into this (empty) index, numbering the indexed
        documents again in their order; returns how many records were written."""
        if int(self._call(self.client.get, self.prefix + "seq") or 0):
            raise ConfigError(f"index {self.namespace!r} is not empty: import into a new one")
        count = 0
        chunk: list[dict[str, Any]] = []
        for record in records:
            chunk.append(record)
            if len(chunk) == batch:
                count += self._restore(chunk)
                chunk = []
        return count + self._restore(chunk)

    def _restore(self, records: list[dict[str, Any]]) -> int:
        if not records:
            return 0
        items, dhs = [], []
        for r in records:
            d = Decision.from_dict(r["decision"])
            indexed = "text" in r
            entry = Entry(d.id, r["space"], d.fingerprint, "", r["text"]) if indexed else None
            items.append(Commit(d, entry))
            dhs.append(bytes.fromhex(r["digest_hash"]) if indexed else b"")
        self._mark = int(self._call(self.client.get, self.prefix + "seq") or 0)
        if self._commit(items, dhs).done != len(items):
            raise BackendUnavailable(
                "the index changed during the import: import into an index nobody writes to"
            )
        return len(items)

    def keys(self) -> Iterator[bytes]:
        """Every key of the index: the coordinator's, then the shards' (on every node)."""
        for pattern in (f"{self.prefix}*", f"nd:{{{self.namespace}/*"):
            yield from self.client.scan_iter(match=pattern, count=10_000)

    def drop(self) -> int:
        """Delete the whole index; returns the number of keys deleted."""
        keys = list(self.keys())
        for at in range(0, len(keys), 1000):  # a cluster client splits the UNLINK by slot
            self._call(self.client.unlink, *keys[at : at + 1000])
        return len(keys)

    def stats(self) -> dict[str, int]:
        """Documents indexed, and the memory of the server (every primary of a cluster)."""
        client: Any = self.client
        if isinstance(client, RedisCluster):  # one answer per primary
            info = self._call(lambda: client.info("memory", target_nodes=RedisCluster.PRIMARIES))
            used = sum(int(v["used_memory"]) for v in info.values())
        else:
            used = int(self._call(client.info, "memory")["used_memory"])
        return {
            "documents": int(self._call(self.client.get, self.prefix + "seq") or 0),
            "used_memory": used,
        }
