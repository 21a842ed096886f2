"""A seeded generator of realistic agent histories: sessions, tool calls and LLM requests.

Durations are heavy-tailed and family-specific (log-normal per kind of command, plus rare stragglers),
shaped after the published agent tool-time statistics (per call p50 ≈ 0.3 s, p90 ≈ 14 s, long tail):
file tools and `git`/`grep` take milliseconds, `pytest` and `python` seconds, `make`/`npm test`/`pip`
tens of seconds. Commands carry the same hints real harnesses send (`sleep N`, `timeout N`, the Bash
tool's `timeout` in ms, mini-SWE-agent's environment timeout, background launches), and a few carry
secrets so redaction is exercised. The same seed always gives the same history.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tao_harness.readiness.call import describe_call
from tao_harness.store.records import LLMRequestRecord, SessionRecord, StoreRecord, ToolCallRecord

DEFAULT_START = 1_790_000_000.0  # 2026-09-21 UTC: a fixed origin keeps generated files reproducible
_FILES = ("src/app.py", "src/models.py", "tests/test_api.py", "lib/utils.py", "setup.py", "README.md")
_TESTS = ("tests/test_api.py", "tests/test_models.py", "tests/unit", "tests/test_utils.py::test_parse")


@dataclass(frozen=True)
class _Kind:
    """One kind of tool call: how often it occurs, how it is written and how long it takes."""

    weight: float
    tool: str  # structured tool name, or "shell" for the harness's shell tool
    command: Callable[[random.Random], str]  # for structured tools: the file/pattern argument
    median_s: float
    sigma: float  # log-normal shape; larger is a heavier tail


def _pick(options: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(options)


_GIT = ("git status", "git diff", "git log --oneline -5", "git diff --stat")
_LOOK = ("ls -la", "cat setup.py", "grep -rn TODO src", "find . -name '*.py'")
_SCRIPTS = ("reproduce.py", "scripts/check.py", "demo.py")
_BACKGROUND = ("nohup python server.py > log.txt 2>&1 &", "python worker.py &")
_INSTALL = ("pip install -e .", "uv run pip install -r requirements.txt")


def _pytest_k(rng: random.Random) -> str:
    return f"cd /repo && pytest {rng.choice(_TESTS)} -k {rng.choice(('parse', 'api'))}"


_KINDS: tuple[_Kind, ...] = (
    _Kind(14, "Read", _pick(_FILES), 0.012, 0.5),
    _Kind(7, "Edit", _pick(_FILES), 0.03, 0.5),
    _Kind(5, "Grep", _pick(("def main", "TODO", "import numpy")), 0.05, 0.8),
    _Kind(3, "Glob", _pick(("**/*.py", "src/**/*.ts")), 0.02, 0.6),
    _Kind(10, "shell", lambda r: f"python -m pytest {r.choice(_TESTS)} -x -q", 3.5, 0.9),
    _Kind(4, "shell", _pytest_k, 4.0, 1.0),
    _Kind(6, "shell", lambda r: f"python {r.choice(_SCRIPTS)}", 0.9, 0.9),
    _Kind(8, "shell", _pick(_GIT), 0.04, 0.6),
    _Kind(9, "shell", _pick(_LOOK), 0.03, 0.7),
    _Kind(2, "shell", lambda r: f"sleep {r.choice((1, 2, 5, 10))}", 0.0, 0.0),
    _Kind(1, "shell", lambda r: f"sleep {r.choice((2, 3))} && curl -s localhost:8000/health", 0.0, 0.0),
    _Kind(1, "shell", lambda r: f'python -c "import time; time.sleep({r.choice((0.5, 1, 2))})"', 0.0, 0.0),
    _Kind(2, "shell", _pick(("make -j4", "make test")), 14.0, 0.7),
    _Kind(2, "shell", _pick(("npm test", "npm run build")), 9.0, 0.6),
    _Kind(2, "shell", _pick(_INSTALL), 6.0, 0.5),
    _Kind(1, "shell", lambda r: f"timeout {r.choice((20, 30))} python serve.py", 25.0, 0.4),
    _Kind(1, "shell", _pick(_BACKGROUND), 0.0, 0.0),
    _Kind(1, "shell", lambda r: f"OPENAI_API_KEY=sk-test{r.randrange(10**20):020d} python eval.py", 2.0, 0.6),
)

# harness -> (its shell tool's name, whether that tool takes a `timeout` in ms, environment timeout)
_HARNESSES: dict[str, tuple[str, bool, float | None]] = {
    "claude_code": ("Bash", True, None),
    "opencode": ("bash", True, None),
    "mini_swe_agent": ("bash", False, 60.0),
}
_SLEEP_OVERHEAD_S = 0.004
_SLEEP = re.compile(r"(?:\bsleep |time\.sleep\()(\d+(?:\.\d+)?)")


def _sleep_total(command: str) -> float | None:
    total = sum(float(value) for value in _SLEEP.findall(command))
    return total if total > 0 else None


def _duration(kind: _Kind, command: str, rng: random.Random) -> float:
    slept = _sleep_total(command)
    if slept is not None:
        return slept + _SLEEP_OVERHEAD_S + rng.expovariate(1 / 0.02) + (0.3 if "curl" in command else 0.0)
    if kind.median_s == 0.0:  # a background launch returns at once
        return 0.01 + rng.expovariate(1 / 0.01)
    straggler = 4.0 if rng.random() < 0.02 else 1.0  # cold caches, contended disks
    return kind.median_s * math.exp(rng.gauss(0.0, kind.sigma)) * straggler


def _tool_call(rng: random.Random, harness: str, session: str, index: int, started: float) -> ToolCallRecord:
    kind = rng.choices(_KINDS, weights=[k.weight for k in _KINDS])[0]
    shell_tool, timeout_arg, env_timeout = _HARNESSES[harness]
    text = kind.command(rng)
    args: dict[str, Any]
    if kind.tool == "shell":
        tool, command = shell_tool, text
        args = {"command": command}
        if timeout_arg and rng.random() < 0.3:
            args["timeout"] = rng.choice((60_000, 120_000, 600_000))
        if harness == "claude_code" and command.endswith("&"):
            args["run_in_background"] = True
    else:
        tool, command = kind.tool, None
        args = {"file_path": text} if kind.tool in ("Read", "Edit") else {"pattern": text}
    family, hints = describe_call(tool, command, args, env_timeout_s=env_timeout)
    duration = _duration(kind, text, rng)
    status, exit_code = ("ok", 0) if rng.random() > 0.15 else ("error", 1)
    if hints.max_s is not None and duration > hints.max_s:
        duration, status, exit_code = hints.max_s, "timeout", 124
    return ToolCallRecord(
        id=f"{session}-call{index:04d}",
        session_id=session,
        harness=harness,
        tool_name=tool,
        family=family,
        command=command,
        args=args,
        hints=hints.to_json(),
        timeout_s=hints.max_s,
        env_timeout_s=env_timeout,
        background=hints.background,
        started_at=started,
        ended_at=started + duration,
        duration_s=duration,
        status=status,
        exit_code=exit_code if kind.tool == "shell" else None,
    )


def generate_history(
    sessions: int = 40,
    calls_per_session: tuple[int, int] = (20, 80),
    *,
    seed: int = 0,
    start: float = DEFAULT_START,
    span_s: float = 86_400.0,
) -> list[StoreRecord]:
    """Sessions starting at random within `span_s` of `start`, each alternating LLM turns and tools."""
    rng = random.Random(seed)
    records: list[StoreRecord] = []
    for number in range(sessions):
        harness = rng.choice(tuple(_HARNESSES))
        session = f"s{seed}-{number:04d}"
        clock = start + rng.uniform(0.0, span_s)
        records.append(
            SessionRecord(id=session, harness=harness, started_at=clock, labels={"bench": "synthetic"})
        )
        context = rng.randrange(2_000, 6_000)
        for index in range(rng.randint(*calls_per_session)):
            latency = 0.4 + rng.lognormvariate(math.log(3.0), 0.6)
            cached = max(0, context - rng.randrange(200, 1_500))
            records.append(
                LLMRequestRecord(
                    id=f"{session}-req{index:04d}",
                    session_id=session,
                    replica=f"r{rng.randrange(4)}",
                    prompt_tokens=context,
                    cached_tokens=cached,
                    completion_tokens=rng.randrange(40, 600),
                    queue_wait_s=rng.expovariate(1 / 0.3),
                    ttft_s=0.05 + (context - cached) * 2e-5,
                    latency_s=latency,
                    started_at=clock,
                    ended_at=clock + latency,
                    status="ok",
                )
            )
            clock += latency
            call = _tool_call(rng, harness, session, index, clock)
            records.append(call)
            clock = (call.ended_at or clock) + rng.uniform(0.01, 0.1)
            context += rng.randrange(100, 1_500)
        records.append(SessionRecord(id=session, ended_at=clock))
    return records
