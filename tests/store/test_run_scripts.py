"""``run_scripts``: calls of several scripts in one write, each script loaded where a server
lacks it (NOSCRIPT) and just its calls sent again; errors in their calls' places."""

from __future__ import annotations

import pytest
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from services.store.client import connect
from services.store.scripts import ReadOnlyScript, evalsha_many, run_scripts

pytestmark = pytest.mark.redis

SET_LUA = "return redis.call('SET', KEYS[1], ARGV[1])"
GET_LUA = "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])"


async def test_scripts_lost_by_the_server_are_loaded_and_their_calls_sent_again(
    private_redis: str,
) -> None:
    client = connect(private_redis)
    try:
        put, get = AsyncScript(client, SET_LUA), ReadOnlyScript(client, GET_LUA)
        calls = [(put, ["a"], ["1"]), (get, ["a"], []), (put, ["b"], ["2"]), (get, ["b"], [])]
        first = await run_scripts(client, calls)  # a new server holds no script yet
        assert first == [b"OK", b"1", b"OK", b"2"]
        await client.script_flush()  # as after a restart or a failover
        await client.set("c", "x")
        refused = (ReadOnlyScript(client, SET_LUA), ["c"], ["4"])  # a write by EVALSHA_RO
        again = await run_scripts(client, [*calls, (get, ["c"], []), refused])
        assert again[:5] == [b"OK", b"1", b"OK", b"2", b"x"]
        assert isinstance(again[5], ResponseError)  # in its place; the others answered
        with pytest.raises(ResponseError):
            await evalsha_many(refused[0], [(["d"], ["5"])])
    finally:
        await client.aclose()
