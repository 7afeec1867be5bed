-- DELETE, on the coordinator: forget documents. Each id's decision goes, and its number
-- loses the id (if it still maps to it), so no lookup returns it from then on; the
-- caller then takes its entries and digest out of the shards.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2..] the ids
-- Reply: per id, the value its decision key held ('' for an id the index did not know)
local C, out = ARGV[1], {}
for i = 2, #ARGV do
  local key = C .. 'dec:' .. ARGV[i]
  local v = redis.call('GET', key)
  out[i - 1] = v or ''
  if v then
    redis.call('DEL', key)
    local num = tonumber(string.match(v, '^(%d+) '))
    if num then
      local ids = C .. 'id:' .. math.floor(num / 128)
      if redis.call('HGET', ids, num % 128) == ARGV[i] then redis.call('HDEL', ids, num % 128) end
    end
  end
end
return out
