"""``conquian chaos``: the whole service under load while its processes are SIGKILLed.

Exit status: 0 when every kind was killed and every check held (``services.chaos.report``),
1 otherwise, 2 for bad arguments.  The JSON report goes to ``--report`` (and to stdout with
``--json``); the text table to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.cli import Subparsers


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Register ``conquian chaos``."""
    from services.chaos.targets import KINDS

    parser = subparsers.add_parser(
        name,
        help="SIGKILL services and Redis under load, then check nothing was lost or doubled",
        description="Starts a private Redis and `conquian serve` on it, drives scripted tables "
        "through the gateway with `conquian loadtest --retry --ledger`, and SIGKILLs engine "
        "workers, the projector, the bots runner, the turn clock, the gateway and Redis at "
        "seeded random moments.  Then checks the ledger against the events, audits every "
        "table and compares the views with a rebuild.  See docs/chaos.md.",
    )
    parser.add_argument("--duration", type=_positive, default=180.0,
                        help="seconds of load and kills (default: %(default)s)")  # fmt: skip
    parser.add_argument("--interval", type=_positive, default=6.0,
                        help="mean seconds between kills, after the last one is replaced "
                        "(default: %(default)s)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the kill schedule and of the scripted moves")  # fmt: skip
    parser.add_argument("--tables", type=int, default=8,
                        help="tables played at once (default: %(default)s)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2,
                        help="engine worker processes (default: %(default)s)")  # fmt: skip
    parser.add_argument("--shards", type=int, default=8,
                        help="shards of the run's namespace (default: %(default)s)")  # fmt: skip
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="what to kill, comma-separated (default: %(default)s)")  # fmt: skip
    parser.add_argument("--folder", type=Path, default=None,
                        help="the run's folder, new or empty: Redis data, logs, ledger "
                        "(default: a new temporary folder, named in the report)")  # fmt: skip
    parser.add_argument("--report", metavar="PATH", help="write the JSON report here")
    parser.add_argument("--json", action="store_true", help="print the JSON report too")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run chaos as the arguments say; print and write the report; return the exit status."""
    from services.chaos import report as chaos_report
    from services.chaos.harness import Plan
    from services.chaos.harness import run as run_chaos
    from services.chaos.targets import KINDS
    from services.log import configure

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds or args.tables < 1 or args.workers < 1 or args.shards < 1:
        sys.stderr.write(
            f"conquian chaos: kinds are {', '.join(KINDS)} (got {unknown or 'none'}); "
            "--tables, --workers and --shards are at least 1\n"
        )
        return 2
    if args.folder is not None and args.folder.exists() and any(args.folder.iterdir()):
        sys.stderr.write(f"conquian chaos: {args.folder} is not empty: give a new folder\n")
        return 2
    configure("WARNING")
    folder = args.folder or Path(tempfile.mkdtemp(prefix="conquian-chaos-"))
    plan = Plan(
        duration=args.duration,
        interval=args.interval,
        seed=args.seed,
        folder=folder,
        tables=args.tables,
        workers=args.workers,
        shards=args.shards,
        kinds=kinds,
    )
    try:
        findings = run_chaos(plan)
    except RuntimeError as error:
        sys.stderr.write(f"conquian chaos: {error}\n")
        return 1
    report = chaos_report.build(plan, findings)
    data = json.dumps(report, indent=2) + "\n"
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(data)
    if args.json:
        sys.stdout.write(data)
    sys.stdout.write(chaos_report.text(report))
    return 0 if report["ok"] else 1
