"""Trimming a command stream of what has been consumed: the stream is an intake, not a log.

At each sweep the shard's owner deletes what every group acknowledged longer than
``command_retention_ms`` ago (:data:`TRIM_CONSUMED_LUA`) and reads the backlog gauge;
``docs/services.md`` ("Module notes") has the bound it trims to.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

__all__ = ["TRIM_CONSUMED_LUA", "ConsumedTrim", "Trimmed"]

TRIM_CONSUMED_LUA = """
-- KEYS[1] a command stream   ARGV[1] retention (ms)   ARGV[2] '~' (whole nodes) or '='
-- ARGV[3] the group whose backlog to report
-- Returns {entries deleted, the group's pending + lag (-1: no such group, or no lag known)}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, -1} end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return {0, -1} end
local now = redis.call('TIME')
local bound_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  - tonumber(ARGV[1])
local bound_seq = 0
local function lower(id)
  local dash = string.find(id, '-', 1, true)
  local ms = tonumber(string.sub(id, 1, dash - 1))
  local seq = tonumber(string.sub(id, dash + 1))
  if ms < bound_ms or (ms == bound_ms and seq < bound_seq) then
    bound_ms, bound_seq = ms, seq
  end
end
local backlog = -1
for _, group in ipairs(groups) do
  local name, last, lag
  for i = 1, #group, 2 do
    if group[i] == 'name' then name = group[i + 1] end
    if group[i] == 'last-delivered-id' then last = group[i + 1] end
    if group[i] == 'lag' then lag = group[i + 1] end
  end
  local pending = redis.call('XPENDING', KEYS[1], name)
  if pending[1] > 0 then lower(pending[2]) else lower(last) end
  if name == ARGV[3] and type(lag) == 'number' then backlog = pending[1] + lag end
end
local deleted = 0
if bound_ms > 0 then
  deleted = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2],
    string.format('%d-%d', bound_ms, bound_seq))
end
return {deleted, backlog}
"""


@dataclass(frozen=True)
class Trimmed:
    """What a trim did: the entries it deleted, and the reported group's backlog (pending and
    not yet delivered entries; None when the group does not exist or Redis knows no lag)."""

    deleted: int
    backlog: int | None


class ConsumedTrim:
    """Deletes the consumed entries of a command stream (``docs/services.md``)."""

    def __init__(self, client: Redis, group: str) -> None:
        self._script = client.register_script(TRIM_CONSUMED_LUA)
        self.group = group

    async def __call__(self, stream: str, retention_ms: int, *, exact: bool = False) -> Trimmed:
        """Trim ``stream`` of the entries every group acknowledged more than ``retention_ms``
        ago, and read :attr:`group`'s backlog.  ``exact`` trims entry by entry instead of whole
        nodes (tests: the node size is a server setting)."""
        reply = await self._script(
            keys=[stream], args=[retention_ms, "=" if exact else "~", self.group]
        )
        deleted, backlog = (int(x) for x in reply)
        return Trimmed(deleted, None if backlog < 0 else backlog)
