-- APPLIED, on the coordinator: a committed range is in the shards now. It comes off
-- pending, and the log is trimmed to `keep` entries below the applied mark (now and then:
-- only once it holds twice that many, since the rewrite copies the whole log). The recent
-- writes (rd, rw) are trimmed to `recent` below the applied mark, `chunk` notes a call,
-- so that no call holds the coordinator long: an id's record leaves rd when no later
-- write has replaced it. A caller whose reads rest on an applied mark below the trimmed
-- one (rtrim) must read again (COMMIT, DELETE).
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  member, the pending range "first:last:time"
-- ARGV[3]  keep, log entries kept below the applied mark (LOG_KEEP)
-- ARGV[4]  recent, writes kept in rd and rw below the applied mark (RECENT_KEEP)
-- ARGV[5]  chunk, notes a call trims at most
-- Reply: the applied mark; every write numbered at or below it is in the shards
local C, member, keep = ARGV[1], ARGV[2], tonumber(ARGV[3])
local recent, chunk = tonumber(ARGV[4]), tonumber(ARGV[5])
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
local trimmed = tonumber(redis.call('GET', C .. 'rtrim') or '0')
local to = math.min(applied - recent, trimmed + chunk)
if to > trimmed then
  for w = trimmed + 1, to do
    local nt = redis.call('HGET', C .. 'rw', w)
    if nt then
      local len = struct.unpack('<I2', nt, 2)
      local id = string.match(string.sub(nt, 4, 3 + len), '^[^%z]*')
      local v = redis.call('HGET', C .. 'rd', id)
      if v and struct.unpack('<I4', v, 2) == w then redis.call('HDEL', C .. 'rd', id) end
      redis.call('HDEL', C .. 'rw', w)
    end
  end
  redis.call('SET', C .. 'rtrim', to)
end
return applied
