"""The ``conquian loadtest`` subcommand: parse, run on one asyncio loop, report, plot.

Exit status: 0 when the run ended with no error (rejections are answers, not errors) and, run
by deals and not stopped by Ctrl-C, every table's match is over; 1 otherwise; 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from services.loadtest import options as run_options

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.loadtest.runner import RunEnd


GC_YOUNG = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Register ``conquian loadtest``."""
    parser = run_options.add_parser(subparsers, name)
    parser.set_defaults(handler=run)
    return parser


def raise_open_files(needed: int) -> int:
    """Raise this process's open-file limit to ``needed`` if it is lower; return the limit.

    Past the hard limit only a privileged process may go (root, as on the load machines);
    otherwise the soft limit is raised to the hard one.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    for limits in ((needed, max(needed, hard)), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        except (ValueError, OSError):
            continue
        return limits[0]
    return soft


def files_needed(options: run_options.Options) -> int:
    """Return the open files a run needs: two sockets a table through the gateway, and the
    pooled connections, with room for the rest."""
    if options.via == "gateway":
        return 2 * options.tables + options.http_connections + 256
    return options.shards + 256


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
    needed = files_needed(options)
    limit = raise_open_files(needed)
    if limit < needed:
        sys.stderr.write(
            f"conquian loadtest: {options.tables} tables need about {needed} open files and the "
            f"limit is {limit}: raise it (ulimit -n) or some tables will fail to connect\n"
        )
    started_at = datetime.now(UTC)
    title = f"conquian loadtest via {options.via} ({options.tables} {options.players} tables)"
    with Display(options.display, title) as display:

        def shown(row: dict[str, Any], stats: Any) -> None:
            display.show(row, stats.counts())

        try:
            end = _loop(Run(options, make_driver(options), shown).run())
        except NoService as error:
            sys.stderr.write(f"conquian loadtest: the service does not answer: {error}\n")
            return 1
    report = run_report.build(options, end, started_at)
    if options.report:
        run_report.write(report, options.report)
    if options.plot:
        from services.loadtest.plot import draw

        draw(report, options.plot)
    if options.display != "none":
        sys.stdout.write(run_report.summary(report))
    unfinished = (
        options.duration is None
        and not end.interrupted
        and (report["tables"]["finished"] < options.tables or end.timed_out)
    )
    return 1 if report["errors"] or unfinished else 0


def _loop(main: Any) -> RunEnd:
    """Run the coroutine on uvloop when it is installed, else on asyncio's loop.

    What was made before (the modules, the options) lives as long as the process: frozen,
    the garbage collector skips it; and it runs less often, so that a table's short-lived
    replies die before a collection moves them to an older generation (``docs/loadtest.md``).
    """
    gc.freeze()
    gc.set_threshold(GC_YOUNG, 10, 10)
    try:
        import uvloop
    except ImportError:
        end: RunEnd = asyncio.run(main)
        return end
    return uvloop.run(main)  # type: ignore[no-any-return]
