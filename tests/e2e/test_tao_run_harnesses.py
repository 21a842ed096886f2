"""End to end: the real Claude Code, OpenCode and mini-SWE-agent CLIs through `tao-run`.

Emulated replicas (in this process) play the LLM with a script: one `sleep 1` bash call with a 30 s
timeout, then a final answer (mini-SWE-agent: the submit command). `tao-run` runs in this process and
event loop, the agent CLIs as its children. Assertions go to the coordinator's store: every tool call
with its family key, outcome and a duration of at least 1 s within its own start and end, the timeout
hint parsed, the LLM requests attributed to
the session and all served by one replica (pinned), and the agent's exit code returned.
CLIs come from `make agents` (.tools/agents, .tools/mini); a missing one skips its tests.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tao_harness.cli.run import _plan
from tao_harness.config import ReplicaConfig, load_config
from tao_harness.coordinator.embedded import EmbeddedCluster
from tao_harness.replica.app import build_app as build_replica
from tao_harness.replica.scenario import load_scenario
from tao_harness.shims.runner import run_agent
from tao_harness.store.engine import open_store
from tao_harness.store.models import LLMRequest, ToolCall

from .agent_env import AGENT_ENV

REPO = Path(__file__).resolve().parents[2]
AGENTS_BIN = REPO / ".tools" / "agents" / "node_modules" / ".bin"
MINI_BIN = REPO / ".tools" / "mini" / "bin"
SCENARIO = """
name: sleep-with-timeout
turns:
  - bash: sleep 1
    timeout_s: 30
    output_tokens: 30
  - answer: Done.
    output_tokens: 10
"""
# Two clock readings of one moment on the harness's and the shim's side.
CLOCK_SLACK_S = 0.05

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _command(harness: str, task: str) -> list[str]:
    if harness == "claude":
        return [str(AGENTS_BIN / "claude"), "-p", task, "--dangerously-skip-permissions",
                "--output-format", "stream-json", "--verbose"]
    if harness == "opencode":
        return [str(AGENTS_BIN / "opencode"), "run", "--model", "tao/m", "--format", "json",
                "--dangerously-skip-permissions", "--", task]
    return [str(MINI_BIN / "mini"), "-m", "openai/m", "-t", task, "-y", "--exit-immediately"]


HARNESS = {"claude": "claude-code", "opencode": "opencode", "mini": "mini-swe-agent"}


def _private_home(home: Path, harness: str) -> list[str]:
    """`env HOME=...` prefix: concurrent OpenCode processes must not share their state database."""
    if harness != "opencode":
        return []
    home.mkdir()
    return ["env", f"HOME={home}", f"XDG_DATA_HOME={home}/data", f"XDG_STATE_HOME={home}/state",
            f"XDG_CONFIG_HOME={home}/config", f"XDG_CACHE_HOME={home}/cache"]


def _installed(harness: str) -> bool:
    return Path(_command(harness, "x")[0]).exists()


@dataclass
class Cluster:
    replicas: list[str]
    db_url: str
    tmp: Path


@pytest.fixture
async def cluster(aiohttp_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(SCENARIO)
    urls = []
    for _ in range(2):
        server = await aiohttp_server(build_replica(ReplicaConfig(port=0, time_scale=50.0),
                                                    load_scenario(str(scenario_file))))
        urls.append(str(server.make_url("")).rstrip("/"))
    home = tmp_path / "home"
    home.mkdir()
    for key, value in {"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data"), **AGENT_ENV}.items():
        monkeypatch.setenv(key, value)
    for key in ("TAO_COORDINATOR_URL", "TAO_DB_URL", "TAO_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    return Cluster(urls, f"sqlite:///{tmp_path / 'history.db'}", tmp_path)


def _replica_flags(cluster: Cluster) -> list[str]:
    return [flag for i, url in enumerate(cluster.replicas) for flag in ("--replica", f"r{i}={url}")]


async def _tao_run(args: list[str]) -> int:
    # minutes: a loaded 2-core machine; within the suite's per-test limit (300 s)
    return await asyncio.wait_for(run_agent(_plan(args)), timeout=200)


def _store_rows(db_url: str, session: str) -> tuple[list[ToolCall], list[LLMRequest]]:
    with open_store(db_url) as store, store.engine.connect() as conn:
        calls = list(conn.execute(select(ToolCall).where(ToolCall.session_id == session)))
        requests = list(conn.execute(select(LLMRequest).where(LLMRequest.session_id == session)))
    return calls, requests


def _assert_session(db_url: str, session: str, harness: str) -> None:
    calls, requests = _store_rows(db_url, session)
    sleeps = [c for c in calls if c.command == "sleep 1"]
    assert len(sleeps) == 1, calls
    sleep = sleeps[0]
    assert sleep.family == "bash:sleep" and (sleep.status, sleep.exit_code) == ("ok", 0)
    # No wall-clock guess of the upper end (a loaded machine stretches it): `sleep 1` cannot end sooner
    # than 1 s, and the harness's own duration lies within its start and end reports.
    assert 1.0 - CLOCK_SLACK_S <= sleep.duration_s <= sleep.ended_at - sleep.started_at + CLOCK_SLACK_S
    if harness == "mini":
        assert sleep.env_timeout_s == 30.0  # mini-SWE-agent's environment.timeout
    else:
        assert sleep.timeout_s == 30.0  # 30000 ms in the tool input -> 30 s
    assert all(c.ended_at is not None for c in calls)
    assert len(requests) >= 2 and all(r.status == "ok" for r in requests)
    assert len({r.replica for r in requests}) == 1  # pinned to the replica the coordinator chose


async def test_agent_exit_code_is_returned(cluster: Cluster) -> None:
    if not _installed("claude"):
        pytest.skip("claude is not installed: run `make agents`")
    # An unknown option makes Claude Code itself exit with its own error code.
    code = await _tao_run(["--db", cluster.db_url, *_replica_flags(cluster), "--",
                           str(AGENTS_BIN / "claude"), "--no-such-option"])
    assert code == 1


async def test_eight_concurrent_mixed_sessions_lose_no_events(cluster: Cluster) -> None:
    # One OpenCode: each one costs ~20 s of CPU to start (test_telemetry_truth runs one beside these too).
    mix = [h for h in ["claude", "mini", "opencode", "claude", "mini", "claude", "claude", "claude"]
           if _installed(h)]
    if len(mix) < 8:
        pytest.skip("needs all three CLIs: run `make agents`")
    config = load_config(None, {"store.url": cluster.db_url, "cluster.replicas": [
        {"id": f"r{i}", "base_url": url} for i, url in enumerate(cluster.replicas)]})
    async with EmbeddedCluster(config) as shared:
        runs = [_tao_run(["--coordinator", shared.coordinator_url, "--proxy", shared.proxy_url,
                          "--session", f"mix-{i}-{h}", "--harness", HARNESS[h], "--",
                          *_private_home(cluster.tmp / f"home-{i}", h),
                          *_command(h, "Wait a second, then report.")])
                for i, h in enumerate(mix)]
        codes = await asyncio.gather(*runs)
    assert codes == [0] * 8
    for i, harness in enumerate(mix):
        _assert_session(cluster.db_url, f"mix-{i}-{harness}", harness)


async def test_coordinator_unreachable_during_a_run_events_land_from_the_spool(cluster: Cluster) -> None:
    if not _installed("claude"):
        pytest.skip("claude is not installed: run `make agents`")
    session = "offline-1"
    # No coordinator: the private proxy routes by cache affinity, tool events go to the spool.
    code = await _tao_run(["--coordinator", "http://127.0.0.1:9", "--session", session,
                           *_replica_flags(cluster), "--", *_command("claude", "Wait a second, then report.")])
    assert code == 0
    assert list((cluster.tmp / "data" / "tao_harness" / "spool").glob("*.jsonl"))
    # The next run (with a working coordinator) delivers the spool before it ends.
    assert await _tao_run(["--db", cluster.db_url, *_replica_flags(cluster), "--harness", "generic", "--",
                           "sh", "-c", "sleep 1"]) == 0
    calls, _ = _store_rows(cluster.db_url, session)
    assert [(c.command, c.family, c.status) for c in calls] == [("sleep 1", "bash:sleep", "ok")]
    assert not list((cluster.tmp / "data" / "tao_harness" / "spool").glob("*.jsonl"))
