"""Engine throughput: random deals with ``legal_actions`` at every step, on one core.

    .venv/bin/python bench/engine.py [--deals 2000] [--seed 1] [--bot random|greedy] [--repeat 3]

The last line printed is one JSON object (``actions_per_s``, ``actions_per_cpu_s``, ...); the
figures are recorded in ``docs/performance.md`` ("Engine").
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is bench/engine.py: run as a script, its folder comes first on sys.path and would
# shadow the ``engine`` package.  Put the repository root there instead.
_HERE = Path(__file__).resolve().parent
if sys.path and Path(sys.path[0] or ".").resolve() == _HERE:
    sys.path[0] = str(_HERE.parent)

import argparse  # noqa: E402  (after the sys.path fix above)
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from engine.actions import Action, NewMatch, Play, StartDeal  # noqa: E402
from engine.bots import make_bot  # noqa: E402
from engine.cards import ALL_CARDS  # noqa: E402
from engine.game import decide, evolve  # noqa: E402
from engine.legal import legal_actions  # noqa: E402
from engine.state import Match  # noqa: E402

Chooser = Callable[[Match, int, random.Random], Action]


def random_choice(match: Match, seat: int, rng: random.Random) -> Action:
    """Return a uniformly random legal action (the random bot without its seat check)."""
    return rng.choice(legal_actions(match))


def play_deal(deck: tuple[int, ...], rng: random.Random, dealer: int, choose: Chooser) -> int:
    """Play one deal to its end, ``choose`` acting for both seats; return the number of actions."""
    match: Match | None = None
    for command in (NewMatch(first_dealer=dealer), StartDeal(deck)):
        for event in decide(match, command):
            match = evolve(match, event)
    assert match is not None
    actions = 0
    while (seat := match.to_act) is not None:
        action = choose(match, seat, rng)
        for event in decide(match, Play(seat, action)):
            match = evolve(match, event)
        actions += 1
    return actions


def run(deals: int, seed: int, bot: str, repeat: int = 1) -> dict[str, object]:
    """Play ``deals`` seeded deals ``repeat`` times and return the figures of the fastest run.

    The fastest of a few runs is the least disturbed by other work on the machine.
    """
    decks: list[tuple[int, ...]] = []
    for i in range(deals):
        cards = list(ALL_CARDS)
        random.Random(f"bench/{seed}/{i}").shuffle(cards)
        decks.append(tuple(cards))
    choose: Chooser = random_choice if bot == "random" else make_bot(bot).choose
    timings: list[float] = []
    cpu_timings: list[float] = []
    for _ in range(repeat):
        rng = random.Random(seed)
        actions = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        for i, deck in enumerate(decks):
            actions += play_deal(deck, rng, i % 2, choose)
        timings.append(time.perf_counter() - start)
        cpu_timings.append(time.process_time() - cpu_start)
    elapsed = min(timings)
    cpu = min(cpu_timings)
    return {
        "bot": bot,
        "deals": deals,
        "actions": actions,
        "repeat": repeat,
        "seconds": round(elapsed, 3),
        "actions_per_s": round(actions / elapsed),
        "deals_per_s": round(deals / elapsed, 1),
        "actions_per_s_runs": [round(actions / t) for t in timings],
        "actions_per_cpu_s": round(actions / cpu),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def main() -> None:
    """Parse the arguments, run the benchmark, print a summary and the JSON line last."""
    parser = argparse.ArgumentParser(description="Engine throughput on one core.")
    parser.add_argument("--deals", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bot", choices=("random", "greedy"), default="random")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the fastest is reported")
    args = parser.parse_args()
    if args.deals < 1 or args.repeat < 1:
        parser.error("--deals and --repeat must be at least 1")
    figures = run(args.deals, args.seed, args.bot, args.repeat)
    sys.stdout.write(
        f"{figures['deals']} deals, {figures['actions']} actions in {figures['seconds']} s, "
        f"fastest of {args.repeat} ({figures['bot']} bot, Python {figures['python']})\n"
    )
    sys.stdout.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
