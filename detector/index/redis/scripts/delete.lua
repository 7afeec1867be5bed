-- DELETE, on the coordinator: forget documents. Each id known to the index takes a write
-- number (a zero LOG entry) whose record is a tombstone (TOMBSTONE and the number) and
-- whose note takes every version of the id (the current one and
-- those kept as candidates) out of the lookups; the caller then applies it to the shards
-- (decision, id map, counts) and takes the versions' entries, digests and texts out.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  seen, the applied mark the caller's reads rest on (as COMMIT's)
-- ARGV[3..] per id: the id, then the record the caller read for it ('' for none)
-- Reply: {'relookup'} (read again: nothing written), or {'ok', member, values}: the
-- pending range to apply ('' when no id was known), and per id the record deleted (''
-- for an id the index did not know)
local C, seen = ARGV[1], tonumber(ARGV[2])
if seen < recent_base(C) then return {'relookup'} end
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local first, out, log = seq + 1, {}, {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local v = current(C, id, ARGV[i + 1], seen)
  out[#out + 1] = v or ''
  if v then
    local h = header(v)
    local gone = {}
    if h.n > 0 then gone[1] = {n = h.n, cause = 'd', name = name_of(id, h.r)} end
    for _, k in ipairs(h.k) do
      gone[#gone + 1] = {n = k.n, cause = 'd', name = name_of(id, k.r)}
    end
    seq = seq + 1
    redis.call('HSET', C .. 'rd', id, '\0' .. struct.pack('<I4', seq))
    redis.call('HSET', C .. 'rw', seq, note(false, id, gone))
    log[#log + 1] = string.rep('\0', 32)
  end
end
local member = ''
if seq >= first then
  redis.call('SET', KEYS[1], seq)
  redis.call('APPEND', C .. 'log', table.concat(log))
  member = first .. ':' .. seq .. ':' .. tonumber(redis.call('TIME')[1])
  redis.call('ZADD', C .. 'pending', first, member)
end
return {'ok', member, out}
