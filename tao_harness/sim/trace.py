"""Agent-session traces: the JSON Lines format the simulator replays, `tao trace` writes and reads.

One session per line (README, "Traces"):

    {"session": "s1", "arrival_s": 0.0, "prefix_group": "swe-sys-v1", "shared_prefix_tokens": 2000,
     "turns": [{"input_tokens": 3500, "output_tokens": 180,
                "tool": {"name": "bash", "command": "pytest -q tests/", "duration_s": 4.2, "timeout_s": 60}},
               {"input_tokens": 900, "output_tokens": 250}]}

`input_tokens` is what a turn appends to the context (turn 1 includes the shared prefix), so a turn's
prompt is the running sum of inputs and earlier outputs. The tool of a turn runs after that turn's reply;
the last turn has no tool. Unknown fields are ignored so traces can carry extra annotations; anything
malformed raises `TraceError` naming the line and the field, never a bare KeyError.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


class TraceError(ValueError):
    """A trace line that cannot be used; the message starts with `line N:` and names the field."""


@dataclass(frozen=True)
class TraceTool:
    """One tool call that follows a turn's reply."""

    name: str
    """Tool name as the harness reports it (`bash`, `Bash`, `Monitor`, ...)."""
    command: str | None
    """Command text when the tool runs a shell command; what the readiness hint parser sees."""
    duration_s: float
    """True wall time of the call; the simulator uses it, the readiness estimator never sees it."""
    timeout_s: float | None = None
    """Deadline the harness exposed for the call, if any."""
    args: Mapping[str, Any] | None = None
    """Other tool input (file path, pattern, ...), kept for replay and family keys."""


@dataclass(frozen=True)
class TraceTurn:
    """One LLM request of a session and the tool call (if any) its reply asked for."""

    input_tokens: int
    """Tokens this turn appends to the context (tool output, user message; turn 1: the whole prompt)."""
    output_tokens: int
    """Tokens the model generates in this turn."""
    tool: TraceTool | None = None
    """The tool call after this turn's reply; None on the last turn."""


@dataclass(frozen=True)
class TraceSession:
    """One agent session: when it arrives, what prefix it shares with others, and its turns in order."""

    session: str
    """Session id, unique within a trace."""
    arrival_s: float
    """Earliest start time in seconds from the trace start (closed-loop replay may start it later)."""
    prefix_group: str | None
    """Sessions of one group share their first `shared_prefix_tokens` tokens (system prompt, task set)."""
    shared_prefix_tokens: int
    """Length of the shared prefix; part of the first turn's input_tokens."""
    turns: tuple[TraceTurn, ...]
    """The LLM turns in order; at least one."""

    @property
    def total_tokens(self) -> int:
        """Context length after the last reply."""
        return sum(t.input_tokens + t.output_tokens for t in self.turns)

    @property
    def tool_time_s(self) -> float:
        """Wall time spent in this session's tools."""
        return sum(t.tool.duration_s for t in self.turns if t.tool is not None)


# --- reading -------------------------------------------------------------------------------------------


def _require(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise TraceError(f"{where}: missing field '{key}'")
    return obj[key]


def _int(value: Any, where: str, minimum: int = 0) -> int:
    # bool is an int subclass; `true` as a token count is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TraceError(f"{where} must be an integer, got {json.dumps(value)}")
    if value < minimum:
        raise TraceError(f"{where} must be >= {minimum}, got {value}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"{where} must be a finite number, got {json.dumps(value)}")
    if value < 0:
        raise TraceError(f"{where} must be >= 0, got {value}")
    return float(value)


def _optional_number(value: Any, where: str) -> float | None:
    return None if value is None else _number(value, where)


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TraceError(f"{where} must be a string, got {json.dumps(value)}")


def _parse_tool(raw: Any, where: str) -> TraceTool | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TraceError(f"{where} must be an object")
    name = _require(raw, "name", where)
    if not isinstance(name, str) or not name:
        raise TraceError(f"{where}.name must be a non-empty string")
    args = raw.get("args")
    if args is not None and not isinstance(args, dict):
        raise TraceError(f"{where}.args must be an object")
    return TraceTool(
        name=name,
        command=_optional_str(raw.get("command"), f"{where}.command"),
        duration_s=_number(_require(raw, "duration_s", where), f"{where}.duration_s"),
        timeout_s=_optional_number(raw.get("timeout_s"), f"{where}.timeout_s"),
        args=args,
    )


def _parse_turn(raw: Any, where: str) -> TraceTurn:
    if not isinstance(raw, dict):
        raise TraceError(f"{where} must be an object")
    return TraceTurn(
        input_tokens=_int(_require(raw, "input_tokens", where), f"{where}.input_tokens"),
        output_tokens=_int(_require(raw, "output_tokens", where), f"{where}.output_tokens"),
        tool=_parse_tool(raw.get("tool"), f"{where}.tool"),
    )


def parse_session(raw: Any, where: str = "session") -> TraceSession:
    """Validate one decoded JSON object; `where` prefixes error messages."""
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    session = _require(raw, "session", where)
    if not isinstance(session, str) or not session:
        raise TraceError(f"{where}: 'session' must be a non-empty string")
    raw_turns = _require(raw, "turns", where)
    if not isinstance(raw_turns, list) or not raw_turns:
        raise TraceError(f"{where}: 'turns' must be a non-empty list")
    turns = tuple(_parse_turn(t, f"{where}: turns[{k}]") for k, t in enumerate(raw_turns))
    if turns[-1].tool is not None:
        raise TraceError(f"{where}: the last turn must not have a tool (turns[{len(turns) - 1}])")
    shared = _int(raw.get("shared_prefix_tokens", 0), f"{where}: shared_prefix_tokens")
    if shared > turns[0].input_tokens:
        raise TraceError(
            f"{where}: shared_prefix_tokens ({shared}) exceeds the first turn's input_tokens "
            f"({turns[0].input_tokens}); turn 1 includes the shared prefix"
        )
    return TraceSession(
        session=session,
        arrival_s=_number(raw.get("arrival_s", 0.0), f"{where}: arrival_s"),
        prefix_group=_optional_str(raw.get("prefix_group"), f"{where}: prefix_group"),
        shared_prefix_tokens=shared,
        turns=turns,
    )


def _lines_of(source: str | Path | Iterable[str]) -> Iterable[str]:
    if isinstance(source, (str, Path)):
        try:
            return Path(source).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise TraceError(f"cannot read trace {source}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise TraceError(f"trace {source} is not UTF-8 text") from None
    return source


def read_trace(source: str | Path | Iterable[str]) -> list[TraceSession]:
    """Read a trace from a file path or from an iterable of lines; blank lines are skipped."""
    sessions: list[TraceSession] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_lines_of(source), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        session = parse_session(raw, where)
        if session.session in seen:
            raise TraceError(
                f"{where}: session '{session.session}' already defined on line {seen[session.session]}"
            )
        seen[session.session] = number
        sessions.append(session)
    return sessions


# --- writing -------------------------------------------------------------------------------------------


def _tool_json(tool: TraceTool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "command": tool.command, "duration_s": tool.duration_s}
    if tool.timeout_s is not None:
        out["timeout_s"] = tool.timeout_s
    if tool.args is not None:
        out["args"] = dict(tool.args)
    return out


def session_to_json(session: TraceSession) -> dict[str, Any]:
    """The JSON object of one trace line."""
    turns: list[dict[str, Any]] = []
    for turn in session.turns:
        entry: dict[str, Any] = {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens}
        if turn.tool is not None:
            entry["tool"] = _tool_json(turn.tool)
        turns.append(entry)
    return {
        "session": session.session,
        "arrival_s": session.arrival_s,
        "prefix_group": session.prefix_group,
        "shared_prefix_tokens": session.shared_prefix_tokens,
        "turns": turns,
    }


def dump_trace(sessions: Sequence[TraceSession], out: TextIO) -> None:
    """Write sessions as JSON Lines to an open text stream."""
    for session in sessions:
        out.write(json.dumps(session_to_json(session), separators=(",", ":")))
        out.write("\n")


def write_trace(sessions: Sequence[TraceSession], path: str | Path) -> None:
    """Write sessions as JSON Lines to `path` (replaced if it exists)."""
    with Path(path).open("w", encoding="utf-8") as out:
        dump_trace(sessions, out)
