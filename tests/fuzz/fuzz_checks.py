"""The checks every fuzzed answer passes: no 5xx, the documented rejection shape.

A rejection is ``{"ok": false, "code": "<area>/<what>", "message": ...}`` with the HTTP status
of its code (``services.gateway.errors.status_of``, the table of docs/api.md).
"""

from __future__ import annotations

import json
from typing import Any

from services.gateway.errors import STATUS_BY_CODE, STATUS_BY_FAMILY, status_of


def body_of(content: bytes | str) -> Any:
    """Return the JSON of an answer, None when it is no JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return None


def is_rejection(status: int, content: bytes | str) -> bool:
    """Say whether an answer refuses the request (a 4xx, or a body with ``ok: false``)."""
    if status >= 400:
        return True
    body = body_of(content)
    return isinstance(body, dict) and body.get("ok") is False


def check_rejection(body: Any, status: int | None = None) -> str:
    """Assert that ``body`` is a documented rejection (of ``status``); return its code."""
    assert isinstance(body, dict) and body.get("ok") is False, body
    code, message = body.get("code"), body.get("message")
    assert isinstance(code, str) and isinstance(message, str), body
    area = code.partition("/")[0]
    assert code in STATUS_BY_CODE or area in STATUS_BY_FAMILY, f"undocumented code {code!r}"
    if status is not None:
        assert status_of(code) == status, (status, body)
    return code
