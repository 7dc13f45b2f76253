"""The Conquian rules engine: pure, deterministic, standard library only.

``legal_actions`` lists what the seat to act may do, ``decide`` turns a command into events or
raises a typed error, ``evolve`` folds an event into the state.  See RULES.md for the rules.
"""

from engine.actions import (
    Action,
    Command,
    Discard,
    Force,
    Leave,
    MeldHand,
    NewMatch,
    Play,
    Refuse,
    Resign,
    StartDeal,
    Take,
    TurnCard,
    Waive,
)
from engine.cards import Card, CardMask, format_card, format_cards, mask_of, parse_card, parse_cards
from engine.errors import EngineError, MoveError, NotationError
from engine.game import decide, evolve, fold
from engine.game_events import Event
from engine.legal import legal_actions
from engine.rules import CLASSIC, PRESETS, Forcing, Rules, StakeOnDraw, preset
from engine.state import Deal, Match, Outcome, Phase, Termination

__all__ = [
    "CLASSIC",
    "PRESETS",
    "Action",
    "Card",
    "CardMask",
    "Command",
    "Deal",
    "Discard",
    "EngineError",
    "Event",
    "Force",
    "Forcing",
    "Leave",
    "Match",
    "MeldHand",
    "MoveError",
    "NewMatch",
    "NotationError",
    "Outcome",
    "Phase",
    "Play",
    "Refuse",
    "Resign",
    "Rules",
    "StakeOnDraw",
    "StartDeal",
    "Take",
    "Termination",
    "TurnCard",
    "Waive",
    "decide",
    "evolve",
    "fold",
    "format_card",
    "format_cards",
    "legal_actions",
    "mask_of",
    "parse_card",
    "parse_cards",
    "preset",
]
