"""JSON Schema of the wire contract, one file per union, written by ``make schema``.

``python -m events.schema docs/schema`` writes ``commands.json`` (every command),
``events.json`` (every domain event) and ``envelope.json`` (a table event in its envelope),
deterministically: keys sorted, indent 2, a trailing newline.  ``--check`` writes nothing and
exits with status 1 when a file is missing or differs (``tests/events/test_schema.py`` fails
the same way).  The schemas describe what goes out: card patterns are the canonical upper-case
form, although the service also accepts lower case and suit symbols.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from events.commands import Command
from events.domain import DomainEvent
from events.envelope import Envelope

__all__ = ["DIALECT", "main", "render", "schemas", "stale", "write"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schemas() -> dict[str, dict[str, Any]]:
    """Return each schema file's name and its JSON Schema (validation mode)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {
        "commands.json": ("Command", TypeAdapter(Command).json_schema()),
        "events.json": ("DomainEvent", TypeAdapter(DomainEvent).json_schema()),
        "envelope.json": ("Envelope", Envelope.model_json_schema()),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (title, schema) in found.items():
        out[name] = {"$schema": DIALECT, "$id": f"conquian/{name}", "title": title, **schema}
    return out


def render(schema: dict[str, Any]) -> str:
    """Return a schema as the text of its file: keys sorted, indent 2, a trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(folder: Path) -> list[Path]:
    """Write every schema file into ``folder`` (created if needed); return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, schema in schemas().items():
        path = folder / name
        path.write_text(render(schema), encoding="utf-8")
        paths.append(path)
    return paths


def stale(folder: Path) -> list[str]:
    """Return the names of the schema files in ``folder`` that are missing or out of date."""
    out = []
    for name, schema in schemas().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render(schema):
            out.append(name)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check``, compare) the schema files; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m events.schema", description="Export the JSON Schema of the contract."
    )
    parser.add_argument("folder", type=Path, help="where the schema files go (docs/schema)")
    parser.add_argument("--check", action="store_true", help="only check they are up to date")
    args = parser.parse_args(argv)
    if args.check:
        old = stale(args.folder)
        if old:
            print(f"stale JSON Schema in {args.folder}: {', '.join(old)}; run make schema")
            return 1
        return 0
    for path in write(args.folder):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
