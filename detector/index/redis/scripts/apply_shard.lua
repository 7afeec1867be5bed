-- APPLY_SHARD, on one shard: its part of a commit, bucket entries and digests. A bucket
-- past `limit` bytes keeps its newest `keep` bytes; with retention it expires `ttl` s
-- after its last entry.
-- KEYS     B bucket keys, then the shard's digest hashes (one per digest)
-- ARGV[1]  B, how many of the keys are buckets
-- ARGV[2]  limit, bytes
-- ARGV[3]  keep, bytes
-- ARGV[4]  ttl, seconds (0: buckets do not expire)
-- ARGV[4 + i], i = 1 .. B: the 12-byte entry appended to bucket i
-- ARGV, then 2 per digest hash, in the order of its key: field, number
-- Reply: 0
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
