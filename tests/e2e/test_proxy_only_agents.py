"""Real agents with only their base URL pointed at `tao proxy` (no `tao-run`, no shim): every tool call their
own transcripts show is recorded from the traffic, under the right session.

Four agent sessions at once play the `telemetry-cases` scenario on an emulated replica — Claude Code
(Monitor offered directly), OpenCode, mini-SWE-agent (environment timeout 5 s) and the Codex CLI (the
Responses API; it has no shim at all) — beside three sessions of one Python process whose threads share
one `openai` client (a home-grown loop: no session header, results as "Exit code: N"). Claude Code names
its session in a header, OpenCode in `x-session-affinity`, Codex in `session-id`; mini-SWE-agent and the
Python threads name it nowhere and are told apart by their conversations.

Per call: recorded under the agent's session, with the outcome the traffic shows (exit codes and
timeouts where the harness writes them into the result), and a span that contains what the agent saw
(the response's end before the agent issued the call, the next request after it had the result), on
the agent's own clock. A session's last call, after which the agent exits without another request
(mini-SWE-agent's submit command), has no end in the traffic: it is recorded with its start only. The
call x harness table is printed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from sqlalchemy import select

from tao_harness.config import ReplicaConfig, load_config
from tao_harness.coordinator.embedded import EmbeddedCluster
from tao_harness.replica.app import build_app as build_replica
from tao_harness.replica.scenario import load_scenario
from tao_harness.serving import start_site
from tao_harness.store.engine import open_store
from tao_harness.store.models import ToolCall

from .agent_env import agent_environment, run_agent
from .test_telemetry_truth import (AGENTS_BIN, CLOCK_SLACK_S, MINI_BIN, MINI_TIMEOUT_S, RUN_TIMEOUT_S, TASK,
                                   _expected_status, _installed)
from .transcripts import SeenCall, Transcript, claude_stream, codex_json, mini_trajectory, opencode_json

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

THREADS = 3
BASH = {"type": "function", "function": {"name": "bash", "description": "Run a shell command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"]}}}


@dataclass(frozen=True)
class Agent:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    read: str  # which transcript reader
    identified_by: str  # the proxy's identity rule for its session
    # The harness writes a command's exit code into the result the model reads (OpenCode 1.18.33 does
    # not: "exit 3" comes back as "(no output)", so only its timeouts show in the traffic).
    shows_exit_codes: bool = True


def _agents(proxy: str) -> tuple[Agent, ...]:
    claude = (str(AGENTS_BIN / "claude"), "-p", TASK, "--dangerously-skip-permissions", "--output-format",
              "stream-json", "--verbose")
    opencode_config = {"autoupdate": False, "share": "disabled", "model": "tao/m", "provider": {"tao": {
        "npm": "@ai-sdk/openai-compatible", "name": "proxy", "options": {"baseURL": proxy + "/v1"},
        "models": {"m": {}}}}}
    codex = (str(AGENTS_BIN / "codex"), "exec", "--json", "--skip-git-repo-check", "--sandbox", "danger-full-access",
             "-c", 'model="m"', "-c", 'model_provider="tao"', "-c", 'model_providers.tao.name="proxy"',
             "-c", f'model_providers.tao.base_url="{proxy}/v1"', "-c", 'model_providers.tao.env_key="OPENAI_API_KEY"',
             "-c", 'model_providers.tao.wire_api="responses"', TASK)
    return (
        Agent("claude", claude, {"ANTHROPIC_BASE_URL": proxy, "ENABLE_TOOL_SEARCH": "false"}, "claude",
              "claude-code"),
        Agent("opencode", (str(AGENTS_BIN / "opencode"), "run", "--model", "tao/m", "--format", "json",
                           "--dangerously-skip-permissions", "--", TASK),
              {"OPENCODE_CONFIG_CONTENT": json.dumps(opencode_config)}, "opencode", "session-header",
              shows_exit_codes=False),
        Agent("mini", (str(MINI_BIN / "mini"), "-m", "openai/m", "-t", TASK, "-y", "--exit-immediately", "-o",
                       "trajectory.json", "-c", "mini.yaml", "-c", f"environment.timeout={MINI_TIMEOUT_S}",
                       "-c", f"model.model_kwargs.api_base={proxy}/v1", "-c", "model.model_kwargs.api_key=dummy"),
              {"MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, "mini",
              "conversation"),
        Agent("codex", codex, {}, "codex", "session-header"),
    )


def _transcript(agent: Agent, directory: Path) -> Transcript:
    if agent.read == "claude":
        return claude_stream(directory / "stdout.jsonl")
    if agent.read == "opencode":
        return opencode_json(directory / "stdout.jsonl")
    if agent.read == "codex":
        return codex_json(directory / "stdout.jsonl")
    return mini_trajectory(directory / "trajectory.json")


async def _run(agent: Agent, directory: Path) -> tuple[int, str]:
    directory.mkdir()
    return await run_agent(agent.argv, directory, agent_environment(directory, agent.env), RUN_TIMEOUT_S)


def _python_loop(client: openai.OpenAI, seen: Transcript) -> None:
    """A home-grown agent loop: its tools run as subprocesses; what it saw is its transcript."""
    messages: list[dict[str, object]] = [{"role": "user", "content": TASK}]
    while True:
        message = client.chat.completions.create(model="m", messages=messages, tools=[BASH]).choices[0].message  # type: ignore[arg-type]
        if not message.tool_calls:
            return
        issued = time.time()
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": "bash", "arguments": c.function.arguments}}
            for c in message.tool_calls]})
        for tool_call in message.tool_calls:
            arguments = json.loads(tool_call.function.arguments)
            timeout_ms = arguments.get("timeout")
            call = SeenCall(tool_call.id, "bash", arguments["command"], arguments, issued=issued,
                            deadline_s=timeout_ms / 1000 if isinstance(timeout_ms, int) else None)
            try:
                call.exit_code = subprocess.run(arguments["command"], shell=True, check=False,
                                                timeout=call.deadline_s).returncode
                content = f"Exit code: {call.exit_code}\n"
            except subprocess.TimeoutExpired:
                call.timed_out = True
                content = f"Command timed out after {call.deadline_s:g}s"
            call.returned = time.time()
            seen.calls[call.call_id] = call
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": content})


@dataclass
class Outcome:
    name: str
    seen: Transcript
    rows: dict[str, ToolCall]  # every recorded row, by the key the agent's transcript names its calls by
    identified_by: str
    code: int = 0
    stderr: str = ""
    shows_exit_codes: bool = True


async def _run_all(root: Path) -> tuple[list[Outcome], dict[str, str | None]]:
    replica, replica_url = await start_site(build_replica(ReplicaConfig(port=0, time_scale=50.0),
                                                          load_scenario("telemetry-cases")))
    db_url = f"sqlite:///{root / 'history.db'}"
    config = load_config(None, {"store.url": db_url, "cluster.replicas": [{"id": "r0", "base_url": replica_url}]})
    try:
        async with EmbeddedCluster(config) as cluster:
            agents = _agents(cluster.proxy_url)
            client = openai.OpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0)
            loops = [Transcript() for _ in range(THREADS)]
            threads = [threading.Thread(target=_python_loop, args=(client, seen)) for seen in loops]
            for thread in threads:
                thread.start()
            results = await asyncio.gather(*(_run(agent, root / agent.name) for agent in agents))
            while any(thread.is_alive() for thread in threads):
                await asyncio.sleep(0.1)
            assert cluster.coordinator is not None and cluster.coordinator.writer is not None
            cluster.coordinator.writer.flush()
            with open_store(db_url) as store, store.engine.connect() as conn:
                rows = {row.id: row for row in conn.execute(select(ToolCall))}
            identities = {row.session_id: cluster.coordinator.identified_by(row.session_id) for row in rows.values()}
    finally:
        await replica.cleanup()
    outcomes = []
    for agent, (code, stderr) in zip(agents, results):
        seen = _transcript(agent, root / agent.name) if code == 0 else Transcript()
        keyed = rows
        if agent.read == "codex":  # its transcript has item ids of its own: its calls are found by command
            codex_rows = {row.command: row for row in rows.values() if row.harness == "codex"}
            keyed = rows | {c.call_id: codex_rows[c.command] for c in seen.calls.values() if c.command in codex_rows}
        outcomes.append(Outcome(agent.name, seen, keyed, agent.identified_by, code, stderr, agent.shows_exit_codes))
    outcomes += [Outcome(f"python-thread-{index}", seen, rows, "conversation") for index, seen in enumerate(loops)]
    return outcomes, identities


def _check(outcome: Outcome, identities: dict[str, str | None]) -> list[str]:
    """Problems with one agent's calls (empty: all recorded, under its one session, with their outcome)."""
    calls = list(outcome.seen.calls.values())
    if not calls:
        return [f"{outcome.name}: no calls seen (exit {outcome.code}): {outcome.stderr[-1500:]}"]
    missing = [c.call_id for c in calls if c.call_id not in outcome.rows]
    if missing:
        return [f"{outcome.name}: not recorded: {missing}"]
    sessions = {outcome.rows[c.call_id].session_id for c in calls}
    if len(sessions) != 1:
        return [f"{outcome.name}: calls under several sessions {sessions}"]
    [session] = sessions
    problems = []
    others = {row.id for row in outcome.rows.values() if row.session_id == session} - {
        outcome.rows[c.call_id].id for c in calls}
    if others:
        problems.append(f"{outcome.name}: rows of calls it did not make: {sorted(others)}")
    if identities.get(session) != outcome.identified_by:
        problems.append(f"{outcome.name}: identified by {identities.get(session)}, not {outcome.identified_by}")
    for seen in calls:
        row = outcome.rows[seen.call_id]
        if row.ended_at is None and seen is calls[-1] and row.source == "proxy":
            continue  # the agent's last call (mini-SWE-agent's submit): no request follows to end it
        if row.source != "proxy" or row.ended_at is None or row.started_at is None:
            problems.append(f"{outcome.name} {seen.command!r}: source {row.source}, ended {row.ended_at}")
            continue
        # An exit code 0 that the harness does not write into the result (Claude Code, OpenCode) is unknown.
        shown = row.exit_code is not None or (seen.exit_code not in (None, 0) and outcome.shows_exit_codes)
        hidden = seen.exit_code is not None and not seen.timed_out and not outcome.shows_exit_codes
        if (row.status != _expected_status(seen) and not hidden) or (shown and row.exit_code != seen.exit_code):
            problems.append(f"{outcome.name} {seen.command!r}: recorded {row.status}/{row.exit_code}, "
                            f"agent saw {_expected_status(seen)}/{seen.exit_code}")
        if seen.timed_out and row.status != "timeout":
            problems.append(f"{outcome.name} {seen.command!r}: a timeout recorded as {row.status}")
        if seen.failed and row.status == "ok" and outcome.shows_exit_codes:
            problems.append(f"{outcome.name} {seen.command!r}: a failure recorded as ok")
        if seen.issued is not None and row.started_at > seen.issued + CLOCK_SLACK_S:
            problems.append(f"{outcome.name} {seen.command!r}: span starts after the agent issued the call")
        if seen.returned is not None and row.ended_at < seen.returned - CLOCK_SLACK_S:
            problems.append(f"{outcome.name} {seen.command!r}: span ends before the agent had the result")
    return problems


def test_agents_through_the_proxy_alone_have_every_call_recorded(tmp_path: Path) -> None:
    if not _installed() or not (AGENTS_BIN / "codex").exists():
        pytest.skip("needs Claude Code, OpenCode, mini-SWE-agent and the Codex CLI: run `make agents`")
    outcomes, identities = asyncio.run(_run_all(tmp_path))
    problems = [problem for outcome in outcomes for problem in _check(outcome, identities)]
    for outcome in outcomes:
        for seen in outcome.seen.calls.values():
            row = outcome.rows.get(seen.call_id)
            recorded = "MISSING" if row is None else (
                f"{row.status}/{row.exit_code} {row.duration_s}s timeout {row.timeout_s} {row.session_id}")
            print(f"{outcome.name:<18} {str(seen.command)[:40]:<40} seen {_expected_status(seen)}/{seen.exit_code} "
                  f"deadline {seen.deadline_s} | recorded {recorded}")
    assert not problems, "\n".join(problems)
