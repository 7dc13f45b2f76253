"""Step 2 of the audit: a stored body decoded into a ``_Decoded``, by the plain checks where
they are enough, else by ``events.upcast.parse_event``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from events.base import ContractError
from events.domain import CommandRejected, TableCreated
from events.envelope import BODY_KEYS
from events.mapping import rules_from_wire
from events.upcast import parse_event
from services.audit.plain_checks import _CAUSATION, _ID, _MAX_TIME, _SHAPES
from services.audit.results import UNDECODABLE, Failure, StoredLike, _Failed


@dataclass(slots=True)
class _Decoded:
    """A decoded event: version, hash, type, its payload fields, how many, and command id.

    ``payload`` is the stored body itself when it passed the plain checks (``canonical``: its
    envelope keys then come along, ``size`` counts only the payload's own keys), else the dump
    of the parsed and upcast model.  ``model`` is kept for ``table_created``.
    """

    version: int
    hash: str
    type: str
    payload: Mapping[str, Any]
    size: int
    command_id: str
    canonical: bool
    model: TableCreated | None = None

    def same(self, want: Mapping[str, Any]) -> bool:
        """Say whether the payload is exactly ``want`` (a wire dict without envelope keys)."""
        if len(want) != self.size:
            return False
        payload = self.payload
        for key, value in want.items():  # noqa: SIM110 - a loop beats all() on small dicts
            if payload.get(key, _MISSING) != value:
                return False
        return True


_MISSING = object()


def _payload(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in BODY_KEYS}


def _decode(table_id: str, stored: StoredLike, checked_id: str = "") -> _Decoded:
    """Step 2 for one event: check the envelope fields and the payload (``checked_id`` is a
    command id already found valid: events of one command come one after the other)."""
    body = stored.body
    version = stored.version
    kind = body.get("type")
    command_id = body.get("command_id")
    moment = body.get("time")
    causation = body.get("causation")
    if command_id != checked_id and (type(command_id) is not str or not _ID.fullmatch(command_id)):
        raise _undecodable(table_id, version, kind, f"command_id {command_id!r} is not valid")
    if type(moment) is not int or not 0 <= moment <= _MAX_TIME:
        raise _undecodable(table_id, version, kind, f"time {moment!r} is not valid")
    if causation is not None and (
        type(causation) is not str or not _CAUSATION.fullmatch(causation)
    ):
        raise _undecodable(table_id, version, kind, f"causation {causation!r} is not valid")
    shape = _SHAPES.get(kind) if type(kind) is str else None
    if shape is not None:
        keys = body.keys()
        v = body.get("v")
        if (
            (keys == shape.bare or keys == shape.caused)
            and type(v) is int
            and v == shape.version
            and shape.check(body)
        ):
            return _Decoded(
                version, stored.hash, str(kind), body, len(shape.keys), command_id, True
            )
    try:
        model = parse_event(_payload(body))
    except ContractError as error:
        raise _undecodable(table_id, version, kind, f"{error.code}: {error}") from None
    if isinstance(model, CommandRejected):
        raise _undecodable(table_id, version, kind, "a command_rejected is never stored")
    if isinstance(model, TableCreated):
        try:
            rules_from_wire(model.rules)
        except ValueError as error:
            reason = f"the engine refuses the rules: {error}"
            raise _undecodable(table_id, version, kind, reason) from None
    payload = model.model_dump(mode="json")
    kept = model if isinstance(model, TableCreated) else None
    return _Decoded(
        version, stored.hash, model.type, payload, len(payload), command_id, False, kept
    )


def _undecodable(table_id: str, version: int, kind: object, reason: str) -> _Failed:
    text = kind if type(kind) is str else None
    return _Failed(Failure(table_id, version, text, UNDECODABLE, reason))
