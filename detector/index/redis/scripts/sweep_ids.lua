-- SWEEP_IDS, on the coordinator: the id map of the numbers at or below a cutoff, past the
-- retention horizon, and the counts with it (`expired`); at most `chunk` id hashes a
-- call, so that a sweep long put off does not hold the coordinator. Once the cutoff is
-- reached, the epochs before the one that makes it go too.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  cutoff, the number at or below which documents are past the horizon
-- ARGV[3]  chunk, the most id hashes one call deletes whole
-- Reply: the number swept to (meta's `swept`): the cutoff once done, else less (call again)
local C, cutoff, chunk = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local swept = tonumber(redis.call('HGET', C .. 'meta', 'swept') or '0')
if cutoff <= swept then return swept end
local tally = counts(C)
local first, last = math.floor((swept + 1) / 128), math.floor(cutoff / 128)
local stop = math.min(last, first + chunk)
for j = first, stop - 1 do  -- whole hashes, below the cutoff's own
  local ids = C .. 'id:' .. j
  tally.add(j, -redis.call('HLEN', ids), 'expired')
  redis.call('DEL', ids)
end
local to = stop * 128 - 1
if stop == last then  -- the cutoff's own hash, up to the cutoff
  local fields = {}
  for n = math.max(swept + 1, last * 128), cutoff do fields[#fields + 1] = n % 128 end
  tally.add(last, -redis.call('HDEL', C .. 'id:' .. last, unpack(fields)), 'expired')
  to = cutoff
  local rank = redis.call('ZRANK', C .. 'epochs', cutoff)
  if rank and rank > 0 then redis.call('ZREMRANGEBYRANK', C .. 'epochs', 0, rank - 1) end
end
tally.write()
redis.call('HSET', C .. 'meta', 'swept', to)
return to
