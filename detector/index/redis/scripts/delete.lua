-- DELETE, on the coordinator: forget documents. Each id's decision goes, and the numbers
-- of its versions (the current one and those kept as candidates) lose their names, so
-- no lookup returns them from then on; the caller then takes their entries, digests and
-- texts out of the shards.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2..] the ids
-- Reply: per id, the value its decision key held ('' for an id the index did not know)
local C, out = ARGV[1], {}
local function unmap(num, name)
  local ids = C .. 'id:' .. math.floor(num / 128)
  if redis.call('HGET', ids, num % 128) == name then redis.call('HDEL', ids, num % 128) end
end
local function name_of(id, r)
  if not r or r == 0 then return id end
  return id .. '\0' .. r
end
for i = 2, #ARGV do
  local id = ARGV[i]
  local key = C .. 'dec:' .. id
  local v = redis.call('GET', key)
  out[i - 1] = v or ''
  if v then
    redis.call('DEL', key)
    if string.sub(v, 1, 1) == '#' then  -- the header of keys.py
      local h = cjson.decode(string.sub(v, 2, string.find(v, '\n', 1, true) - 1))
      if h.n and h.n > 0 then unmap(h.n, name_of(id, h.r)) end
      if type(h.k) == 'table' then
        for _, k in ipairs(h.k) do unmap(k.n, name_of(id, k.r)) end
      end
    else  -- written before re-fetches: "N SPACE DH" when indexed
      local num = tonumber(string.match(v, '^(%d+) '))
      if num then unmap(num, id) end
    end
  end
end
return out
