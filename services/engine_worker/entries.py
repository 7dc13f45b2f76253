"""Command-stream entries: a command and its seat, or why an entry is not one.

The engine workers read every shard's stream ``<ns>:{sNN}:cmd`` in the consumer group
:data:`GROUP`; an entry's fields are ``c`` (the command's JSON), ``s`` (the seat) and ``r``
(received, ms): ``docs/services.md`` ("Command intake").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from engine.codes import Code
from events.commands import Command, parse_command
from services.store.keys import KeySpace

GROUP = "engine"
"""The consumer group of the engine workers on every command stream."""

ID_PEEK_BYTES = 64 * 1024
"""A malformed command up to this size is searched for a command id to publish its rejection."""

RawEntry = tuple[bytes, Mapping[bytes, bytes]]
"""A stream entry as read: its id and its fields."""


@dataclass
class Entry:
    """A command read from the stream, with the deliveries it had before this one."""

    entry_id: bytes
    command: Command
    seat: int | None
    tries: int = 0
    error: str = ""


@dataclass(frozen=True)
class Malformed:
    """An entry that is not a command: its rejection, and the ids read from it if any."""

    entry_id: bytes
    code: str
    message: str
    table_id: str | None
    command_id: str | None


_no: tuple[None, None] = (None, None)


def _peek_ids(raw: bytes | None) -> tuple[str | None, str | None]:
    """The ``table_id`` and ``command_id`` of raw JSON that failed to parse, when readable."""
    if raw is None or len(raw) > ID_PEEK_BYTES:
        return None, None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and 0 < len(value) <= 128 else None

    return text("table_id"), text("command_id")


def parse_entry(
    entry_id: bytes, fields: Mapping[bytes, bytes], shard: int, keys: KeySpace
) -> Entry | Malformed:
    """Turn an entry of ``shard``'s stream into a command and its seat, or say why it is not
    one (not JSON, not a command, a bad seat field, a table of another shard)."""
    raw = fields.get(b"c")
    if raw is None:
        message = "the entry has no command (field c)"
        return Malformed(entry_id, Code.COMMAND_INVALID, message, *_no)
    try:
        command = parse_command(raw)
    except Exception as error:  # ContractError, and anything else the input can provoke
        code = getattr(error, "code", None)
        if not isinstance(code, str):
            code = Code.COMMAND_MALFORMED_JSON.value
        return Malformed(entry_id, code, str(error)[:500], *_peek_ids(raw))
    ids = (command.table_id, command.command_id)
    seat_text = fields.get(b"s", b"")
    if seat_text == b"":
        seat = None
    elif seat_text in (b"0", b"1"):
        seat = int(seat_text)
    else:
        message = f"bad seat field {seat_text[:20]!r}"
        return Malformed(entry_id, Code.COMMAND_INVALID, message, *ids)
    if keys.shard_of(command.table_id) != shard:
        message = f"table {command.table_id} is not on shard {shard}"
        return Malformed(entry_id, Code.COMMAND_WRONG_SHARD, message, *ids)
    return Entry(entry_id, command, seat)
