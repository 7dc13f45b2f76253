"""What must hold after a run that killed processes: the checks of ``docs/chaos.md``.

* every command a client got an accepted answer for is in its table's events, applied once:
  a command's events are one run of consecutive versions (the append writes them in one atomic
  call), so a command id in two runs was applied twice (``doubled``) and a ledger entry with no
  run was ``lost``;
* ``conquian audit --all`` finds every table clean;
* ``conquian project --rebuild`` writes the very views that are stored.

The CLI checks run ``python -m services.cli`` in a child process, as an operator would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.loadtest.ledger import Entry
from services.store.base import EventStore, StoredEvent
from services.store.keys import KeySpace
from services.tables.stored_parts import STORED_PARTS

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 600.0


def command_runs(events: Iterable[StoredEvent]) -> list[str]:
    """Return the command id of each run of consecutive events that share one, in order.

    >>> from services.store.base import StoredEvent as E
    >>> command_runs([E("t", v, {"command_id": c}, "", "") for v, c in enumerate("aabcb")])
    ['a', 'b', 'c', 'b']
    """
    runs: list[str] = []
    for event in events:
        command_id = str(event.body["command_id"])
        if not runs or runs[-1] != command_id:
            runs.append(command_id)
    return runs


def applied_twice(runs: Sequence[str]) -> list[str]:
    """Return the command ids that head more than one run (each once, sorted)."""
    return sorted(command for command, count in Counter(runs).items() if count > 1)


@dataclass
class LedgerCheck:
    """The ledger against the events: what was accepted, lost and doubled."""

    accepted: int = 0
    tables: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    version_mismatch: list[str] = field(default_factory=list)
    """Accepted commands whose last event is not at the version their answer named."""

    def as_dict(self) -> dict[str, Any]:
        """Return the check as JSON data (ids listed up to 20 of each)."""
        return {
            "accepted": self.accepted,
            "tables": self.tables,
            "lost": len(self.lost),
            "doubled": len(self.doubled),
            "version_mismatch": len(self.version_mismatch),
            "lost_ids": self.lost[:20],
            "doubled_ids": self.doubled[:20],
            "version_mismatch_ids": self.version_mismatch[:20],
        }


async def check_ledger(store: EventStore, entries: Sequence[Entry]) -> LedgerCheck:
    """Compare the ledger with every event of its tables (and find commands applied twice,
    in the ledger or not)."""
    by_table: dict[str, list[Entry]] = {}
    for entry in entries:
        by_table.setdefault(entry.table_id, []).append(entry)
    check = LedgerCheck(accepted=len(entries), tables=len(by_table))
    for table_id, accepted in sorted(by_table.items()):
        events = await store.read(table_id)
        runs = command_runs(events)
        check.doubled += [f"{table_id}/{c}" for c in applied_twice(runs)]
        last_version = {str(e.body["command_id"]): e.version for e in events}
        for entry in accepted:
            if entry.command_id not in last_version:
                check.lost.append(f"{table_id}/{entry.command_id}")
            elif last_version[entry.command_id] != entry.version:
                check.version_mismatch.append(f"{table_id}/{entry.command_id}")
    return check


async def applied_twice_anywhere(store: EventStore) -> list[str]:
    """Return ``table/command`` for every command applied twice in any table of the store."""
    doubled: list[str] = []
    async for table_id in store.tables():
        runs = command_runs(await store.read(table_id))
        doubled += [f"{table_id}/{c}" for c in applied_twice(runs)]
    return sorted(doubled)


async def read_views(client: Any, keys: KeySpace, tables: Iterable[str]) -> dict[str, Any]:
    """Return every stored view part of the tables, ``<table>/<part>`` → JSON (None: none)."""
    out: dict[str, Any] = {}
    for table in tables:
        for part in STORED_PARTS:
            raw = await client.get(keys.table_view(table, part))
            out[f"{table}/{part}"] = None if raw is None else json.loads(raw)
    return out


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Return the keys whose values differ between two ``read_views`` results, sorted."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def run_cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``conquian <args>`` in a child process with ``env``; return what it did."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def audit_all(env: Mapping[str, str]) -> dict[str, Any]:
    """Return ``conquian audit --all --json``'s summary (``ok``, ``tables``, ``failed``, …).

    Raises RuntimeError when the audit prints no summary (it could not run).
    """
    done = run_cli(env, "audit", "--all", "--json")
    try:
        summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"conquian audit did not run: {done.stderr[-2000:]}") from None
    return summary


def rebuild_views(env: Mapping[str, str]) -> None:
    """Run ``conquian project --rebuild``.

    Raises RuntimeError when it fails.
    """
    done = run_cli(env, "project", "--rebuild")
    if done.returncode != 0:
        raise RuntimeError(f"conquian project --rebuild failed: {done.stderr[-2000:]}")
