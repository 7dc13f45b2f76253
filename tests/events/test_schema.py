"""Tests of the exported JSON Schema: docs/schema is up to date and describes the models."""

from __future__ import annotations

import json
from pathlib import Path

from events import schema
from events.commands import COMMAND_TYPES
from events.domain import EVENT_TYPES, TABLE_EVENT_TYPES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schema"


def test_docs_schema_is_up_to_date(tmp_path: Path) -> None:
    schema.write(tmp_path)
    for path in sorted(tmp_path.iterdir()):
        committed = DOCS / path.name
        assert committed.is_file(), f"docs/schema/{path.name} is missing: run make schema"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"docs/schema/{path.name} is stale: run make schema"
        )
    assert sorted(p.name for p in DOCS.glob("*.json")) == sorted(schema.schemas())


def test_writing_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    schema.write(first)
    schema.write(second)
    for name in schema.schemas():
        text = (first / name).read_text(encoding="utf-8")
        assert text == (second / name).read_text(encoding="utf-8")
        assert text.endswith("}\n")
        assert json.loads(text)["$schema"] == schema.DIALECT


def test_check_flag_reports_a_stale_folder(tmp_path: Path, capsys: object) -> None:
    assert schema.main([str(tmp_path), "--check"]) == 1
    assert schema.main([str(tmp_path)]) == 0
    assert schema.main([str(tmp_path), "--check"]) == 0
    (tmp_path / "events.json").write_text("{}\n", encoding="utf-8")
    assert schema.stale(tmp_path) == ["events.json"]


def test_unions_are_discriminated_on_type_and_tags_are_required() -> None:
    found = schema.schemas()
    commands, events = found["commands.json"], found["events.json"]
    assert set(commands["discriminator"]["mapping"]) == set(COMMAND_TYPES)
    assert set(events["discriminator"]["mapping"]) == set(EVENT_TYPES)
    payload = found["envelope.json"]["properties"]["payload"]
    assert set(payload["discriminator"]["mapping"]) == set(TABLE_EVENT_TYPES)
    for definition in events["$defs"].values():
        if "type" in definition.get("properties", {}):
            assert {"type", "v"} <= set(definition["required"])
            assert definition["additionalProperties"] is False
    for kind in COMMAND_TYPES:
        name = commands["discriminator"]["mapping"][kind].rsplit("/", 1)[-1]
        assert {"type", "command_id", "table_id"} <= set(commands["$defs"][name]["required"])
