"""Hypothesis strategies of the fuzz tests: seats' commands, broken ones, and WebSocket frames.

:func:`commands` makes wire commands of every type, most of them well formed (real card texts,
a valid command id, the table's id), then :func:`mutated` breaks some: a field dropped, a value
of the wrong type, a key no command has, another type.  :func:`frames` makes what a client may
send on the table's socket: command messages, any JSON, wrong kinds, deep nesting, frames over
the size limits, binary frames and text frames that are not UTF-8.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from engine.cards import ALL_CARDS, format_card

CANONICAL = [format_card(c) for c in ALL_CARDS]
SURROGATES = st.text(st.characters(categories=["Cs", "Ll", "Nd"]), min_size=1, max_size=10)
"""Text with lone surrogates: JSON escapes (``\\ud800``) decode to them, UTF-8 holds none."""
CARD_TEXTS = st.one_of(
    st.sampled_from(CANONICAL),
    st.sampled_from(CANONICAL).map(str.lower),
    st.sampled_from(["7♥", "♠A", "KC ", "10H", "7HH", "", "ZZ", "1C", "sota de oros"]),
    st.text(max_size=9),
    SURROGATES,
)
COMMAND_IDS = st.one_of(
    st.from_regex(r"\Afz-[A-Za-z0-9_-]{5,20}\Z"),
    st.sampled_from(["short", "x" * 65, "spaces in id", "ünïcode-id-1", ""]),
    SURROGATES.map(lambda text: f"fz-{text}-id"),
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value, small."""

SEAT_TYPES = [
    "turn",
    "take",
    "refuse",
    "leave",
    "force",
    "waive",
    "discard",
    "meld_hand",
    "next_deal",
    "resign",
]
ALL_TYPES = [*SEAT_TYPES, "create_table", "join", "fly", "", "TURN"]


def _melds() -> st.SearchStrategy[list[list[str]]]:
    return st.lists(st.lists(CARD_TEXTS, min_size=0, max_size=11), max_size=3)


def _fields(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The fields beside ``type`` of a command of ``kind``."""
    hand = st.lists(CARD_TEXTS, max_size=11)
    if kind == "take":
        return st.fixed_dictionaries({"hand": hand}, optional={"table": _melds()})
    if kind == "meld_hand":
        return st.fixed_dictionaries({"hand": hand, "table": _melds()})
    if kind == "discard":
        return st.fixed_dictionaries({"card": CARD_TEXTS})
    if kind == "join":
        return st.fixed_dictionaries({"name": st.text(max_size=40)}, optional={"seat": JSON})
    if kind == "create_table":
        return st.fixed_dictionaries({}, optional={"deals": JSON, "rules": JSON, "bots": JSON})
    return st.just({})


@st.composite
def commands(draw: st.DrawFn, table_id: str, version: int) -> dict[str, Any]:
    """A command of any type for ``table_id``, mostly well formed; ``version`` is the table's."""
    kind = draw(st.sampled_from(SEAT_TYPES) | st.sampled_from(ALL_TYPES))
    command: dict[str, Any] = {
        "type": kind,
        "command_id": draw(COMMAND_IDS),
        "table_id": draw(st.sampled_from([table_id, table_id, table_id, "fz-open", "no-table"])),
        **draw(_fields(kind)),
    }
    expected = draw(st.sampled_from(["absent", "current", "stale", "ahead", "junk"]))
    if expected != "absent":
        command["expected_version"] = {
            "current": version,
            "stale": max(version - 1, 0),
            "ahead": version + 5,
            "junk": draw(JSON),
        }[expected]
    return command


@st.composite
def mutated(draw: st.DrawFn, command: dict[str, Any]) -> dict[str, Any]:
    """``command`` with one thing broken (or none)."""
    broken = dict(command)
    how = draw(st.sampled_from(["none", "none", "drop", "retype", "extra", "type"]))
    if how == "drop":
        broken.pop(draw(st.sampled_from(sorted(broken))))
    elif how == "retype":
        broken[draw(st.sampled_from(sorted(broken)))] = draw(JSON)
    elif how == "extra":
        broken[draw(st.text(min_size=1, max_size=10))] = draw(JSON)
    elif how == "type":
        broken["type"] = draw(st.sampled_from(ALL_TYPES) | st.text(max_size=10))
    return broken


@dataclass(frozen=True)
class Frame:
    """One WebSocket frame: its data, whether it goes as text, and what it is meant to test."""

    data: bytes
    text: bool
    kind: str

    def __repr__(self) -> str:
        head = self.data[:60]
        return f"Frame({self.kind}, text={self.text}, {len(self.data)} bytes: {head!r}…)"


def _json(value: Any) -> bytes:
    """Return value as JSON text in UTF-8; a lone surrogate goes as its ``\\u`` escape."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _nested(depth: int, kind: str) -> bytes:
    if kind == "arrays":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@st.composite
def frames(draw: st.DrawFn, table_id: str, version: int) -> Frame:
    """A frame a client may send on ``table_id``'s socket (``version``: the table's)."""
    command = draw(commands(table_id, version).flatmap(mutated))
    choice = draw(
        st.sampled_from(
            [
                "command",
                "command",
                "command",
                "json",
                "kind",
                "nested",
                "large",
                "binary",
                "not_utf8",
                "empty",
            ]
        )
    )
    if choice == "command":
        return Frame(_json({"kind": "command", "command": command}), draw(st.booleans()), choice)
    if choice == "json":
        return Frame(_json(draw(JSON)), True, choice)
    if choice == "kind":
        message = {"kind": draw(JSON | st.sampled_from(["command", "hello", "result"]))}
        if draw(st.booleans()):
            message["command"] = draw(JSON)
        return Frame(_json(message), True, choice)
    if choice == "nested":
        depth = draw(st.sampled_from([10, 900, 1_100, 3_000, 4_500]))
        shape = draw(st.sampled_from(["arrays", "objects"]))
        data = _nested(depth, shape)
        if draw(st.booleans()):
            data = b'{"kind":"command","command":' + data + b"}"
        return Frame(data, True, choice)
    if choice == "large":
        size = draw(st.sampled_from([9 * 1024, 9 * 1024 + 1_025, 40_000, 70_000]))
        padded = {"kind": "command", "command": {**command, "pad": "x" * size}}
        return Frame(_json(padded), True, choice)
    if choice == "binary":
        raw = draw(st.binary(max_size=64) | st.just(_json({"kind": "command", "command": command})))
        return Frame(raw, False, choice)
    if choice == "not_utf8":
        raw = draw(st.binary(min_size=1, max_size=32)) + b"\xff\xfe\xc0"
        return Frame(raw, True, choice)
    return Frame(b"", draw(st.booleans()), choice)


RAW_BODIES: list[bytes] = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"{",
    b"[" * 3_000 + b"]" * 3_000,
    b'{"a":' * 1_500 + b"1" + b"}" * 1_500,
    b'{"type": "turn", "table_id": "\\ud800", "command_id": "\\udc00-lone-surrogate"}',
    b'{"type": "discard", "table_id": "fz-play", "command_id": "fz-surrogate", "card": "\\ud800"}',
    b'{"type": "take", "table_id": "fz-play", "command_id": "fz-surrogate", "hand": ["\\ud800"]}',
    b'{"name": "\\ud800", "rules": "\\ud800", "bots": {"1": "\\ud800"}, "seat": "\\ud800"}',
    b'{"type": "turn", "deals": ' + b"9" * 5_000 + b"}",
    b'{"type": "turn", "deals": NaN, "expected_version": Infinity}',
    b'{"type": "turn", "type": "resign", "command_id": "fz-duplicate-key"}',
    b'{"type": "turn", "command_id": "fz-nul\\u0000byte"}',
    b"\xff\xfe{not utf-8}",
    b"\xef\xbb\xbf{}",
]
"""Bodies that JSON encoders never make: the edge cases of JSON text itself."""

CORPUS: list[Frame] = [
    *(Frame(body, True, "corpus") for body in RAW_BODIES if _is_utf8(body)),
    *(Frame(body, False, "corpus") for body in RAW_BODIES),
    Frame(_nested(100_000, "arrays"), True, "large"),  # past the socket's 64 KiB
    Frame(b'{"kind": "command", "command": {"pad": "' + b"x" * 70_000 + b'"}}', True, "large"),
    Frame(b'{"kind": "command", "command": {"command_id": "\\ud800-surrogate"}}', True, "corpus"),
    Frame(
        b'{"kind": "command", "command": {"type": "turn", "table_id": "fz-play",'
        b' "command_id": "fz-\\udfff-lone"}}',
        True,
        "corpus",
    ),
    Frame(b"\xff\xfe\xc0", True, "not_utf8"),
    Frame(b'{"kind": "command", "command": "\xed\xa0\x80"}', True, "not_utf8"),
]
"""Frames every run sends before the generated ones."""
