"""Building blocks of the wire contract: the model base, wire value types and ``ContractError``.

Wire models are frozen, strict and forbid unknown fields (``docs/events.md``, "Module notes").

>>> from pydantic import TypeAdapter
>>> TypeAdapter(CardText).validate_python("j♣")
'JC'
>>> TypeAdapter(Melds).validate_python([["7h", "6H", "JH"]])
(('7H', '6H', 'JH'),)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
)

from engine.cards import format_card, parse_card
from engine.codes import Code, CodedError

__all__ = [
    "CARD_PATTERN",
    "BotName",
    "CardText",
    "CommandId",
    "ContractError",
    "Hand",
    "Hex64",
    "InvalidContent",
    "MalformedJson",
    "Meld",
    "Melds",
    "NonNegative",
    "PlayerName",
    "Positive",
    "RuleSetName",
    "Seat",
    "Subject",
    "TableId",
    "TooLarge",
    "UnknownType",
    "UnknownVersion",
    "WireModel",
    "summarise",
]

Subject = Literal["command", "event"]

CARD_PATTERN = "^[A2-7JQK][CDHS]$"
COMMAND_ID_PATTERN = "^[A-Za-z0-9_-]{8,64}$"
TABLE_ID_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
HEX64_PATTERN = "^[0-9a-f]{64}$"


# --- errors ------------------------------------------------------------------------------------


class ContractError(CodedError, ValueError):
    """Raw input that is not a valid command or event; ``code`` is stable, e.g. ``command/invalid``.

    ``codes`` gives the catalogue's entry (``engine.codes``) for each subject the error is
    raised for.  ``details`` lists the problems found as ``{"loc": "table.0.1", "msg": "..."}``
    (empty when the input did not get as far as field validation).
    """

    kind: ClassVar[str] = "invalid"
    codes: ClassVar[Mapping[Subject, Code]] = {
        "command": Code.COMMAND_INVALID,
        "event": Code.EVENT_INVALID,
    }

    def __init__(
        self, subject: Subject, message: str, details: Sequence[Mapping[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.subject = subject
        self.code = self.codes[subject].value
        self.details = tuple(dict(d) for d in details)


class MalformedJson(ContractError):
    """The input is not JSON text, or not a JSON object."""

    kind = "malformed_json"
    codes: ClassVar[Mapping[Subject, Code]] = {
        "command": Code.COMMAND_MALFORMED_JSON,
        "event": Code.EVENT_MALFORMED_JSON,
    }


class TooLarge(ContractError):
    """The raw input is larger than the contract allows; it was not parsed."""

    kind = "too_large"
    codes: ClassVar[Mapping[Subject, Code]] = {"command": Code.COMMAND_TOO_LARGE}


class UnknownType(ContractError):
    """The ``type`` field is missing or names no command or event of this contract."""

    kind = "unknown_type"
    codes: ClassVar[Mapping[Subject, Code]] = {
        "command": Code.COMMAND_UNKNOWN_TYPE,
        "event": Code.EVENT_UNKNOWN_TYPE,
    }


class UnknownVersion(ContractError):
    """An event's schema version is newer than this code, or no upcaster leads from it."""

    kind = "unknown_version"
    codes: ClassVar[Mapping[Subject, Code]] = {"event": Code.EVENT_UNKNOWN_VERSION}


class InvalidContent(ContractError):
    """The type is known but the fields are wrong; ``details`` says which and how."""

    kind = "invalid"


def summarise(
    exc: ValidationError, limit: int = 5, skip: int = 0
) -> tuple[str, list[dict[str, str]]]:
    """Return a one-line summary of a pydantic error and its first ``limit`` details.

    ``skip`` drops leading location parts: 1 drops the tag that pydantic puts first for a
    discriminated union, so that ``take.hand.0`` reads ``hand.0``.
    """
    details: list[dict[str, str]] = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = [str(part) for part in err["loc"][skip:]]
        details.append({"loc": ".".join(loc), "msg": str(err["msg"])})
    text = "; ".join(f"{d['loc'] or '(root)'}: {d['msg']}" for d in details)
    more = exc.error_count() - len(details)
    if more > 0:
        text += f"; and {more} more"
    return text, details


# --- models ------------------------------------------------------------------------------------


def _require_tags(schema: dict[str, Any]) -> None:
    """Mark ``type`` (and ``v`` where present) as required in the JSON Schema.

    They have defaults so that Python code may leave them out, but every JSON document carries
    them: the union is discriminated on ``type`` and upcasting reads ``v``.
    """
    props = schema.get("properties", {})
    required = list(schema.get("required", []))
    for tag in ("type", "v"):
        if tag in props and tag not in required:
            required.insert(0, tag)
    if required:
        schema["required"] = sorted(required)


class WireModel(BaseModel):
    """Base of every wire model: frozen, unknown fields forbidden, ``type``/``v`` required."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra=_require_tags,
    )


# --- value types -------------------------------------------------------------------------------


def normalise_card(text: str) -> str:
    """Return the canonical text of a card (``"j♣"`` → ``"JC"``); raise ValueError otherwise."""
    return format_card(parse_card(text))


def _distinct(cards: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(cards)) != len(cards):
        twice = sorted({c for c in cards if cards.count(c) > 1})
        raise ValueError(f"a card appears more than once: {' '.join(twice)}")
    return cards


def _disjoint(melds: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    _distinct(tuple(c for meld in melds for c in meld))
    return melds


CardText = Annotated[
    str,
    Strict(),
    StringConstraints(max_length=8),
    AfterValidator(normalise_card),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": CARD_PATTERN,
            "description": "A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).",
        }
    ),
]
"""A card as text; lower case and suit symbols are accepted on input, upper case goes out."""

Hand = Annotated[tuple[CardText, ...], Field(max_length=10), AfterValidator(_distinct)]
"""Cards from one hand, each at most once (at most 10)."""

Meld = Annotated[tuple[CardText, ...], Field(min_length=3, max_length=10)]
"""One meld: 3 to 10 cards (whether they form a set or a run is the engine's judgement)."""

Melds = Annotated[tuple[Meld, ...], Field(max_length=13), AfterValidator(_disjoint)]
"""A seat's melds on the table (the wire field ``table``), no card in two of them."""

Seat = Annotated[int, Strict(), Field(ge=0, le=1)]
"""Seat 0 or 1."""

NonNegative = Annotated[int, Strict(), Field(ge=0)]
Positive = Annotated[int, Strict(), Field(ge=1)]

CommandId = Annotated[str, Strict(), StringConstraints(pattern=COMMAND_ID_PATTERN)]
"""A client-chosen idempotency key: 8 to 64 of ``A-Z a-z 0-9 _ -``."""

TableId = Annotated[str, Strict(), StringConstraints(pattern=TABLE_ID_PATTERN)]
"""A table id: 1 to 64 of ``A-Z a-z 0-9 _ -``."""

Hex64 = Annotated[str, Strict(), StringConstraints(pattern=HEX64_PATTERN)]
"""A SHA-256 digest or a 32-byte seed as 64 lower-case hex digits."""


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("a name may not hold control characters")
    return text


PlayerName = Annotated[
    str,
    Strict(),
    StringConstraints(strip_whitespace=True, min_length=1, max_length=40),
    AfterValidator(_printable),
]
"""A player's display name: 1 to 40 printable characters, surrounding spaces removed."""

BotName = Annotated[str, Strict(), StringConstraints(pattern="^[a-z0-9_-]{1,32}$")]
"""The name of a bot of ``engine.bots`` (``random``, ``greedy``); the service checks it exists."""

RuleSetName = Annotated[str, Strict(), StringConstraints(pattern="^[A-Za-z0-9 _.-]{1,40}$")]
"""The name of a rule set: a preset's name or one a table creator chose."""
