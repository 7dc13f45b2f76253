"""Domain events on the wire: what happened at a table, one frozen model per ``type``.

Who may see an event is decided by ``engine.secrecy.sees`` (``docs/services.md``, "Secrecy");
``docs/events.md`` lists every event and its rules.

>>> CardTurned(seat=1, card="7h").model_dump()
{'type': 'card_turned', 'v': 1, 'seat': 1, 'card': '7H'}
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, Strict, StringConstraints

from events.base import (
    BotName,
    CardText,
    CommandId,
    Hand,
    Hex64,
    Melds,
    NonNegative,
    PlayerName,
    Positive,
    RuleSetName,
    Seat,
    TableId,
    WireModel,
)

__all__ = [
    "BOT_CODE_PATTERN",
    "CODE_PATTERN",
    "EVENT_TYPES",
    "TABLE_EVENT_TYPES",
    "BotFailed",
    "CardDiscarded",
    "CardLeft",
    "CardRefused",
    "CardTurned",
    "CardWasted",
    "CommandRejected",
    "DealRevealed",
    "DealStarted",
    "DomainEvent",
    "EventModel",
    "ForceDemanded",
    "ForceWaived",
    "GameDrawn",
    "HandDealt",
    "HandMelded",
    "MatchEnded",
    "MeldMade",
    "PlayerJoined",
    "PlayerLeft",
    "RematchAgreed",
    "RematchOpened",
    "Resigned",
    "RuleSet",
    "StakesSettled",
    "TableCreated",
    "TableEvent",
    "WentOut",
]

Algorithm = Annotated[str, Strict(), StringConstraints(pattern="^[a-z0-9_.-]{1,40}$")]
CODE_PATTERN = "^[a-z_]+/[a-z_]+$"
"""The form of a stable error code: ``area/what`` (``move/not_your_turn``)."""
BOT_CODE_PATTERN = "^bot/[a-z_]+$"
"""The form of the code of a bot's failure (``bot/failed``)."""

Scores = tuple[NonNegative, NonNegative]
Forcing = Literal["optional", "automatic", "off"]
StakeOnDraw = Literal["double", "carry", "none"]


class RuleSet(WireModel):
    """A complete rule set, field for field ``engine.rules.Rules`` (RULES.md: *variant*)."""

    name: RuleSetName
    max_run_length: Annotated[int, Strict(), Field(ge=3, le=10)] | None
    forcing: Forcing
    hand_melds_without_centre_card: Annotated[bool, Strict()]
    stake_on_draw: StakeOnDraw
    base_stake: Annotated[int, Strict(), Field(ge=1, le=1_000_000)]


class EventModel(WireModel):
    """Base of every domain event: a ``type`` tag and a schema version ``v`` equal to ``VERSION``.

    Raises TypeError at class creation when a subclass's ``v`` default is not its ``VERSION``.
    """

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields
        if "type" not in fields or "v" not in fields:
            raise TypeError(f"{cls.__name__} needs the fields 'type' and 'v'")
        if fields["v"].default != cls.VERSION:
            raise TypeError(f"{cls.__name__}: v defaults to {fields['v'].default}, not VERSION")
        cls.TYPE = str(fields["type"].default)


# --- table and seats -----------------------------------------------------------------------------


class TableCreated(EventModel):
    """A table opened: its rules, how the match ends, the turn clock and the first dealer."""

    type: Literal["table_created"] = "table_created"
    v: Literal[1] = 1
    rules: RuleSet
    deals: Positive | None
    target_score: Positive | None
    turn_seconds: Positive | None
    first_dealer: Seat


class PlayerJoined(EventModel):
    """A player (or a bot, named by ``bot``) took a seat."""

    type: Literal["player_joined"] = "player_joined"
    v: Literal[1] = 1
    seat: Seat
    name: PlayerName
    bot: BotName | None = None


class PlayerLeft(EventModel):
    """The player of ``seat`` gave the seat up before the first deal; its token stops working."""

    type: Literal["player_left"] = "player_left"
    v: Literal[1] = 1
    seat: Seat


class RematchAgreed(EventModel):
    """After the match, ``seat`` agreed to play again (a bot seat agrees without an event)."""

    type: Literal["rematch_agreed"] = "rematch_agreed"
    v: Literal[1] = 1
    seat: Seat


class RematchOpened(EventModel):
    """Both seats agreed: the rematch is at table ``next_table_id`` (same rules, seats, clock)."""

    type: Literal["rematch_opened"] = "rematch_opened"
    v: Literal[1] = 1
    next_table_id: TableId
class BotFailed(EventModel):
    """The bot on ``seat`` could not choose its move: ``code`` says why, ``message`` in words.

    Recorded by the bots runner (through the command stream, ``report_bot_failure``) so that
    clients see why a bot's table stopped; public, so the message never quotes a card.  It
    changes nothing in the match; the seat's failure stands until the table's next event.
    """

    type: Literal["bot_failed"] = "bot_failed"
    v: Literal[1] = 1
    seat: Seat
    bot: BotName
    code: Annotated[str, Strict(), StringConstraints(pattern=BOT_CODE_PATTERN)]
    message: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]


# --- the deal ------------------------------------------------------------------------------------


class DealStarted(EventModel):
    """A deal began; ``commitment`` is the SHA-256 of the secret seed the deck is shuffled from."""

    type: Literal["deal_started"] = "deal_started"
    v: Literal[1] = 1
    number: Positive
    dealer: Seat
    stake: Positive
    commitment: Hex64
    algorithm: Algorithm


class HandDealt(EventModel):
    """The ten cards dealt to ``seat``, sorted; SECRET: only that seat may see this event."""

    type: Literal["hand_dealt"] = "hand_dealt"
    v: Literal[1] = 1
    seat: Seat
    cards: Annotated[Hand, Field(min_length=10, max_length=10)]


class CardTurned(EventModel):
    """``seat`` turned the top card of the stock; it is their turned card."""

    type: Literal["card_turned"] = "card_turned"
    v: Literal[1] = 1
    seat: Seat
    card: CardText


class CardRefused(EventModel):
    """``seat`` refused the offered card; ``forceable`` opens a force window for the opponent."""

    type: Literal["card_refused"] = "card_refused"
    v: Literal[1] = 1
    seat: Seat
    card: CardText
    forceable: Annotated[bool, Strict()]


class CardLeft(EventModel):
    """``seat`` left its turned card face up; ``forceable`` opens a force window."""

    type: Literal["card_left"] = "card_left"
    v: Literal[1] = 1
    seat: Seat
    card: CardText
    forceable: Annotated[bool, Strict()]


class ForceDemanded(EventModel):
    """``seat`` forced the card the opponent declined: the opponent must take it."""

    type: Literal["force_demanded"] = "force_demanded"
    v: Literal[1] = 1
    seat: Seat


class ForceWaived(EventModel):
    """``seat`` let the opponent's declined card go on as if it were not forceable."""

    type: Literal["force_waived"] = "force_waived"
    v: Literal[1] = 1
    seat: Seat


class CardWasted(EventModel):
    """The refused card went to the waste, out of the game."""

    type: Literal["card_wasted"] = "card_wasted"
    v: Literal[1] = 1
    card: CardText


class MeldMade(EventModel):
    """``seat`` took the centre ``card`` with hand cards ``hand``; ``table`` is its new table."""

    type: Literal["meld_made"] = "meld_made"
    v: Literal[1] = 1
    seat: Seat
    card: CardText
    hand: Hand
    table: Melds


class HandMelded(EventModel):
    """``seat`` laid hand cards down without a centre card (variant); ``table`` is the new table."""

    type: Literal["hand_melded"] = "hand_melded"
    v: Literal[1] = 1
    seat: Seat
    hand: Hand
    table: Melds


class CardDiscarded(EventModel):
    """``seat`` discarded a hand card face up; it is the opponent's offered card."""

    type: Literal["card_discarded"] = "card_discarded"
    v: Literal[1] = 1
    seat: Seat
    card: CardText


class WentOut(EventModel):
    """``seat`` reached exactly 11 table cards with an empty hand and won the deal."""

    type: Literal["went_out"] = "went_out"
    v: Literal[1] = 1
    seat: Seat


class GameDrawn(EventModel):
    """A card was refused with no stock card left: the deal is a draw."""

    type: Literal["game_drawn"] = "game_drawn"
    v: Literal[1] = 1


class Resigned(EventModel):
    """``seat`` conceded the match."""

    type: Literal["resigned"] = "resigned"
    v: Literal[1] = 1
    seat: Seat


class StakesSettled(EventModel):
    """The deal's stake went to ``winner`` (None on a draw); ``scores`` by seat, then next stake.

    Version 2: version 1 wrote ``scores`` as an object keyed by seat (``{"0": 3, "1": 1}``).
    """

    VERSION: ClassVar[int] = 2
    type: Literal["stakes_settled"] = "stakes_settled"
    v: Literal[2] = 2
    winner: Seat | None
    amount: NonNegative
    scores: Scores
    next_stake: Positive


class DealRevealed(EventModel):
    """The ended deal's seed is revealed: anyone can re-derive its deck (docs/fairness.md).

    Version 2: version 1 also carried the 40-card ``deck``, which the seed determines.
    """

    VERSION: ClassVar[int] = 2
    type: Literal["deal_revealed"] = "deal_revealed"
    v: Literal[2] = 2
    number: Positive
    seed: Hex64
    algorithm: Algorithm


class MatchEnded(EventModel):
    """The match is over; ``winner`` has the higher score (None on a tie)."""

    type: Literal["match_ended"] = "match_ended"
    v: Literal[1] = 1
    winner: Seat | None
    scores: Scores


# --- not in table streams ------------------------------------------------------------------------


class CommandRejected(EventModel):
    """A command was rejected with a stable ``code``; sent to its sender, never stored.

    ``command_id`` is None when the command was too malformed to read its id.
    """

    type: Literal["command_rejected"] = "command_rejected"
    v: Literal[1] = 1
    command_id: CommandId | None
    code: Annotated[str, Strict(), StringConstraints(pattern=CODE_PATTERN)]
    message: Annotated[str, Strict(), StringConstraints(max_length=500)]


TableEvent = Annotated[
    TableCreated
    | PlayerJoined
    | PlayerLeft
    | RematchAgreed
    | RematchOpened
    | DealStarted
    | HandDealt
    | CardTurned
    | CardRefused
    | CardLeft
    | ForceDemanded
    | ForceWaived
    | CardWasted
    | MeldMade
    | HandMelded
    | CardDiscarded
    | WentOut
    | GameDrawn
    | Resigned
    | StakesSettled
    | DealRevealed
    | MatchEnded
    | BotFailed,
    Field(discriminator="type"),
]
"""An event of a table's stream: what an envelope carries."""

DomainEvent = Annotated[TableEvent | CommandRejected, Field(discriminator="type")]
"""Any domain event: a table event or a rejection sent to a client."""

TABLE_EVENT_TYPES: dict[str, type[EventModel]] = {
    cls.TYPE: cls
    for cls in (
        TableCreated,
        PlayerJoined,
        PlayerLeft,
        RematchAgreed,
        RematchOpened,
        DealStarted,
        HandDealt,
        CardTurned,
        CardRefused,
        CardLeft,
        ForceDemanded,
        ForceWaived,
        CardWasted,
        MeldMade,
        HandMelded,
        CardDiscarded,
        WentOut,
        GameDrawn,
        Resigned,
        StakesSettled,
        DealRevealed,
        MatchEnded,
        BotFailed,
    )
}
"""Every table event class by its ``type``."""

EVENT_TYPES: dict[str, type[EventModel]] = {
    **TABLE_EVENT_TYPES,
    "command_rejected": CommandRejected,
}
"""Every domain event class by its ``type``; ``cls.VERSION`` is the version this code writes."""
