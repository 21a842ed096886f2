"""The environment the real agent CLIs run with in these tests: dummy credentials and a model on the
emulated replicas, and every fetch they would make from the internet turned off (a machine without
egress may drop such connects instead of refusing them, and the agent then waits on them)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

AGENT_ENV = {
    "IS_SANDBOX": "1",
    "ANTHROPIC_API_KEY": "dummy",
    "ANTHROPIC_MODEL": "m",
    "OPENAI_API_KEY": "dummy",
    "MSWEA_CONFIGURED": "true",
    "OPENCODE_CONFIG_CONTENT": '{"autoupdate": false, "share": "disabled", "model": "tao/m"}',
    # OpenCode otherwise fetches its model list and checks for updates and LSP servers on start
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # Claude Code: no telemetry, error reporting or update checks (tao-run's launcher sets it too)
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def agent_environment(directory: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of one agent run: this process's, without any TAO / provider settings, a private
    `HOME` (no user config leaks in or out), `AGENT_ENV` and `extra`."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TAO_", "ANTHROPIC_", "OPENAI_", "OPENCODE_", "CLAUDE"))
           and key not in ("ENABLE_TOOL_SEARCH", "PYTHONPATH")}
    home = directory / "home"
    home.mkdir()
    env.update({
        "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"), **AGENT_ENV,
    })
    env.update(extra)
    return env


async def run_agent(argv: Sequence[str], directory: Path, env: dict[str, str], timeout_s: float) -> tuple[int, str]:
    """Run `argv` in `directory` (stdout to stdout.jsonl there); its exit code and stderr."""
    with (directory / "stdout.jsonl").open("wb") as stdout, (directory / "stderr.txt").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout,
                                                       stderr=stderr, cwd=directory, env=env)
        try:
            code = await asyncio.wait_for(process.wait(), timeout_s)
        finally:
            if process.returncode is None:
                process.kill()
    return code, (directory / "stderr.txt").read_text(errors="replace")
