"""Launching mini-SWE-agent with the shim: its console script run under the stdlib-only launcher.

mini-SWE-agent lives in its own virtualenv, so nothing of tao_harness can be imported there. The command
`mini ARGS` becomes `<mini's python> -m tao_mswea_launch <path of mini> ARGS`, with the launcher's
directory (copied into the run's private directory) first on `PYTHONPATH`; the launcher restores the
user's `PYTHONPATH` before anything else runs, so the agent's tool commands do not see it. The
interpreter is read from the script's shebang (plain `#!/path/python`, `#!/usr/bin/env python3`, or
pip's `#!/bin/sh` + `'''exec' "/path/python"` form for long paths). A command that is not a Python
script runs unchanged, with a warning: no tool events then.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

from tao_harness.shims.launch import Launch, LaunchContext, base_env

LAUNCHER_MODULE = "tao_mswea_launch"
LAUNCHER_FILES = ("tao_mswea_launch.py", "tao_mswea_report.py")
OUTCOMES_MODULE_FILE = "tao_outcomes.py"


def interpreter_of(script: Path, path_env: str | None) -> str | None:
    """The Python interpreter a console script runs with, or None if it is not a Python script."""
    try:
        with open(script, "rb") as handle:
            head = handle.read(1024).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = shlex.split(head[0][2:].strip())
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        found = shutil.which(words[-1], path=path_env)
        return found if found and "python" in os.path.basename(words[-1]) else None
    if "python" in os.path.basename(words[0]):
        return words[0]
    if os.path.basename(words[0]) == "sh" and len(head) > 1 and head[1].startswith("'''exec'"):
        exec_words = shlex.split(head[1][len("'''exec'"):])
        return exec_words[0] if exec_words and "python" in os.path.basename(exec_words[0]) else None
    return None


def install_launcher(target: Path) -> Path:
    """The launcher's files in `target`, with the outcome vocabulary (stdlib only) as `tao_outcomes`."""
    target.mkdir(exist_ok=True)
    package = resources.files("tao_harness.shims.mini_swe_agent").joinpath("pythonpath")
    for name in LAUNCHER_FILES:
        (target / name).write_text(package.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    outcomes = resources.files("tao_harness").joinpath("outcomes.py").read_text(encoding="utf-8")
    (target / OUTCOMES_MODULE_FILE).write_text(outcomes, encoding="utf-8")
    return target


def prepare(argv: tuple[str, ...], context: LaunchContext) -> Launch:
    env = base_env(context)
    env.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
    # LiteLLM otherwise fetches its price list from the internet at start (seconds of retries offline).
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    script = shutil.which(argv[0], path=env.get("PATH"))
    interpreter = interpreter_of(Path(script), env.get("PATH")) if script else None
    if script is None or interpreter is None:
        print(f"tao-run: warning: {argv[0]} is not a Python console script; running it without the "
              "mini-SWE-agent shim (no tool events)", file=sys.stderr)
        return Launch(argv, env, "mini-swe-agent")
    launcher_dir = install_launcher(context.workdir / "mswea-pythonpath")
    original = context.environ.get("PYTHONPATH")
    if original:
        env["TAO_MSWEA_ORIG_PYTHONPATH"] = original
    env["PYTHONPATH"] = os.pathsep.join([str(launcher_dir), *([original] if original else [])])
    return Launch((interpreter, "-m", LAUNCHER_MODULE, script, *argv[1:]), env, "mini-swe-agent")
