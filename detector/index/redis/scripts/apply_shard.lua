-- APPLY_SHARD, on one shard: its part of a commit, bucket entries and digests. A lookup
-- reads a bucket's newest `keep` bytes: an entry appended to a bucket already that full
-- pushes its oldest read entry out of the reads (counted in the shard's `evicted`). A
-- bucket past `limit` bytes is cut back to its newest `keep` bytes; with retention it
-- expires `ttl` s after its last entry.
-- KEYS     B bucket keys, then the shard's digest hashes (one per digest), then the
--          shard's evicted counter (nd:{NAME/S}:evicted)
-- ARGV[1]  B, how many of the keys are buckets
-- ARGV[2]  limit, bytes
-- ARGV[3]  keep, bytes
-- ARGV[4]  ttl, seconds (0: buckets do not expire)
-- ARGV[4 + i], i = 1 .. B: the 12-byte entry appended to bucket i
-- ARGV, then 2 per digest hash, in the order of its key: field, number
-- Reply: {evicted, i...}: the entries pushed out of the reads, then the buckets (1 .. B)
-- that were cut back
local buckets, limit, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local evicted, cut = 0, {}
for i = 1, buckets do
  local size = redis.call('APPEND', KEYS[i], ARGV[4 + i])
  if size > keep then evicted = evicted + 1 end
  if size > limit then
    redis.call('SET', KEYS[i], redis.call('GETRANGE', KEYS[i], -keep, -1))
    cut[#cut + 1] = i
  end
  if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
end
local at = 5 + buckets
for i = buckets + 1, #KEYS - 1 do
  redis.call('HSETNX', KEYS[i], ARGV[at], ARGV[at + 1])  -- the first copy is the one named
  at = at + 2
end
if evicted > 0 then redis.call('INCRBY', KEYS[#KEYS], evicted) end
return {evicted, unpack(cut)}
