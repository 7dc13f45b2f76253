"""Schema versions on read: upcasters lift an old event dict to the version this code writes.

Stored events are never rewritten; ``docs/events.md`` has the history of every version.

>>> old = {"type": "stakes_settled", "v": 1, "winner": 0, "amount": 1,
...        "scores": {"0": 1, "1": 0}, "next_stake": 1}
>>> parse_event(old).scores
(1, 0)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from pydantic import ValidationError

from events.base import InvalidContent, MalformedJson, UnknownType, UnknownVersion, summarise
from events.domain import EVENT_TYPES, DomainEvent

__all__ = ["UPCASTERS", "Upcaster", "parse_event", "upcast", "upcaster"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""Every upcaster by the event type and the version it reads."""


def upcaster(kind: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register the decorated function as the upcaster of ``kind`` from ``from_version``.

    The function takes the old dict (``v`` already checked) and returns the new one; it need
    not set ``v``.  Raises ValueError when that step already has an upcaster.
    """

    def register(function: Upcaster) -> Upcaster:
        if (kind, from_version) in UPCASTERS:
            raise ValueError(f"{kind} v{from_version} already has an upcaster")
        UPCASTERS[(kind, from_version)] = function
        return function

    return register


def upcast(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return the event dict lifted to the current version of its type (a new dict).

    Raises UnknownType (``event/unknown_type``) for a missing or unknown ``type`` and
    UnknownVersion (``event/unknown_version``) for a ``v`` that is missing, newer than this
    code, or has no upcaster.
    """
    kind = raw.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UnknownType("event", f"unknown event type {kind!r}")
    version = raw.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UnknownVersion("event", f"{kind}: the schema version v must be an int >= 1")
    if version > cls.VERSION:
        raise UnknownVersion("event", f"{kind} v{version} is newer than this code (v{cls.VERSION})")
    event = dict(raw)
    while version < cls.VERSION:
        step = UPCASTERS.get((cls.TYPE, version))
        if step is None:
            raise UnknownVersion("event", f"no upcaster for {kind} v{version}")
        event = step(event)
        version += 1
        event["v"] = version
    return event


def parse_event(raw: Mapping[str, Any] | str | bytes) -> DomainEvent:
    """Return the domain event of a dict (or JSON text), upcast to the current version.

    Raises MalformedJson, UnknownType, UnknownVersion or InvalidContent (``event/invalid``).
    """
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise MalformedJson("event", f"an event must be JSON text: {exc}") from None
    if not isinstance(raw, Mapping):
        raise MalformedJson("event", f"an event must be a JSON object, not {type(raw).__name__}")
    event = upcast(raw)
    try:  # the class of its type directly: the union's tag look-up cost a fifth more
        return cast(DomainEvent, EVENT_TYPES[event["type"]].model_validate(event))
    except ValidationError as exc:
        text, details = summarise(exc)
        raise InvalidContent("event", f"invalid {event['type']} event: {text}", details) from None


# --- the upcasters -------------------------------------------------------------------------------


@upcaster("stakes_settled", 1)
def _stakes_settled_v1(event: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: ``scores`` was an object keyed by seat (``{"0": 3, "1": 1}``), now ``[3, 1]``.

    A seat missing from the object had scored nothing.
    """
    scores = event.get("scores")
    if isinstance(scores, Mapping):
        event["scores"] = [scores.get("0", 0), scores.get("1", 0)]
    return event


@upcaster("deal_revealed", 1)
def _deal_revealed_v1(event: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: the 40-card ``deck`` is dropped; the seed determines it (docs/fairness.md)."""
    event.pop("deck", None)
    return event
