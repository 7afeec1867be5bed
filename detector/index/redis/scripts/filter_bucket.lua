-- FILTER_BUCKET, on one shard: a deleted document's entry out of a bucket (a field of a
-- bucket hash, keys.py), by its number. The hash keeps its TTL; an emptied bucket's
-- field is deleted (and with it an emptied hash).
-- KEYS[1]  the bucket hash
-- ARGV[1]  the bucket's field
-- ARGV[2]  the document's number
-- ARGV[3]  size, bytes an entry (its number the last 4, little endian)
-- Reply: 1 if the bucket held it, else 0
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local gone, size = tonumber(ARGV[2]), tonumber(ARGV[3])
local kept = {}
for pos = 1, #v - size + 1, size do
  if struct.unpack('<I4', v, pos + size - 4) ~= gone then
    kept[#kept + 1] = string.sub(v, pos, pos + size - 1)
  end
end
local out = table.concat(kept)
if #out == #v then return 0 end
if #out == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], out)
end
return 1
