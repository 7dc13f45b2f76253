"""The gateway's hub: one hint message carries a batch's hints, one a line, and each reaches its
waiters and watchers; a bad line is logged and skips only itself."""

from __future__ import annotations

import asyncio
import json

import redis.asyncio
import structlog
from test_engine_worker import eventually  # the test folder is on sys.path

from services.gateway.hub import Hub


async def test_every_line_of_a_hint_message_is_a_hint(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    hub = Hub(redis_client, redis_ns, structlog.get_logger("test"))
    await hub.start()
    seen: dict[str, list[int | None]] = {"t-a": [], "t-b": []}
    for table_id, got in seen.items():
        hub.watch(table_id, got.append)
    try:
        with (
            hub.result_waiter("t-a", "cmd-a-0001") as first,
            hub.result_waiter("t-b", "cmd-b-0001") as second,
        ):
            hints = [
                {"table_id": "t-a", "command_id": "cmd-a-0001", "result": {"ok": True}},
                {"table_id": "t-b", "command_id": "cmd-b-0001", "result": {"ok": False}},
            ]
            text = "\n".join(json.dumps(h) for h in hints)
            await redis_client.publish(f"{redis_ns}:results", text)
            await asyncio.wait_for(first.event.wait(), 5)
            await asyncio.wait_for(second.event.wait(), 5)
            assert (first.result, second.result) == ({"ok": True}, {"ok": False})

        await redis_client.publish(f"{redis_ns}:views", "t-a 7\nnot a hint\nt-b 9")
        await eventually(lambda: 7 in seen["t-a"] and 9 in seen["t-b"], 5)
        assert seen == {"t-a": [None, 7], "t-b": [None, 9]}  # a result hint, then the view's
    finally:
        await hub.stop()


async def test_a_result_hint_reaches_only_the_waiter_of_its_seat(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    """A command id is its seat's (issue 18 e): seat 1 waiting on an id seat 0 also sent must
    not take seat 0's result from the hint; a hint naming no seat (an older worker's, or an
    entry too broken to read its seat) still wakes every waiter of the id."""
    hub = Hub(redis_client, redis_ns, structlog.get_logger("test"))
    await hub.start()
    try:
        with (
            hub.result_waiter("t-a", "cmd-shared-1", 0) as zero,
            hub.result_waiter("t-a", "cmd-shared-1", 1) as one,
        ):
            refused = {"ok": False, "code": "move/not_your_turn"}
            hint = {"table_id": "t-a", "command_id": "cmd-shared-1", "seat": 0, "result": refused}
            await redis_client.publish(f"{redis_ns}:results", json.dumps(hint))
            await asyncio.wait_for(zero.event.wait(), 5)
            assert zero.result == refused
            assert not one.event.is_set() and one.result is None
            bare = {"table_id": "t-a", "command_id": "cmd-shared-1", "result": {"ok": False}}
            await redis_client.publish(f"{redis_ns}:results", json.dumps(bare))
            await asyncio.wait_for(one.event.wait(), 5)
            assert one.result == {"ok": False}
    finally:
        await hub.stop()
