"""The name the engine workers share with the rest of the system: their consumer group (their
hint channels are ``services.hint_channels``)."""

from __future__ import annotations

GROUP = "engine"
"""The consumer group of the engine workers on every command stream."""
