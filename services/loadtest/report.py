"""The JSON report of a run: what was asked, what was measured, and the time series.

Its keys are listed in ``docs/loadtest.md`` ("Module notes").
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.loadtest.options import Options
from services.loadtest.runner import RunEnd


def build(options: Options, end: RunEnd, started_at: datetime) -> dict[str, Any]:
    """Return the report of a finished run."""
    totals = end.stats.totals()
    seconds = max(end.seconds, 1e-9)
    return {
        "tool": "conquian loadtest",
        "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
        "seconds": round(end.seconds, 3),
        "settings": options.settings(),
        "commands_per_s": round(totals["commands"]["results"] / seconds, 1),
        "rate_sent": round(totals["commands"]["sent"] / seconds, 1),
        "moves_per_s": round(totals["moves_seen"] / seconds, 1),
        **totals,
        "timed_out": end.timed_out,
        "interrupted": end.interrupted,
        "generator": end.generator,
        "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg())},
        "series": end.series,
    }


def write(report: dict[str, Any], path: str) -> None:
    """Write the report as indented JSON (the folder is made if missing)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2) + "\n")


def summary(report: dict[str, Any]) -> str:
    """Return a few lines for the terminal at the end of a run."""
    commands = report["commands"]
    result = report["latency_ms"]["result"]
    view = report["latency_ms"]["view"]
    tables = report["tables"]
    lines = [
        f"{report['commands_per_s']} commands/s over {report['seconds']} s "
        f"({commands['results']} answered of {commands['sent']} sent, "
        f"{commands['rejected']} rejected)",
        f"to the result: p50 {result['p50']} p95 {result['p95']} p99 {result['p99']} "
        f"max {result['max']} ms",
        f"to the view:   p50 {view['p50']} p95 {view['p95']} p99 {view['p99']} "
        f"max {view['max']} ms",
        f"tables: {tables['started']} started, {tables['finished']} finished, "
        f"{tables['deals_finished']} deals",
    ]
    if report["rejections"]:
        lines.append(f"rejections: {report['rejections']}")
    if report["errors"]:
        lines.append(f"errors: {report['errors']}")
    generator = report["generator"]
    lines.append(
        f"the tool itself: {generator['cpu_share']} of a core, its event loop late by p99 "
        f"{generator['loop_lag_ms']['p99']} max {generator['loop_lag_ms']['max']} ms"
    )
    return "\n".join(lines) + "\n"
