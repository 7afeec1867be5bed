-- APPLY_SHARD, on one shard: its part of committed writes: bucket entries, digests, the id
-- map and its counts, decisions. Writes may come here out of order (a repair, a slow
-- consumer), so each part is written so that order does not matter:
--  * A bucket is a field of a bucket hash (keys.py). A lookup reads a bucket's newest
--    `keep` bytes: an entry appended to a bucket already that full pushes its oldest read
--    entry out of the reads (counted in the shard's `evicted`). A bucket past `limit`
--    bytes is cut back to its newest `keep` bytes. With retention, a bucket hash expires
--    `ttl` s after its last entry, and a bucket appended to first loses its oldest entries
--    numbered at or below `cutoff` (past the horizon: no lookup returns them).
--  * The id map: a number is mapped to its name only if it has no field yet; a version
--    taken out leaves '', or '\0' when it is taken out before its map came, which the
--    map then turns into '' (so a late map cannot bring it back, and a map applied
--    twice counts once). `documents` in the shard's counts follows the names mapped,
--    each cause the names taken out.
--  * A decision is written only over an older write's (its number, bytes 2..5); a
--    tombstone (a delete: TOMBSTONE and the number) stays in the decision hash, for the
--    same reason, unless its TTL is -1: no older write of the id can still come (the
--    caller knows the write it deleted was in the shards), and nothing stays.
-- KEYS     B bucket hashes (one per bucket: a hash may come again), D digest hashes (one
--          per digest), M id hashes (one per id-map change), 2 per decision (its decision
--          hash, then its key that expires), then the shard's evicted counter, its set of
--          spaces and its counts (nd:{NAME/S}:evicted, :sp, :ct)
-- ARGV[1..4]  B, D, M, R: how many buckets, digests, id-map changes and decisions
-- ARGV[5]  size, bytes an entry (its number the last 4, little endian)
-- ARGV[6]  limit, bytes
-- ARGV[7]  keep, bytes
-- ARGV[8]  ttl, seconds (0: buckets do not expire)
-- ARGV[9]  cutoff, the number at or below which documents are past the horizon (0: none)
-- ARGV[10] S, how many spaces follow the buckets
-- ARGV, then: per bucket, its field and the entry appended to it; the S spaces of the
-- buckets; per digest, field and number; per id-map change, field, name and what it does
-- ('m' map, 'r' or 'd' take out: replaced, deleted); per decision, its field (the id),
-- its value (a record or a tombstone) and its TTL (0: none; -1: a tombstone that goes)
-- Reply: {evicted, i...}: the entries pushed out of the reads, then the buckets (1 .. B)
-- that were cut back
local B, D, M, R = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local size, limit, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local ttl, cutoff, spaces = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local evicted, cut = 0, {}
local at = 11
for i = 1, B do
  local field = ARGV[at]
  local v = redis.call('HGET', KEYS[i], field) or ''
  if cutoff > 0 and #v >= size and struct.unpack('<I4', v, size - 3) <= cutoff then
    local from = 1
    while from <= #v - size + 1 and struct.unpack('<I4', v, from + size - 4) <= cutoff do
      from = from + size
    end
    v = string.sub(v, from)
  end
  v = v .. ARGV[at + 1]
  if #v > keep then evicted = evicted + 1 end
  if #v > limit then
    v = string.sub(v, -keep)
    cut[#cut + 1] = i
  end
  redis.call('HSET', KEYS[i], field, v)
  if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
  at = at + 2
end
local n = #KEYS
if spaces > 0 then
  redis.call('SADD', KEYS[n - 1], unpack(ARGV, at, at + spaces - 1))
  at = at + spaces
end
local k = B
for _ = 1, D do
  k = k + 1
  redis.call('HSETNX', KEYS[k], ARGV[at], ARGV[at + 1])  -- the first copy is the one named
  at = at + 2
end
local counts = {documents = 0, replaced = 0, deleted = 0}
local CAUSE = {r = 'replaced', d = 'deleted'}
for _ = 1, M do
  k = k + 1
  local field, name, op = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local v = redis.call('HGET', KEYS[k], field)
  if op == 'm' then
    if not v or v == '\0' then  -- '\0': taken out before it came (below)
      redis.call('HSET', KEYS[k], field, v and '' or name)
      counts.documents = counts.documents + 1
    end
  elseif v == name or not v then
    redis.call('HSET', KEYS[k], field, v and '' or '\0')
    counts.documents = counts.documents - 1
    counts[CAUSE[op]] = counts[CAUSE[op]] + 1
  end
  at = at + 3
end
local function write_of(v)
  if not v or #v < 5 then return -1 end
  return struct.unpack('<I4', v, 2)
end
for _ = 1, R do
  local hash, key = KEYS[k + 1], KEYS[k + 2]
  k = k + 2
  local field, value, expires = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])
  local w = write_of(value)
  local held, own = redis.call('HGET', hash, field), redis.call('GET', key)
  if math.max(write_of(held), write_of(own)) < w then
    if expires < 0 then  -- a delete after which no older write can come: nothing stays
      if held then redis.call('HDEL', hash, field) end
      if own then redis.call('DEL', key) end
    elseif string.byte(value, 1) == 0 or expires == 0 then
      redis.call('HSET', hash, field, value)
      if own then redis.call('DEL', key) end
    else
      redis.call('SET', key, value, 'EX', expires)
      if held then redis.call('HDEL', hash, field) end
    end
  end
  at = at + 3
end
for name, c in pairs(counts) do
  if c ~= 0 then redis.call('HINCRBY', KEYS[n], name, c) end
end
if evicted > 0 then redis.call('INCRBY', KEYS[n - 2], evicted) end
return {evicted, unpack(cut)}
