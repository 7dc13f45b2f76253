"""The live progress of a run: a rich table on a terminal, plain lines elsewhere.

Each interval shows commands/s (results received in the interval), p50 and p99 of the
interval's latencies to the result and to the view, rejections, errors, tables, and the tool's
own CPU share and longest event-loop lag (``selfwatch``); the rich display also keeps the
run's totals.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO


def _ms(value: object) -> str:
    return "-" if value is None else f"{value:.1f}"


def line(row: Mapping[str, Any]) -> str:
    """Return one interval as a plain line.

    >>> text = line({"t": 2.0, "commands_per_s": 10.0, "result_p50_ms": 1.5,
    ...     "result_p99_ms": 3.0, "view_p50_ms": None, "view_p99_ms": None, "rejected": 0,
    ...     "errors": 0, "tables_active": 4, "tables_finished": 1})
    >>> text.split(" view")[0]
    't=2.0s 10.0 cmd/s result p50 1.5 p99 3.0 ms'
    """
    moves = f" bot moves {row['moves_per_s']:.1f}/s" if row.get("moves_seen") else ""
    return (
        f"t={row['t']:.1f}s {row['commands_per_s']:.1f} cmd/s{moves}"
        f" result p50 {_ms(row['result_p50_ms'])} p99 {_ms(row['result_p99_ms'])} ms"
        f" view p50 {_ms(row['view_p50_ms'])} p99 {_ms(row['view_p99_ms'])} ms"
        f" rejected {row['rejected']} errors {row['errors']}"
        f" tables {row['tables_active']} active {row['tables_finished']} finished"
        f" | tool cpu {row.get('generator_cpu_share', '-')} lag"
        f" {_ms(row.get('generator_lag_max_ms'))} ms"
    )


class Display:
    """Shows each interval as it is cut (``mode``: auto, rich, plain or none)."""

    def __init__(self, mode: str, title: str, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        if mode == "auto":
            mode = "rich" if self.out.isatty() else "plain"
        self.mode = mode
        self.title = title
        self.live: Any = None
        self.rows: list[Mapping[str, Any]] = []

    def __enter__(self) -> Display:
        if self.mode == "rich":
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self._table({}), console=Console(file=self.out), auto_refresh=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.out.write("\n")

    def show(self, row: Mapping[str, Any], totals: Mapping[str, Any]) -> None:
        """Show an interval's row with the totals so far."""
        if self.mode == "plain":
            self.out.write(line(row) + "\n")
            self.out.flush()
        elif self.live is not None:
            self.rows = [*self.rows[-9:], row]
            self.live.update(self._table(totals), refresh=True)

    def _table(self, totals: Mapping[str, Any]) -> Any:
        from rich.table import Table

        table = Table(title=self.title, caption=_caption(totals), padding=(0, 1))
        columns = ("t s", "cmd/s", "moves/s", "result", "view", "rej", "err", "tables", "tool")
        for name in columns:
            table.add_column(name, justify="right", no_wrap=True)
        for row in self.rows:
            table.add_row(
                f"{row['t']:.1f}",
                f"{row['commands_per_s']:.1f}",
                f"{row['moves_per_s']:.1f}",
                f"{_ms(row['result_p50_ms'])}/{_ms(row['result_p99_ms'])}",
                f"{_ms(row['view_p50_ms'])}/{_ms(row['view_p99_ms'])}",
                str(row["rejected"]),
                str(row["errors"]),
                f"{row['tables_active']}/{row['tables_finished']}",
                f"{row.get('generator_cpu_share', '-')}/{_ms(row.get('generator_lag_max_ms'))}",
            )
        return table


LEGEND = (
    "result, view: p50/p99 ms of the interval; tables: active/done; "
    "tool: its CPU share/event loop lag ms"
)


def _caption(totals: Mapping[str, Any]) -> str:
    if not totals:
        return LEGEND
    commands = totals["commands"]
    tables = totals["tables"]
    return (
        f"{LEGEND}\n"
        f"commands {commands['sent']} sent, {commands['results']} answered, "
        f"{commands['rejected']} rejected; errors {sum(totals['errors'].values())}; "
        f"tables {tables['started']} started, {tables['finished']} finished"
    )
