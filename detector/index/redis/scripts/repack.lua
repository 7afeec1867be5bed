-- REPACK, on one shard: texts packed again with the index's dictionary (texts.py), each
-- only where its key still holds the form it was written in: a text deleted, expired or
-- written anew since is left as it is. The key keeps its TTL.
-- KEYS[i]        text keys of one shard
-- ARGV[2i - 1]   the form KEYS[i] was written with
-- ARGV[2i]       the same text packed with the dictionary
-- Reply: how many were replaced
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    redis.call('SET', key, ARGV[2 * i], 'KEEPTTL')
    n = n + 1
  end
end
return n
