-- COMMIT, on the coordinator: numbers, logs and stores a batch, atomically, unless seq
-- moved since the lookup's mark `upto`: then it answers with what was committed
-- meanwhile, for the caller to check against its batch and ask again.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV, fixed:
--   [1] C, the coordinator's prefix nd:{NAME}:
--   [2] upto, the seq the caller's lookup saw
--   [3] n, the number of items that follow
--   [4] decision_ttl, seconds a decision of a document not indexed is kept (0: always)
--   [5] keep, seconds an indexed document's decision is kept (0: always); above 0 the
--       index has a retention, and the commit marks its time in epochs
--   [6] granularity, seconds of one epochs window
-- ARGV, then 4 per item, in order, from [7]:
--   id
--   kind      'e' to index, 'x' a decision only (not indexed), 'r' a replay (nothing is
--             written: the decision is one the caller read back)
--   decision  'e': "SPACE DIGESTHASH\n" then the decision JSON ("N " goes before it
--             here); 'x' and 'r': the decision JSON
--   entry     'e': its 32-byte LOG entry; otherwise ''
-- An id that has a decision already gets nothing written: its outcome says what it has.
-- Reply:
--   {'relookup'}          the log no longer holds what came after upto (trimmed), or
--                         upto is past seq: nothing written, look up again
--   {'stale', seq, log}   seq moved: the LOG entries of documents upto+1 .. seq;
--                         nothing written
--   {'ok', outcomes, member}  written. outcomes[i], for item i: '' (a replay, or a
--                         decision stored without indexing), 's' .. the stored value of
--                         the id's earlier decision (this one was not written), or
--                         'n' .. the number it is indexed under. member: the pending
--                         range "first:last:time" to apply to the shards, or '' when no
--                         document was numbered
local C, upto, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local decision_ttl, keep, granularity = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
if seq ~= upto then
  local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
  if upto < base or seq < upto then return {'relookup'} end
  return {'stale', seq, redis.call('GETRANGE', C .. 'log', (upto - base) * 32,
                                   (seq - base) * 32 - 1)}
end
local now = tonumber(redis.call('TIME')[1])
local function set(key, value, ttl)
  if ttl > 0 then redis.call('SET', key, value, 'EX', ttl) else redis.call('SET', key, value) end
end
local out, log, first, at = {}, {}, seq + 1, 7
for i = 1, n do
  local id, kind, decision, entry = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  at = at + 4
  out[i] = ''
  if kind ~= 'r' then
    local key = C .. 'dec:' .. id
    local earlier = redis.call('GET', key)
    if earlier then
      out[i] = 's' .. earlier
    elseif kind == 'e' then
      seq = seq + 1
      log[#log + 1] = entry
      redis.call('HSET', C .. 'id:' .. math.floor(seq / 128), seq % 128, id)
      set(key, seq .. ' ' .. decision, keep)
      out[i] = 'n' .. seq
    else
      set(key, decision, decision_ttl)
    end
  end
end
local member = ''
if seq >= first then
  redis.call('SET', KEYS[1], seq)
  redis.call('APPEND', C .. 'log', table.concat(log))
  member = first .. ':' .. seq .. ':' .. now
  redis.call('ZADD', C .. 'pending', first, member)
end
if keep > 0 and seq >= first then
  -- Every document numbered up to seq was committed by now. A window keeps only its last
  -- mark, so a document ages out at most one window late, never early.
  local last = redis.call('ZRANGE', C .. 'epochs', -1, -1, 'WITHSCORES')
  if last[1] and math.floor(tonumber(last[2]) / granularity) == math.floor(now / granularity) then
    redis.call('ZREM', C .. 'epochs', last[1])
  end
  redis.call('ZADD', C .. 'epochs', now, seq)
end
return {'ok', out, member}
