"""Bots play seeded deals against each other: ``conquian selfplay`` and the functions behind it.

The command line; playing is :mod:`services.selfplay.deals`, recording
:mod:`services.selfplay.record` (``docs/audit.md``, "Recording selfplay").

>>> result = run_selfplay(SelfplayConfig(deals=2, seed=1, players=("greedy", "random")))
>>> result.deals, sum(result.wins) + result.draws
(2, 2)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from engine.bots import BOTS
from engine.rules import CLASSIC, PRESETS, Rules
from services.selfplay.deals import DealHook as DealHook
from services.selfplay.deals import PlayedDeal as PlayedDeal
from services.selfplay.deals import SelfplayConfig as SelfplayConfig
from services.selfplay.deals import SelfplayResult as SelfplayResult
from services.selfplay.deals import bot_rng as bot_rng
from services.selfplay.deals import deal_deck as deal_deck
from services.selfplay.deals import play_deal as play_deal
from services.selfplay.deals import run_selfplay as run_selfplay
from services.selfplay.record import TABLE_ID as TABLE_ID
from services.selfplay.record import RecordedTable as RecordedTable
from services.selfplay.record import RecordingConflict as RecordingConflict
from services.selfplay.record import _wire_rules as _wire_rules
from services.selfplay.record import command_id_of as command_id_of
from services.selfplay.record import deal_seed as deal_seed
from services.selfplay.record import record_selfplay as record_selfplay
from services.selfplay.record import record_table as record_table
from services.selfplay.record import table_id_of as table_id_of

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.store.keys import KeySpace

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
    record = parser.add_argument_group(
        "recording", "play through the table service and store each table (for conquian audit)"
    )
    record.add_argument(
        "--record",
        action="store_true",
        help="write the deals through the store as tables selfplay-<seed>-<n>",
    )
    record.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL") or os.environ.get("CONQUIAN_REDIS_URL"),
        help="Redis to record into (default: $REDIS_URL)",
    )
    record.add_argument(
        "--namespace",
        default=None,
        help="key namespace of the store (default: $CONQUIAN_NAMESPACE, else cq)",
    )
    record.add_argument(
        "--shards",
        type=_deal_count,
        default=None,
        help="shards of the deployment (default: $CONQUIAN_SHARDS, else 16)",
    )
    record.add_argument(
        "--table-deals",
        type=_deal_count,
        default=1,
        help="deals per recorded table, each table a match of that many deals (default 1)",
    )
    parser.set_defaults(handler=run, parser=parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``conquian selfplay`` with parsed arguments; returns the exit status."""
    config = SelfplayConfig(args.deals, args.seed, args.players, args.rules)
    show = sys.stdout.isatty() and sys.stderr.isatty()
    progress = _progress_bar(sys.stderr) if show else None
    recorded: dict[str, Any] | None = None
    if args.record:
        if not args.redis_url:
            args.parser.error("--record needs --redis-url or REDIS_URL")
        from services.store.keys import DEFAULT_NS, DEFAULT_SHARDS, KeySpace

        namespace = args.namespace or os.environ.get("CONQUIAN_NAMESPACE") or DEFAULT_NS
        try:
            shards = args.shards or int(os.environ.get("CONQUIAN_SHARDS") or DEFAULT_SHARDS)
            keys = KeySpace(namespace, shards)
        except ValueError as exc:
            args.parser.error(str(exc))
        try:
            result, tables = asyncio.run(_record(args.redis_url, keys, config, args, progress))
        except RecordingConflict as conflict:
            sys.stderr.write(f"conquian selfplay: {conflict}\n")
            return 1
        recorded = {
            "namespace": keys.ns,
            "tables": len(tables),
            "first_table": tables[0].table_id,
            "last_table": tables[-1].table_id,
            "events": sum(t.events for t in tables),
        }
    elif args.namespace or args.shards or args.table_deals != 1:
        args.parser.error("--namespace, --shards and --table-deals need --record")
    else:
        result = run_selfplay(config, progress=progress)
    if args.json:
        data = result.as_dict()
        if recorded is not None:
            data["recorded"] = recorded
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_result(result))
        if recorded is not None:
            sys.stdout.write(
                f"  recorded {recorded['tables']} tables ({recorded['first_table']} … "
                f"{recorded['last_table']}), {recorded['events']} events, "
                f"namespace {recorded['namespace']}\n"
            )
    return 0


async def _record(
    url: str,
    keys: KeySpace,
    config: SelfplayConfig,
    args: argparse.Namespace,
    progress: Callable[[int, int], None] | None,
) -> tuple[SelfplayResult, list[RecordedTable]]:
    from services.store import RedisEventStore
    from services.store.client import connect

    client = connect(url)
    try:
        store = RedisEventStore(client, keys)
        return await record_selfplay(config, store, args.table_deals, progress=progress)
    finally:
        await client.aclose()


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
