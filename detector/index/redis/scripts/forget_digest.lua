-- FORGET_DIGEST, on one shard: a deleted document's digest, if the digest still names it.
-- KEYS[1]  the digest hash
-- ARGV[1]  the digest's field
-- ARGV[2]  the document's number
-- Reply: 1 if the field was removed, else 0
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
