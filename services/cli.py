"""The ``conquian`` console script: argparse subcommands, each registered by its own module.

This module holds no business logic.  A subcommand module provides

    def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser

which adds ``subparsers.add_parser(name, help=...)``, its arguments, and
``parser.set_defaults(handler=run)`` where ``run(args: argparse.Namespace) -> int`` returns the
exit status.  Registering it is one line in ``SUBCOMMANDS``.  Keep heavy imports (web servers,
Redis clients) inside ``run`` so that every subcommand starts fast.  Output is written with
``sys.stdout.write``, never ``print``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import TypeAlias

import services.lobby.cli
import services.selfplay.cli
import services.serve.cli
from services import archive, audit, chaos, loadtest, projector
from services.audit import replay
from services.store import spread

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Registrar = Callable[[Subparsers, str], argparse.ArgumentParser]
Handler = Callable[[argparse.Namespace], int]

# One line per subcommand: (name, module.add_parser).
SUBCOMMANDS: list[tuple[str, Registrar]] = [
    ("selfplay", services.selfplay.cli.add_parser),
    ("audit", audit.add_parser),
    ("replay", replay.add_parser),
    ("project", projector.add_parser),
    ("serve", services.serve.cli.add_parser),
    ("shards", spread.add_parser),
    ("loadtest", loadtest.add_parser),
    ("archive", archive.add_parser),
    ("lobby", services.lobby.cli.add_parser),
    ("chaos", chaos.add_parser),
]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``conquian`` parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="conquian", description="Conquian table service and tools."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, register in SUBCOMMANDS:
        register(subparsers, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process arguments), run the subcommand, return its status.

    Bad arguments exit with status 2 and a message naming the argument (argparse).
    """
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


def _version() -> str:
    try:
        return metadata.version("conquian")
    except metadata.PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
