"""The mini-SWE-agent shim: shebang parsing, the stdlib launcher's wrappers, and the real mini-SWE-agent."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tao_harness.shims.launch import LaunchContext
from tao_harness.shims.mini_swe_agent.launch import install_launcher, interpreter_of, prepare

from .conftest import REPO, Recorder

def _launcher(tmp_path: Path) -> ModuleType:
    """The launcher as `tao-run` installs it (with its copy of the outcome vocabulary)."""
    directory = str(install_launcher(tmp_path / "launcher"))
    sys.path.insert(0, directory)
    try:
        return importlib.import_module("tao_mswea_launch")
    finally:
        sys.path.remove(directory)


@pytest.mark.parametrize(("head", "expected"), [
    ("#!/opt/mini/bin/python\nimport x\n", "/opt/mini/bin/python"),
    ("#!/bin/sh\n'''exec' \"/very/long/venv/bin/python3\" \"$0\" \"$@\"\n' '''\n", "/very/long/venv/bin/python3"),
    ("#!/bin/bash\necho hi\n", None),
    ("MZ binary", None),
])
def test_interpreter_from_shebang(tmp_path: Path, head: str, expected: str | None) -> None:
    script = tmp_path / "mini"
    script.write_text(head)
    assert interpreter_of(script, None) == expected


def test_prepare_wraps_a_python_console_script(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mini"
    script.write_text("#!/opt/mini/bin/python\n")
    script.chmod(0o755)
    context = LaunchContext("m-1", "http://127.0.0.1:1", "http://127.0.0.1:2", tmp_path,
                            {"PATH": str(bin_dir), "PYTHONPATH": "/user/lib"})
    launch = prepare(("mini", "-t", "task"), context)
    assert launch.argv == ("/opt/mini/bin/python", "-m", "tao_mswea_launch", str(script), "-t", "task")
    first, rest = launch.env["PYTHONPATH"].split(os.pathsep, 1)
    assert (Path(first) / "tao_mswea_launch.py").is_file() and rest == "/user/lib"
    assert launch.env["TAO_MSWEA_ORIG_PYTHONPATH"] == "/user/lib"
    assert launch.env["MSWEA_COST_TRACKING"] == "ignore_errors"


class Submitted(Exception):
    """Same name as mini-SWE-agent's: the submit command raises it from `execute`."""


class ShapedEnvironment:
    """An environment with mini-SWE-agent's `execute` signature (the real one is tested below)."""

    class config:  # noqa: N801 - mirrors `self.config.timeout`
        timeout = 9

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        if action["command"] == "submit":
            raise Submitted()
        return {"output": "", "returncode": 3 if action["command"] == "false" else 0, "exception_info": ""}


async def test_wrappers_give_each_instance_its_own_session(recorder: Recorder, tmp_path: Path) -> None:
    launcher = _launcher(tmp_path)
    reporter = sys.modules["tao_mswea_report"].Reporter(recorder.url)
    environment = launcher.wrap_environment(ShapedEnvironment, reporter, "base")
    assert launcher.wrap_environment(environment, reporter, "base").execute is environment.execute

    def process_instance(instance: dict) -> None:
        env = environment()
        env.execute({"command": "false"})
        env.execute({"command": "true"}, timeout=4)
        with pytest.raises(Submitted):
            env.execute({"command": "submit"})

    wrapped = launcher._wrap_process_instance(process_instance, reporter, "base")

    def run_batch() -> None:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(wrapped, [{"instance_id": "django__django-1"}, {"instance_id": "a/b"}]))
        environment().execute({"command": "true"})  # the main thread: the run's own session
        assert reporter.flush(10.0)

    await asyncio.to_thread(run_batch)
    assert sorted(s["session"] for s in recorder.sessions) == ["base.a_b", "base.django__django-1"]
    assert sorted(recorder.ended) == ["base.a_b", "base.django__django-1"]
    for session in ("base.a_b", "base.django__django-1"):
        ends = [e for calls in recorder.calls(session).values() for e in calls if e["type"] == "tool_end"]
        assert sorted((e["status"], e["exit_code"]) for e in ends) == [("error", 3), ("ok", 0), ("ok", 0)]
        starts = [e for calls in recorder.calls(session).values() for e in calls if e["type"] == "tool_start"]
        # Seconds, as mini-SWE-agent's execute(timeout=) and environment.timeout are; never in args.
        assert sorted(e["env_timeout_s"] for e in starts) == [4.0, 9.0, 9.0]
        assert all(e["args"] == {"command": e["command"]} for e in starts)
    assert len(recorder.calls("base")) == 1


TIMED_OUT = {"output": "", "returncode": -1, "exception_info": "An error occurred while executing the command: "
             "Command 'sleep 10' timed out after 3 seconds",
             "extra": {"exception_type": "TimeoutExpired", "exception": "Command 'sleep 10' timed out after 3 seconds"}}


@pytest.mark.parametrize(("raised", "output", "expected"), [
    (None, {"output": "", "returncode": 0, "exception_info": ""}, ("ok", 0)),
    (None, {"output": "", "returncode": 3, "exception_info": ""}, ("error", 3)),
    (None, {"output": "", "returncode": 124, "exception_info": ""}, ("timeout", 124)),  # GNU timeout
    (None, {"output": "", "returncode": 137, "exception_info": ""}, ("killed", 137)),
    (None, TIMED_OUT, ("timeout", None)),  # mini-SWE-agent's own timeout: -1 is not an exit code
    (None, {"output": "", "returncode": -1, "exception_info": "boom", "extra": {"exception_type": "OSError"}},
     ("error", None)),
    (Submitted(), None, ("ok", 0)),
    (KeyboardInterrupt(), None, ("cancelled", None)),
    (RuntimeError("x"), None, ("error", None)),
])
def test_end_status_reads_what_execute_reported(tmp_path: Path, raised: BaseException | None, output: Any,
                                                expected: tuple[str, int | None]) -> None:
    assert _launcher(tmp_path)._end_status(raised, output) == expected


async def test_the_models_tool_call_id_names_the_call(recorder: Recorder, tmp_path: Path) -> None:
    launcher = _launcher(tmp_path)
    reporter = sys.modules["tao_mswea_report"].Reporter(recorder.url)

    class Environment:  # a class of its own: wrapping patches the class in place
        def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
            return {"output": "", "returncode": 0, "exception_info": ""}

    environment = launcher.wrap_environment(Environment, reporter, "s")
    environment().execute({"command": "true", "tool_call_id": "call_abc"})
    assert await asyncio.to_thread(reporter.flush, 10.0)
    assert list(recorder.calls("s")) == ["call_abc"]
