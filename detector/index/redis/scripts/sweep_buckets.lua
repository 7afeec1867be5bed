-- SWEEP_BUCKETS, on one shard: the entries numbered at or below a cutoff (past the
-- horizon), out of the buckets of bucket hashes. A bucket's entries are oldest first, so
-- only a bucket whose first entry is past the horizon is rewritten; an emptied bucket's
-- field is deleted (and with it an emptied hash).
-- KEYS     the bucket hashes
-- ARGV[1]  cutoff, the number at or below which documents are past the horizon
-- Reply: the number of entries removed
local cutoff, removed = tonumber(ARGV[1]), 0
for k = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    local v = all[i + 1]
    if #v >= 12 and struct.unpack('<I4', v, 9) <= cutoff then
      local kept = {}
      for pos = 1, #v - 11, 12 do
        if struct.unpack('<I4', v, pos + 8) > cutoff then
          kept[#kept + 1] = string.sub(v, pos, pos + 11)
        end
      end
      local out = table.concat(kept)
      removed = removed + (#v - #out) / 12
      if #out == 0 then
        redis.call('HDEL', KEYS[k], all[i])
      else
        redis.call('HSET', KEYS[k], all[i], out)
      end
    end
  end
end
return removed
