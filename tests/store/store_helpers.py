"""Helpers shared by the event-store tests (imported as a top-level module by pytest)."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count()


def typical_body(i: int, command_id: str = "c" * 22) -> dict[str, Any]:
    """An event body like the engine's (without table_id and version)."""
    return {
        "type": "card_turned",
        "v": 1,
        "seat": i % 2,
        "card": "7H",
        "command_id": command_id,
        "causation": "k" * 22,
        "time": 1764480000000 + i,
    }


def new_command_id() -> str:
    return f"cmd-{next(_ids):018d}"
