"""Prometheus metrics of the gateway, in the process's default registry.

The default registry is what ``GET /metrics`` exposes, so an engine worker or projector running
in the same process (tests, a single-process deployment) shows its metrics there too.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

COMMANDS = Counter(
    "conquian_gateway_commands_total",
    "Commands through the gateway by type and outcome (ok, rejected, refused, pending)",
    ["type", "outcome"],
)
COMMAND_SECONDS = Histogram(
    "conquian_gateway_command_seconds",
    "Time from receiving a command to answering it with its result",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
REQUESTS = Counter(
    "conquian_gateway_requests_total",
    "HTTP requests by route and status",
    ["route", "status"],
)
WS_CONNECTIONS = Gauge("conquian_gateway_ws_connections", "Open WebSocket connections")
WS_MESSAGES = Counter(
    "conquian_gateway_ws_messages_total", "WebSocket messages sent by kind", ["kind"]
)
RATE_LIMITED = Counter(
    "conquian_gateway_rate_limited_total",
    "Requests and WebSocket commands refused with rate/limited, by the limit they met "
    "(seat, address, create)",
    ["limit"],
)
HINTS = Counter("conquian_gateway_hints_total", "Pub/sub hints received by channel", ["channel"])
RECHECKED = Counter(
    "conquian_gateway_rechecked_total",
    "What a re-read of the store found before any hint said so (a hint lost or late), by "
    "waiter: result (a command's answer), view (a min_version wait), room (a live table)",
    ["waiter"],
)
