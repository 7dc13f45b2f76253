"""The projector's Lua scripts, their SHA1 digests for EVALSHA, and the write script's replies."""

from __future__ import annotations

from services.store.redis_store import READ_LUA
from services.store.scripts import is_read_only

_VIEW_VERSION = """\
-- The table version a stored view part was built to (its first "version" field), nil if none.
local function view_version(text)
  return text and tonumber(string.match(text, '"version":(%d+)'))
end
"""

WRITE_LUA = (
    """#!lua
-- One shard's views and checkpoint, all or nothing.  KEYS[1] checkpoint, KEYS[2] lease, then
-- the view keys, ARGV[6] of them a table (its public part first).  ARGV[1] the checkpoint the
-- batch started from ('' none), ARGV[2] the new one ('' keeps it), ARGV[3] lease owner ('' no
-- lease check), ARGV[4] hint channel, ARGV[5] the hints, one line per table ('' publishes
-- nothing), ARGV[6] parts a table, then one value per view key.
-- A table whose stored public part is newer than the one given keeps its parts: the engine
-- workers store views with their appends, and a projector folding behind them must not undo
-- them (equal versions are written again: a rebuild rewrites what it finds).
-- Returns {0, ''} written, {1, holder} lease not ours, {2, checkpoint} checkpoint moved.
-- Views and checkpoints are derived data: they go to replicas but not into the AOF (after a
-- restart both are as of the last AOF rewrite, and the projector folds the feed from there).
"""
    + _VIEW_VERSION
    + """\
redis.set_repl(redis.REPL_REPLICA)
if ARGV[3] ~= '' then
  local holder = redis.call('GET', KEYS[2])
  if holder ~= ARGV[3] then return {1, holder or ''} end
end
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return {2, current} end
local per = tonumber(ARGV[6])
for i = 3, #KEYS, per do
  local had = view_version(redis.call('GET', KEYS[i]))
  local given = view_version(ARGV[i + 4])
  if not (had and given and had > given) then
    for j = i, i + per - 1 do redis.call('SET', KEYS[j], ARGV[j + 4]) end
  end
end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2]) end
if ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
return {0, ''}
"""
)

VERSIONS_LUA = (
    """#!lua flags=no-writes
-- The version of each stored public view part (KEYS), 0 where there is none.
"""
    + _VIEW_VERSION
    + """\
local out = {}
for i = 1, #KEYS do out[i] = view_version(redis.call('GET', KEYS[i])) or 0 end
return out
"""
)

LEASE_LUA = """#!lua
-- Take or renew a lease: KEYS[1] lease, ARGV[1] owner, ARGV[2] ms.  1 when held by owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""

RELEASE_LUA = """#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

FEED_LUA = """#!lua flags=no-writes
-- Up to ARGV[2] entries of one shard feed (KEYS[1]) after ARGV[1] ('' from the start), as one
-- string: lines '<id> <table> <first> <last>' (one reply to parse instead of ten per entry).
local start = '-'
if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
local e = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', ARGV[2])
local out = {}
for i = 1, #e do
  local f = e[i][2]
  local t, a, b = '', '', ''
  for j = 1, #f, 2 do
    local k, v = f[j], f[j + 1]
    if k == 't' then t = v elseif k == 'f' then a = v elseif k == 'l' then b = v end
  end
  out[i] = e[i][1] .. ' ' .. t .. ' ' .. a .. ' ' .. b
end
return table.concat(out, '\\n')
"""


def _read_many_lua(read_one: str) -> str:
    """Wrap the store's one-stream read script (``READ_LUA``) into one that reads several
    streams of a shard: KEYS the streams, ARGV three per key (start id, end id, COUNT), one
    reply string per key.  Built from the store's own text, so the framing always matches
    ``decode_packed``; the wrapped body sees its key and arguments as ``KEYS``/``ARGV``."""
    body = "\n".join(line for line in read_one.splitlines() if not line.startswith("#!"))
    return (
        "#!lua flags=no-writes\n"
        "local function read_one(KEYS, ARGV)\n"
        f"{body}\n"
        "end\n"
        "local out = {}\n"
        "for k = 1, #KEYS do\n"
        "  local a = (k - 1) * 3\n"
        "  out[k] = read_one({KEYS[k]}, {ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]})\n"
        "end\n"
        "return out\n"
    )


READ_MANY_LUA = _read_many_lua(READ_LUA)
"""Ranges of several table streams of one shard in one call (see :func:`_read_many_lua`)."""

SCRIPTS = {
    "write": WRITE_LUA,
    "lease": LEASE_LUA,
    "release": RELEASE_LUA,
    "feed": FEED_LUA,
    "read": READ_MANY_LUA,
    "versions": VERSIONS_LUA,
}
"""Every script by the name the projector calls it by."""
WRITTEN, LEASE_LOST, MOVED = 0, 1, 2
"""The write script's first reply: written, lease not ours, checkpoint moved."""

READ_ONLY = frozenset(name for name, source in SCRIPTS.items() if is_read_only(source))
"""The scripts that write nothing, run by ``EVALSHA_RO`` (``services.store.scripts``)."""
