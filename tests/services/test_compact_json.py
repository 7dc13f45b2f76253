"""``services.store.compact_json.dumps`` writes what the standard library's compact form would."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.store.compact_json import dumps

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers(-5, 5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_same_text_as_the_standard_library(value: object) -> None:
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("message", ["plain", "Zoë \u2028 🃏", 'a "quote" \\ \x00\x1f'])
def test_a_result_reads_back_unchanged(message: str) -> None:
    result = {"ok": False, "code": "move/not_your_turn", "message": message, "deal": 2}
    assert json.loads(dumps(result)) == result
