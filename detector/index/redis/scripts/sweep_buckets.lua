-- SWEEP_BUCKETS, on one shard: the entries numbered at or below a cutoff (past the
-- horizon), out of the buckets of bucket hashes. A bucket's entries are oldest first, so
-- only a bucket whose first entry is past the horizon is rewritten; an emptied bucket's
-- field is deleted (and with it an emptied hash).
-- KEYS     the bucket hashes
-- ARGV[1]  cutoff, the number at or below which documents are past the horizon
-- ARGV[2]  size, bytes an entry (its number the last 4, little endian)
-- Reply: the number of entries removed
local cutoff, size, removed = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
for k = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    local v = all[i + 1]
    if #v >= size and struct.unpack('<I4', v, size - 3) <= cutoff then
      local kept = {}
      for pos = 1, #v - size + 1, size do
        if struct.unpack('<I4', v, pos + size - 4) > cutoff then
          kept[#kept + 1] = string.sub(v, pos, pos + size - 1)
        end
      end
      local out = table.concat(kept)
      removed = removed + (#v - #out) / size
      if #out == 0 then
        redis.call('HDEL', KEYS[k], all[i])
      else
        redis.call('HSET', KEYS[k], all[i], out)
      end
    end
  end
end
return removed
