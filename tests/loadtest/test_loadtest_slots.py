"""``--via streams`` on a real Redis Cluster: every call on one hash slot, the run whole.

A private three-master cluster (``services.redis_server.cluster``); the engine worker and
projector run in this process (``tests.services.gateway_stack.Stack``) against it; the tool's run
goes in the same loop, with every call of its pipelines recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import PIPELINE_BLOCKED_COMMANDS
from redis.crc import key_slot

from services.loadtest.options import Options
from services.loadtest.runner import Run
from services.loadtest.streams import StreamsDriver
from services.redis_server.cluster import LocalCluster
from services.settings import load_settings
from tests.services.gateway_stack import Stack

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "cluster", masters=3) as running:
        yield running


def keys_of(call: tuple[Any, ...]) -> list[Any]:
    """The keys of a pipelined call: ``MGET``'s arguments, the others' first one."""
    return list(call[1:]) if call[0].upper() == "MGET" else [call[1]]


async def test_a_streams_run_on_a_cluster_finishes_with_every_call_on_one_slot(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_url, redis_ns = cluster.url, "lts"
    calls: list[tuple[str, list[Any]]] = []
    execute = StreamsDriver.execute

    async def recorded(self: StreamsDriver, pipelined: list[Any]) -> list[Any]:
        calls.extend((call[0].lower(), keys_of(call)) for call in pipelined)
        return await execute(self, pipelined)

    monkeypatch.setattr(StreamsDriver, "execute", recorded)
    settings = load_settings(
        redis_url=redis_url, namespace=redis_ns, shards=4, token_secret="s" * 32
    )
    options = Options(
        via="streams",
        redis_url=redis_url,
        namespace=redis_ns,
        shards=4,
        tables=3,
        bad_share=0.2,
        table_prefix="lt-slots",
        display="none",
        timeout=60,
    )
    async with Stack(settings):
        driver = StreamsDriver(options)
        reads: list[list[Any]] = []
        send = driver.client.execute_command

        async def recorded_xread(*args: Any, **kwargs: Any) -> Any:
            if args[0] == "XREAD":  # the feeds' blocking reads: the keys follow STREAMS
                after = list(args[args.index(b"STREAMS") + 1 :])
                reads.append(after[: len(after) // 2])
            return await send(*args, **kwargs)

        monkeypatch.setattr(driver.client, "execute_command", recorded_xread)
        outcome = await Run(options, driver, lambda row, stats: None).run()
    totals = outcome.stats.totals()
    assert totals["tables"]["finished"] == 3 and totals["errors"] == {}
    assert {name for name, _ in calls} == {"xadd", "hget", "mget"}
    # redis-py blocks pipeline methods whose keys may span slots (``pipe.mget``); a call of
    # them whose keys share one slot (checked below) goes through the pipeline as any other
    assert not {name.upper() for name, _ in calls} & set(PIPELINE_BLOCKED_COMMANDS) - {"MGET"}
    assert reads and all(len(keys) == 1 for keys in reads)  # one shard feed a blocking read
    for name, keys in calls:
        slots = {key_slot(key.encode() if isinstance(key, str) else key) for key in keys}
        assert len(slots) == 1, (name, keys)
