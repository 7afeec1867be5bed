-- VERSIONS: what COMMIT and DELETE share about an id's versions, put before each of them
-- (lua.py).

-- A decision key's header: '#' JSON, or, from before re-fetches, "N SPACE DH" (indexed,
-- no digest) or none at all (a bare decision JSON).
local function header(v)
  if string.sub(v, 1, 1) == '#' then
    return cjson.decode(string.sub(v, 2, string.find(v, '\n', 1, true) - 1))
  end
  local num, space, dh = string.match(v, '^(%d+) (%S+) (%x+)\n')
  if num then return {n = tonumber(num), s = space, dh = dh, r = 0} end
  return {n = 0, r = 0}
end
local function name_of(id, r)
  if not r or r == 0 then return id end
  return id .. '\0' .. r
end
local function unmap(C, num, name)  -- the number names the version no more: no lookup finds it
  local ids = C .. 'id:' .. math.floor(num / 128)
  if redis.call('HGET', ids, num % 128) == name then redis.call('HDEL', ids, num % 128) end
end
