"""End to end: the real Claude Code CLI (`make agents`) in -p mode runs the replica's scripted Bash call."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import StartReplica

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / ".tools" / "agents" / "node_modules" / ".bin" / "claude"

pytestmark = pytest.mark.e2e


async def _run_claude(url: str, workdir: Path, home: Path) -> list[dict[str, Any]]:
    env = {key: os.environ[key] for key in ("PATH", "LANG", "TMPDIR") if key in os.environ}
    env |= {
        "HOME": str(home),
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "dummy",
        "ANTHROPIC_MODEL": "tao-replica",
    }
    process = await asyncio.create_subprocess_exec(
        str(CLAUDE),
        "-p",
        "Wait a second, then report.",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        cwd=workdir,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, stderr.decode()[-2000:]
    return [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]


def _blocks(events: list[dict[str, Any]], role: str, kind: str) -> list[dict[str, Any]]:
    return [
        block
        for event in events
        if event.get("type") == role
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("type") == kind
    ]


async def test_claude_code_runs_the_scripted_bash_call_and_completes(
    start_replica: StartReplica, tmp_path: Path
) -> None:
    if not CLAUDE.exists():
        pytest.skip("Claude Code is not installed: run `make agents`")
    replica = await start_replica("sleep-then-answer", time_scale=20.0)
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    events = await _run_claude(replica.url, tmp_path / "work", tmp_path / "home")

    calls = _blocks(events, "assistant", "tool_use")
    assert [(c["name"], c["input"]["command"]) for c in calls] == [("Bash", "sleep 1")]
    results = _blocks(events, "user", "tool_result")
    assert [r["tool_use_id"] for r in results] == [calls[0]["id"]]
    assert results[0].get("is_error") is False
    final = events[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and final["is_error"] is False
    assert final["result"].endswith("The command finished; the task is done.")
    assert final["usage"]["cache_read_input_tokens"] > 0  # the second turn reused the first turn's KV
