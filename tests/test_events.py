from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tao_harness.events import EventError, ToolEnd, ToolStart, event_from_json, event_to_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def test_round_trip_both_kinds() -> None:
    start = ToolStart(session="s", call_id="c", tool_name="Bash", at=10.0, harness="claude-code",
                      command="sleep 1", args={"command": "sleep 1", "timeout": 30000})
    end = ToolEnd(session="s", call_id="c", at=11.0, duration_s=1.0, status="error", exit_code=2)
    assert event_from_json(event_to_json(start)) == start
    assert event_from_json(event_to_json(end)) == end
    assert event_from_json({**event_to_json(end), "extra": 1}) == end
    job = ToolStart(session="s", call_id="c:job", tool_name="Monitor", at=10.0, kind="job")
    assert event_from_json(event_to_json(job)) == job


@pytest.mark.parametrize("status", ["ok", "error", "timeout", "killed", "cancelled"])
def test_every_outcome_status_is_accepted(status: str) -> None:
    end = event_from_json({"type": "tool_end", "session": "s", "call_id": "c", "at": 1.0, "status": status})
    assert isinstance(end, ToolEnd) and end.status == status


def test_the_old_interrupted_status_reads_as_cancelled() -> None:
    # Spool files written by older shims say "interrupted".
    end = event_from_json({"type": "tool_end", "session": "s", "call_id": "c", "at": 1.0, "status": "interrupted"})
    assert isinstance(end, ToolEnd) and end.status == "cancelled"


def test_unknown_call_kind_is_rejected() -> None:
    with pytest.raises(EventError, match="^kind:"):
        event_from_json({"type": "tool_start", "session": "s", "call_id": "c", "at": 1.0, "tool_name": "Bash",
                         "kind": "daemon"})


@pytest.mark.parametrize(
    ("patch", "field"),
    [({"type": "tool_middle"}, "type"), ({"session": ""}, "session"), ({"at": -1}, "at"),
     ({"at": True}, "at"), ({"status": "weird"}, "status"), ({"exit_code": 1.5}, "exit_code"),
     ({"duration_s": "1"}, "duration_s"), ({"status": "interrupted!"}, "status"), ({"status": 3}, "status")],
)
def test_errors_name_the_field(patch: dict, field: str) -> None:
    base = {"type": "tool_end", "session": "s", "call_id": "c", "at": 1.0}
    with pytest.raises(EventError, match=f"^{field}:"):
        event_from_json(base | patch)


@settings(suppress_health_check=[HealthCheck.too_slow])  # generation is slow on a loaded machine
@given(st.dictionaries(st.sampled_from(["type", "session", "call_id", "at", "tool_name", "args", "command",
                                        "status", "duration_s", "exit_code", "env_timeout_s", "kind"]),
                       json_values))
def test_arbitrary_json_gives_an_event_or_event_error(data: dict) -> None:
    try:
        event = event_from_json(data)
    except EventError:
        return
    assert event_from_json(event_to_json(event)) == event
