"""The Redis index: the same interface as the memory index, on a Redis 7 server.

Key layout, every key under the prefix `nd:{NAME}:` (the braces are a Redis Cluster hash
tag: all keys of one index live in one slot, so the commit script stays atomic):

    nd:{NAME}:meta                 hash    version of the fingerprints, block scheme
    nd:{NAME}:seq                  string  counter: the number of the last indexed document
    nd:{NAME}:b:{SPACE}:{T}:{KEY}  string  block table T's bucket KEY (hex): 12-byte entries,
                                           fingerprint (8, little endian) + number (4), in
                                           number order
    nd:{NAME}:id:{N>>7}            hash    field N & 127 -> id of document number N
    nd:{NAME}:dg:{D[:4]}           hash    field D[4:] -> id of the first document whose
                                           token stream has digest D (exact copies)
    nd:{NAME}:tx:{ID}              string  LZ4 of the normalized text (literal pass; TTL)
    nd:{NAME}:dec:{ID}             string  the decision JSON (redelivery; TTL)

Documents are numbered by the commit script, so every bucket is sorted by number and
"indexed since the lookup" means "number above the lookup's mark": the conflict check
reads only the tail of each bucket.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import redis

from ..blocks import BlockScheme
from ..errors import BackendUnavailable, ConfigError
from ..metrics import REDIS_SECONDS
from ..records import Decision
from . import Candidate, Commit, Committed, Found, Query, pack_text, unpack_text

ENTRY = np.dtype([("fp", "<u8"), ("num", "<u4")])
IDS_PER_HASH = 128  # stays within Redis's compact listpack encoding of small hashes

# Check-and-insert, atomically, in order. Stops at the first item that conflicts with a
# document indexed by someone else since the caller's lookup (number in (mark, start]).
COMMIT = r"""
local prefix, mark, k = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local text_ttl, decision_ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
local start = tonumber(redis.call('GET', KEYS[1]) or '0')
local pop = {}
for i = 0, 255 do
  local c, x = 0, i
  while x > 0 do c = c + (x % 2); x = math.floor(x / 2) end
  pop[i] = c
end
local function near(a, b)
  local d = 0
  for i = 1, 8 do
    d = d + pop[bit.bxor(string.byte(a, i), string.byte(b, i))]
    if d > k then return false end
  end
  return true
end
local function set(key, value, ttl)
  if ttl > 0 then redis.call('SET', key, value, 'EX', ttl) else redis.call('SET', key, value) end
end
local mine = {}
local out = {}
local at = 8
for item = 1, n do
  local id, kind, decision = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local fp, digest, text, space = ARGV[at + 3], ARGV[at + 4], ARGV[at + 5], ARGV[at + 6]
  local buckets, probes = {}, {}
  for key in string.gmatch(ARGV[at + 7], '[^,]+') do
    buckets[#buckets + 1] = prefix .. 'b:' .. space .. ':' .. #buckets .. ':' .. key
  end
  for key in string.gmatch(ARGV[at + 8], '[^,]+') do  -- table:key, when lookups probe
    probes[#probes + 1] = prefix .. 'b:' .. space .. ':' .. key
  end
  if #probes == 0 then probes = buckets end
  at = at + 9
  if kind ~= 'r' then
    local earlier = redis.call('GET', prefix .. 'dec:' .. id)
    if earlier then
      out[#out + 1] = earlier
    else
      if kind == 'e' then
        local dgkey, dgfield = prefix .. 'dg:' .. string.sub(digest, 1, 4), string.sub(digest, 5)
        -- Nothing can conflict when no one else has indexed anything since the lookup.
        local foreign = start > mark
        if foreign and not mine[digest] and redis.call('HEXISTS', dgkey, dgfield) == 1 then
          return {item - 1, out}
        end
        for t = 1, foreign and #probes or 0 do
          local v = redis.call('GET', probes[t])
          if v then
            local pos = #v - 11
            while pos >= 1 do
              local num = struct.unpack('<I4', v, pos + 8)
              if num <= mark then break end
              if num <= start and near(string.sub(v, pos, pos + 7), fp) then
                return {item - 1, out}
              end
              pos = pos - 12
            end
          end
        end
        local num = redis.call('INCR', KEYS[1])
        local entry = fp .. struct.pack('<I4', num)
        for t = 1, #buckets do
          redis.call('APPEND', buckets[t], entry)
        end
        redis.call('HSET', prefix .. 'id:' .. math.floor(num / 128), num % 128, id)
        redis.call('HSETNX', dgkey, dgfield, id)
        mine[digest] = true
        set(prefix .. 'tx:' .. id, text, text_ttl)
      end
      set(prefix .. 'dec:' .. id, decision, decision_ttl)
      out[#out + 1] = ''
    end
  else
    out[#out + 1] = ''
  end
end
return {n, out}
"""


class RedisIndex:
    def __init__(
        self,
        client: redis.Redis,
        scheme: BlockScheme,
        namespace: str = "default",
        text_ttl: int = 0,
        decision_ttl: int = 0,
    ) -> None:
        if not namespace or any(c in namespace for c in "{}: "):
            raise ConfigError(
                f"index name {namespace!r} must be non-empty, without {{}}: or spaces"
            )
        self.client = client
        self.scheme = scheme
        self.namespace = namespace
        self.prefix = f"nd:{{{namespace}}}:"
        self.text_ttl = text_ttl
        self.decision_ttl = decision_ttl
        self._mark = 0
        self._commit = client.register_script(COMMIT)

    def _call(self, fn: Any, *args: Any) -> Any:
        """One round trip: timed, and its failures sorted into the error tree."""
        try:
            with REDIS_SECONDS.time():
                return fn(*args)
        except redis.AuthenticationError as exc:
            raise ConfigError(f"Redis refused the credentials: {exc}") from exc
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
            raise BackendUnavailable(f"Redis: {exc}") from exc

    def bind(self, version: str) -> None:
        meta = self.prefix + "meta"
        self._call(self.client.hsetnx, meta, "version", version)
        self._call(self.client.hsetnx, meta, "scheme", self.scheme.name)
        have = self._call(self.client.hmget, meta, ["version", "scheme"])
        if have[0].decode() != version:
            raise ConfigError(
                f"index {self.namespace!r} holds fingerprints of {have[0].decode()}, not {version}"
            )
        if have[1].decode() != self.scheme.name:
            raise ConfigError(
                f"index {self.namespace!r} uses block scheme {have[1].decode()}, "
                f"not {self.scheme.name}"
            )

    def _bucket(self, space: str, table: int, key: int) -> str:
        return f"{self.prefix}b:{space}:{table}:{key:x}"

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        if not queries:
            return []
        probes = self.scheme.probes([q.fingerprint for q in queries])
        tables = len(probes[0])  # buckets read per query
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.prefix + "seq")  # first: whatever is indexed after it is checked again
        pipe.mget(
            [
                self._bucket(q.space, t, key)
                for q, row in zip(queries, probes, strict=True)
                for t, key in row
            ]
        )
        for q in queries:
            pipe.hget(f"{self.prefix}dg:{q.digest[:4]}", q.digest[4:])
        replies = self._call(pipe.execute)
        self._mark = int(replies[0] or 0)
        buckets, digests = replies[1], replies[2:]
        near: list[tuple[int, np.ndarray, np.ndarray]] = []
        numbers: set[int] = set()
        for i, q in enumerate(queries):
            raw = b"".join(b for b in buckets[i * tables : (i + 1) * tables] if b)
            if not raw:
                continue
            entries = np.frombuffer(raw, ENTRY)
            dist = np.bitwise_count(entries["fp"] ^ np.uint64(q.fingerprint))
            keep = dist <= self.scheme.k
            nums, first = np.unique(entries["num"][keep], return_index=True)
            near.append((i, nums, entries["fp"][keep][first]))
            numbers.update(nums.tolist())
        ids = self._ids(sorted(numbers))
        found = [Found(d.decode() if d else None, []) for d in digests]
        for i, nums, fps in near:
            q = queries[i]
            cands = [
                Candidate(ids[n], int(fp), (int(fp) ^ q.fingerprint).bit_count())
                for n, fp in zip(nums.tolist(), fps.tolist(), strict=True)
                if n in ids
            ]
            cands.sort(key=lambda c: (c.distance, c.id))
            found[i].candidates = cands
        return found

    def _ids(self, numbers: list[int]) -> dict[int, str]:
        if not numbers:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for n in numbers:
            pipe.hget(f"{self.prefix}id:{n // IDS_PER_HASH}", n % IDS_PER_HASH)
        replies = self._call(pipe.execute)
        return {n: r.decode() for n, r in zip(numbers, replies, strict=True) if r is not None}

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        replies = self._call(self.client.mget, [f"{self.prefix}tx:{i}" for i in ids])
        return {i: unpack_text(r) for i, r in zip(ids, replies, strict=True) if r is not None}

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        if not ids:
            return {}
        replies = self._call(self.client.mget, [f"{self.prefix}dec:{i}" for i in ids])
        return {
            i: Decision.from_dict(json.loads(r))
            for i, r in zip(ids, replies, strict=True)
            if r is not None
        }

    def commit(self, items: Sequence[Commit]) -> Committed:
        if not items:
            return Committed(0, {})
        args: list[Any] = [
            self.prefix,
            self._mark,
            self.scheme.k,
            len(items),
            "",
            self.text_ttl,
            self.decision_ttl,
        ]
        fps = [c.entry.fingerprint if c.entry else 0 for c in items]
        keys = self.scheme.keys(fps)
        probes = self.scheme.probes(fps, keys) if self.scheme.radius else []
        for item_at, (item, row) in enumerate(zip(items, keys, strict=True)):
            e = item.entry
            kind = "r" if item.replay else ("e" if e is not None else "x")
            args += [item.decision.id, kind, item.decision.to_json()]
            if e is None:
                args += [b"", "", b"", "", "", ""]
            else:
                args += [e.fingerprint.to_bytes(8, "little"), e.digest, pack_text(e.text), e.space]
                args.append(",".join(f"{key:x}" for key in row))
                args.append(
                    ",".join(f"{t}:{key:x}" for t, key in probes[item_at])
                    if self.scheme.radius
                    else ""
                )
        done, outcomes = self._call(self._commit, [self.prefix + "seq"], args)
        stored = {i: Decision.from_dict(json.loads(o)) for i, o in enumerate(outcomes) if o}
        return Committed(int(done), stored)

    def stats(self) -> dict[str, int]:
        info = self._call(self.client.info, "memory")
        return {
            "documents": int(self._call(self.client.get, self.prefix + "seq") or 0),
            "used_memory": int(info["used_memory"]),
        }
