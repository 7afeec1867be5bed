-- TRIM_TEXTS, on one shard: texts that have left the window of texts kept (--text-window,
-- texts.py): a text key that still holds a sketch and a text gives up its text, and its
-- sketch moves to its sketch hash (the key is deleted) or, where documents expire, stays
-- alone in the key (SET KEEPTTL); every one leaves the shard's queue of windowed texts. A
-- key deleted or written anew since (a value without a text) is left as it is.
-- KEYS[1]          the shard's queue (tq)
-- KEYS[1 + i]      text keys of the shard, n of them (ARGV[1])
-- KEYS[1 + n + i]  the sketch hash of KEYS[1 + i], when sketches move to hashes
-- ARGV[1]          n
-- ARGV[1 + i]      the queue's member for KEYS[1 + i] (its version's name: the field)
-- Reply: how many texts were trimmed
local n = tonumber(ARGV[1])
local hashed = #KEYS > 1 + n
local trimmed = 0
for i = 1, n do
  local key = KEYS[1 + i]
  local v = redis.call('GET', key)
  if v and string.sub(v, 1, 4) == 'SKT\254' then
    local size = 6 + string.byte(v, 5) + 256 * string.byte(v, 6)
    if #v > size then
      if hashed then
        redis.call('HSET', KEYS[1 + n + i], ARGV[1 + i], string.sub(v, 7, size))
        redis.call('DEL', key)
      else
        redis.call('SET', key, string.sub(v, 1, size), 'KEEPTTL')
      end
      trimmed = trimmed + 1
    end
  end
  redis.call('ZREM', KEYS[1], ARGV[1 + i])
end
return trimmed
