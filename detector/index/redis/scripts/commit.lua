-- COMMIT, on the coordinator: numbers, logs and stores a batch and counts its documents
-- (versions.lua), atomically, unless seq moved since the lookup's mark `upto`: then it
-- answers with what was committed meanwhile, for the caller to check against its batch
-- and ask again.
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV, fixed:
--   [1] C, the coordinator's prefix nd:{NAME}:
--   [2] upto, the seq the caller's lookup saw
--   [3] n, the number of items that follow
--   [4] decision_ttl, seconds a decision of a document not indexed is kept (0: always)
--   [5] keep, seconds an indexed document's decision is kept (0: always); above 0 the
--       index has a retention, and the commit marks its time in epochs
--   [6] granularity, seconds of one epochs window
--   [7] keep_old, '1': a revision keeps the version it replaces as a candidate
-- ARGV, then 8 per item, in order, from [8]:
--   id        the record's id (its decision is C .. 'dec:' .. id)
--   name      the version's name, id or id .. NUL .. revision (the id map holds it)
--   kind      'e' to index, 'x' a decision only (not indexed), 'r' a replay (nothing is
--             written: the decision is one the caller read back)
--   head      the decision record's head (keys.record_head)
--   body      its body, the decision's JSON less what the key and head give
--   entry     'e': its 32-byte LOG entry; otherwise ''
--   prev      '' for an id the caller found undecided; else the digest of the decision
--             it revises (the id's stored decision must still be that one)
--   mine      the digest of the content decided on (prev and mine: keys.pack_digest)
-- An id decided meanwhile on the same content gets nothing written: its outcome is the
-- stored decision. An id decided, revised or deleted meanwhile otherwise is a conflict.
-- Reply:
--   {'relookup'}          the log no longer holds what came after upto (trimmed), or
--                         upto is past seq: nothing written, look up again
--   {'stale', seq, log}   seq moved: the LOG entries of documents upto+1 .. seq;
--                         nothing written
--   {'moved', i}          item i+1 met a conflict on its id: nothing written; commit
--                         the first i again, decide the rest afresh
--   {'ok', outcomes, member, replaced}  written. outcomes[i], for item i: '' (a replay,
--                         or a decision stored without indexing), 's' .. the stored value
--                         of the id's decision (this one was not written), or 'n' .. the
--                         number it is indexed under. member: the pending range
--                         "first:last:time" to apply to the shards, or '' when no
--                         document was numbered. replaced[i]: the stored value a
--                         revision replaced, when that version left the index (the
--                         caller takes its entries out of the shards), else ''
local C, upto, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local decision_ttl, keep, granularity = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local keep_old = ARGV[7] == '1'
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
if seq ~= upto then
  local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
  if upto < base or seq < upto then return {'relookup'} end
  return {'stale', seq, redis.call('GETRANGE', C .. 'log', (upto - base) * 32,
                                   (seq - base) * 32 - 1)}
end

-- What an item does with its id's decision: 'new', 'revise', 'stored' (decided meanwhile on
-- this very content, or by an index that kept no digests: that decision stands), or
-- 'moved' (decided, revised or deleted meanwhile on other content: decide it again).
-- `dg` is the digest of the id's decision ('' when it has none, nil when it has one
-- without a digest).
local function outcome(dg, prev, mine)
  if dg == '' then
    if prev == '' then return 'new' end
    return 'moved'  -- deleted meanwhile
  end
  if dg == nil or dg == mine then return 'stored' end
  if dg == prev then return 'revise' end
  return 'moved'
end
local function digest_of(v)
  if not v then return '' end
  return header(v).dg
end

-- First every item against what the caller saw, before anything is written; items of one
-- id see the items before them.
local A, FIRST, now_dg = 8, 8, {}
for i = 1, n do
  local at = FIRST + (i - 1) * A
  local id, kind, prev, mine = ARGV[at], ARGV[at + 2], ARGV[at + 6], ARGV[at + 7]
  if kind ~= 'r' then
    local dg = now_dg[id]
    if dg == nil then dg = digest_of(redis.call('GET', C .. 'dec:' .. id)) end
    local o = outcome(dg, prev, mine)
    if o == 'moved' then return {'moved', i - 1} end
    if o ~= 'stored' then now_dg[id] = mine end
  end
end

if seq == 0 then  -- a new index: counted from its first commit on
  redis.call('HSETNX', C .. 'counts', 'counted', 'all')
end
local tally = counts(C)
local now = tonumber(redis.call('TIME')[1])
-- keys.record: the record of version `num` (0: not indexed) with its head and body as
-- the caller packed them, and the versions it keeps
local function record(num, head, kept, body)
  local parts = {'\1', struct.pack('<I4', num), head, struct.pack('<I2', #kept)}
  for _, k in ipairs(kept) do
    parts[#parts + 1] = struct.pack('<I4I4B', k.n, k.r, #k.s) .. k.s .. k.dh .. k.fp
  end
  parts[#parts + 1] = body
  return table.concat(parts)
end
local function set(key, value, ttl)
  if ttl > 0 then redis.call('SET', key, value, 'EX', ttl) else redis.call('SET', key, value) end
end
local out, replaced, log, first = {}, {}, {}, seq + 1
for i = 1, n do
  local at = FIRST + (i - 1) * A
  local id, name, kind, head = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local body, entry, prev, mine = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6], ARGV[at + 7]
  out[i], replaced[i] = '', ''
  local v = kind ~= 'r' and redis.call('GET', C .. 'dec:' .. id)
  local o = kind ~= 'r' and outcome(digest_of(v), prev, mine)
  if o == 'stored' then
    out[i] = 's' .. v
  elseif kind ~= 'r' then
    local kept = nil
    if o == 'revise' then  -- the version it replaces leaves the lookups, or stays
      local old = header(v)
      kept = old.k
      if old.n > 0 then
        if keep_old then
          kept[#kept + 1] = {n = old.n, r = old.r, s = old.s, dh = old.dh, fp = old.fp}
        else
          tally.unmap(old.n, name_of(id, old.r), 'replaced')
          replaced[i] = v
        end
      end
    end
    local num = 0
    if kind == 'e' then
      seq = seq + 1
      num = seq
      log[#log + 1] = entry
      tally.map(seq, name)
      out[i] = 'n' .. seq
    end
    local value = record(num, head, kept or {}, body)
    if kind == 'e' then set(C .. 'dec:' .. id, value, keep) else
      set(C .. 'dec:' .. id, value, decision_ttl) end
  end
end
tally.write()
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
return {'ok', out, member, replaced}
