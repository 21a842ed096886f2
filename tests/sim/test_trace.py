"""Trace format: round trip through a file, tolerance of unknown fields, line-numbered errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tao_harness.sim.trace import TraceError, TraceSession, TraceTool, TraceTurn, read_trace, write_trace

EXAMPLE = (
    '{"session": "s1", "arrival_s": 0.0, "prefix_group": "swe-sys-v1", "shared_prefix_tokens": 2000,'
    ' "turns": [{"input_tokens": 3500, "output_tokens": 180,'
    ' "tool": {"name": "bash", "command": "pytest -q tests/", "duration_s": 4.2, "timeout_s": 60}},'
    ' {"input_tokens": 900, "output_tokens": 250}]}'
)


def _session(name: str, arrival: float = 0.0) -> TraceSession:
    tool = TraceTool("bash", "sleep 5 && make", 5.3, 60.0, {"cwd": "/repo"})
    return TraceSession(
        session=name,
        arrival_s=arrival,
        prefix_group="g",
        shared_prefix_tokens=100,
        turns=(TraceTurn(300, 40, tool), TraceTurn(50, 20, TraceTool("grep", None, 0.1)), TraceTurn(10, 5)),
    )


def test_readme_example_parses() -> None:
    [session] = read_trace([EXAMPLE])
    assert session.session == "s1"
    assert session.shared_prefix_tokens == 2000
    assert session.turns[0].tool == TraceTool("bash", "pytest -q tests/", 4.2, 60.0, None)
    assert session.turns[1].tool is None
    assert session.total_tokens == 3500 + 180 + 900 + 250
    assert session.tool_time_s == pytest.approx(4.2)


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    sessions = [_session("a"), _session("b", 3.5)]
    path = tmp_path / "t.jsonl"
    write_trace(sessions, path)
    assert read_trace(path) == sessions
    assert read_trace(str(path)) == sessions
    assert len(path.read_text().splitlines()) == 2


def test_unknown_fields_and_blank_lines_are_ignored() -> None:
    raw = json.loads(EXAMPLE)
    raw["harness"] = "mini"
    raw["turns"][0]["model"] = "m"
    raw["turns"][0]["tool"]["exit_code"] = 0
    assert read_trace(["", json.dumps(raw), "   "]) == read_trace([EXAMPLE])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("session"), "missing field 'session'"),
        (lambda r: r.update(turns=[]), "'turns' must be a non-empty list"),
        (lambda r: r["turns"][0].update(input_tokens="many"), "turns[0].input_tokens must be an integer"),
        (lambda r: r["turns"][1].update(output_tokens=-1), "turns[1].output_tokens must be >= 0"),
        (lambda r: r["turns"][0]["tool"].pop("duration_s"), "turns[0].tool: missing field 'duration_s'"),
        (
            lambda r: r["turns"][0]["tool"].update(duration_s=float("nan")),
            "duration_s must be a finite number",
        ),
        (
            lambda r: r["turns"][1].update(tool={"name": "bash", "duration_s": 1}),
            "last turn must not have a tool",
        ),
        (lambda r: r.update(shared_prefix_tokens=9999), "shared_prefix_tokens (9999) exceeds"),
        (lambda r: r.update(arrival_s=-2), "arrival_s must be >= 0"),
        (lambda r: r.update(prefix_group=3), "prefix_group must be a string"),
    ],
)
def test_malformed_fields_name_line_and_field(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(EXAMPLE)
    mutate(raw)
    with pytest.raises(TraceError) as caught:
        read_trace(["", json.dumps(raw, allow_nan=True)])
    assert str(caught.value).startswith("line 2")
    assert message in str(caught.value)


def test_invalid_json_and_duplicates_are_reported_with_line_numbers() -> None:
    with pytest.raises(TraceError, match=r"^line 2: not valid JSON"):
        read_trace([EXAMPLE, "{not json"])
    with pytest.raises(TraceError, match=r"^line 3: session 's1' already defined on line 1"):
        read_trace([EXAMPLE, "", EXAMPLE])
    with pytest.raises(TraceError, match=r"^line 1: expected a JSON object, got list"):
        read_trace(["[1, 2]"])


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read trace"):
        read_trace(tmp_path / "absent.jsonl")
