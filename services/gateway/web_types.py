"""TypeScript declarations of the wire contract for the web page's client module.

``python -m services.gateway.web_types docs/schema services/gateway/web/conquian-types.d.ts``
(run by ``make schema``) turns the JSON Schema files of ``docs/schema/`` into one ``.d.ts``:
an interface per command and event, and the unions ``Command``, ``DomainEvent`` and
``Envelope``.  ``--check`` writes nothing and exits 1 when the file is stale; ``docs/web.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.gateway.generated import write_or_check

FILES = ("commands.json", "events.json", "envelope.json")
HEADER = (
    "// The Conquian wire contract as TypeScript declarations, for conquian-client.js.\n"
    "// Generated from docs/schema/*.json by `python -m services.gateway.web_types`\n"
    "// (make schema); do not edit by hand.\n"
)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def ts_type(schema: dict[str, Any]) -> str:
    """Return the TypeScript type of a JSON Schema fragment (the subset pydantic writes).

    >>> ts_type({"anyOf": [{"type": "integer"}, {"type": "null"}]})
    'number | null'
    >>> ts_type({"type": "array", "items": {"type": "string"}})
    'string[]'
    """
    if "$ref" in schema:
        return _ref_name(schema["$ref"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_wrapped(ts_type(s)) for s in schema[key])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return "number"
    if kind in ("string", "boolean", "null"):
        return str(kind)
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(ts_type(s) for s in schema["prefixItems"]) + "]"
        return f"{_wrapped(ts_type(schema.get('items', {})))}[]"
    if kind == "object" and "properties" not in schema:
        extra = schema.get("additionalProperties")
        value = ts_type(extra) if isinstance(extra, dict) else "unknown"
        names = schema.get("propertyNames", {}).get("enum")
        key = " | ".join(json.dumps(n) for n in names) if names else "string"
        return f"{{ [key in {key}]?: {value} }}" if names else f"{{ [key: string]: {value} }}"
    if kind == "object":
        return _object_body(schema, "")
    return "unknown"


def _wrapped(text: str) -> str:
    return f"({text})" if " | " in text else text


def _comment(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    lines = [line.rstrip() for line in text.strip().replace("*/", "* /").splitlines()]
    return [f"{indent}/**", *[f"{indent} * {line}".rstrip() for line in lines], f"{indent} */"]


def _object_body(schema: dict[str, Any], indent: str) -> str:
    required = set(schema.get("required", ()))
    lines = ["{"]
    for name, prop in schema.get("properties", {}).items():
        lines += _comment(prop.get("description"), indent + "  ")
        optional = "" if name in required else "?"
        lines.append(f"{indent}  {name}{optional}: {ts_type(prop)};")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _declaration(name: str, schema: dict[str, Any]) -> str:
    lines = _comment(schema.get("description"), "")
    if schema.get("type") == "object" and "properties" in schema:
        lines.append(f"export interface {name} {_object_body(schema, '')}")
    else:
        lines.append(f"export type {name} = {ts_type(schema)};")
    return "\n".join(lines)


def render(folder: Path) -> str:
    """Return the ``.d.ts`` text for the schema files in ``folder``.

    Raises ValueError when two files define one name differently.
    """
    definitions: dict[str, dict[str, Any]] = {}
    roots: list[tuple[str, dict[str, Any]]] = []
    for file in FILES:
        schema = json.loads((folder / file).read_text(encoding="utf-8"))
        for name, definition in schema.get("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                raise ValueError(f"{file} defines {name} unlike an earlier file")
        root = {k: v for k, v in schema.items() if not k.startswith("$")}
        roots.append((schema["title"], root))
    blocks = [_declaration(name, definitions[name]) for name in sorted(definitions)]
    blocks += [_declaration(name, root) for name, root in roots]
    return HEADER + "\n" + "\n\n".join(blocks) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the declarations file; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m services.gateway.web_types",
        description="TypeScript declarations of the wire contract from its JSON Schema.",
    )
    parser.add_argument("schema_folder", type=Path, help="docs/schema")
    parser.add_argument("output", type=Path, help="services/gateway/web/conquian-types.d.ts")
    parser.add_argument("--check", action="store_true", help="only check it is up to date")
    args = parser.parse_args(argv)
    return write_or_check(args.output, render(args.schema_folder), args.check)


if __name__ == "__main__":
    sys.exit(main())
