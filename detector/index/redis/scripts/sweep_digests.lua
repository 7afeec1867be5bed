-- SWEEP_DIGESTS, on one shard: the digests numbered at or below a cutoff, out of the
-- shard's digest hashes.
-- KEYS     the digest hashes
-- ARGV[1]  cutoff, the number at or below which documents are past the horizon
-- Reply: the number of fields removed
local cutoff, removed = tonumber(ARGV[1]), 0
for k = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= cutoff then
      removed = removed + redis.call('HDEL', KEYS[k], all[i])
    end
  end
end
return removed
