-- COUNT_IDS, on the coordinator: counts `chunk` more id hashes into the counts of an index
-- made before them (its documents so far were never counted). The scripts that change
-- the id map keep the hashes below `counted` counted meanwhile (versions.lua), so once
-- `counted` passes the last hash the count is exact, however many commits came between.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV[1]  C, the coordinator's prefix nd:{NAME}:
-- ARGV[2]  chunk, id hashes a call
-- Reply: 1 once every hash is counted ('counted' is 'all'), else 0 (call again)
local C, chunk = ARGV[1], tonumber(ARGV[2])
local counted = redis.call('HGET', C .. 'counts', 'counted')
if counted == 'all' then return 1 end
local from = tonumber(counted or '0')
local last = math.floor(tonumber(redis.call('GET', KEYS[1]) or '0') / 128)
local to = math.min(from + chunk, last + 1)
local n = 0
for j = from, to - 1 do n = n + redis.call('HLEN', C .. 'id:' .. j) end
redis.call('HINCRBY', C .. 'counts', 'documents', n)
if to > last then
  redis.call('HSET', C .. 'counts', 'counted', 'all')
  return 1
end
redis.call('HSET', C .. 'counts', 'counted', to)
return 0
