"""Commands on the wire: what a client asks a table to do, one frozen model per ``type``.

:func:`parse_command` turns raw input into a command or raises a ``ContractError`` with a
stable code; ``docs/events.md`` describes the fields (``command_id``, ``expected_version``).

>>> parse_command('{"type": "discard", "command_id": "c-000001", "table_id": "T1", "card": "7h"}')
Discard(command_id='c-000001', table_id='T1', expected_version=None, type='discard', card='7H')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    Strict,
    StringConstraints,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from engine.rules import PRESETS, Rules
from events.base import (
    BotName,
    CardText,
    CommandId,
    Hand,
    InvalidContent,
    MalformedJson,
    Melds,
    NonNegative,
    PlayerName,
    RuleSetName,
    Seat,
    TableId,
    TooLarge,
    UnknownType,
    WireModel,
    summarise,
)
from events.chain import canonical_json

__all__ = [
    "COMMAND_TYPES",
    "MAX_COMMAND_BYTES",
    "Command",
    "CommandModel",
    "CreateTable",
    "Discard",
    "Force",
    "Join",
    "Leave",
    "LeaveTable",
    "MeldHand",
    "NextDeal",
    "Refuse",
    "Rematch",
    "ReportBotFailure",
    "Resign",
    "RuleOptions",
    "Take",
    "Turn",
    "Waive",
    "parse_command",
]

MAX_COMMAND_BYTES = 8 * 1024
"""The largest raw command accepted, in bytes of UTF-8; larger input is not even parsed."""

_CLASSIC = Rules()


def _known_preset(name: str) -> str:
    if name not in PRESETS:
        raise ValueError(f"unknown rule set {name!r}; known: {', '.join(sorted(PRESETS))}")
    return name


PresetName = Annotated[
    str,
    Strict(),
    AfterValidator(_known_preset),
    WithJsonSchema({"type": "string", "enum": sorted(PRESETS)}),
]
"""The name of a rule-set preset of ``engine.rules.PRESETS``."""


class RuleOptions(WireModel):
    """A rule set chosen option by option; an option left out takes its classic value.

    The options are those of ``engine.rules.Rules``; the set is checked by ``Rules.from_dict``.
    """

    name: RuleSetName = "custom"
    max_run_length: Annotated[int, Strict(), Field(ge=3, le=10)] | None = _CLASSIC.max_run_length
    forcing: Literal["optional", "automatic", "off"] = "optional"
    hand_melds_without_centre_card: Annotated[bool, Strict()] = False
    stake_on_draw: Literal["double", "carry", "none"] = "double"
    base_stake: Annotated[int, Strict(), Field(ge=1, le=1_000_000)] = _CLASSIC.base_stake

    @model_validator(mode="after")
    def _engine_accepts(self) -> RuleOptions:
        self.to_rules()
        return self

    def to_rules(self) -> Rules:
        """Return the engine's rule set; raises ValueError when the engine refuses it."""
        return Rules.from_dict(self.model_dump())


def _rules_kind(value: object) -> str:
    return "preset" if isinstance(value, str) else "options"


RulesChoice = Annotated[
    Annotated[PresetName, Tag("preset")] | Annotated[RuleOptions, Tag("options")],
    Discriminator(_rules_kind),
]
"""A preset's name, or a rule set option by option."""


class CommandModel(WireModel):
    """Fields every command carries: idempotency key, table and the version the client saw."""

    command_id: CommandId
    table_id: TableId
    expected_version: NonNegative | None = None


# --- the table -----------------------------------------------------------------------------------


SeatKey = Annotated[int, Field(ge=0, le=1)]  # lax: JSON object keys are strings ("0", "1")
_BOTS_SCHEMA = {
    "anyOf": [
        {
            "type": "object",
            "propertyNames": {"enum": ["0", "1"]},
            "additionalProperties": {"type": "string", "pattern": "^[a-z0-9_-]{1,32}$"},
        },
        {"type": "null"},
    ],
    "description": 'A bot by name on a seat: {"1": "greedy"}.',
}


class CreateTable(CommandModel):
    """Open a table: rules (a preset name or options), how the match ends, clock and bots.

    The match ends after ``deals`` deals or when a player reaches ``target_score``, whichever
    comes first; at least one of them must be set.  ``turn_seconds`` is the turn clock (None:
    no clock).  ``bots`` seats a bot, by name, on a seat.
    """

    type: Literal["create_table"] = "create_table"
    rules: RulesChoice = "classic"
    deals: Annotated[int, Strict(), Field(ge=1, le=1000)] | None = 1
    target_score: Annotated[int, Strict(), Field(ge=1, le=1_000_000)] | None = None
    turn_seconds: Annotated[int, Strict(), Field(ge=5, le=86_400)] | None = None
    bots: Annotated[dict[SeatKey, BotName] | None, WithJsonSchema(_BOTS_SCHEMA)] = None

    @model_validator(mode="after")
    def _match_ends(self) -> CreateTable:
        if self.deals is None and self.target_score is None:
            raise ValueError("set deals, target_score or both: a match must be able to end")
        return self

    def to_rules(self) -> Rules:
        """Return the engine's rule set of this table."""
        if isinstance(self.rules, RuleOptions):
            return self.rules.to_rules()
        return PRESETS[self.rules]


class Join(CommandModel):
    """Take a seat (0 or 1, or None for any free seat) under a display name."""

    type: Literal["join"] = "join"
    seat: Seat | None = None
    name: PlayerName


class NextDeal(CommandModel):
    """Start the next deal of the match (the service shuffles and commits to the deck)."""

    type: Literal["next_deal"] = "next_deal"


class Resign(CommandModel):
    """Concede: the running deal goes to the opponent and the match ends."""

    type: Literal["resign"] = "resign"


class LeaveTable(CommandModel):
    """Give one's seat up before the first deal (not ``leave``: leave the turned card)."""

    type: Literal["leave_table"] = "leave_table"


class Rematch(CommandModel):
    """Agree, once the match is over, to play again: the same seats at ``next_table_id``.

    The gateway's rematch route sends it and derives ``next_table_id``; a seat cannot send it
    on its own.
    """

    type: Literal["rematch"] = "rematch"
    next_table_id: TableId
class ReportBotFailure(CommandModel):
    """Record that the bot on the sending seat could not choose its move (``bot_failed``).

    Sent by the bots runner only, as the bot's seat, through the command stream; the gateway
    refuses it from clients (``command/unsupported``).
    """

    type: Literal["report_bot_failure"] = "report_bot_failure"
    code: Annotated[str, Strict(), StringConstraints(pattern="^bot/[a-z_]+$")]
    message: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]


# --- play ----------------------------------------------------------------------------------------


class Turn(CommandModel):
    """Turn the top card of the stock (first turn of a deal)."""

    type: Literal["turn"] = "turn"


class Take(CommandModel):
    """Take the centre card with the named hand cards; ``table`` is the whole table after it.

    ``table`` None lets the engine choose the arrangement (``engine.legal.default_take``).
    """

    type: Literal["take"] = "take"
    hand: Hand = ()
    table: Melds | None = None


class Refuse(CommandModel):
    """Refuse the offered card (it goes to the waste and the next card is turned)."""

    type: Literal["refuse"] = "refuse"


class Leave(CommandModel):
    """Leave the turned card face up for the opponent (not: leave the table)."""

    type: Literal["leave"] = "leave"


class Force(CommandModel):
    """Force the card the opponent just declined on them."""

    type: Literal["force"] = "force"


class Waive(CommandModel):
    """Let the opponent's declined card go on as if it were not forceable."""

    type: Literal["waive"] = "waive"


class Discard(CommandModel):
    """Discard a hand card after a take."""

    type: Literal["discard"] = "discard"
    card: CardText


class MeldHand(CommandModel):
    """Lay hand cards down without a centre card (variant); ``table`` is the whole new table."""

    type: Literal["meld_hand"] = "meld_hand"
    hand: Annotated[Hand, Field(min_length=1)]
    table: Melds


Command = Annotated[
    CreateTable
    | Join
    | NextDeal
    | Resign
    | LeaveTable
    | Rematch
    | Turn
    | Take
    | Refuse
    | Leave
    | Force
    | Waive
    | Discard
    | MeldHand
    | ReportBotFailure,
    Field(discriminator="type"),
]
"""Any command a client may send."""

COMMAND_TYPES: dict[str, type[CommandModel]] = {
    str(cls.model_fields["type"].default): cls
    for cls in (
        CreateTable,
        Join,
        NextDeal,
        Resign,
        LeaveTable,
        Rematch,
        Turn,
        Take,
        Refuse,
        Leave,
        Force,
        Waive,
        Discard,
        MeldHand,
        ReportBotFailure,
    )
}
"""Every command class by its ``type``."""


def _decode(raw: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    """Return the JSON object of a raw command; raise TooLarge or MalformedJson."""
    if isinstance(raw, Mapping):
        try:
            size = len(canonical_json(raw))
        except (TypeError, ValueError) as exc:
            raise MalformedJson("command", f"a command must be JSON data: {exc}") from None
        except RecursionError:
            raise MalformedJson(
                "command", "a command must be JSON data: nested too deeply"
            ) from None
    else:
        size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > MAX_COMMAND_BYTES:
        raise TooLarge("command", f"a command is at most {MAX_COMMAND_BYTES} bytes, got {size}")
    if isinstance(raw, Mapping):
        return raw
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedJson("command", f"a command must be JSON text: {exc}") from None
    except RecursionError:  # a few thousand nested arrays: under the size limit, over the stack
        raise MalformedJson("command", "a command must be JSON text: nested too deeply") from None
    if not isinstance(data, dict):
        raise MalformedJson(
            "command", f"a command must be a JSON object, not {type(data).__name__}"
        )
    return data


def parse_command(raw: bytes | str | Mapping[str, Any]) -> Command:
    """Return the command in raw JSON (text, bytes or an already decoded object).

    Raises TooLarge (``command/too_large``, checked before parsing), MalformedJson
    (``command/malformed_json``), UnknownType (``command/unknown_type``) or InvalidContent
    (``command/invalid``, with the first problems in ``details``).
    """
    data = _decode(raw)
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in COMMAND_TYPES:
        known = ", ".join(sorted(COMMAND_TYPES))
        raise UnknownType("command", f"unknown command type {kind!r}; known: {known}")
    try:  # the class of its type directly: the union's tag look-up cost a fifth more
        return cast(Command, COMMAND_TYPES[kind].model_validate(data))
    except ValidationError as exc:
        text, details = summarise(exc)
        raise InvalidContent("command", f"invalid {kind} command: {text}", details) from None
