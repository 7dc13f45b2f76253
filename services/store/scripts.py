"""The store's Lua scripts: append (from ``append.lua``), read and seal;
:class:`ReadOnlyScript`, how a script that writes nothing is run (by ``EVALSHA_RO``); and
:func:`run_scripts`, many script calls in one write that survives NOSCRIPT."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from services.store.packed import send_packed

__all__ = [
    "APPEND_LUA",
    "PACK_ENTRIES_LUA",
    "READ_LUA",
    "SEAL_LUA",
    "ReadOnlyScript",
    "ScriptCall",
    "evalsha_many",
    "is_read_only",
    "run_scripts",
]


def is_read_only(source: str) -> bool:
    """Whether a script declares that it writes nothing (``#!lua flags=no-writes``)."""
    first = source.split("\n", 1)[0]
    return first.startswith("#!lua") and "no-writes" in first


class ReadOnlyScript(AsyncScript):
    """A script that writes nothing, run by ``EVALSHA_RO`` instead of ``EVALSHA``.

    Redis's ACL asks read *and* write permission on every key an ``EVALSHA`` names, and only
    read permission for ``EVALSHA_RO``: so a user that may only read a table's events (the
    gateway's, ``deploy/redis/users.acl``) can still run the read scripts, and no write script
    at all (``docs/deploy.md``, "Redis users").  Loaded on NOSCRIPT, as redis-py's scripts are,
    except when queued in a cluster pipeline, which leaves NOSCRIPT to its caller: many calls
    in one pipeline go through :func:`run_scripts`, which loads it on both.
    """

    async def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        from redis.asyncio.client import Pipeline
        from redis.asyncio.cluster import ClusterPipeline

        keys = list(keys or [])
        argv = (*keys, *(args or []))
        client = self.registered_client if client is None else client
        if isinstance(client, Pipeline):
            client.scripts.add(self)  # type: ignore[arg-type]  # loads what the server lacks
        if isinstance(client, ClusterPipeline):
            return client.evalsha_ro(self.sha, len(keys), *argv)
        try:
            return await client.evalsha_ro(self.sha, len(keys), *argv)
        except NoScriptError:
            self.sha = await client.script_load(self.script)
            return await client.evalsha_ro(self.sha, len(keys), *argv)


ScriptCall = tuple[AsyncScript, Sequence[Any], Sequence[Any]]
"""A script to run, with its keys and its arguments."""


async def run_scripts(client: Any, calls: Sequence[ScriptCall]) -> list[Any]:
    """Return the reply of each call (script, keys, args), or its error in its place, all sent
    packed in one write (a write a master on a cluster: :func:`~services.store.packed.send_packed`)
    by ``EVALSHA`` (``EVALSHA_RO`` for a :class:`ReadOnlyScript`).

    No ``SCRIPT EXISTS`` goes first (redis-py's plain pipeline sends one before every pipeline
    that holds a registered script, a second round trip each time; its cluster pipeline sends
    none and raises NOSCRIPT): a script is loaded only when a call of it meets NOSCRIPT (a
    restart, a flush, a failover), and just those calls are sent again (NOSCRIPT means the
    script did not run).  On a cluster ``SCRIPT LOAD`` goes to every primary, so it reaches the
    one that lacked the script.  NOSCRIPT a second time stays in its call's place.
    """
    replies: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for attempt in range(2):
        if not todo:
            break
        got = await send_packed(client, [_evalsha(*calls[i]) for i in todo])
        missing: dict[str, list[int]] = {}
        for i, reply in zip(todo, got, strict=True):
            replies[i] = reply
            if isinstance(reply, NoScriptError) and not attempt:
                missing.setdefault(calls[i][0].sha, []).append(i)
        for waiting in missing.values():
            await client.script_load(calls[waiting[0]][0].script)
        todo = [i for waiting in missing.values() for i in waiting]
    return replies


def _evalsha(script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
    name = "EVALSHA_RO" if isinstance(script, ReadOnlyScript) else "EVALSHA"
    return (name, script.sha, len(keys), *keys, *args)


async def evalsha_many(
    script: AsyncScript, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]
) -> list[Any]:
    """Return the replies of ``script`` to ``calls`` (keys, args), by :func:`run_scripts` on
    the script's client; the first error, NOSCRIPT again included, is raised."""
    replies = await run_scripts(script.registered_client, [(script, k, a) for k, a in calls])
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


APPEND_LUA: str = resources.files(__package__).joinpath("append.lua").read_text("utf-8")
"""The append script (loaded once with SCRIPT LOAD, run with EVALSHA)."""

SEAL_LUA = """#!lua
local d = redis.call('DUMP', KEYS[1])
if not d then return 0 end
redis.call('RESTORE', KEYS[1], 0, d, 'REPLACE')
return 1
"""
"""Rewrites a stream with exact-size nodes (what :meth:`RedisEventStore.seal` runs)."""

PACK_ENTRIES_LUA = """
local function pack_entries(e)
  local out, n, pack = {}, 0, struct.pack
  for i = 1, #e do
    local id, f = e[i][1], e[i][2]
    local b, h
    if f[1] == 'b' and f[3] == 'h' then
      b, h = f[2], f[4]
    else
      b, h = '', ''
      for j = 1, #f, 2 do
        if f[j] == 'b' then b = f[j + 1] elseif f[j] == 'h' then h = f[j + 1] end
      end
    end
    out[n + 1] = pack('>BBI', #id, #h, #b)
    out[n + 2] = id
    out[n + 3] = h
    out[n + 4] = b
    n = n + 4
  end
  return table.concat(out)
end
"""
"""A Lua function ``pack_entries(entries)`` for scripts: XRANGE entries of a table stream as
one string, framed as :data:`READ_LUA` describes (``services.store.codec.decode_packed``)."""

READ_LUA = (
    "#!lua flags=no-writes\n"
    + PACK_ENTRIES_LUA
    + "return pack_entries(redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3]))\n"
)
"""Reads a range of a table stream as one string (so the client parses one reply, not five per
event): per entry ``>BBI`` (lengths of the stream id, the hash and the stored body), then the id,
the raw hash and the stored body.  KEYS[1] the stream; ARGV start id, end id, COUNT."""
