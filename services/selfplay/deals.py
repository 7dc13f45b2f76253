"""Bots play seeded deals against each other, one engine deal at a time, and the run's tally.

Deal ``i`` of a run with seed ``S`` is shuffled by its own ``random.Random`` derived from
``S`` and ``i`` alone, and its bots draw from another one, so every deal can be replayed on its
own.  Seat 0 deals the even deals and seat 1 the odd ones.  Each deal is a one-deal match
started with ``NewMatch``; ``play_deal`` returns its engine events.  ``conquian selfplay`` is
:mod:`services.selfplay.cli`; recording through the store is :mod:`services.selfplay.record`.

>>> result = run_selfplay(SelfplayConfig(deals=2, seed=1, players=("greedy", "random")))
>>> result.deals, sum(result.wins) + result.draws
(2, 2)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.actions import NewMatch, Play, StartDeal
from engine.bots import Bot, make_bot
from engine.cards import ALL_CARDS, Card
from engine.game import decide, evolve
from engine.game_events import Event
from engine.rules import CLASSIC, Rules
from engine.state import Match, Outcome


@dataclass(frozen=True)
class PlayedDeal:
    """One finished deal: every engine event in order, the seats' commands and the outcome."""

    events: tuple[Event, ...]
    plays: tuple[Play, ...]
    outcome: Outcome


def deal_deck(seed: int, index: int) -> tuple[Card, ...]:
    """Return the shuffled deck of deal ``index`` of a run seeded with ``seed``."""
    deck = list(ALL_CARDS)
    random.Random(f"conquian/selfplay/{seed}/{index}/deck").shuffle(deck)
    return tuple(deck)


def bot_rng(seed: int, index: int) -> random.Random:
    """Return the random source the bots of deal ``index`` share."""
    return random.Random(f"conquian/selfplay/{seed}/{index}/bots")


def play_deal(
    bots: Sequence[Bot],
    deck: tuple[Card, ...],
    rng: random.Random,
    rules: Rules = CLASSIC,
    dealer: int = 0,
) -> PlayedDeal:
    """Play one deal as a one-deal match, ``bots[seat]`` acting for each seat, to its end."""
    events: list[Event] = []
    plays: list[Play] = []

    def apply(state: Match | None, new: list[Event]) -> Match | None:
        for event in new:
            state = evolve(state, event)
        events.extend(new)
        return state

    match = apply(None, decide(None, NewMatch(rules=rules, first_dealer=dealer, deals=1)))
    match = apply(match, decide(match, StartDeal(deck)))
    while match is not None and (seat := match.to_act) is not None:
        play = Play(seat, bots[seat].choose(match, seat, rng))
        plays.append(play)
        match = apply(match, decide(match, play))
    outcome = match.deal.outcome if match is not None and match.deal is not None else None
    if outcome is None:  # decide always ends a deal with an outcome
        raise RuntimeError("the deal stopped without an outcome")
    return PlayedDeal(tuple(events), tuple(plays), outcome)


@dataclass(frozen=True)
class SelfplayConfig:
    """A selfplay run: how many deals, the seed, the bot of each seat and the rule set."""

    deals: int
    seed: int
    players: tuple[str, str]
    rules: Rules = CLASSIC


@dataclass(frozen=True)
class SelfplayResult:
    """The tally of a run: wins per seat, draws and the number of actions played."""

    config: SelfplayConfig
    deals: int
    wins: tuple[int, int]
    draws: int
    actions: int

    @property
    def mean_actions(self) -> float:
        """Return the mean number of actions per deal."""
        return self.actions / self.deals if self.deals else 0.0

    def as_dict(self) -> dict[str, object]:
        """Return the result as the JSON object that ``--json`` prints."""
        decided = sum(self.wins)
        return {
            "deals": self.deals,
            "seed": self.config.seed,
            "rules": self.config.rules.name,
            "players": list(self.config.players),
            "wins": list(self.wins),
            "draws": self.draws,
            "decided": decided,
            "win_rate_decided": [round(w / decided, 4) if decided else None for w in self.wins],
            "actions": self.actions,
            "mean_actions": round(self.mean_actions, 3),
        }


DealHook = Callable[[int, PlayedDeal], None]


def run_selfplay(
    config: SelfplayConfig,
    on_deal: DealHook | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SelfplayResult:
    """Play the run's deals in order; ``on_deal(i, deal)`` sees each finished deal (recording).

    Raises KeyError for an unknown bot name.
    """
    bots = (make_bot(config.players[0]), make_bot(config.players[1]))
    wins = [0, 0]
    draws = actions = 0
    for i in range(config.deals):
        played = play_deal(
            bots, deal_deck(config.seed, i), bot_rng(config.seed, i), config.rules, i % 2
        )
        if played.outcome.winner is None:
            draws += 1
        else:
            wins[played.outcome.winner] += 1
        actions += len(played.plays)
        if on_deal is not None:
            on_deal(i, played)
        if progress is not None:
            progress(i + 1, config.deals)
    return SelfplayResult(config, config.deals, (wins[0], wins[1]), draws, actions)
