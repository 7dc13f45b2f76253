"""Bots play seeded deals against each other: ``conquian selfplay`` and the functions behind it.

Deal ``i`` of a run with seed ``S`` is shuffled by its own ``random.Random`` derived from
``S`` and ``i`` alone, and its bots draw from another one, so every deal can be replayed on its
own.  Seat 0 deals the even deals and seat 1 the odd ones.  Each deal is a one-deal match
started with ``NewMatch``; ``play_deal`` returns its engine events, which is what a recorder
writes to an event store (the hook for a later ``--record`` is ``run_selfplay(on_deal=...)``).

>>> result = run_selfplay(SelfplayConfig(deals=2, seed=1, players=("greedy", "random")))
>>> result.deals, sum(result.wins) + result.draws
(2, 2)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from engine.actions import NewMatch, Play, StartDeal
from engine.bots import BOTS, Bot, make_bot
from engine.cards import ALL_CARDS, Card
from engine.events import Event
from engine.game import decide, evolve
from engine.rules import CLASSIC, PRESETS, Rules
from engine.state import Match, Outcome

if TYPE_CHECKING:
    from services.cli import Subparsers

# --- playing ---------------------------------------------------------------------------------


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


# --- command line ----------------------------------------------------------------------------


def _deal_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _players(text: str) -> tuple[str, str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"name two bots separated by a comma, not {text!r}")
    for name in names:
        if name not in BOTS:
            known = ", ".join(sorted(BOTS))
            raise argparse.ArgumentTypeError(f"unknown bot {name!r}; known: {known}")
    return names[0], names[1]


def _rules(text: str) -> Rules:
    if text not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise argparse.ArgumentTypeError(f"unknown rule set {text!r}; known: {known}")
    return PRESETS[text]


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``selfplay`` subcommand and its arguments."""
    parser = subparsers.add_parser(
        name,
        help="let two bots play seeded deals and print the tally",
        description="Bots play N seeded deals (the deal alternates); prints wins per seat, "
        "draws and the mean number of actions per deal.",
    )
    parser.add_argument("--deals", type=_deal_count, default=100, help="deals to play (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument(
        "--players",
        type=_players,
        default=("greedy", "random"),
        help=f"bots of seat 0 and seat 1, e.g. greedy,random (known: {', '.join(sorted(BOTS))})",
    )
    parser.add_argument(
        "--rules",
        type=_rules,
        default=CLASSIC,
        help=f"rule preset (default classic; known: {', '.join(sorted(PRESETS))})",
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``conquian selfplay`` with parsed arguments; returns the exit status."""
    config = SelfplayConfig(args.deals, args.seed, args.players, args.rules)
    show = sys.stdout.isatty() and sys.stderr.isatty()
    result = run_selfplay(config, progress=_progress_bar(sys.stderr) if show else None)
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_result(result))
    return 0


def format_result(result: SelfplayResult) -> str:
    """Return the human-readable tally of a run."""
    config = result.config
    lines = [f"selfplay: {result.deals} deals, seed {config.seed}, rules {config.rules.name}"]
    decided = sum(result.wins)
    for seat, (name, wins) in enumerate(zip(config.players, result.wins, strict=True)):
        share = f" ({wins / decided:.1%} of decided deals)" if decided else ""
        lines.append(f"  seat {seat} {name:<8} wins {wins}{share}")
    lines.append(f"  draws {result.draws}")
    lines.append(f"  mean actions per deal {result.mean_actions:.1f}")
    return "\n".join(lines) + "\n"


def _progress_bar(stream: TextIO, width: int = 30) -> Callable[[int, int], None]:
    """Return a callback that redraws a one-line bar on ``stream`` (a terminal)."""

    def draw(done: int, total: int) -> None:
        filled = width * done // total
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        stream.write("\r" + line)
        if done == total:
            stream.write("\r" + " " * len(line) + "\r")
        stream.flush()

    return draw
