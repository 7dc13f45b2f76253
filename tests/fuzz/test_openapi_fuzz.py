"""schemathesis over every operation of the gateway's OpenAPI document, against the served stack.

Each operation gets cases that fit its schema and cases that break it (schemathesis' positive
and negative modes).  Hypothesis also chooses, per case, whether to aim it at a known table
(``fz-play``, a deal in play; ``fz-open``, a seat free) and which credentials to present (none,
either seat's token, a wrong one, or what schemathesis made), so that the cases reach the
tables, the seats and the engine, not only the checks on ids and tokens.  Every answer:

* is no 5xx, and a rejection has the documented shape, its status the one of its code;
* passes schemathesis' checks of the document (status, content type, body schema);
* after a rejection, no table moved (head version and hash, length of the event stream);
* shows the viewer no card hidden from it and no seed (``fuzz_truth``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from fuzz_checks import body_of, check_rejection, is_rejection
from fuzz_payloads import RAW_BODIES
from fuzz_stack import Tables, examples
from fuzz_truth import Truth, leaks
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.services.gateway_stack import Stack

pytestmark = pytest.mark.fuzz

CASES = {"GET /healthz": 10, "GET /readyz": 10, "GET /metrics": 10}
"""Cases of an operation that reads no table; the others get :data:`CASES_PER_OPERATION`, and
the seats' commands :data:`CASES_OF_COMMANDS`."""
CASES_PER_OPERATION = 50
CASES_OF_COMMANDS = 150
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
PENDING_RETRIES = 50
"""A 202 (queued, no result within the wait) is sent again with the same command id, as a
client does, until it has its result."""


def credentials(tables: Tables, table_id: str, choice: str) -> dict[str, str] | None:
    """Return the Authorization header of a choice (None: keep what schemathesis made)."""
    if choice == "generated":
        return None
    if choice == "none":
        return {}
    if choice == "wrong":
        return {"Authorization": "Bearer not-a-seat-token"}
    seat = int(choice[-1])
    token = tables.token(table_id, seat) or tables.token(tables.play, seat)
    return {"Authorization": f"Bearer {token}"}


def viewer(tables: Tables, table_id: str, headers: dict[str, Any]) -> int | None:
    """Return the seat of the token the request presented on ``table_id`` (None: spectator)."""
    presented = str(headers.get("Authorization", "")).removeprefix("Bearer ").strip()
    for seat in (0, 1):
        if presented and presented == tables.token(table_id, seat):
            return seat
    return None


TABLE_OPERATIONS = (
    "POST /tables",
    "POST /tables/{table_id}/join",
    "POST /tables/{table_id}/commands",
    "GET /tables/{table_id}",
    "GET /tables/{table_id}/view",
    "GET /tables/{table_id}/events",
)
DECIDED = ("seat/taken", "table/full", "table/exists", "command/stale_version", "move/")
"""Codes only the engine gives: a case that gets one reached a table."""


def reached(outcome: str) -> bool:
    """Say whether an answer (``"<status> <code>"``) shows the request reached a table."""
    status, _, code = outcome.partition(" ")
    return status in ("200", "201") or code.startswith(DECIDED)


def operations(stack: Stack) -> list[Any]:
    schema = schemathesis.openapi.from_dict(stack.app.openapi())
    found = [result.ok() for result in schema.get_all_operations()]
    return sorted(found, key=lambda op: op.label)


def fuzz_operation(operation: Any, stack: Stack, tables: Tables, truth: Truth) -> dict[str, int]:
    """Run the cases of one operation; return how many answers each status and code got."""
    base_url = f"http://127.0.0.1:{stack.port}"
    session = requests.Session()
    client = httpx.Client(base_url=base_url, timeout=30)
    seen: dict[str, int] = {}
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    aim = st.sampled_from(["generated", "play", "play", tables.open])
    who = st.sampled_from(["generated", "none", "wrong", "seat0", "seat1", "seat0", "seat1"])
    count = CASES.get(operation.label, CASES_PER_OPERATION)
    if operation.label.endswith("/commands"):
        count = CASES_OF_COMMANDS

    @examples(count)
    @given(case=cases, target=aim, choice=who, same_table=st.booleans())
    def run(case: Any, target: str, choice: str, same_table: bool) -> None:
        if truth.over_now(tables.play):  # a resignation ended it: cards to hide again
            tables.renew(client)
        if target == "play":
            target = tables.play
        if "table_id" in (case.path_parameters or {}) and target != "generated":
            case.path_parameters["table_id"] = target
        table_id = str((case.path_parameters or {}).get("table_id", tables.play))
        if same_table and isinstance(case.body, dict) and "table_id" in case.body:
            case.body["table_id"] = table_id  # past the wrong-table check, on to the engine
        headers = credentials(tables, table_id, choice)
        if headers is not None:
            case.headers = {k: v for k, v in (case.headers or {}).items() if k != "Authorization"}
            case.headers.update(headers)
        watched = [*tables.ids, table_id]
        if isinstance(case.body, dict) and isinstance(case.body.get("table_id"), str):
            watched.append(case.body["table_id"])
        before = truth.marks_now(watched)
        response = case.call(base_url=base_url, session=session, timeout=30)
        for _ in range(PENDING_RETRIES):
            if response.status_code != 202:
                break
            response = case.call(base_url=base_url, session=session, timeout=30)
        answer = body_of(response.content)
        outcome = f"{response.status_code} {answer.get('code') if isinstance(answer, dict) else ''}"
        seen[outcome.strip()] = seen.get(outcome.strip(), 0) + 1
        case.validate_response(response, checks=CHECKS)
        if is_rejection(response.status_code, response.content):
            check_rejection(body_of(response.content), response.status_code)
            assert truth.marks_now(watched) == before, "a rejected request changed a table"
        request = json.dumps([case.path_parameters, case.query, case.body], default=str)
        seat = viewer(tables, table_id, case.headers or {})
        shown = leaks(response.content, truth.hidden_now(table_id, seat), request)
        assert not shown, f"{operation.label} showed {shown} to seat {seat}: {response.text}"

    try:
        run()
    finally:
        session.close()
        client.close()
    return seen


def describe(error: BaseException) -> str:
    """Return an error's type and text, and those of the errors it groups (a flaky failure's
    first one among them)."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, BaseExceptionGroup):
        text += "".join(f"\n  {describe(inner)}" for inner in error.exceptions)
    return text


async def test_every_operation_of_the_openapi_document(
    stack: Stack, tables: Tables, truth: Truth
) -> None:
    found = operations(stack)
    labels = {op.label for op in found}
    assert set(TABLE_OPERATIONS) <= labels
    failures: dict[str, str] = {}
    seen: dict[str, dict[str, int]] = {}
    for operation in found:  # every operation runs, so that one report names every failure
        try:
            seen[operation.label] = await asyncio.to_thread(
                fuzz_operation, operation, stack, tables, truth
            )
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup is a group
            failures[operation.label] = describe(exc)[:6000]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    assert set(seen) == labels  # every operation, the ones added later too
    for label in TABLE_OPERATIONS:  # the cases got past the checks of ids and tokens, to tables
        assert any(reached(outcome) for outcome in seen[label]), (label, seen[label])
    moves = [o for o in seen["POST /tables/{table_id}/commands"] if " move/" in o]
    assert moves, seen["POST /tables/{table_id}/commands"]  # and on to the engine


async def test_json_text_no_encoder_makes(stack: Stack, tables: Tables, truth: Truth) -> None:
    """The bodies of ``fuzz_payloads.RAW_BODIES`` (lone surrogates, NaN, 5,000 digits, deep
    nesting, bytes that are not UTF-8…) on every route that reads one, with a seat's token."""
    token = {"Authorization": f"Bearer {tables.tokens[tables.play][0]}"}
    for url in ("/tables", f"/tables/{tables.open}/join", f"/tables/{tables.play}/commands"):
        for body in RAW_BODIES:
            before = await truth.marks(tables.ids)
            response = await stack.http.post(url, content=body, headers=token)
            assert response.status_code < 500, (url, body[:80], response.text)
            if response.status_code == 201:  # a create that the route completes: a table
                assert url == "/tables" and response.json()["ok"] is True, body[:80]
                continue
            code = check_rejection(response.json(), response.status_code)
            assert await truth.marks(tables.ids) == before, (url, body[:80], code)


def test_the_document_names_the_answers_the_fuzzer_found(stack: Stack) -> None:
    """Found by schemathesis: ``GET /tables/{id}`` documented 200 and 422 only, and answered
    404 (and 503); ``/metrics`` documented JSON, and answered Prometheus text; ``POST /tables``
    did not document the 202 it answers when the worker is slow (a long run on a loaded
    machine)."""
    paths = stack.app.openapi()["paths"]
    public = paths["/tables/{table_id}"]["get"]["responses"]
    assert {"200", "404", "422", "503"} <= set(public)
    assert public["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/Rejection")
    metrics = paths["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(metrics) == {"text/plain"}
    for path in ("/tables", "/tables/{table_id}/join", "/tables/{table_id}/commands"):
        assert "202" in paths[path]["post"]["responses"], path  # queued, no result yet
