"""Typed errors of the rules engine, each with a stable ``code`` that services send to clients.

Every rejection of a command is an ``EngineError``; ``decide`` raises them and never changes
state.  Messages name the input and the position.  The codes, their HTTP statuses and meanings
are declared in the catalogue, ``engine.codes``.
"""

from __future__ import annotations

from engine.codes import Code, CodedError


class EngineError(CodedError):
    """Base of every engine error; ``code`` is stable across versions."""

    code = Code.ENGINE_ERROR.value


class NotationError(EngineError, ValueError):
    """A card, action or position text does not parse."""

    code = Code.NOTATION_INVALID.value

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class MoveError(EngineError):
    """A command that the rules do not allow in this position."""

    code = Code.MOVE_ILLEGAL.value


class NotYourTurn(MoveError):
    """The seat that sent the command is not the one to act."""

    code = Code.MOVE_NOT_YOUR_TURN.value


class WrongPhase(MoveError):
    """The kind of action does not fit the phase of the deal (e.g. discard before a take)."""

    code = Code.MOVE_WRONG_PHASE.value


class UnknownCard(MoveError):
    """A named card is not where the command says it is (not in the hand, not the centre)."""

    code = Code.MOVE_UNKNOWN_CARD.value


class IllegalTake(MoveError):
    """A take whose hand cards or resulting table break RULES.md section 5; ``reason`` says how."""

    code = Code.MOVE_ILLEGAL_TAKE.value

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class MustTake(MoveError):
    """Declining is not allowed: the card is forced (or automatic forcing makes it compulsory)."""

    code = Code.MOVE_MUST_TAKE.value


class DealOver(MoveError):
    """The deal has ended; only a new deal may start."""

    code = Code.MOVE_DEAL_OVER.value


class MatchOver(MoveError):
    """The match has ended; the table takes no more deals."""

    code = Code.MOVE_MATCH_OVER.value


class InvalidMatch(MoveError):
    """A match opened with settings that cannot be played (no such seat, no way to end)."""

    code = Code.MOVE_INVALID_MATCH.value


class InvalidDeck(MoveError):
    """A deal was started with something that is not an order of the 40 cards."""

    code = Code.MOVE_INVALID_DECK.value
