-- DECISIONS, on one shard: the second half of reading decisions (RECENT is the first), as
-- one command a shard where an HGET and a GET an id would be two (redis-py spends about
-- 20 us of the client's time on each command of a pipeline).
-- KEYS     per id, its decision hash, then its key that expires (keys.Layout.decisions)
-- ARGV     per id, its field in the decision hash
-- Reply: per id, the hash's value, then the key's (false: none)
local out = {}
for i = 1, #ARGV do
  out[2 * i - 1] = redis.call('HGET', KEYS[2 * i - 1], ARGV[i])
  out[2 * i] = redis.call('GET', KEYS[2 * i])
end
return out
