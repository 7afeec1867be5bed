-- TRIM_TEXTS, on one shard: texts that have left the window of texts kept (--text-window,
-- texts.py): a text key that still holds a sketch and a text keeps only its sketch (and
-- its TTL); every one leaves the shard's queue of windowed texts. A key deleted or
-- written anew since (a value without a text) is left as it is.
-- KEYS[1]        the shard's queue (tq)
-- KEYS[1 + i]    text keys of the shard
-- ARGV[i]        the queue's member for KEYS[1 + i] (its version's name)
-- Reply: how many texts were trimmed
local n = 0
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and string.sub(v, 1, 4) == 'SKT\254' then
    local size = 6 + string.byte(v, 5) + 256 * string.byte(v, 6)
    if #v > size then
      redis.call('SET', KEYS[i], string.sub(v, 1, size), 'KEEPTTL')
      n = n + 1
    end
  end
  redis.call('ZREM', KEYS[1], ARGV[i - 1])
end
return n
