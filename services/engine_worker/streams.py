"""The names the engine workers share with the rest of the system: their group, their channel."""

from __future__ import annotations

from services.settings import Settings

GROUP = "engine"
"""The consumer group of the engine workers on every command stream."""


def results_channel(settings: Settings) -> str:
    """The channel of result hints: ``<ns>:results``."""
    return f"{settings.namespace}:results"
