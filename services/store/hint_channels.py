"""The pub/sub channels of hints: how the gateways learn, without polling, that a command was
answered or a view was written (docs/services.md; the AsyncAPI document names them too).

A hint is only a nudge: what it announces is already stored (the command's result under its
id, the view under its key), so a hint lost while a gateway reconnects costs a read, never an
answer.
"""

from __future__ import annotations

import random

__all__ = ["hint_dropped", "results_channel", "views_channel"]


def results_channel(namespace: str) -> str:
    """Return the channel of result hints, a JSON object ``{"table_id", "command_id",
    "result"}`` a line: ``<ns>:results`` (the engine workers publish, the gateways listen)."""
    return f"{namespace}:results"


def views_channel(namespace: str) -> str:
    """Return the channel of view hints, ``<table_id> <version>`` a line: ``<ns>:views`` (the
    engine workers publish the views their appends stored, the projectors the views they
    write, and the gateways listen)."""
    return f"{namespace}:views"


def hint_dropped(fraction: float) -> bool:
    """Say whether a publisher drops this hint message: true for about ``fraction`` of them
    (``Settings.drop_hints``, a fault for tests: every waiter must finish without hints)."""
    return fraction > 0 and random.random() < fraction
