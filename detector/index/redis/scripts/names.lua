-- NAMES, on the coordinator: the names of numbers a lookup found above its applied mark
-- (in the log, not yet in the shards' id map), from the recent writes' notes: '' for a
-- number whose version is no longer one a lookup may return (replaced, deleted) or whose
-- note is gone (trimmed: the caller's commit will have to read again anyway).
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2..] the numbers
-- Reply: per number, its name or ''
local C, out = ARGV[1], {}
for i = 2, #ARGV do
  local num = tonumber(ARGV[i])
  local nt = redis.call('HGET', C .. 'rw', num)
  local name = ''
  if nt and string.byte(nt, 1) == 1 then
    local len = struct.unpack('<I2', nt, 2)
    local version = string.sub(nt, 4, 3 + len)
    local v = redis.call('HGET', C .. 'rd', string.match(version, '^[^%z]*'))
    if v and string.byte(v, 1) ~= 0 then
      local h = header(v)
      if h.n == num then name = version end
      for _, kv in ipairs(h.k) do
        if kv.n == num then name = version end
      end
    end
  end
  out[#out + 1] = name
end
return out
