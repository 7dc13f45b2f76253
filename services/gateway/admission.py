"""The admission of a command: what the gateway checks before a command is queued.

Every route and the WebSocket admit a command here: the client address's and the seat's rate
limits, the seat of the presented token, the body (JSON, type, fields:
``events.parse_command``), that it is for the table of the URL and one its sender may send, and
that the table is not archived; a refusal raises ``ApiError`` and is counted.  The order of the
checks is each route's; why tokens and join ids look as they do: ``docs/api.md``, "Module notes".
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from redis.asyncio import Redis
from starlette.requests import HTTPConnection, Request

from engine.codes import Code
from events.base import COMMAND_ID_PATTERN, TABLE_ID_PATTERN, ContractError
from events.commands import MAX_COMMAND_BYTES, Command, parse_command
from services.archive.reads import ArchiveReader
from services.gateway import metrics
from services.gateway.errors import ApiError, from_contract
from services.gateway.rate_limit import RateLimits
from services.lru import Lru
from services.store.client import as_text
from services.store.keys import KeySpace
from services.tables.table import TOKEN_KEY
from services.tables.tokens import SeatTokens, hash_token, token_matches

SEATS = (0, 1)
TABLE_LEVEL = frozenset({"create_table", "join", "rematch"})
"""Commands with routes of their own, never sent as a seat's command (create and join are
table-level, the join's id is derived; the rematch's route derives its next table's id)."""
_ROUTES = {
    "create_table": "POST /tables",
    "join": "POST /tables/{table_id}/join",
    "rematch": "POST /tables/{table_id}/rematch",
}
SERVICE_ONLY = frozenset({"report_bot_failure"})
"""Commands only the services send (the bots runner, as a bot's seat): refused from clients."""
MAX_MESSAGE_BYTES = MAX_COMMAND_BYTES + 1024
"""A WebSocket message holds one command and a little framing."""
MAX_VERSION = 2**53 - 1
"""The largest version a query may name (JSON numbers are exact up to it); no table gets near."""
_TABLE_ID = re.compile(TABLE_ID_PATTERN)
_COMMAND_ID = re.compile(COMMAND_ID_PATTERN)
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
_DEALT = frozenset({"playing", "over"})
"""Head statuses of a table that has dealt: its seats' tokens no longer change."""


class Admission:
    """Admits commands: finds the seat of a token, counts rate limits, parses and checks."""

    def __init__(
        self,
        redis: Redis,
        keys: KeySpace,
        tokens: SeatTokens,
        *,
        limits: RateLimits | None = None,
        archived: ArchiveReader | None = None,
        cache_size: int = 50_000,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.tokens = tokens
        self.limits = limits
        """How fast a seat or an address may send (``services.gateway.rate_limit``)."""
        self.archived = archived
        """The archive of finished tables (``CONQUIAN_ARCHIVE_DIR``), None without one."""
        self._seats: Lru[tuple[str, str], int] = Lru(cache_size)

    # --- the commands of each route ------------------------------------------------------------

    async def create(self, request: Request) -> Command:
        """Admit ``POST /tables``: a ``create_table``, its table and command ids generated when
        left out."""
        with _refusing("create_table"):
            self.count(client_address(request), creates=True)
            data = json_object(await request.body())
            data["type"] = "create_table"
            if data.get("table_id") is None:
                data["table_id"] = new_table_id()
            if data.get("command_id") is None:
                data["command_id"] = new_command_id()
            command = parse(data)
            self.refuse_if_archived(command.table_id, Code.TABLE_EXISTS)
        return command

    async def join(self, request: Request, table_id: str) -> tuple[Command, str]:
        """Admit ``POST /tables/{id}/join``; return the ``join`` and the client's key, from which
        its wire command id is derived."""
        with _refusing("join"):
            self.count(client_address(request))
            check_table_id(table_id)
            data = json_object(await request.body())
            key = data.pop("command_id", None)
            key = new_command_id() if key is None else check_command_id(key)
            data["type"] = "join"
            data["table_id"] = table_id
            data["command_id"] = self.tokens.join_command_id(table_id, key)
            command = parse(data)
            self.refuse_if_archived(table_id, Code.TABLE_FULL)
        return command, key

    async def seat_command(
        self, request: Request, table_id: str, token: str | None
    ) -> tuple[Command, int]:
        """Admit ``POST /tables/{id}/commands``: a wire command of the token's seat."""
        with _refusing("unknown"):
            self.count(client_address(request))
            check_table_id(table_id)
            seat = await self.seat(table_id, token)
            self.count_seat(client_address(request), table_id, seat)
            command = seat_command(await request.body(), table_id)
            self.refuse_if_archived(table_id, Code.MOVE_MATCH_OVER)
        return command, seat

    async def seat_action(
        self,
        request: Request,
        table_id: str,
        token: str | None,
        kind: str,
        **fields: Any,
    ) -> tuple[Command, int]:
        """Admit a lobby route's one command ``kind`` (leave, resign, rematch) of the token's
        seat; the body is optional: ``command_id`` (generated when left out) and
        ``expected_version``."""
        with _refusing(kind):
            check_table_id(table_id)
            self.count(client_address(request))  # as POST /commands counts a seat's command
            seat = await self.seat(table_id, token)
            self.count_seat(client_address(request), table_id, seat)
            data = json_object(await request.body())
            data.update(type=kind, **fields)
            data.setdefault("table_id", table_id)
            if data.get("command_id") is None:
                data["command_id"] = new_command_id()
            command = parse(data)
            if command.table_id != table_id:
                raise _wrong_table(command, table_id)
            if kind == "rematch" and self.is_archived(table_id):
                raise ApiError(
                    Code.TABLE_ARCHIVED,
                    f"table {table_id} has left Redis for the archive: too late for a rematch",
                )
            self.refuse_if_archived(table_id, Code.MOVE_MATCH_OVER)
        return command, seat

    def socket_message(self, raw: str) -> dict[str, Any]:
        """Return the command object of a WebSocket message ``{"kind": "command", "command":
        {...}}``, or raise its refusal."""
        with _refusing("unknown"):
            if len(raw.encode()) > MAX_MESSAGE_BYTES:
                too_large = f"a message is at most {MAX_MESSAGE_BYTES} bytes"
                raise ApiError(Code.COMMAND_TOO_LARGE, too_large)
            message = json_object(raw.encode())
            command = message.get("command")
            if message.get("kind") != "command" or not isinstance(command, dict):
                raise ApiError(
                    Code.COMMAND_UNKNOWN_TYPE,
                    'send {"kind": "command", "command": {...}}; no other message is taken',
                )
        return command

    async def socket_command(
        self,
        table_id: str,
        token: str | None,
        seat: int | None,
        data: Mapping[str, Any],
        address: str | None,
    ) -> Command:
        """Admit a command sent on the socket of ``seat`` (opened with ``token``), as
        ``POST /tables/{id}/commands`` would; a seat given up since is refused."""
        with _refusing("unknown"):
            if seat is None:
                spectator = "a spectator sends no commands: connect with a token"
                raise ApiError(Code.SEAT_REQUIRED, spectator)
            self.count(address)  # as POST /commands: the address's, then the seat's
            self.count_seat(address, table_id, seat)
            command = seat_command(data, table_id)
            self.refuse_if_archived(table_id, Code.MOVE_MATCH_OVER)
            if token is None or await self.seat_of(table_id, token) != seat:  # given up
                raise ApiError(Code.SEAT_BAD_TOKEN, "the seat was given up: its token is no seat's")
        return command

    # --- seats -------------------------------------------------------------------------------

    async def seat(self, table_id: str, token: str | None) -> int:
        """Return the seat of the presented token; raise ``seat/bad_token`` without one, or
        for a token that is no seat's on the table."""
        if token is None:
            raise ApiError(
                Code.SEAT_BAD_TOKEN,
                "send the seat's token as 'Authorization: Bearer <token>'",
                headers=_CHALLENGE,
            )
        seat = await self.seat_of(table_id, token)
        if seat is None:
            message = "the token is no seat's on this table"
            raise ApiError(Code.SEAT_BAD_TOKEN, message, headers=_CHALLENGE)
        return seat

    async def viewer_seat(self, table_id: str, token: str | None) -> int | None:
        """Return the seat of the presented token, None (a spectator) for no token; raise
        ``seat/bad_token`` for a token that is no seat's."""
        return None if token is None else await self.seat(table_id, token)

    async def seat_of(self, table_id: str, token: str) -> int | None:
        """Return the seat whose token ``token`` is on the table, None when it is no seat's.

        A seat's token hash changes only when its player leaves the seat, which is possible
        only before the first deal: a match is remembered once the table has dealt (its head's
        status is ``playing`` or ``over``).  The digests are the table's tokens hash, apart from
        its seeds, which the gateway never reads (``docs/deploy.md``, "Redis users").
        """
        key = (table_id, hash_token(token))
        seat = self._seats.recall(key)
        if seat is not None:
            return seat
        fields = [TOKEN_KEY.format(seat=s) for s in SEATS]
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.keys.tokens(table_id), fields)
            pipe.hget(self.keys.head(table_id), "status")
            stored, status = await pipe.execute()
        dealt = status is not None and as_text(status) in _DEALT
        if self.archived is not None and all(raw is None for raw in stored):
            table = self.archived.table(table_id)  # a finished table that left Redis
            if table is not None:
                stored = [table.tokens.get(field) for field in fields]
                dealt = True
        for s, raw in zip(SEATS, stored, strict=True):
            text = raw.decode() if isinstance(raw, bytes) else raw
            if token_matches(token, text):
                if dealt:
                    self._seats.remember(key, s)
                return s
        return None

    # --- rate limits and the archive ---------------------------------------------------------

    def count(self, address: str | None, *, creates: bool = False) -> None:
        """Count a create, join or command from the client ``address``; raise
        ``rate/limited``."""
        if self.limits is not None:
            self.limits.request(address, creates=creates)

    def count_seat(self, address: str | None, table_id: str, seat: int) -> None:
        """Count a command of a seat sent from ``address``; raise ``rate/limited``."""
        if self.limits is not None:
            self.limits.command(table_id, seat, address)

    def is_archived(self, table_id: str) -> bool:
        """Say whether the table's match is over and the table is in the archive."""
        return self.archived is not None and self.archived.archive.exists(table_id)

    def refuse_if_archived(self, table_id: str, code: Code) -> None:
        """Refuse a command to a table that is in the archive (its match is over) with the code
        the engine worker gives it while the table is in Redis: the worker, which knows Redis
        alone, would take the archived table for a missing one (``docs/archive.md``)."""
        if not self.is_archived(table_id):
            return
        messages = {
            Code.TABLE_EXISTS: f"table {table_id!r} already exists (its match is over)",
            Code.TABLE_FULL: f"table {table_id} has no free seat (its match is over)",
            Code.MOVE_MATCH_OVER: f"the match of table {table_id} is over",
        }
        raise ApiError(code, messages[code])


@contextmanager
def _refusing(kind: str) -> Iterator[None]:
    """Count a command the gateway refuses before queueing it (``kind``: its type if known)."""
    try:
        yield
    except ApiError:
        metrics.COMMANDS.labels(kind, "refused").inc()
        raise


# --- the request: its address, its token, its body -------------------------------------------


def client_address(connection: HTTPConnection) -> str | None:
    """The client's address as the server saw it (the proxy's, unless uvicorn trusts its
    forwarding headers)."""
    return connection.client.host if connection.client else None


def bearer(authorization: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, None if there is none."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def json_object(raw: bytes) -> dict[str, Any]:
    """Return the JSON object of a request body, or raise ``command/malformed_json``."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(Code.COMMAND_MALFORMED_JSON, f"the body must be JSON text: {exc}") from None
    except RecursionError:  # thousands of nested arrays in a few KiB: refused, never a 500
        raise ApiError(
            Code.COMMAND_MALFORMED_JSON, "the body must be JSON text: nested too deeply"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            Code.COMMAND_MALFORMED_JSON,
            f"the body must be a JSON object, not {type(data).__name__}",
        )
    return data


def parse(raw: bytes | str | Mapping[str, Any]) -> Command:
    """Return the command of raw input, or raise the ApiError of its contract code."""
    try:
        return parse_command(raw)
    except ContractError as exc:
        raise from_contract(exc) from None


def seat_command(raw: bytes | str | Mapping[str, Any], table_id: str) -> Command:
    """Return the command a seat sent to ``table_id``, or raise the ApiError of its code."""
    command = parse(raw)
    if command.table_id != table_id:
        raise _wrong_table(command, table_id)
    if command.type in TABLE_LEVEL:
        route = _ROUTES[command.type].format(table_id=table_id)
        raise ApiError(
            Code.COMMAND_UNSUPPORTED, f"{command.type} is not sent as a command: use {route}"
        )
    if command.type in SERVICE_ONLY:
        raise ApiError(Code.COMMAND_UNSUPPORTED, f"{command.type} is sent by the bots runner only")
    return command


def _wrong_table(command: Command, table_id: str) -> ApiError:
    return ApiError(
        Code.COMMAND_WRONG_TABLE,
        f"the command is for table {command.table_id!r}, sent to table {table_id!r}",
    )


# --- ids and query parameters ----------------------------------------------------------------


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
            Code.TABLE_INVALID_ID, f"invalid table id {table_id!r}: 1-64 of A-Z a-z 0-9 _ -"
        )
    return table_id


def check_command_id(command_id: object) -> str:
    """Return a client's command id (idempotency key) if valid, else raise ``command/invalid``."""
    if not isinstance(command_id, str) or not _COMMAND_ID.fullmatch(command_id):
        raise ApiError(
            Code.COMMAND_INVALID,
            f"invalid command_id {command_id!r}: 8-64 of A-Z a-z 0-9 _ -",
            details=[{"loc": "command_id", "msg": "8-64 of A-Z a-z 0-9 _ -"}],
        )
    return command_id


def version_param(name: str, raw: str | None) -> int | None:
    """Return the version a query parameter names (None when absent), or raise
    ``query/invalid``: the rule of ``after`` and ``min_version`` on HTTP and WebSocket alike."""
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_VERSION:
        raise ApiError(
            Code.QUERY_INVALID,
            f"{name} must be a whole number from 0 to {MAX_VERSION}, not {raw!r}",
        )
    return int(raw)
