"""Hint parser: a table of commands and argument objects, then property tests over arbitrary input."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tao_harness.readiness.hints import Hints, parse_hints
from tao_harness.readiness.pysleep import python_sleep_seconds

B = "Bash"
# (tool, command, args, env_timeout_s) -> (min_s, max_s, background)
CASES: list[tuple[str, str | None, dict[str, Any] | None, float | None, tuple[float | None, float | None, bool]]] = [
    (B, "sleep 5", None, None, (5.0, None, False)),
    (B, "sleep 0.5", None, None, (0.5, None, False)),
    (B, "sleep .25s", None, None, (0.25, None, False)),
    (B, "sleep 2m", None, None, (120.0, None, False)),
    (B, "sleep 1h", None, None, (3600.0, None, False)),
    (B, "sleep 1d", None, None, (86400.0, None, False)),
    (B, "sleep 1 2", None, None, (3.0, None, False)),
    (B, "sleep 1m 30s", None, None, (90.0, None, False)),
    (B, "sleep 1; sleep 2 && sleep 0.5", None, None, (3.5, None, False)),
    (B, "sleep 3\nsleep 4", None, None, (7.0, None, False)),
    (B, "sleep 2 | cat", None, None, (2.0, None, False)),
    (B, "cd /x && sleep 10 && cat out.log", None, None, (10.0, None, False)),
    (B, "sleep 0", None, None, (None, None, False)),
    (B, "sleep $N", None, None, (None, None, False)),
    (B, "sleep 5 x", None, None, (None, None, False)),
    (B, "sleep infinity", None, None, (None, None, False)),
    (B, "sleep 5 &", None, None, (None, None, True)),
    (B, "(sleep 5; make) &", None, None, (None, None, True)),
    (B, "(sleep 5; kill $pid) & pytest", None, None, (None, None, False)),
    (B, "sleep 2; server & sleep 1", None, None, (3.0, None, False)),
    (B, "for i in 1 2 3; do sleep 1; done", None, None, (None, None, False)),
    (B, "while ! curl -s x; do sleep 2; done", None, None, (None, None, False)),
    (B, "until false; do sleep 1; done; sleep 4", None, None, (4.0, None, False)),
    (B, "false || sleep 3", None, None, (None, None, False)),
    (B, "if [ -f x ]; then sleep 3; fi", None, None, (None, None, False)),
    (B, "sleep 3 || true", None, None, (3.0, None, False)),
    (B, "bash -c 'sleep 2; echo done'", None, None, (2.0, None, False)),
    (B, "python -c 'import time; time.sleep(2.5)'", None, None, (2.5, None, False)),
    (B, "python3 -c 'from time import sleep\nsleep(1)\nsleep(0.5)'", None, None, (1.5, None, False)),
    (B, "python -W ignore -c 'import time; time.sleep(1)'", None, None, (1.0, None, False)),
    (B, "python -c 'import time\nfor _ in range(3): time.sleep(1)'", None, None, (None, None, False)),
    (B, "python -c 'import time; time.sleep(x)'", None, None, (None, None, False)),
    # timeout wrappers
    (B, "timeout 30 pytest", None, None, (None, 30.0, False)),
    (B, "timeout 1.5m make", None, None, (None, 90.0, False)),
    (B, "timeout -k 5 30s pytest", None, None, (None, 35.0, False)),
    (B, "timeout -k5 -s KILL 10 pytest", None, None, (None, 15.0, False)),
    (B, "timeout --signal=TERM --kill-after=2 10 pytest", None, None, (None, 12.0, False)),
    (B, "timeout --preserve-status 1h ./build.sh", None, None, (None, 3600.0, False)),
    (B, "timeout 0 pytest", None, None, (None, None, False)),
    (B, "cd /repo && timeout 60 pytest -x 2>&1 | tail -20", None, None, (None, 60.0, False)),
    (B, "timeout 10 make; timeout 5 pytest", None, None, (None, 15.0, False)),
    (B, "sleep 2 && timeout 10 curl x", None, None, (2.0, 12.0, False)),
    (B, "timeout 10 make; pytest", None, None, (None, None, False)),
    (B, "for t in a b; do timeout 5 pytest $t; done", None, None, (None, None, False)),
    (B, "timeout 3 sleep 10", None, None, (3.0, 3.0, False)),
    # tool arguments and the harness's deadline
    (B, "npm test", {"command": "npm test", "timeout": 120000}, None, (None, 120.0, False)),
    (B, None, {"command": "sleep 4", "timeout": 2000}, None, (2.0, 2.0, False)),
    ("bash", "pytest", {"timeout": 45000, "description": "x"}, None, (None, 45.0, False)),
    (B, "timeout 30 pytest", {"timeout": 10000}, None, (None, 10.0, False)),
    (B, "timeout 5 pytest", {"timeout": 10000}, None, (None, 5.0, False)),
    ("bash", "pytest", None, 60.0, (None, 60.0, False)),
    ("bash", "timeout 20 pytest", None, 60.0, (None, 20.0, False)),
    ("Monitor", "tail -f log", {"timeout_ms": 60000, "persistent": False}, None, (None, 60.0, True)),
    ("Read", None, {"file_path": "/x", "timeout": 5000}, None, (None, None, False)),
    (B, "npm run dev", {"run_in_background": True}, None, (None, None, True)),
    (B, "sleep 5", {"run_in_background": True, "timeout": 9000}, None, (None, 9.0, True)),
    (B, "nohup ./server", None, None, (None, None, True)),
    (B, "npm run dev &\n", None, None, (None, None, True)),
    (B, "server & curl x", None, None, (None, None, False)),
    (B, "npm test", {"timeout": "abc"}, None, (None, None, False)),
    (B, "npm test", {"timeout": True}, None, (None, None, False)),
    (B, "npm test", {"timeout": -5}, None, (None, None, False)),
    (B, "npm test", None, float("nan"), (None, None, False)),
]


@pytest.mark.parametrize(("tool", "command", "args", "env_timeout", "expected"), CASES)
def test_hint_table(
    tool: str,
    command: str | None,
    args: dict[str, Any] | None,
    env_timeout: float | None,
    expected: tuple[float | None, float | None, bool],
) -> None:
    hints = parse_hints(tool, command, args, env_timeout_s=env_timeout)
    assert (hints.min_s, hints.max_s, hints.background) == pytest.approx(expected)


def test_sources_name_the_evidence() -> None:
    assert parse_hints(B, "sleep 5").sources == ("sleep",)
    assert parse_hints(B, "timeout 9 pytest", {"timeout": 9000}).sources == ("timeout", "args.timeout")
    assert parse_hints("Monitor", None, {"timeout_ms": 1000}).sources == ("monitor", "args.timeout_ms")
    assert parse_hints("bash", "x", None, env_timeout_s=3).sources == ("env.timeout",)
    assert "trailing-&" in parse_hints(B, "make &").sources
    assert "run_in_background" in parse_hints(B, "make", {"run_in_background": True}).sources


def test_to_json_has_exactly_the_cli_shape() -> None:
    assert parse_hints(B, "sleep 5 && timeout 30 make").to_json() == {"min_s": 5.0, "max_s": 35.0, "background": False}


def test_python_sleep_reads_only_top_level_statements() -> None:
    assert python_sleep_seconds("import time\nwith open('x'):\n    time.sleep(2)\ntime.sleep(1)") == 3.0
    assert python_sleep_seconds("def f():\n    time.sleep(9)\nf()") == 0.0
    assert python_sleep_seconds("time.sleep(") == 0.0


def _check(hints: Hints) -> None:
    assert isinstance(hints, Hints)
    for bound in (hints.min_s, hints.max_s):
        assert bound is None or (math.isfinite(bound) and bound > 0)
    if hints.min_s is not None and hints.max_s is not None:
        assert hints.min_s <= hints.max_s
    assert set(hints.to_json()) == {"min_s", "max_s", "background"}


SHELLISH = st.text(alphabet=st.sampled_from(list("sleep timeout -k5m1.;&|()<>'\"\\\n$#{}! donefi")), max_size=80)
JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
ARGS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["timeout", "timeout_ms", "command", "run_in_background", "x"]), JSON, max_size=4),
    JSON,
)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["Bash", "bash", "Monitor", "Read", "shell", ""]),
    st.one_of(st.none(), st.text(max_size=120), SHELLISH),
    ARGS,
    st.one_of(st.none(), st.floats(), st.integers()),
)
def test_parse_hints_never_raises(tool: str, command: str | None, args: Any, env_timeout: Any) -> None:
    _check(parse_hints(tool, command, args, env_timeout_s=env_timeout))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(min_value=0.001, max_value=1e5), min_size=1, max_size=4))
def test_foreground_sleeps_add_up(durations: list[float]) -> None:
    command = " && ".join(f"sleep {d!r}" for d in durations)
    hints = parse_hints(B, command)
    assert hints.min_s == pytest.approx(sum(durations))
    assert parse_hints(B, command + " &").min_s is None


@settings(max_examples=80, deadline=None)
@given(st.floats(min_value=0.001, max_value=1e5), st.floats(min_value=0.001, max_value=1e5))
def test_the_smallest_upper_bound_wins(text_limit: float, arg_limit_s: float) -> None:
    hints = parse_hints(B, f"timeout {text_limit!r} pytest", {"timeout": arg_limit_s * 1000})
    assert hints.max_s == pytest.approx(min(text_limit, arg_limit_s))


def test_command_may_come_from_args_as_a_string_or_an_argv_list() -> None:
    assert parse_hints("shell", None, {"command": ["bash", "-lc", "sleep 2 && make"]}).min_s == 2.0
    assert parse_hints("Bash", None, {"command": "timeout 4 make"}).max_s == 4.0
    assert parse_hints("Bash", None, {"command": ["bash", 3]}) == parse_hints("Bash", None)


@pytest.mark.parametrize(("harness", "tool", "args", "max_s"), [
    # mini-SWE-agent's execute(timeout=) is seconds (a 5 s deadline was once read as 0.005 s)
    ("mini-swe-agent", "bash", {"command": "sleep 3", "timeout": 5}, 5.0),
    ("opencode", "bash", {"command": "sleep 3", "timeout": 5000}, 5.0),
    ("claude-code", "Bash", {"command": "sleep 3", "timeout": 5000}, 5.0),
    ("claude-code", "Monitor", {"command": "tail -f x", "timeout_ms": 5000}, 5.0),
    (None, "Bash", {"command": "sleep 3", "timeout": 5000}, 5.0),
    # OpenCode has no timeout_ms field: a stray one is not read in the wrong unit
    ("opencode", "bash", {"command": "sleep 3", "timeout_ms": 5}, None),
])
def test_timeout_arguments_are_read_in_the_harness_unit(harness: str | None, tool: str, args: dict,
                                                         max_s: float | None) -> None:
    hints = parse_hints(tool, None, args, harness=harness)
    assert hints.max_s == max_s
    if tool != "Monitor":
        assert hints.min_s == (3.0 if max_s is None else min(3.0, max_s))


def test_a_harness_is_known_by_either_spelling() -> None:
    # tao-run records "mini-swe-agent"; exports from other tools say "mini_swe_agent": both mean seconds.
    for harness in ("mini-swe-agent", "mini_swe_agent", "Mini_SWE_Agent"):
        hints = parse_hints("bash", "make", {"timeout": 30}, harness=harness)
        assert hints.max_s == 30.0, harness
