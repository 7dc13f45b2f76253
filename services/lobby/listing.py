"""The lobby: an index of the tables waiting for a player and of those a spectator may watch.

Its keys and scripts are in ``docs/services.md`` ("The lobby", "Module notes"), the route in
``docs/api.md`` ("Lobby").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from services.store.client import as_text
from services.store.keys import KeySpace
from services.store.scripts import ReadOnlyScript
from services.tables.table import Table

Status = Literal["waiting", "running"]
MAX_LIMIT = 100

_MEMBER = re.compile(r"\d{13}:[A-Za-z0-9_.:\-]{1,128}")

WRITE_LUA = """#!lua
-- KEYS[1] waiting, KEYS[2] running, KEYS[3] rows.  Five ARGV per table: id, version, status
-- ('waiting', 'running' or '' for neither), row JSON, creation time (ms).  A row older than
-- (or as old as) the stored one is skipped; a table keeps the creation time first stored.
for i = 1, #ARGV, 5 do
  local id, version, status, row = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local created = ARGV[i + 4]
  local old = redis.call('HGET', KEYS[3], id)
  local fresh = true
  if old then
    local v, c = string.match(old, '^(%d+) (%d+)')
    if tonumber(v) >= tonumber(version) then fresh = false end
    created = c
  end
  if fresh then
    local member = string.rep('0', 13 - #created) .. created .. ':' .. id
    redis.call('ZREM', KEYS[1], member)
    redis.call('ZREM', KEYS[2], member)
    if status == 'waiting' then redis.call('ZADD', KEYS[1], 0, member) end
    if status == 'running' then redis.call('ZADD', KEYS[2], 0, member) end
    if status == '' then row = '' end
    redis.call('HSET', KEYS[3], id, version .. ' ' .. created .. ' ' .. row)
  end
end
return 0
"""

FORGET_LUA = """#!lua
-- KEYS[1] waiting, KEYS[2] running, KEYS[3] rows; ARGV the table ids to forget.
for i = 1, #ARGV do
  local old = redis.call('HGET', KEYS[3], ARGV[i])
  if old then
    local c = string.match(old, '^%d+ (%d+)')
    local member = string.rep('0', 13 - #c) .. c .. ':' .. ARGV[i]
    redis.call('ZREM', KEYS[1], member)
    redis.call('ZREM', KEYS[2], member)
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
return 0
"""

PAGE_LUA = """#!lua flags=no-writes
-- KEYS[1] the list, KEYS[2] rows; ARGV[1] the cursor member ('' from the newest), ARGV[2]
-- how many.  Returns member, stored row, member, stored row, ... newest first.
local top = '+'
if ARGV[1] ~= '' then top = '(' .. ARGV[1] end
local members = redis.call('ZRANGE', KEYS[1], top, '-', 'BYLEX', 'REV', 'LIMIT', 0, ARGV[2])
local out = {}
for i = 1, #members do
  local id = string.match(members[i], '^%d+:(.*)$')
  out[#out + 1] = members[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
end
return out
"""


class BadCursor(ValueError):
    """A cursor that no page of the lobby handed out."""


@dataclass(frozen=True)
class LobbyRow:
    """A table as the lobby lists it: its list (None: neither) and its row."""

    table_id: str
    version: int
    status: Status | None
    row: dict[str, Any]
    created: int | None = None
    """When the table was created (ms), if known; else the time of the first write."""


def lobby_row(table: Table) -> LobbyRow:
    """Return the lobby row of a table: ``waiting`` with a free seat before the first deal,
    ``running`` with both seats taken until the match ends, else in neither list."""
    match = table.match
    status: Status | None = None
    if match is not None and not match.over:
        if None not in table.seats:
            status = "running"
        elif table.deal_number == 0:
            status = "waiting"
    row: dict[str, Any] = {}
    if match is not None and status is not None:
        row = {
            "table_id": table.table_id,
            "status": status,
            "seats": [
                {
                    "seat": s,
                    "name": None if h is None else h.name,
                    "bot": None if h is None else h.bot,
                    "taken": h is not None,
                }
                for s, h in enumerate(table.seats)
            ],
            "rules": match.rules.name,
            "deals": match.deals,
            "target_score": match.target_score,
            "turn_seconds": table.turn_seconds,
            "version": table.version,
        }
    return LobbyRow(table.table_id, table.version, status, row)


def _keys(keys: KeySpace) -> list[str]:
    return [keys.lobby("waiting"), keys.lobby("running"), keys.lobby("rows")]


async def write_rows(
    redis: Redis | RedisCluster, keys: KeySpace, rows: Iterable[LobbyRow], now: int
) -> None:
    """Store the rows (one script call; a row older than the stored one changes nothing); a
    table first stored is listed as created at ``row.created``, else ``now`` (ms)."""
    args: list[str | int] = []
    for r in rows:
        text = json.dumps(r.row, separators=(",", ":"), ensure_ascii=False) if r.row else ""
        args += [r.table_id, r.version, r.status or "", text, r.created or now]
    if args:
        await redis.register_script(WRITE_LUA)(_keys(keys), args)


async def forget(redis: Redis | RedisCluster, keys: KeySpace, table_ids: Sequence[str]) -> None:
    """Take tables out of the lobby and drop their rows (the archiver moved them out)."""
    if table_ids:
        await redis.register_script(FORGET_LUA)(_keys(keys), list(table_ids))


def encode_cursor(member: str) -> str:
    """Return the opaque cursor of a list member."""
    return base64.urlsafe_b64encode(member.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """Return the member of a cursor; raise :class:`BadCursor` for one no page handed out."""
    try:
        member = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor(f"cursor {cursor[:40]!r} is not one a page handed out") from None
    if not _MEMBER.fullmatch(member):
        raise BadCursor(f"cursor {cursor[:40]!r} is not one a page handed out")
    return member


async def page(
    redis: Redis | RedisCluster, keys: KeySpace, status: Status, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Return ``{"tables": [...], "next_cursor": ...}``: up to ``limit`` rows of a list,
    newest first, after ``cursor``; raise :class:`BadCursor` for a cursor no page gave."""
    after = "" if cursor is None else decode_cursor(cursor)
    page_script = ReadOnlyScript(redis, PAGE_LUA)  # EVALSHA_RO: the gateway only reads
    reply = await page_script([keys.lobby(status), keys.lobby("rows")], [after, limit + 1])
    pairs = [(as_text(reply[i]), as_text(reply[i + 1])) for i in range(0, len(reply), 2)]
    more = len(pairs) > limit
    pairs = pairs[:limit]
    tables = []
    for _, stored in pairs:
        parts = stored.split(" ", 2)
        if len(parts) == 3 and parts[2]:
            tables.append(json.loads(parts[2]))
    next_cursor = encode_cursor(pairs[-1][0]) if more and pairs else None
    return {"tables": tables, "next_cursor": next_cursor}
