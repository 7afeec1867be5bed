-- VERSIONS: what COMMIT, DELETE and SWEEP_IDS share about an id's versions and the
-- counts, put before each of them (lua.py).

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
-- The counts (C .. 'counts', keys.py) change atomically with the id map: every script that
-- maps or unmaps numbers does it through `counts(C)`, which adds up the changes and
-- `write`s them once. `documents` is the number of fields of the id hashes below `counted`,
-- every one once `counted` is 'all'; in an index made before the counts, the hashes at or
-- above it are counted later (COUNT_IDS), so what changes in them meanwhile is left out.
local CAUSES = {'replaced', 'deleted', 'expired'}
local function counts(C)
  local counted = redis.call('HGET', C .. 'counts', 'counted')
  local c = {documents = 0, replaced = 0, deleted = 0, expired = 0}
  -- n numbers of id hash j mapped (n > 0) or unmapped (n < 0, by `cause`)
  function c.add(j, n, cause)
    if counted == 'all' or (counted and j < tonumber(counted)) then
      c.documents = c.documents + n
    end
    if cause then c[cause] = c[cause] - n end
  end
  function c.map(num, name)
    local j = math.floor(num / 128)
    c.add(j, redis.call('HSET', C .. 'id:' .. j, num % 128, name))
  end
  -- the number names the version no more, so no lookup finds it (if it still named it)
  function c.unmap(num, name, cause)
    local j = math.floor(num / 128)
    local ids = C .. 'id:' .. j
    if redis.call('HGET', ids, num % 128) == name then
      c.add(j, -redis.call('HDEL', ids, num % 128), cause)
    end
  end
  function c.write()
    if c.documents ~= 0 then redis.call('HINCRBY', C .. 'counts', 'documents', c.documents) end
    for _, cause in ipairs(CAUSES) do
      if c[cause] ~= 0 then redis.call('HINCRBY', C .. 'counts', cause, c[cause]) end
    end
  end
  return c
end
