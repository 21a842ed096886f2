"""TAO launcher for mini-SWE-agent: `python -m tao_mswea_launch SCRIPT ARGS...` (run by `tao-run`).

Runs inside mini-SWE-agent's own interpreter, so it is stdlib only. Before running the console SCRIPT
(`mini`, `mini-extra`, ...) it patches mini-SWE-agent in memory:
- `Environment.execute` of every environment class (local, docker, and any class looked up by name
  through `get_environment_class`, which is how the swebench batch path builds its environments)
  reports `tool_start` before and `tool_end` in `finally`: the submit command ends the run by raising
  `Submitted` from `execute`. The call's `timeout` or the environment's `config.timeout` (seconds) is
  the only deadline mini-SWE-agent has and is sent as `env_timeout_s`. The call id is the model's
  tool-call id when the action carries one. Outcomes use `tao_outcomes`, a copy of
  `tao_harness.outcomes` installed next to this file.
- `get_model` points `model_kwargs.api_base` at the proxy and adds an `X-TAO-Session` header.
- `minisweagent.run.benchmarks.swebench.process_instance` (patched when that module is imported) runs
  each instance as its own session `<session>.<instance_id>`, so every `-w N` worker thread's current
  instance is scheduled separately.
Events go to the relay of `tao-run` from a daemon thread; the agent never waits on the network.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import runpy
import sys
import threading
import time
import uuid
from typing import Any, Callable

from tao_mswea_report import Reporter, after_import
from tao_outcomes import status_of_exit

HARNESS = "mini-swe-agent"
SWEBENCH_MODULE = "minisweagent.run.benchmarks.swebench"
_current = threading.local()


def _session(base: str) -> str:
    return getattr(_current, "session", base)


def _end_status(exc: BaseException | None, output: Any) -> tuple[str, int | None]:
    """(status, exit code) in tao_outcomes' vocabulary from what `execute` returned or raised."""
    if exc is not None:
        if type(exc).__name__ == "Submitted":
            return "ok", 0  # the submit command exited 0, then mini-SWE-agent ended the run
        return ("cancelled" if isinstance(exc, KeyboardInterrupt) else "error"), None
    if not isinstance(output, dict):
        return "error", None
    extra = output.get("extra") if isinstance(output.get("extra"), dict) else {}
    if extra.get("exception_type") == "TimeoutExpired":
        return "timeout", None  # returncode -1 is a placeholder: the process group was SIGKILLed
    if output.get("exception_info"):
        return "error", None
    code = output.get("returncode")
    if isinstance(code, int) and not isinstance(code, bool) and code >= 0:
        return status_of_exit(code), code
    return "error", None


def wrap_environment(cls: type, reporter: Reporter, base: str) -> type:
    original = getattr(cls, "execute", None)
    if original is None or getattr(original, "_tao_wrapped", False):
        return cls

    @functools.wraps(original)
    def execute(self: Any, action: Any, *args: Any, **kwargs: Any) -> Any:
        session = _session(base)
        # The model's tool-call id (mini-SWE-agent keeps it on the action), as its trajectory names the call.
        call_id = action.get("tool_call_id") if isinstance(action, dict) else None
        if not isinstance(call_id, str) or not call_id:
            call_id = f"mswea-{uuid.uuid4().hex[:16]}"
        command = action.get("command", "") if isinstance(action, dict) else str(action)
        # `execute(..., timeout=)` and `environment.timeout` are seconds; the model's own arguments
        # carry no timeout, so the deadline travels as env_timeout_s only.
        timeout = kwargs.get("timeout") or getattr(getattr(self, "config", None), "timeout", None)
        started = time.time()
        reporter.event({"type": "tool_start", "session": session, "call_id": call_id, "tool_name": "bash",
                        "harness": HARNESS, "at": started, "command": command, "args": {"command": command},
                        "env_timeout_s": float(timeout) if isinstance(timeout, (int, float)) else None})
        output, error = None, None
        try:
            output = original(self, action, *args, **kwargs)
            return output
        except BaseException as exc:
            error = exc
            raise
        finally:
            ended = time.time()
            status, exit_code = _end_status(error, output)
            reporter.event({"type": "tool_end", "session": session, "call_id": call_id, "at": ended,
                            "duration_s": ended - started, "status": status, "exit_code": exit_code})

    execute._tao_wrapped = True  # type: ignore[attr-defined]
    cls.execute = execute
    return cls


def _wrap_get_model(original: Callable[..., Any], proxy_url: str | None, base: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_model(input_model_name: str | None = None, config: dict | None = None) -> Any:
        config = copy.deepcopy(config) if config else {}
        kwargs = config.setdefault("model_kwargs", {})
        if proxy_url:
            kwargs["api_base"] = proxy_url.rstrip("/") + "/v1"
        kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), "X-TAO-Session": _session(base)}
        return original(input_model_name, config)

    return get_model


def _wrap_process_instance(original: Callable[..., Any], reporter: Reporter, base: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def process_instance(instance: dict, *args: Any, **kwargs: Any) -> Any:
        instance_id = str(instance.get("instance_id", uuid.uuid4().hex[:8]))
        session = f"{base}.{re.sub(r'[^A-Za-z0-9._-]', '_', instance_id)}"[:128]
        reporter.post("/v1/sessions", {"session": session, "harness": HARNESS, "started_at": time.time(),
                                       "labels": {"instance_id": instance_id, "parent_session": base},
                                       "harness_session_id": None})
        _current.session = session
        try:
            return original(instance, *args, **kwargs)
        finally:
            del _current.session
            reporter.post(f"/v1/sessions/{session}/end", {"ended_at": time.time()})

    return process_instance


def install(reporter: Reporter, base: str, proxy_url: str | None) -> None:
    import minisweagent.environments as environments
    import minisweagent.models as models

    lookup = environments.get_environment_class

    @functools.wraps(lookup)
    def get_environment_class(spec: str) -> type:
        return wrap_environment(lookup(spec), reporter, base)

    environments.get_environment_class = get_environment_class
    models.get_model = _wrap_get_model(models.get_model, proxy_url, base)
    for name in ("local", "docker"):
        try:
            get_environment_class(name)
        except (ValueError, ImportError):
            pass  # an optional environment whose dependencies are missing
    after_import(SWEBENCH_MODULE, lambda module: setattr(
        module, "process_instance", _wrap_process_instance(module.process_instance, reporter, base)))


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tao_mswea_launch SCRIPT [ARGS...]")
    # Tool commands run by the agent must not inherit this launcher's PYTHONPATH.
    original_path = os.environ.pop("TAO_MSWEA_ORIG_PYTHONPATH", None)
    if original_path:
        os.environ["PYTHONPATH"] = original_path
    else:
        os.environ.pop("PYTHONPATH", None)
    relay, base = os.environ.get("TAO_RELAY_URL"), os.environ.get("TAO_SESSION")
    if relay and base:
        reporter = Reporter(relay)
        install(reporter, base, os.environ.get("TAO_PROXY_URL"))
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    # As if the script had been run directly: its own directory first on sys.path, not the cwd.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
