"""The ``conquian loadtest`` subcommand: parse, run on one asyncio loop, report, plot.

Exit status: 0 when the run ended with no error (rejections are answers, not errors) and, run
by deals and not stopped by Ctrl-C, every table's match is over; 1 otherwise; 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from services.loadtest import options as run_options

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.loadtest.runner import Outcome


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Register ``conquian loadtest``."""
    parser = run_options.add_parser(subparsers, name)
    parser.set_defaults(handler=run)
    return parser


def raise_open_files() -> int:
    """Raise this process's open-file limit to its hard limit (two sockets a table); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def run(args: argparse.Namespace) -> int:
    """Run the load as the arguments say; write the report and plot; return the exit status."""
    from services.log import configure

    try:
        from services.loadtest import report as run_report
        from services.loadtest.display import Display
        from services.loadtest.links import NoService
        from services.loadtest.runner import Run, make_driver
    except ImportError as missing:
        sys.stderr.write(
            f"conquian loadtest needs its extra: pip install 'conquian[loadtest]' ({missing})\n"
        )
        return 2
    options = run_options.from_args(args)
    configure("WARNING")
    raise_open_files()
    started_at = datetime.now(UTC)
    title = f"conquian loadtest via {options.via} ({options.tables} {options.players} tables)"
    with Display(options.display, title) as display:

        def shown(row: dict[str, Any], stats: Any) -> None:
            display.show(row, stats.counts())

        try:
            outcome = _loop(Run(options, make_driver(options), shown).run())
        except NoService as error:
            sys.stderr.write(f"conquian loadtest: the service does not answer: {error}\n")
            return 1
    report = run_report.build(options, outcome, started_at)
    if options.report:
        run_report.write(report, options.report)
    if options.plot:
        from services.loadtest.plot import draw

        draw(report, options.plot)
    if options.display != "none":
        sys.stdout.write(run_report.summary(report))
    unfinished = (
        options.duration is None
        and not outcome.interrupted
        and (report["tables"]["finished"] < options.tables or outcome.timed_out)
    )
    return 1 if report["errors"] or unfinished else 0


def _loop(main: Any) -> Outcome:
    """Run the coroutine on uvloop when it is installed, else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        outcome: Outcome = asyncio.run(main)
        return outcome
    return uvloop.run(main)  # type: ignore[no-any-return]
