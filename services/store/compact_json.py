"""Compact JSON text of small service values (command results, result hints), by orjson.

The text is what ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` writes for
the values the services send (dicts, strings, ints, booleans, None, lists; int keys written as
strings, as ``json`` does), without the encoder the standard library builds anew for every
call with ``separators`` (its cost: ``docs/performance.md``, "Module notes").
"""

from __future__ import annotations

import orjson

__all__ = ["dumps"]


def dumps(value: object) -> str:
    """Return the compact JSON text of ``value`` (non-ASCII characters written as themselves)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
