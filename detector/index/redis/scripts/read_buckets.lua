-- READ_BUCKETS, on one shard: the buckets a lookup reads, many fields of each bucket hash
-- named by one argument, and the answer in two strings. HMGET with one argument a field
-- cost redis-py some 3 us an argument to pack and hiredis a reply element each to read:
-- two thirds of a vector lookup's time (548 buckets a record) went there.
-- KEYS     the bucket hashes
-- ARGV[1]  tail, the bytes of a bucket read at most: its newest entries (max_bucket)
-- ARGV[1+i] the fields of KEYS[i] to read, each 2 bytes, little endian
-- Reply: {lengths, values}: the length of each bucket read, 4 bytes little endian, 0 for
-- none, in the order of the keys and their fields; and the values read, concatenated
local tail = tonumber(ARGV[1])
local lengths, values = {}, {}
local none = string.rep('\0', 4)
for k = 1, #KEYS do
  local packed = ARGV[k + 1]
  local count = #packed / 2
  -- unpack() is bounded by Lua's C stack (8,000 values): HMGETs of at most 4,000 fields
  for first = 1, count, 4000 do
    local last = math.min(count, first + 3999)
    local names = {}
    for j = first, last do
      local lo, hi = string.byte(packed, 2 * j - 1, 2 * j)
      names[#names + 1] = lo + 256 * hi
    end
    local got = redis.call('HMGET', KEYS[k], unpack(names))
    for j = 1, #got do
      local v = got[j]
      if v then
        if #v > tail then v = string.sub(v, -tail) end
        values[#values + 1] = v
        lengths[#lengths + 1] = struct.pack('<I4', #v)
      else
        lengths[#lengths + 1] = none
      end
    end
  end
end
return {table.concat(lengths), table.concat(values)}
