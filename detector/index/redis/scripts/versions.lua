-- VERSIONS: what COMMIT and DELETE share about an id's records and the notes of writes,
-- put before each of them (lua.py).

-- A decision record's header (keys.py RECORD): w, n, r, fp, dg, s and dh (indexed), k (the
-- kept versions: n, r, s, dh, fp each); dh and fp as the record keeps them (16 and 8
-- bytes, fp little endian), dg as keys.pack_digest, kept the kept versions' bytes as the
-- record holds them (count first).
local function header(v)
  local w, n, flags, r, fp, at = struct.unpack('<I4I4BI4c8', v, 2)
  local h = {w = w, n = n, r = r, fp = fp, k = {}}
  local len = string.byte(v, at)
  if len > 0 then h.dg = string.sub(v, at + 1, at + len) end
  at = at + 1 + len
  if flags % 2 == 1 then
    len = string.byte(v, at)
    h.s, h.dh = string.sub(v, at + 1, at + len), string.sub(v, at + len + 1, at + len + 16)
    at = at + len + 17
  end
  local count, from = struct.unpack('<I2', v, at)
  for i = 1, count do
    local kn, kr
    kn, kr, len, from = struct.unpack('<I4I4B', v, from)
    h.k[i] = {n = kn, r = kr, s = string.sub(v, from, from + len - 1),
              dh = string.sub(v, from + len, from + len + 15),
              fp = string.sub(v, from + len + 16, from + len + 23)}
    from = from + len + 24
  end
  return h
end
local function name_of(id, r)
  if not r or r == 0 then return id end
  return id .. '\0' .. r
end
-- The kept versions as a record holds them: count u16, then n, r, space, dh, fp each.
local function pack_kept(kept)
  local parts = {struct.pack('<I2', #kept)}
  for _, k in ipairs(kept) do
    parts[#parts + 1] = struct.pack('<I4I4B', k.n, k.r, #k.s) .. k.s .. k.dh .. k.fp
  end
  return table.concat(parts)
end
-- A write's note (keys.Note): flags (1: it indexed `name`), the name, then the versions it
-- took out of the lookups: number, cause ('r' replaced, 'd' deleted), name.
local function note(indexed, name, gone)
  local parts = {struct.pack('<BI2', indexed and 1 or 0, #name), name, struct.pack('<I2', #gone)}
  for _, g in ipairs(gone) do
    parts[#parts + 1] = struct.pack('<I4c1I2', g.n, g.cause, #g.name) .. g.name
  end
  return table.concat(parts)
end
-- The id's record now, for a write checked against `old`, what the caller read, resting
-- on the applied mark `seen` (keys.py): a recent write after that mark is newer than
-- what the caller read; one at or below it was in the shards when the caller read them
-- (and may have expired there since). False when it has none (never decided, expired or
-- deleted).
local function current(C, id, old, seen)
  local v = redis.call('HGET', C .. 'rd', id)
  if not v or struct.unpack('<I4', v, 2) <= seen then v = old end
  if v == '' or string.byte(v, 1) == 0 then return false end
  return v
end
-- How far the recent writes are trimmed (APPLIED): at or below it they have gone to the
-- shards and off the coordinator. A caller whose reads rest on an applied mark below it
-- must read again.
local function recent_base(C)
  return tonumber(redis.call('GET', C .. 'rtrim') or '0')
end
