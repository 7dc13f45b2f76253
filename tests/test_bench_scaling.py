"""bench/scaling.py: the service's warnings of a run are counted by event (``lease lost``…)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.scaling import log_events


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
