"""The ledger of a run (``--ledger PATH``): one JSON line per command the service accepted.

Each line is ``{"table_id", "command_id", "seat", "version", "at"}``: the seat that sent it
(null for a create), the table version its answer named, and the wall-clock time the answer
arrived (``time.time()``).  A command sent again with the same ``command_id`` after an outage is
written once, when its answer comes.  ``conquian chaos`` checks the ledger against the tables'
events (``docs/chaos.md``): every line must match exactly one applied command.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Entry:
    """One accepted command as the client saw its answer."""

    table_id: str
    command_id: str
    seat: int | None
    version: int
    at: float


class Ledger:
    """An append-only JSON-lines file, flushed line by line (a killed run keeps what it wrote)."""

    def __init__(self, path: str | Path) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = target.open("a", encoding="utf-8")

    def accepted(self, table_id: str, command_id: str, seat: int | None, version: int) -> None:
        """Write one accepted command."""
        if self._file is None:
            raise ValueError("the ledger is closed")
        line = {
            "table_id": table_id,
            "command_id": command_id,
            "seat": seat,
            "version": version,
            "at": round(time.time(), 3),
        }
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None


def read_ledger(path: str | Path) -> list[Entry]:
    """Return the entries of a ledger file, in the order written.

    Raises ValueError for a line that is not a ledger entry (a half-written last line of a
    killed run is skipped).
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    entries = []
    for number, line in enumerate(lines, start=1):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not JSON: {line[:80]!r}") from None
        entries.append(
            Entry(
                str(data["table_id"]),
                str(data["command_id"]),
                data["seat"],
                int(data["version"]),
                float(data["at"]),
            )
        )
    return entries
