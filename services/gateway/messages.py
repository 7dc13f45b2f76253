"""The shapes the gateway speaks, as pydantic models: for the OpenAPI and AsyncAPI documents.

The gateway builds its answers as plain JSON (and checks commands with ``events``); these models
describe them, so that ``/docs`` and ``docs/asyncapi.json`` say exactly what goes over the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from events.base import CommandId, Hex64, NonNegative, PlayerName, Seat, TableId
from events.commands import Command, CreateTable
from events.envelope import Envelope

Code = Annotated[str, Field(pattern="^[a-z_]+/[a-z_]+$", examples=["move/not_your_turn"])]


# --- HTTP requests ---------------------------------------------------------------------------


class CreateTableRequest(CreateTable):
    """``create_table`` without ``type``; ``table_id`` and ``command_id`` may be left out."""

    table_id: TableId | None = None  # type: ignore[assignment]
    command_id: CommandId | None = None  # type: ignore[assignment]


class JoinRequest(BaseModel):
    """Take a seat: a display name, a seat (None: any free one) and an idempotency key."""

    model_config = ConfigDict(extra="forbid")

    name: PlayerName
    seat: Seat | None = None
    command_id: CommandId | None = Field(
        default=None,
        description="The join's idempotency key; keep it private: a join sent again with it "
        "returns the same seat and token.  Generated when left out (and returned).",
    )
    expected_version: NonNegative | None = None


# --- HTTP answers ----------------------------------------------------------------------------


class Rejection(BaseModel):
    """A rejection: a stable code and a message; ``details`` lists field problems."""

    ok: Literal[False] = False
    code: Code
    message: str
    details: list[dict[str, str]] | None = None
    table_id: str | None = None
    command_id: str | None = None
    version: int | None = None


class CommandAnswer(BaseModel):
    """A command's result as the store recorded it, with the table version after it.

    ``ok`` is null (and ``pending`` true) when the result did not come within the wait: the
    command is queued; send it again with the same ``command_id`` to get its result.
    Rejections carry ``code`` and ``message``.  Result fields of some commands appear beside
    (``first_dealer`` for create_table, ``seat`` for join, ``deal`` for next_deal).
    """

    model_config = ConfigDict(extra="allow")

    ok: bool | None
    table_id: str
    command_id: str
    version: int | None = None
    first_version: int | None = None
    duplicate: bool | None = None
    pending: bool | None = None
    code: Code | None = None
    message: str | None = None


class JoinAnswer(BaseModel):
    """The seat taken and its token (shown once per join; the table keeps only its hash)."""

    ok: Literal[True] = True
    table_id: TableId
    seat: Seat
    token: str
    command_id: CommandId
    version: int


class LobbySeat(BaseModel):
    """A seat as the lobby lists it: who holds it, if anyone."""

    seat: Seat
    name: str | None
    bot: str | None
    taken: bool


class LobbyTable(BaseModel):
    """A table in the lobby; ``version`` is the table's version when its row last changed."""

    table_id: TableId
    status: Literal["waiting", "running"]
    seats: list[LobbySeat]
    rules: str
    deals: int | None
    target_score: int | None
    turn_seconds: int | None
    version: int


class LobbyPage(BaseModel):
    """A page of the lobby, newest first; ``next_cursor`` is null on the last page."""

    tables: list[LobbyTable]
    next_cursor: str | None


class SeatActionRequest(BaseModel):
    """The optional body of leave, resign and rematch: the idempotency key (generated when
    left out) and the version the client last saw."""

    command_id: CommandId | None = None
    expected_version: NonNegative | None = None


class RematchState(BaseModel):
    """Who agreed to the rematch, and, once both did, its table and this seat's token there."""

    agreed: list[Seat]
    table_id: TableId | None
    token: str | None
    seat: Seat | None


class RematchAnswer(BaseModel):
    """The answer of a rematch request."""

    ok: Literal[True] = True
    table_id: TableId
    seat: Seat
    command_id: CommandId
    version: int
    rematch: RematchState


class SentEnvelope(Envelope):
    """An event's envelope as the gateway sends it; ``hash`` and ``prev_hash`` are null for the
    events of a deal in play (until its seed is revealed)."""

    hash: Hex64 | None  # type: ignore[assignment]
    prev_hash: Hex64 | None  # type: ignore[assignment]


class EventsPage(BaseModel):
    """A viewer's events after ``after``; ``next_after`` is where the next page starts."""

    table_id: TableId
    seat: Seat | None
    version: int = Field(description="the table's version when read")
    next_after: int
    events: list[SentEnvelope]


View = dict[str, Any]
"""A view as the projector wrote it (``version`` inside)."""


# --- WebSocket -------------------------------------------------------------------------------


class ClientCommand(BaseModel):
    """Client → gateway: a seat's command (as for ``POST /tables/{id}/commands``)."""

    kind: Literal["command"] = "command"
    command: Command


class Hello(BaseModel):
    """Gateway → client, first: the seat (null: spectator), the table version, and whether
    the connection resumed after ``after`` (else a full view comes first)."""

    kind: Literal["hello"] = "hello"
    table_id: TableId
    seat: Seat | None
    version: int
    after: int
    resumed: bool


class EventMessage(BaseModel):
    """Gateway → client: one event the seat may see, in version order, each exactly once."""

    kind: Literal["event"] = "event"
    event: SentEnvelope


class ViewMessage(BaseModel):
    """Gateway → client: the seat's (or spectator's) whole view, newer than the last one."""

    kind: Literal["view"] = "view"
    view: View


class ResultMessage(CommandAnswer):
    """Gateway → client: the result of a command sent on this socket."""

    kind: Literal["result"] = "result"


class ErrorMessage(BaseModel):
    """Gateway → client: a message that could not be taken, or why the socket closes."""

    kind: Literal["error"] = "error"
    code: Code
    message: str


# --- Redis -----------------------------------------------------------------------------------


class CommandEntry(BaseModel):
    """An entry of ``<ns>:{sNN}:cmd`` (stream fields, all strings)."""

    c: str = Field(description="the wire command as JSON (events.commands), at most 8 KiB")
    s: Literal["", "0", "1"] = Field(description='the sender\'s seat; "" for create and join')
    r: str = Field(pattern="^[0-9]+$", description="received, ms since the epoch")


class ResultHint(BaseModel):
    """Published on ``<ns>:results`` by the engine worker after each batch: one message a batch,
    its hints as JSON objects one a line."""

    table_id: TableId
    command_id: str
    seat: int | None = Field(
        default=None,
        description="the seat that sent the command (null: create or join); a command id is "
        "its seat's, so a waiter takes only its own seat's hint",
    )
    result: dict[str, Any]


ViewHint = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_-]{1,64} [0-9]+(\n[A-Za-z0-9_-]{1,64} [0-9]+)*$",
        description="Published on <ns>:views by the engine worker after each batch and by the "
        "projector after each shard write: '<table_id> <version>', one line a table",
    ),
]
