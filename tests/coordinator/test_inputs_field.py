"""`inputs.field`'s fast paths for exact JSON types judge every value as its general checks do."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tao_harness.coordinator.inputs import BadRequest, _checked, field

KINDS: list[type | tuple[type, ...]] = [str, int, (int, float), dict, list, bool]
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.text(max_size=220), st.sampled_from(["", "r0", "a\x00b", "x" * 201, "\ud800"]),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.lists(st.integers(), max_size=2),
    st.sampled_from([10**400, -0.0, float("inf")]),
)


def reference(value: Any, kind: type | tuple[type, ...]) -> Any:
    """What `field` answered before it had fast paths: the general checks alone."""
    if value is None:
        return "default"
    return _checked("f", value, kind)


def outcome(call: Any) -> tuple[str, Any]:
    try:
        result = call()
    except BadRequest as exc:
        return "refused", str(exc)
    return "accepted", (type(result), repr(result))


@settings(max_examples=400, deadline=None)
@given(value=VALUES, kind=st.sampled_from(KINDS))
def test_fast_paths_agree_with_the_general_checks(value: Any, kind: type | tuple[type, ...]) -> None:
    assert outcome(lambda: field({"f": value}, "f", kind, "default")) == outcome(lambda: reference(value, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_missing_field(kind: type | tuple[type, ...]) -> None:
    with pytest.raises(BadRequest, match="f: missing field"):
        field({}, "f", kind)
    with pytest.raises(BadRequest, match="f: missing field"):
        field({"f": None}, "f", kind)
    assert field({}, "f", kind, 7) == 7


def test_an_int_number_stays_an_int() -> None:
    assert type(field({"f": 3}, "f", (int, float))) is int
