"""The OpenCode shim: config merging, and the JS plugin run by `node` against a real relay on loopback."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tao_harness.outcomes import status_of_exit
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.shims.delivery import CoordinatorPoster
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.launch import LaunchContext, LaunchError
from tao_harness.shims.opencode.launch import merged_config, plugin_source, prepare
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app
from tao_harness.shims.spool import SpoolWriter

from .conftest import Recorder

NODE = shutil.which("node")

# Drives the plugin the way OpenCode does: before hook, part updates, after hook; a failed call that
# never reaches tool.execute.after; a call rejected before execution (no before hook at all).
DRIVER = """
const { TaoTelemetry } = await import(process.argv[2]);
const hooks = await TaoTelemetry({});
const part = (callID, status, start, end, input, metadata) => ({ type: "message.part.updated", properties: {
  part: { type: "tool", callID, tool: "bash", sessionID: "ses_1", state: { status, input, metadata,
  time: { start, end } } } } });
const t0 = Date.now();
await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "ok1" },
  { args: { command: "sleep 1", timeout: 30000 } });
await hooks.event({ event: part("ok1", "running", t0 - 5000, undefined, { command: "sleep 1" }) });
await new Promise((resolve) => setTimeout(resolve, 400)); // parsing + permission: not tool time
const spawned = Date.now();
await hooks.event({ event: part("ok1", "running", t0 - 5000, undefined, { command: "sleep 1" }, { output: "" }) });
await hooks.event({ event: part("ok1", "completed", t0 - 5000, spawned + 1000, { command: "sleep 1" }) });
await hooks["tool.execute.after"]({ tool: "bash", sessionID: "ses_1", callID: "ok1" }, { output: "" });
const t1 = Date.now();
await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "bad1" },
  { args: { command: "false" } });
await hooks.event({ event: part("bad1", "error", t1, t1 + 200, { command: "false" }) });
await hooks.event({ event: part("denied1", "error", t1 + 300, t1 + 310, { command: "rm -rf /" }) });
await hooks["tool.execute.before"]({ tool: "read", sessionID: "ses_1", callID: "late1" }, { args: {} });
await hooks["tool.execute.after"]({ tool: "read", sessionID: "ses_1", callID: "late1" }, { output: "" });
await new Promise((resolve) => setTimeout(resolve, 2500));
console.log(JSON.stringify({ t0, spawned, t1 }));
"""


def _context(tmp_path: Path, environ: dict[str, str] | None = None) -> LaunchContext:
    return LaunchContext("oc-1", "http://127.0.0.1:7001", "http://127.0.0.1:7002", tmp_path, environ or {})


def test_config_is_merged_not_replaced(tmp_path: Path) -> None:
    user = {"autoupdate": False, "plugin": ["file:///theirs.js"], "model": "tao/m",
            "provider": {"vllm": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://gpu:8000/v1"},
                                  "models": {"qwen": {}}},
                         "anthropic": {"options": {"apiKey": "k"}}}}
    launch = prepare(("opencode", "run", "--model", "tao/m", "hi"),
                     _context(tmp_path, {"OPENCODE_CONFIG_CONTENT": json.dumps(user)}))
    config = json.loads(launch.env["OPENCODE_CONFIG_CONTENT"])
    assert config["autoupdate"] is False and config["model"] == "tao/m"
    assert config["plugin"][0] == "file:///theirs.js" and config["plugin"][1].endswith("tao-opencode-plugin.js")
    assert Path(config["plugin"][1].removeprefix("file://")).read_text() == plugin_source()
    tao = config["provider"]["tao"]
    assert tao["options"] == {"baseURL": "http://127.0.0.1:7002/s/oc-1/v1", "headers": {"X-TAO-Session": "oc-1"}}
    assert tao["models"] == {"m": {}} and tao["npm"] == "@ai-sdk/openai-compatible"
    assert config["provider"]["vllm"]["options"]["baseURL"] == "http://127.0.0.1:7002/s/oc-1/v1"
    assert config["provider"]["vllm"]["models"] == {"qwen": {}}
    assert config["provider"]["anthropic"] == {"options": {"apiKey": "k"}}  # not OpenAI-compatible: untouched
    assert launch.env["TAO_SESSION"] == "oc-1" and launch.env["TAO_RELAY_URL"] == "http://127.0.0.1:7001"


def test_merge_is_idempotent_and_bad_user_config_is_a_clear_error(tmp_path: Path) -> None:
    once = merged_config({}, "file:///p.js", "http://x/v1", "s", ["m"])
    twice = merged_config(once, "file:///p.js", "http://x/v1", "s", ["m"])
    assert twice == once
    with pytest.raises(LaunchError, match="OPENCODE_CONFIG_CONTENT is not valid JSON"):
        prepare(("opencode",), _context(tmp_path, {"OPENCODE_CONFIG_CONTENT": "{oops"}))


async def _drive_plugin(tmp_path: Path, recorder: Recorder, aiohttp_server: Any, script: str) -> bytes:
    """Runs `script` under node with the plugin's URL as argv[2], its events going to `recorder`."""
    plugin = tmp_path / "plugin.mjs"
    plugin.write_text(plugin_source())
    driver = tmp_path / "driver.mjs"
    driver.write_text(script)
    async with aiohttp.ClientSession() as http:
        forwarder = Forwarder(CoordinatorPoster(recorder.url, http, 10.0), SpoolWriter(tmp_path / "spool"), 100, 0.2)
        forwarder.start()
        relay = RelayState(forwarder, SessionInfo("oc-1", "opencode", {}, 0.0), ClaudeHookTranslator("oc-1"))
        server = await aiohttp_server(build_relay_app(relay))
        env = {"TAO_RELAY_URL": str(server.make_url("")).rstrip("/") + relay.prefix, "TAO_SESSION": "oc-1", "PATH": "/usr/bin:/bin"}
        process = await asyncio.create_subprocess_exec(NODE, str(driver), plugin.as_uri(), env=env,
                                                       stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode == 0, err.decode()
        await forwarder.close(5.0)
    return out


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_plugin_reports_exact_times_and_failures(tmp_path: Path, recorder: Recorder,
                                                       aiohttp_server: Any) -> None:
    out = await _drive_plugin(tmp_path, recorder, aiohttp_server, DRIVER)
    times = json.loads(out)
    t0, spawned, t1 = times["t0"] / 1000, times["spawned"] / 1000, times["t1"] / 1000
    calls = recorder.calls("oc-1")
    ok_start, ok_end = calls["ok1"]
    # The start is the before hook (the part's time.start is 5 s early); the end is the part's time.end;
    # the duration counts from the spawn (the first output metadata), not from the before hook.
    assert ok_start["type"] == "tool_start" and abs(ok_start["at"] - t0) < 0.3
    assert ok_start["args"] == {"command": "sleep 1", "timeout": 30000} and ok_start["harness"] == "opencode"
    assert ok_end["at"] == pytest.approx(spawned + 1.0) and ok_end["status"] == "ok"
    assert 0.9 <= ok_end["duration_s"] <= 1.0
    bad_start, bad_end = calls["bad1"]
    assert bad_end["status"] == "error"
    assert bad_end["duration_s"] == pytest.approx(bad_end["at"] - bad_start["at"], abs=1e-3)
    denied_start, denied_end = calls["denied1"]
    assert denied_start["at"] == pytest.approx(t1 + 0.3) and denied_end["duration_s"] == pytest.approx(0.01)
    assert [e["type"] for e in calls["late1"]] == ["tool_start", "tool_end"]  # closed by the after hook
    assert [s["harness_session_id"] for s in recorder.sessions] == ["ses_1"]


# OpenCode 1.18.33's own part states: every finished bash part is "completed"; metadata.exit is the code,
# null with its timeout message when its own timeout stopped the command; an abort is an error part.
TIMEOUT_OUTPUT = ("(no output)\n\n<shell_metadata>\nshell tool terminated command after exceeding timeout 2000 ms. "
                  "If this command is expected to take longer ...\n</shell_metadata>")
OUTCOME_DRIVER = """
const { TaoTelemetry } = await import(process.argv[2]);
const hooks = await TaoTelemetry({});
const cases = JSON.parse(process.argv[3]);
for (const [callID, status, metadata, error] of cases) {
  await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID }, { args: { command: "x" } });
  const t = Date.now();
  await hooks.event({ event: { type: "message.part.updated", properties: { part: { type: "tool", callID,
    tool: "bash", sessionID: "ses_1", state: { status, input: { command: "x" }, metadata, error,
    time: { start: t, end: t + 10 } } } } } });
}
// No part update: the after hook's output closes the call.
await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "after3" }, { args: {} });
await hooks["tool.execute.after"]({ tool: "bash", sessionID: "ses_1", callID: "after3" },
  { output: "", metadata: { output: "", exit: 3 } });
await new Promise((resolve) => setTimeout(resolve, 2500));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_plugin_reports_outcomes_and_exit_codes(tmp_path: Path, recorder: Recorder,
                                                      aiohttp_server: Any) -> None:
    codes = [0, 1, 3, 124, 126, 127, 130, 137, 143, 255]
    cases = [[f"exit{code}", "completed", {"output": "", "exit": code, "truncated": False}, None] for code in codes]
    cases += [["timedout", "completed", {"output": TIMEOUT_OUTPUT, "exit": None, "truncated": False}, None],
              ["aborted", "error", {"interrupted": True}, "Tool execution aborted"],
              ["failed", "error", {}, "Invalid arguments"],
              ["read", "completed", {"preview": "x"}, None]]
    script = OUTCOME_DRIVER.replace("process.argv[3]", repr(json.dumps(cases)))
    await _drive_plugin(tmp_path, recorder, aiohttp_server, script)
    ends = {call: events[-1] for call, events in recorder.calls("oc-1").items()}
    for code in codes:  # the same mapping as tao_harness.outcomes
        assert (ends[f"exit{code}"]["status"], ends[f"exit{code}"]["exit_code"]) == (status_of_exit(code), code)
    assert (ends["timedout"]["status"], ends["timedout"]["exit_code"]) == ("timeout", None)
    assert ends["aborted"]["status"] == "cancelled" and ends["failed"]["status"] == "error"
    assert (ends["read"]["status"], ends["read"]["exit_code"]) == ("ok", None)
    assert (ends["after3"]["status"], ends["after3"]["exit_code"]) == ("error", 3)
