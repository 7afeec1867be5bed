-- APPLIED, on the coordinator: a committed range is in the shards now. It comes off
-- pending, and the log is trimmed to `keep` entries below the applied mark (now and then:
-- only once it holds twice that many, since the rewrite copies the whole log).
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  member, the pending range "first:last:time"
-- ARGV[3]  keep, log entries kept below the applied mark (LOG_KEEP)
-- Reply: the applied mark; every document numbered at or below it is in the shards
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
