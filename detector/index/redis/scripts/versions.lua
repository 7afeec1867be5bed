-- VERSIONS: what COMMIT, DELETE and SWEEP_IDS share about an id's versions and the
-- counts, put before each of them (lua.py).

-- A decision record's header (keys.py RECORD): n, r, fp, dg, s and dh (indexed), k (the
-- kept versions: n, r, s, dh, fp each); dh and fp as the record keeps them (16 and 8
-- bytes, fp little endian), dg as keys.pack_digest.
-- (Every decision of an index of layout 4 is a record: `index migrate` rewrote the rest.)
local function header(v)
  local n, flags, r, fp, at = struct.unpack('<I4BI4c8', v, 2)
  local h = {n = n, r = r, fp = fp, k = {}}
  local len = string.byte(v, at)
  if len > 0 then h.dg = string.sub(v, at + 1, at + len) end
  at = at + 1 + len
  if flags % 2 == 1 then
    len = string.byte(v, at)
    h.s, h.dh = string.sub(v, at + 1, at + len), string.sub(v, at + len + 1, at + len + 16)
    at = at + len + 17
  end
  local count
  count, at = struct.unpack('<I2', v, at)
  for i = 1, count do
    local kn, kr
    kn, kr, len, at = struct.unpack('<I4I4B', v, at)
    h.k[i] = {n = kn, r = kr, s = string.sub(v, at, at + len - 1),
              dh = string.sub(v, at + len, at + len + 15),
              fp = string.sub(v, at + len + 16, at + len + 23)}
    at = at + len + 24
  end
  return h
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
