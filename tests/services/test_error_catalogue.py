"""The error catalogue (``engine/codes.py``): every code raised is in it, code refers to it
rather than spelling codes out, the errors share its base, and docs/api.md's table is current."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from engine import errors as engine_errors
from engine.codes import Code, CodedError, close_of, lookup, status_of
from events import base as contract
from events.envelope import HashMismatch
from events.fairness import FairnessError, InvalidSeed, UnknownAlgorithm
from services.followers.bots_runner import BotError
from services.gateway import error_table
from services.gateway.errors import ApiError
from services.store.base import StoreError, VersionConflict
from services.store.keys import InvalidTableId
from services.tables.decide import TableError
from services.tables.table import FoldError

ROOT = Path(__file__).parents[2]
CODE_LIKE = re.compile(r"[a-z]+/[a-z_]+")
NOT_CODES = {"application", "text", "docs"}
"""Families of code-like literals that are no error codes: MIME types, a docs path."""
OPERATOR_FAMILIES = {"archive", "audit"}
"""Findings of the archive and the audit: an operator's report (docs/audit.md,
docs/archive.md), never sent to a client, so outside the catalogue."""
OPERATOR_CODES = {"projector/busy"}
"""A projector's refusal to start beside another, printed by its CLI to the operator."""
CLIENT_SIDE = ("services/loadtest/",)
"""The load tool is a client of the gateway: its codes are its own labels for failures, and it
reads the wire's codes as any client does."""
WIRE_EXAMPLES = {("services/gateway/messages.py", "move/not_your_turn")}
"""A JSON Schema example, which is wire text by nature."""


def _literals(path: Path) -> list[tuple[int, str]]:
    """Return the string constants of a module that look like codes, with their lines."""
    tree = ast.parse(path.read_text("utf-8"))
    found = []
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_text and CODE_LIKE.fullmatch(node.value):
            found.append((node.lineno, node.value))
    return found


def _sources() -> list[Path]:
    return sorted(p for top in ("engine", "events", "services") for p in (ROOT / top).rglob("*.py"))


def test_every_code_like_literal_is_in_the_catalogue() -> None:
    missing = []
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(CLIENT_SIDE):
            continue
        for line, text in _literals(path):
            family = text.partition("/")[0]
            if family in NOT_CODES | OPERATOR_FAMILIES or text in OPERATOR_CODES:
                continue
            if lookup(text) is None:
                missing.append(f"{name}:{line}: {text}")
    assert not missing, "codes raised but not declared in engine/codes.py:\n" + "\n".join(missing)


def test_no_code_is_spelled_out_beside_the_catalogue() -> None:
    """Engine, contract and services refer to ``Code`` members; only the catalogue holds the
    codes' text (and a client's wire examples)."""
    spelled = []
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name == "engine/codes.py" or name.startswith(CLIENT_SIDE):
            continue
        for line, text in _literals(path):
            if lookup(text) is not None and (name, text) not in WIRE_EXAMPLES:
                spelled.append(f"{name}:{line}: {text!r}")
    assert not spelled, "use the Code member instead:\n" + "\n".join(spelled)


def test_the_scan_sees_a_code_spelled_out(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('raise ApiError("table/nowhere", f"no {x}")\n"""docs/x is no code"""\n')
    assert _literals(module) == [(1, "table/nowhere")]


def test_the_committed_error_table_is_current() -> None:
    text = (ROOT / "docs" / "api.md").read_text("utf-8")
    assert error_table.rewrite(text) == text, "docs/api.md's error table is stale: make schema"
    assert error_table.main([str(ROOT / "docs" / "api.md"), "--check"]) == 0


def test_a_stale_table_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "api.md"
    doc.write_text(f"intro\n{error_table.BEGIN}\n| `seat/old` | 400 |\n{error_table.END}\nrest\n")
    assert error_table.main([str(doc), "--check"]) == 1
    assert error_table.main([str(doc)]) == 0
    text = doc.read_text("utf-8")
    assert "seat/old" not in text and "| `seat/taken` | 409 | — |" in text
    assert text.startswith("intro\n") and text.endswith(f"{error_table.END}\nrest\n")
    assert error_table.main([str(doc), "--check"]) == 0
    with pytest.raises(ValueError, match="no region"):
        error_table.rewrite("no markers here")


def test_each_entry_is_whole() -> None:
    texts = [code.value for code in Code]
    assert len(texts) == len(set(texts))
    for code in Code:
        assert CODE_LIKE.fullmatch(code.value), code
        assert code.meaning and "\n" not in code.meaning and "|" not in code.meaning, code
        assert code.status is None or 400 <= code.status < 600, code
        assert code.close is None or 4000 <= code.close < 5000, code
        assert code == code.value and lookup(code.value) is code


def test_status_and_close_come_from_the_catalogue() -> None:
    assert status_of("table/not_found") == 404 and status_of("rate/limited") == 429
    assert status_of("bot/failed") == 400 and status_of("no/such") == 400  # no status: 400
    assert close_of("seat/bad_token", 1) == 4401 and close_of("view/too_slow", 1) == 4008
    assert close_of("table/invalid_id", 1) == 4404 and close_of("query/invalid", 1) == 4422
    assert close_of("seat/taken", 1) == 1


def test_the_engines_and_the_contracts_errors_share_the_base() -> None:
    engine_classes = [
        c for c in vars(engine_errors).values()
        if isinstance(c, type) and issubclass(c, engine_errors.EngineError)
    ]  # fmt: skip
    assert len(engine_classes) == 12
    for cls in engine_classes:
        assert issubclass(cls, CodedError) and lookup(cls.code) is not None, cls
    for cls in (contract.ContractError, FairnessError, InvalidSeed, UnknownAlgorithm):
        assert issubclass(cls, CodedError)
    assert lookup(FairnessError("x").code) is Code.FAIRNESS_ERROR
    assert lookup(InvalidSeed("x").code) is Code.FAIRNESS_INVALID_SEED


def test_the_services_errors_share_the_base_and_carry_plain_text() -> None:
    errors: list[CodedError] = [
        ApiError(Code.TABLE_NOT_FOUND, "no table"),
        TableError(Code.SEAT_TAKEN, "seat 1 is taken"),
        BotError(0, "random", Code.BOT_FAILED, "the random bot raised"),
        StoreError("corrupt"),
        VersionConflict("t", 1, 2),
        InvalidTableId("bad id"),
        FoldError("a gap"),
    ]
    for error in errors:
        assert lookup(error.code) is not None and type(error.code) is str, error
        assert error.message == str(error), error
    assert ApiError(Code.TABLE_NOT_FOUND, "x").status == 404
    assert ApiError("seat/taken", "a code passed on as text").status == 409


@pytest.mark.parametrize(
    "cls",
    [
        contract.ContractError,
        contract.MalformedJson,
        contract.TooLarge,
        contract.UnknownType,
        contract.UnknownVersion,
        contract.InvalidContent,
        HashMismatch,
    ],
)
def test_a_contract_errors_code_is_its_subject_and_kind(cls: type[contract.ContractError]) -> None:
    """The codes the contract gave before the catalogue: ``<subject>/<kind>``."""
    assert cls.codes
    for subject, code in cls.codes.items():
        error = cls(subject, "message", [{"loc": "a", "msg": "b"}])
        assert error.code == f"{subject}/{cls.kind}" == code.value
        assert error.message == "message" and error.details == ({"loc": "a", "msg": "b"},)
