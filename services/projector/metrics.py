"""The projector's Prometheus metrics (default registry), created once at import."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

LAG = Gauge(
    "conquian_projector_lag_seconds",
    "Now minus the time of the newest event the projector applied (0 when caught up).",
)
APPLIED = Counter(
    "conquian_projector_events_applied", "Table events the projector folded into views."
)
