"""The web page's files as the gateway serves them (no browser here: ``tests/browser/``), and
the TypeScript declarations generated from the JSON Schema (``services/gateway/web_types``)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from services.gateway import web_types
from services.gateway.app import create_app
from services.gateway.web_pages import FOLDER
from services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DECLARATIONS = FOLDER / "conquian-types.d.ts"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings())  # the lifespan is not run: these routes need no Redis
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        yield http


async def test_the_page_is_served_at_the_root(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'src="web/app.js"' in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    head = await client.head("/")
    assert head.status_code == 200


async def test_every_module_is_served_as_javascript_and_its_imports_exist(
    client: httpx.AsyncClient,
) -> None:
    modules = sorted(FOLDER.glob("*.js"))
    assert {p.name for p in modules} >= {"app.js", "conquian-client.js", "fairness.js"}
    for path in modules:
        answer = await client.get(f"/web/{path.name}")
        assert answer.status_code == 200, path.name
        assert answer.headers["content-type"].startswith("text/javascript")
        assert answer.text == path.read_text(encoding="utf-8")
        for target in re.findall(r"from '\./([^']+)'", answer.text):
            assert (FOLDER / target).is_file(), f"{path.name} imports a missing {target}"


async def test_a_missing_file_is_the_usual_json_404(client: httpx.AsyncClient) -> None:
    answer = await client.get("/web/nothing-here.js")
    assert answer.status_code == 404
    assert answer.json()["code"] == "http/not_found"


def test_the_page_fetches_nothing_from_the_internet() -> None:
    for path in FOLDER.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(src|href|import|url)\s*[=(]?\s*['\"]?(https?:)?//", text), path


def test_the_committed_declarations_match_the_json_schema() -> None:
    assert DECLARATIONS.read_text(encoding="utf-8") == web_types.render(ROOT / "docs/schema")
    assert web_types.main([str(ROOT / "docs/schema"), str(DECLARATIONS), "--check"]) == 0
    assert "export type Command = CreateTable | Join" in DECLARATIONS.read_text()


def test_the_check_fails_on_a_changed_schema(tmp_path: Path) -> None:
    schema = tmp_path / "schema"
    shutil.copytree(ROOT / "docs/schema", schema)
    commands = json.loads((schema / "commands.json").read_text())
    commands["$defs"]["Turn"]["properties"]["hint"] = {"type": "string"}
    (schema / "commands.json").write_text(json.dumps(commands))
    assert web_types.main([str(schema), str(DECLARATIONS), "--check"]) == 1
    assert "hint?: string;" in web_types.render(schema)
