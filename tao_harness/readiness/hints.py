"""Duration hints read from a tool call's command text and arguments, before it has run.

Lower bound `min_s` — time the call cannot finish before:
- `sleep N...` in the foreground: GNU units s/m/h/d, fractions, `sleep 1 2` adds up as GNU does, and
  sleeps in sequence (`;`, `&&`, `|`, newlines) add up. Not a bound: a sleep sent to the background
  (`sleep 5 &`, `( ... ) &`), inside a loop, after `||` or inside `if`/`case`, or one with an unreadable
  argument (`sleep $N` fails or varies). Under `timeout T`, a sleep counts for at most T.
- `time.sleep(N)` / `sleep(N)` statements at the top level of a `python -c` script (not in loops,
  conditions or functions), read with `ast`.
- Dropped when the call returns at once (`run_in_background`), and never above `max_s`.

Upper bound `max_s` — the smallest of:
- GNU `timeout [-k D] [-s SIG] N cmd` (limit N plus the `-k` grace), when every foreground command of
  the line is under a timeout, is a readable sleep, is instant (`cd`, `export`, `echo`, ...; not
  `wait`) or is a pipe consumer; anything unbounded, or a command in a loop, leaves the line unbounded;
- a shell tool's `args.timeout` and any tool's `args.timeout_ms`, in the unit of the harness that sent
  them (`ARG_TIMEOUT_UNITS`): Claude Code's Bash `timeout` and Monitor `timeout_ms` and OpenCode's bash
  `timeout` are milliseconds; mini-SWE-agent's `timeout` (its `execute(..., timeout=)`) is seconds.
  Without a harness, `timeout`/`timeout_ms` are read as milliseconds, the unit of the harnesses whose
  model-facing tools take a timeout argument;
- mini-SWE-agent's `environment.timeout`, passed in seconds as `env_timeout_s`.
No default is assumed for a timeout the caller did not send.

`background`: `run_in_background: true`, a line that ends in `&`, a `nohup` launch, or Claude Code's
`Monitor` (it starts a watch and returns).
The command comes from `command`, else from `args["command"]` (a string or an argv list).
`sources` names the evidence, in this order: "sleep" or "python-sleep" (min_s); "timeout", "args.timeout",
"args.timeout_ms", "env.timeout" (only the ones equal to the winning max_s); "trailing-&", "nohup",
"run_in_background", "monitor" (background). `parse_hints` never raises; unreadable input gives no hint.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tao_harness.readiness.family import SETUP_PROGRAMS, is_shell_tool
from tao_harness.readiness.launchers import basename, is_python, unwrap
from tao_harness.readiness.pysleep import python_c_script, python_sleep_seconds
from tao_harness.readiness.shell import parse_shell
from tao_harness.readiness.units import parse_duration

# `wait` blocks on background jobs, so it is not instant for an upper bound.
_INSTANT = (SETUP_PROGRAMS - {"wait"}) | {"echo", "printf", "pwd"}
_MAX_SCRIPT_DEPTH = 3
MONITOR_TOOL = "Monitor"


@dataclass(frozen=True)
class Hints:
    """What a call's text and arguments say about its duration (seconds)."""

    min_s: float | None
    """Lower bound (foreground sleeps), or None."""
    max_s: float | None
    """Upper bound (the smallest timeout that applies), or None."""
    background: bool
    """The work is launched in the background; the call itself returns quickly."""
    sources: tuple[str, ...] = ()
    """Where the hints came from, e.g. ("sleep", "args.timeout")."""

    def to_json(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "max_s": self.max_s, "background": self.background}


NO_HINTS = Hints(None, None, False, ())


@dataclass(frozen=True)
class _Scan:
    lower: float  # sum of the sleeps that certainly run
    upper: float | None  # sum of per-command limits; None = unbounded
    timed: bool  # some `timeout` wrapper contributed to `upper`
    nohup: bool
    python_sleep: bool
    ends_in_background: bool  # the last command was sent to the background: the shell returns at once


def _sleep_seconds(args: tuple[str, ...]) -> float | None:
    durations = [parse_duration(arg) for arg in args]
    if not durations or any(d is None for d in durations):
        return None  # GNU sleep refuses the whole line when one operand is bad
    return sum(d for d in durations if d is not None)


def _scan(command: str, depth: int) -> _Scan:
    lower, upper, timed, nohup, python_sleep = 0.0, 0.0, False, False, False
    commands = parse_shell(command)
    for simple in commands:
        unwrapped = unwrap(simple.words)
        nohup = nohup or unwrapped.nohup
        if simple.background or not unwrapped.argv:
            continue
        limit = unwrapped.timeout_s
        program = basename(unwrapped.argv[0])
        own_lower: float | None = None
        own_upper: float | None = None
        if unwrapped.script is not None and depth < _MAX_SCRIPT_DEPTH:
            inner = _scan(unwrapped.script, depth + 1)
            own_lower, own_upper = inner.lower, inner.upper
            timed, nohup, python_sleep = timed or inner.timed, nohup or inner.nohup, python_sleep or inner.python_sleep
        elif program == "sleep":
            own_lower = own_upper = _sleep_seconds(unwrapped.argv[1:])
        elif is_python(program):
            script = python_c_script(unwrapped.argv[1:])
            own_lower = python_sleep_seconds(script) if script is not None else None
            python_sleep = python_sleep or bool(own_lower)
        elif program in _INSTANT:
            own_upper = 0.0
        if limit is not None:
            own_lower = min(own_lower, limit) if own_lower is not None else None
            own_upper = min(own_upper, limit) if own_upper is not None else limit
            timed = True
        if own_lower and not (simple.in_loop or simple.conditional):
            lower += own_lower
        if simple.consumer:
            continue
        if simple.in_loop or own_upper is None:
            upper = math.inf
        else:
            upper += own_upper
    last_background = bool(commands) and commands[-1].background
    return _Scan(lower, upper if math.isfinite(upper) else None, timed, nohup, python_sleep, last_background)


def _positive_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return float(value)
    return None


_MS = 0.001
# harness -> argument field -> seconds per unit. `timeout` counts for shell tools only; `timeout_ms`
# for any tool (Claude Code's Monitor).
ARG_TIMEOUT_UNITS: dict[str | None, dict[str, float]] = {
    "claude-code": {"timeout": _MS, "timeout_ms": _MS},
    "opencode": {"timeout": _MS},
    "mini-swe-agent": {"timeout": 1.0},
    None: {"timeout": _MS, "timeout_ms": _MS},
}


def canonical_harness(name: str | None) -> str | None:
    """One spelling per harness: `tao-run` says "mini-swe-agent", exports from elsewhere "mini_swe_agent"."""
    return name.strip().lower().replace("_", "-") if name else None


def _arg_limits(args: Mapping[str, Any], shell: bool, harness: str | None) -> list[tuple[float, str]]:
    units = ARG_TIMEOUT_UNITS.get(canonical_harness(harness), ARG_TIMEOUT_UNITS[None])
    limits: list[tuple[float, str]] = []
    for field, scale in units.items():
        value = _positive_number(args.get(field)) if shell or field != "timeout" else None
        if value is not None:
            limits.append((value * scale, f"args.{field}"))
    return limits


def command_text(command: str | None, args: Mapping[str, Any] | None) -> str | None:
    """The call's command line: `command`, else `args["command"]` (a string, or an argv list as the
    Codex shell tool sends it, joined with shell quoting)."""
    if command is not None or not isinstance(args, Mapping):
        return command
    value = args.get("command")
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
        return shlex.join(value)
    return None


def parse_hints(
    tool_name: str,
    command: str | None,
    args: Mapping[str, Any] | None = None,
    *,
    env_timeout_s: float | None = None,
    harness: str | None = None,
) -> Hints:
    """Hints for one call; `args` is the tool's own argument object, `harness` the harness that sent it
    (its units are used for `args` timeouts). Never raises."""
    try:
        return _parse(tool_name, command, args, env_timeout_s, harness)
    except Exception:  # noqa: BLE001 - a hint is optional; odd input must never break the caller
        return NO_HINTS


def _parse(tool_name: str, command: str | None, args: Mapping[str, Any] | None, env_timeout_s: Any,
           harness: str | None) -> Hints:
    shell = isinstance(tool_name, str) and is_shell_tool(tool_name)
    args = args if isinstance(args, Mapping) else {}
    command = command_text(command, args)
    limits: list[tuple[float, str]] = []
    sources: list[str] = []
    in_background = args.get("run_in_background") is True
    background = False
    lower: float | None = None
    if shell and isinstance(command, str) and command.strip():
        scan = _scan(command, 0)
        if scan.lower > 0 and not in_background:
            lower = scan.lower
            sources.append("python-sleep" if scan.python_sleep else "sleep")
        if scan.timed and scan.upper is not None:
            limits.append((scan.upper, "timeout"))
        if scan.ends_in_background:
            background = True
            sources.append("trailing-&")
        if scan.nohup:
            background = True
            sources.append("nohup")
    limits.extend(_arg_limits(args, shell, harness))
    env_limit = _positive_number(env_timeout_s)
    if env_limit is not None:
        limits.append((env_limit, "env.timeout"))
    if in_background:
        background = True
        sources.append("run_in_background")
    if tool_name == MONITOR_TOOL:
        background = True  # the watch runs on; the call returns once it is set up
        sources.append("monitor")
    upper = min(limits)[0] if limits else None
    sources.extend(source for limit, source in limits if limit == upper)
    if lower is not None and upper is not None:
        lower = min(lower, upper)
    return Hints(min_s=lower, max_s=upper, background=background, sources=tuple(sources))
