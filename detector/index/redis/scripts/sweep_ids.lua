-- SWEEP_IDS, on one shard: its id hashes of numbers at or below a cutoff, past the
-- retention horizon, and its counts with them (`expired`; '' and '\0' fields, versions
-- taken out already, are not counted).
-- KEYS     the id hashes, then the shard's counts (nd:{NAME/S}:ct)
-- ARGV[1]  cutoff
-- ARGV[2..] per id hash, its first number (a multiple of 128)
-- Reply: the names swept
local n, cutoff, gone = #KEYS - 1, tonumber(ARGV[1]), 0
for i = 1, n do
  local first = tonumber(ARGV[i + 1])
  if first + 127 <= cutoff then
    for _, v in ipairs(redis.call('HVALS', KEYS[i])) do
      if v ~= '' and v ~= '\0' then gone = gone + 1 end
    end
    redis.call('DEL', KEYS[i])
  else
    for f = 0, cutoff - first do
      local v = redis.call('HGET', KEYS[i], f)
      if v then
        if v ~= '' and v ~= '\0' then gone = gone + 1 end
        redis.call('HDEL', KEYS[i], f)
      end
    end
  end
end
if gone > 0 then
  redis.call('HINCRBY', KEYS[n + 1], 'documents', -gone)
  redis.call('HINCRBY', KEYS[n + 1], 'expired', gone)
end
return gone
