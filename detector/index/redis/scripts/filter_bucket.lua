-- FILTER_BUCKET, on one shard: a deleted document's entry out of a bucket, by its number.
-- The bucket keeps its TTL; an emptied bucket is deleted.
-- KEYS[1]  the bucket
-- ARGV[1]  the document's number
-- Reply: 1 if the bucket held it, else 0
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local gone = tonumber(ARGV[1])
local kept = {}
for pos = 1, #v - 11, 12 do
  if struct.unpack('<I4', v, pos + 8) ~= gone then
    kept[#kept + 1] = string.sub(v, pos, pos + 11)
  end
end
local out = table.concat(kept)
if #out == #v then return 0 end
if #out == 0 then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], out, 'KEEPTTL') end
return 1
