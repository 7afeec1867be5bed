-- APPLY_SHARD, on one shard: its part of a commit, bucket entries and digests. A bucket
-- is a field of a bucket hash (keys.py). A lookup reads a bucket's newest `keep` bytes:
-- an entry appended to a bucket already that full pushes its oldest read entry out of
-- the reads (counted in the shard's `evicted`). A bucket past `limit` bytes is cut back
-- to its newest `keep` bytes. With retention, a bucket hash expires `ttl` s after its
-- last entry, and a bucket appended to first loses its oldest entries numbered at or
-- below `cutoff` (past the horizon: no lookup returns them).
-- KEYS     B bucket hashes (one per bucket: a hash may come again), then the shard's
--          digest hashes (one per digest), then the shard's evicted counter
--          (nd:{NAME/S}:evicted), then its set of spaces (nd:{NAME/S}:sp)
-- ARGV[1]  B, how many of the keys are buckets
-- ARGV[2]  size, bytes an entry (its number the last 4, little endian)
-- ARGV[3]  limit, bytes
-- ARGV[4]  keep, bytes
-- ARGV[5]  ttl, seconds (0: buckets do not expire)
-- ARGV[6]  cutoff, the number at or below which documents are past the horizon (0: none)
-- ARGV[7]  S, how many spaces follow the buckets
-- ARGV[7 + 2i - 1], ARGV[7 + 2i], i = 1 .. B: bucket i's field, the entry appended to it
-- ARGV, then the S spaces of the buckets, then 2 per digest hash, in the order of its
-- key: field, number
-- Reply: {evicted, i...}: the entries pushed out of the reads, then the buckets (1 .. B)
-- that were cut back
local buckets, size = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, keep, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cutoff, spaces = tonumber(ARGV[6]), tonumber(ARGV[7])
local evicted, cut = 0, {}
for i = 1, buckets do
  local field = ARGV[6 + 2 * i]
  local v = redis.call('HGET', KEYS[i], field) or ''
  if cutoff > 0 and #v >= size and struct.unpack('<I4', v, size - 3) <= cutoff then
    local from = 1
    while from <= #v - size + 1 and struct.unpack('<I4', v, from + size - 4) <= cutoff do
      from = from + size
    end
    v = string.sub(v, from)
  end
  v = v .. ARGV[7 + 2 * i]
  if #v > keep then evicted = evicted + 1 end
  if #v > limit then
    v = string.sub(v, -keep)
    cut[#cut + 1] = i
  end
  redis.call('HSET', KEYS[i], field, v)
  if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
end
local at = 8 + 2 * buckets
if spaces > 0 then
  redis.call('SADD', KEYS[#KEYS], unpack(ARGV, at, at + spaces - 1))
  at = at + spaces
end
for i = buckets + 1, #KEYS - 2 do
  redis.call('HSETNX', KEYS[i], ARGV[at], ARGV[at + 1])  -- the first copy is the one named
  at = at + 2
end
if evicted > 0 then redis.call('INCRBY', KEYS[#KEYS - 1], evicted) end
return {evicted, unpack(cut)}
