"""What the gateway checks before a command goes to the engine worker, for HTTP and WebSocket.

Order: size (before parsing), JSON, type, fields (``events.parse_command``), then that the
command is for the table of the URL and is one a seat may send.  Create and join have their
own routes: they are table-level (no seat) and the join's command id is derived
(``services.gateway.auth``), so neither is accepted from a seat; nor is ``rematch``, whose
route derives the next table's id.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from typing import Any

from events import commands as wc
from events.base import COMMAND_ID_PATTERN, TABLE_ID_PATTERN, ContractError
from services.gateway.errors import ApiError, from_contract

TABLE_LEVEL = frozenset({"create_table", "join", "rematch"})
"""Commands with routes of their own, never sent as a seat's command (the rematch's route
derives its next table's id)."""
_ROUTES = {
    "create_table": "POST /tables",
    "join": "POST /tables/{table_id}/join",
    "rematch": "POST /tables/{table_id}/rematch",
}
SERVICE_ONLY = frozenset({"report_bot_failure"})
"""Commands only the services send (the bots runner, as a bot's seat): refused from clients."""
_TABLE_ID = re.compile(TABLE_ID_PATTERN)
_COMMAND_ID = re.compile(COMMAND_ID_PATTERN)
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_table_id() -> str:
    """Return a fresh table id: ``t-`` and 12 random base32 characters (60 bits)."""
    return "t-" + "".join(secrets.choice(_BASE32) for _ in range(12))


def new_command_id() -> str:
    """Return a fresh command id: ``c-`` and 22 random URL-safe characters."""
    return "c-" + secrets.token_urlsafe(16)


def check_table_id(table_id: str) -> str:
    """Return ``table_id`` if it is a valid table id, else raise ``table/invalid_id``."""
    if not _TABLE_ID.fullmatch(table_id):
        raise ApiError(
            "table/invalid_id", f"invalid table id {table_id!r}: 1-64 of A-Z a-z 0-9 _ -"
        )
    return table_id


MAX_VERSION = 2**53 - 1
"""The largest version a query may name (JSON numbers are exact up to it); no table gets near."""


def version_param(name: str, raw: str | None) -> int | None:
    """Return the version a query parameter names (None when absent), or raise
    ``query/invalid``: the rule of ``after`` and ``min_version`` on HTTP and WebSocket alike."""
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_VERSION:
        raise ApiError(
            "query/invalid", f"{name} must be a whole number from 0 to {MAX_VERSION}, not {raw!r}"
        )
    return int(raw)


def check_command_id(command_id: object) -> str:
    """Return a client's command id (idempotency key) if valid, else raise ``command/invalid``."""
    if not isinstance(command_id, str) or not _COMMAND_ID.fullmatch(command_id):
        raise ApiError(
            "command/invalid",
            f"invalid command_id {command_id!r}: 8-64 of A-Z a-z 0-9 _ -",
            details=[{"loc": "command_id", "msg": "8-64 of A-Z a-z 0-9 _ -"}],
        )
    return command_id


def parse(raw: bytes | str | Mapping[str, Any]) -> wc.Command:
    """Return the command of raw input, or raise the ApiError of its contract code."""
    try:
        return wc.parse_command(raw)
    except ContractError as exc:
        raise from_contract(exc) from None


def seat_command(raw: bytes | str | Mapping[str, Any], table_id: str) -> wc.Command:
    """Return the command a seat sent to ``table_id``, or raise the ApiError of its code."""
    command = parse(raw)
    if command.table_id != table_id:
        raise ApiError(
            "command/wrong_table",
            f"the command is for table {command.table_id!r}, sent to table {table_id!r}",
        )
    if command.type in TABLE_LEVEL:
        route = _ROUTES[command.type].format(table_id=table_id)
        raise ApiError(
            "command/unsupported", f"{command.type} is not sent as a command: use {route}"
        )
    if command.type in SERVICE_ONLY:
        raise ApiError("command/unsupported", f"{command.type} is sent by the bots runner only")
    return command


def json_object(raw: bytes) -> dict[str, Any]:
    """Return the JSON object of a request body, or raise ``command/malformed_json``."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("command/malformed_json", f"the body must be JSON text: {exc}") from None
    except RecursionError:  # thousands of nested arrays in a few KiB: refused, never a 500
        raise ApiError(
            "command/malformed_json", "the body must be JSON text: nested too deeply"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            "command/malformed_json", f"the body must be a JSON object, not {type(data).__name__}"
        )
    return data
