-- SNAPSHOT, on the coordinator: what a lookup reads before the shards.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  retention, seconds (0: none)
-- Reply {seq, from, log, cutoff, oldest, dictionary}:
--   seq     number of the last committed document: the lookup's mark
--   from    `log` holds the documents numbered after it: the oldest pending
--           range's first - 1, or seq when nothing is pending; never below logbase
--   log     the LOG entries (32 bytes each) of documents from+1 .. seq
--   cutoff  numbers at or below it are past the retention horizon (0: none are)
--   oldest  the oldest pending range "first:last:time", or '' (for the repair)
--   dictionary  bytes 4..7 of txdict, the text dictionary's id (little endian), or ''
--           before the index has one: a consumer learns of it with no round trip more
local C, retention = ARGV[1], tonumber(ARGV[2])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
local oldest = redis.call('ZRANGE', C .. 'pending', 0, 0, 'WITHSCORES')
local from = seq
if oldest[1] then from = tonumber(oldest[2]) - 1 end
if from < base then from = base end
local log = ''
if seq > from then
  log = redis.call('GETRANGE', C .. 'log', (from - base) * 32, (seq - base) * 32 - 1)
end
local cutoff = 0
if retention > 0 then
  local now = tonumber(redis.call('TIME')[1])
  local e = redis.call('ZRANGE', C .. 'epochs', now - retention, '-inf', 'BYSCORE', 'REV',
                       'LIMIT', 0, 1)
  if e[1] then cutoff = tonumber(e[1]) end
end
local dictionary = redis.call('GETRANGE', C .. 'txdict', 4, 7)
return {seq, from, log, cutoff, oldest[1] or '', dictionary}
