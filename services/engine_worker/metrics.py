"""The engine workers' Prometheus metrics (default registry), created once at import."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

COMMANDS = Counter(
    "conquian_commands", "Commands decided by the engine workers, by result.", ["result"]
)
APPEND_SECONDS = Histogram(
    "conquian_append_seconds",
    "One pipelined append round trip of an engine worker (all tables of one round).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
COMMAND_BACKLOG = Gauge(
    "conquian_command_backlog",
    "Commands of a shard's stream the engine group has not acknowledged (pending, or not "
    "delivered yet), as of the last sweep of the worker that owns the shard.",
    ["shard"],
)
ACCEPTED = COMMANDS.labels(result="accepted")
REJECTED = COMMANDS.labels(result="rejected")
DUPLICATE = COMMANDS.labels(result="duplicate")
