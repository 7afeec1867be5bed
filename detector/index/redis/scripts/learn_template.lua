-- LEARN_TEMPLATE, on one shard: a page teaches its host's template model
-- (detector.templates, whose MemoryTemplates is the reference).
-- KEYS[1]  the host's bitmap of (URL, line) pairs; KEYS[2]  its line counts (hash), and
--          in its field 'pairs' the bits set in the bitmap (templates.changed_lines)
-- ARGV[1]  most lines counted; ARGV[2] the template threshold; ARGV[3] seconds the model
--          lives after its last lesson (0: for ever); ARGV[4..] pairs: the (URL, line)
--          bit, the line's key
-- Reply: the lines counted (those not yet counted for this URL)
local counted = 0
for i = 4, #ARGV, 2 do
  if redis.call('SETBIT', KEYS[1], ARGV[i], 1) == 0 then
    counted = counted + 1
    if redis.call('HINCRBY', KEYS[2], ARGV[i + 1], 1) > 255 then
      redis.call('HSET', KEYS[2], ARGV[i + 1], 255)
    end
  end
end
if counted > 0 then redis.call('HINCRBY', KEYS[2], 'pairs', counted) end
-- Past the cap, the lines not yet template go: they are counted again when they recur.
if counted > 0 and redis.call('HLEN', KEYS[2]) > tonumber(ARGV[1]) + 1 then
  local counts = redis.call('HGETALL', KEYS[2])
  local threshold = tonumber(ARGV[2])
  for j = 1, #counts, 2 do
    if counts[j] ~= 'pairs' and tonumber(counts[j + 1]) < threshold then
      redis.call('HDEL', KEYS[2], counts[j])
    end
  end
end
if tonumber(ARGV[3]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return counted
