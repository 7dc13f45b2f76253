"""Typed errors of the rules engine, each with a stable ``code`` that services send to clients.

Every rejection of a command is an ``EngineError``; ``decide`` raises them and never changes
state.  Messages name the input and the position.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base of every engine error; ``code`` is stable across versions."""

    code = "engine/error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotationError(EngineError, ValueError):
    """A card, action or position text does not parse."""

    code = "notation/invalid"

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class MoveError(EngineError):
    """A command that the rules do not allow in this position."""

    code = "move/illegal"


class NotYourTurn(MoveError):
    """The seat that sent the command is not the one to act."""

    code = "move/not_your_turn"


class WrongPhase(MoveError):
    """The kind of action does not fit the phase of the deal (e.g. discard before a take)."""

    code = "move/wrong_phase"


class UnknownCard(MoveError):
    """A named card is not where the command says it is (not in the hand, not the centre)."""

    code = "move/unknown_card"


class IllegalTake(MoveError):
    """A take whose hand cards or resulting table break RULES.md section 5; ``reason`` says how."""

    code = "move/illegal_take"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class MustTake(MoveError):
    """Declining is not allowed: the card is forced (or automatic forcing makes it compulsory)."""

    code = "move/must_take"


class DealOver(MoveError):
    """The deal has ended; only a new deal may start."""

    code = "move/deal_over"


class MatchOver(MoveError):
    """The match has ended; the table takes no more deals."""

    code = "move/match_over"


class InvalidMatch(MoveError):
    """A match opened with settings that cannot be played (no such seat, no way to end)."""

    code = "move/invalid_match"


class InvalidDeck(MoveError):
    """A deal was started with something that is not an order of the 40 cards."""

    code = "move/invalid_deck"
