from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from tao_harness.store.records import ToolCallRecord
from tao_harness.store.transfer import ImportFormatError, read_calls, write_csv, write_jsonl

CALLS = [
    ToolCallRecord(
        id="c1",
        session_id="s1",
        harness="claude_code",
        tool_name="Bash",
        family="bash:pytest",
        command='pytest -k "a, b" -x\nsecond line',
        args={"command": "pytest", "timeout": 120000},
        hints={"min_s": None, "max_s": 120.0, "background": False},
        timeout_s=120.0,
        background=False,
        started_at=1790000000.123456,
        ended_at=1790000003.5,
        duration_s=3.376544,
        status="ok",
        exit_code=0,
    ),
    ToolCallRecord(id="c2", session_id="s1", tool_name="Read"),  # only what a tool_start knew
    ToolCallRecord(
        id="c3",
        session_id="s2",
        tool_name="bash",
        command="sleep 1 &",
        background=True,
        env_timeout_s=60.0,
        duration_s=0.01,
        exit_code=-9,
        status="interrupted",
    ),
]


@pytest.mark.parametrize("writer", [write_csv, write_jsonl])
def test_round_trip_is_exact(writer: Callable[[list[ToolCallRecord], io.StringIO], int]) -> None:
    out = io.StringIO()
    assert writer(CALLS, out) == 3
    assert list(read_calls(io.StringIO(out.getvalue()))) == CALLS


def test_empty_input_reads_nothing() -> None:
    assert list(read_calls(io.StringIO(""))) == []
    out = io.StringIO()
    write_csv([], out)
    assert list(read_calls(io.StringIO(out.getvalue()))) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "c1", "session_id": "s"}\nnot json\n', "line 2: not JSON"),
        ('{"id": "c1", "session_id": "s", "duration_s": "fast"}\n', "line 1: field 'duration_s'"),
        ('{"id": "c1", "session_id": "s", "colour": 1}\n', "line 1: unknown field 'colour'"),
        ('{"id": "c1"}\n', "line 1: field 'session_id' is required"),
        ('{"id": "c1", "session_id": "s", "args": [1]}\n', "field 'args': expected a JSON object"),
        ("id,session_id,background\nc1,s,maybe\n", "line 2: field 'background': expected true/false"),
        ("a,b\n1,2\n", "CSV header must name"),
        ("id,session_id\nc1,s,extra\n", "more cells than header"),
    ],
)
def test_bad_input_names_line_and_field(text: str, message: str) -> None:
    with pytest.raises(ImportFormatError, match=message):
        list(read_calls(io.StringIO(text)))
