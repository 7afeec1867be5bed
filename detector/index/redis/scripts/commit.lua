-- COMMIT, on the coordinator: numbers, logs and notes a batch's writes atomically, unless
-- seq moved since the lookup's mark `upto`: then it answers with what was committed
-- meanwhile, for the caller to check against its batch and ask again. Every write takes
-- a number (seq): a document indexed, a decision stored without indexing (a zero LOG
-- entry, which no lookup matches). Its record goes to the recent writes (rd: id -> the
-- id's latest record) and its note to rw (number -> note) until the shards have them
-- (the caller's apply, or a repair, then APPLIED).
-- KEYS[1]  C .. 'seq' (it routes the script to the coordinator's slot)
-- ARGV, fixed:
--   [1] C, the coordinator's prefix nd:{NAME}:
--   [2] upto, the seq the caller's lookup saw
--   [3] seen, the applied mark the caller's reads of decisions and shards rest on: the
--       recent writes must still hold every write after it
--   [4] n, the number of items that follow
--   [5] keep, seconds an indexed document's decision is kept (0: always); above 0 the
--       index has a retention, and the commit marks its time in epochs
--   [6] granularity, seconds of one epochs window
--   [7] keep_old, '1': a revision keeps the version it replaces as a candidate
-- ARGV, then 9 per item, in order, from [8]:
--   id        the record's id
--   name      the version's name, id or id .. NUL .. revision (the id map gets it)
--   kind      'e' to index, 'x' a decision only (not indexed), 'r' a replay (nothing is
--             written: the decision is one the caller read back)
--   head      the decision record's head (keys.record_head)
--   body      its body, the decision's JSON less what the key and head give
--   entry     'e': its 32-byte LOG entry; otherwise ''
--   prev      '' for an id the caller found undecided; else the digest of the decision
--             it revises (the id's decision must still be that one)
--   mine      the digest of the content decided on (prev and mine: keys.pack_digest)
--   old       the record the caller read for the id ('' for none)
-- An id decided meanwhile on the same content gets nothing written: its outcome is the
-- stored decision. An id decided, revised or deleted meanwhile otherwise is a conflict.
-- Reply:
--   {'relookup'}          the log or the recent writes no longer reach back to the
--                         caller's marks, or upto is past seq: nothing written
--   {'stale', seq, log}   seq moved: the LOG entries of upto+1 .. seq; nothing written
--   {'moved', i}          item i+1 met a conflict on its id: nothing written; commit
--                         the first i again, decide the rest afresh
--   {'ok', outcomes, member, replaced}  written. outcomes[i], for item i: {''} (a
--                         replay), {'s', value} (the id's stored record: this one was
--                         not written), or {'n' or 'x', number, kept}: written by write
--                         `number`, indexed under it ('n') or not ('x'), with the kept
--                         versions (pack_kept) the record carries. member: the pending
--                         range "first:last:time" the caller applies to the shards, or
--                         '' when nothing was written. replaced[i]: the record a revision
--                         replaced, when that version left the index, else ''
local C, upto, seen = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n, keep, granularity = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local keep_old = ARGV[7] == '1'
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
if seq ~= upto then
  local base = tonumber(redis.call('GET', C .. 'logbase') or '0')
  if upto < base or seq < upto then return {'relookup'} end
  return {'stale', seq, redis.call('GETRANGE', C .. 'log', (upto - base) * 32,
                                   (seq - base) * 32 - 1)}
end
if seen < recent_base(C) then return {'relookup'} end

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

local A, FIRST = 9, 8
-- First every item against what the caller saw, before anything is written; items of one
-- id see the items before them.
local now_dg = {}
for i = 1, n do
  local at = FIRST + (i - 1) * A
  local id, kind, prev, mine = ARGV[at], ARGV[at + 2], ARGV[at + 6], ARGV[at + 7]
  if kind ~= 'r' then
    local dg = now_dg[id]
    if dg == nil then dg = digest_of(current(C, id, ARGV[at + 8], seen)) end
    local o = outcome(dg, prev, mine)
    if o == 'moved' then return {'moved', i - 1} end
    if o ~= 'stored' then now_dg[id] = mine end
  end
end

local now = tonumber(redis.call('TIME')[1])
local out, replaced, log, first, numbered, mine_now = {}, {}, {}, seq + 1, 0, {}
local zero = string.rep('\0', 32)
for i = 1, n do
  local at = FIRST + (i - 1) * A
  local id, name, kind, head = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local body, entry, prev, mine = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6], ARGV[at + 7]
  out[i], replaced[i] = {''}, ''
  if kind ~= 'r' then
    local v = mine_now[id]
    if v == nil then v = current(C, id, ARGV[at + 8], seen) end
    local o = outcome(digest_of(v), prev, mine)
    if o == 'stored' then
      out[i] = {'s', v}
    else
      local kept, gone = {}, {}
      if o == 'revise' then  -- the version it replaces leaves the lookups, or stays
        local old = header(v)
        kept = old.k
        if old.n > 0 then
          if keep_old then
            kept[#kept + 1] = {n = old.n, r = old.r, s = old.s, dh = old.dh, fp = old.fp}
          else
            gone[1] = {n = old.n, cause = 'r', name = name_of(id, old.r)}
            replaced[i] = v
          end
        end
      end
      seq = seq + 1
      local num = 0
      if kind == 'e' then
        num = seq
        numbered = numbered + 1
        log[#log + 1] = entry
      else
        log[#log + 1] = zero
      end
      local packed = pack_kept(kept)
      local value = table.concat({'\3', struct.pack('<I4I4', seq, num), head, packed, body})
      redis.call('HSET', C .. 'rd', id, value)
      redis.call('HSET', C .. 'rw', seq, note(kind == 'e', name, gone))
      mine_now[id] = value
      out[i] = {kind == 'e' and 'n' or 'x', seq, packed}
    end
  end
end
local member = ''
if seq >= first then
  redis.call('SET', KEYS[1], seq)
  redis.call('APPEND', C .. 'log', table.concat(log))
  member = first .. ':' .. seq .. ':' .. now
  redis.call('ZADD', C .. 'pending', first, member)
  if numbered > 0 then redis.call('HINCRBY', C .. 'counts', 'numbered', numbered) end
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
