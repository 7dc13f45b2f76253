#!lua
--[[
Append one command's events to a table, atomically.  All keys share the table's hash tag.

KEYS[1] head     hash: version, hash (hex), status
KEYS[2] events   stream, ids <version>-1, fields b (compact canonical JSON), h (raw sha256)
KEYS[3] feed     shard feed stream, fields t (table), f (first version), l (last version)
KEYS[4] cmdids   the table's hash: "<command id>" -> "<first> <last> <result>"
KEYS[5] secret   hash: the caller's secrets but the token digests (the deal seeds), HSET
                 in the same step
KEYS[6] legacy   the shard's hash "<table>|<command id>" -> the same, where older stores
                 recorded command ids: read, never written
KEYS[7] sealed   the shard's sorted set of finished tables (table id, score: finish time ms),
                 ZADD NX when an append sets the status 'over'; the archiver's index
KEYS[8] tokens   hash: the caller's secrets whose field starts with 'token:' (seat-token
                 digests), HSET in the same step
KEYS[9..]        the table's view parts (strings), SET when events are appended

ARGV[1]  table id            ARGV[2]  command id
ARGV[3]  expected version    ARGV[4]  expected head hash (hex)
ARGV[5]  result to remember  ARGV[6]  n events
ARGV[7]  last hash (hex) after the append
ARGV[8]  status to set in the head ('' leaves it)
ARGV[9]  feed MAXLEN ~ ('' never trims)
ARGV[10] n secret pairs
ARGV[11] ms the command ids stay once the match is over ('' for ever)
ARGV[12] finish time (ms) scored in KEYS[7] when the status becomes 'over'
ARGV[13] result to remember instead when one of the fields below is in KEYS[4]
ARGV[14] k: the count of those fields (the same command id as another seat's)
ARGV[15..14+k] the fields
ARGV[15+k..]  n pairs (body, raw hash), then the secret pairs (field, value), then one value
            per view key

Returns {0, first, last}                          appended
        {1, first, last, result, last raw hash}   command id seen: the first outcome
        {2, head version, head hash hex}          version or hash conflict: nothing written
        {3, head version}                         the id is another seat's: ARGV[13] recorded
]]
local k = tonumber(ARGV[14])
-- the command's own field and the other senders' fields of the same id, in one call
local ids = redis.call('HMGET', KEYS[4], ARGV[2], unpack(ARGV, 15, 14 + k))
local seen = ids[1]
if not seen then seen = redis.call('HGET', KEYS[6], ARGV[1] .. '|' .. ARGV[2]) end
if seen then
  local a = string.find(seen, ' ', 1, true)
  local b = string.find(seen, ' ', a + 1, true)
  local last = string.sub(seen, a + 1, b - 1)
  local h = ''
  if tonumber(last) > 0 then
    local e = redis.call('XRANGE', KEYS[2], last .. '-1', last .. '-1')
    if e[1] then
      local f = e[1][2]
      for i = 1, #f, 2 do
        if f[i] == 'h' then h = f[i + 1] end
      end
    end
  end
  return {1, tonumber(string.sub(seen, 1, a - 1)), tonumber(last), string.sub(seen, b + 1), h}
end

local head = redis.call('HMGET', KEYS[1], 'version', 'hash', 'status')
local version = tonumber(head[1] or '0')
for j = 2, k + 1 do
  -- A command id is one seat's: the other seat's command with it is refused, and the refusal
  -- recorded under this seat's field, so that a retry gets it again.
  if ids[j] then
    redis.call('HSET', KEYS[4], ARGV[2], (version + 1) .. ' ' .. version .. ' ' .. ARGV[13])
    return {3, version}
  end
end
local hash = head[2] or '0000000000000000000000000000000000000000000000000000000000000000'
if version ~= tonumber(ARGV[3]) or hash ~= ARGV[4] then
  return {2, version, hash}
end

local n = tonumber(ARGV[6])
local first = version + 1
local last = version + n
local i = 15 + k
for v = first, last do
  redis.call('XADD', KEYS[2], v .. '-1', 'b', ARGV[i], 'h', ARGV[i + 1])
  i = i + 2
end
if n > 0 then
  if ARGV[9] ~= '' then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[9], '*', 't', ARGV[1], 'f', first, 'l', last)
  else
    redis.call('XADD', KEYS[3], '*', 't', ARGV[1], 'f', first, 'l', last)
  end
  if ARGV[8] ~= '' then
    redis.call('HSET', KEYS[1], 'version', last, 'hash', ARGV[7], 'status', ARGV[8])
  else
    redis.call('HSET', KEYS[1], 'version', last, 'hash', ARGV[7])
  end
elseif ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'version', last, 'hash', hash, 'status', ARGV[8])
end
redis.call('HSET', KEYS[4], ARGV[2], first .. ' ' .. last .. ' ' .. ARGV[5])
-- A finished table's command ids go after a while (NX: counted from the match's end); a
-- duplicate sent later is decided again, and a finished match refuses it.
if ARGV[11] ~= '' and (ARGV[8] == 'over' or (ARGV[8] == '' and head[3] == 'over')) then
  redis.call('PEXPIRE', KEYS[4], ARGV[11], 'NX')
end
if ARGV[8] == 'over' then
  -- the archiver's index of finished tables (NX: the first end counts)
  redis.call('ZADD', KEYS[7], 'NX', ARGV[12], ARGV[1])
end
local ns = tonumber(ARGV[10])
if ns > 0 then
  local seeds, tokens = {}, {}
  for j = i, i + 2 * ns - 1, 2 do
    local kv = seeds
    if string.sub(ARGV[j], 1, 6) == 'token:' then kv = tokens end
    kv[#kv + 1] = ARGV[j]
    kv[#kv + 1] = ARGV[j + 1]
  end
  if #seeds > 0 then redis.call('HSET', KEYS[5], unpack(seeds)) end
  if #tokens > 0 then redis.call('HSET', KEYS[8], unpack(tokens)) end
end
if n > 0 and #KEYS > 8 then
  -- Views are derived data, as the projector's: to replicas, not into the AOF (after a
  -- restart they are as of the last rewrite, and the projector folds the feed from there).
  redis.set_repl(redis.REPL_REPLICA)
  local v = i + 2 * ns
  for k = 9, #KEYS do
    redis.call('SET', KEYS[k], ARGV[v])
    v = v + 1
  end
end
return {0, first, last}
