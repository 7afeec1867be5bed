-- DELETE, on the coordinator: forget documents. Each id's decision goes, and the numbers
-- of its versions (the current one and those kept as candidates) lose their names, so
-- no lookup returns them from then on (counted as `deleted`); the caller then takes their
-- entries, digests and texts out of the shards.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2..] the ids
-- Reply: per id, the value its decision key held ('' for an id the index did not know)
local C, out = ARGV[1], {}
local tally = counts(C)
for i = 2, #ARGV do
  local id = ARGV[i]
  local key = C .. 'dec:' .. id
  local v = redis.call('GET', key)
  out[i - 1] = v or ''
  if v then
    redis.call('DEL', key)
    local h = header(v)
    if h.n and h.n > 0 then tally.unmap(h.n, name_of(id, h.r), 'deleted') end
    if type(h.k) == 'table' then
      for _, k in ipairs(h.k) do tally.unmap(k.n, name_of(id, k.r), 'deleted') end
    end
  end
end
tally.write()
return out
