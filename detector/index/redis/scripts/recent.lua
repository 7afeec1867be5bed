-- RECENT, on the coordinator: the first half of reading decisions. The recent writes of
-- the ids, and the applied mark: every write at or below it is in the shards, which the
-- caller reads next, and every later one is in the recent writes until the caller's
-- commit (which checks that they still reach back to this mark).
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2..] the ids
-- Reply: {applied, values}: per id its latest recent record or tombstone, or false
local C = ARGV[1]
local applied = tonumber(redis.call('GET', KEYS[1]) or '0')
local oldest = redis.call('ZRANGE', C .. 'pending', 0, 0, 'WITHSCORES')
if oldest[1] then applied = tonumber(oldest[2]) - 1 end
local values = {}
if #ARGV > 1 then values = redis.call('HMGET', C .. 'rd', unpack(ARGV, 2)) end
return {applied, values}
