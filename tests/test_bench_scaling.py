"""bench/scaling.py: the service's warnings of a run are counted by event (``lease lost``…);
Redis's command statistics of a run are read from real servers and divided by the commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from bench.scaling import command_stats, command_stats_per_command, log_events


def test_log_events_counts_each_event_and_skips_what_is_not_a_record(tmp_path: Path) -> None:
    log = tmp_path / "serve-single.log"
    lines = [
        json.dumps({"event": "lease lost", "shard": 3, "level": "warning"}),
        "Traceback (most recent call last):",
        json.dumps({"event": "lease lost", "shard": 5, "level": "warning"}),
        json.dumps([1, 2]),
        json.dumps({"event": "batch failed", "level": "error"}),
        json.dumps({"level": "warning"}),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert log_events(log) == {"lease lost": 2, "batch failed": 1}
    assert list(log_events(log)) == ["lease lost", "batch failed"]  # most frequent first
    assert log_events(tmp_path / "absent.log") == {}


@pytest.mark.redis
def test_command_stats_of_a_run_are_per_command_and_largest_first(redis_url: str) -> None:
    before = command_stats([redis_url])
    with redis.Redis.from_url(redis_url) as server:
        for _ in range(40):
            server.ping()
        server.echo("x")
    after = command_stats([redis_url, redis_url])  # two servers: their counts add up
    rows = command_stats_per_command({k: (2 * c, 2 * u) for k, (c, u) in before.items()}, after, 4)
    assert rows["ping"]["calls"] >= 20  # 2 × 40 pings (and those of other tests) over 4
    assert rows["echo"]["calls"] >= 0.5
    assert list(rows) == sorted(rows, key=lambda name: -rows[name]["usec"])
