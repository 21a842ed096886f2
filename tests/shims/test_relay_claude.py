"""The relay's API and Claude Code hook bodies -> tool events (through a real relay on loopback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tao_harness.shims.claude_code.hooks import CLAUDE_HOOK_PATH, ClaudeHookTranslator, hook_settings
from tao_harness.shims.claude_code.launch import merged_settings, prepare
from tao_harness.shims.delivery import CoordinatorPoster
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.launch import LaunchContext, LaunchError
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app
from tao_harness.shims.spool import SpoolWriter
from tao_harness.store.limits import TEXT_KEPT_CHARS

from .conftest import Recorder


def _hook(kind: str, call: str | None = "toolu_1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"hook_event_name": kind, "session_id": "cc-123", "cwd": "/tmp"}
    if call is not None:
        body["tool_use_id"] = call
    return body | extra


def test_pre_and_post_tool_use_become_start_and_end() -> None:
    translator = ClaudeHookTranslator("s1")
    pre = translator.translate(_hook("PreToolUse", tool_name="Bash", tool_input={
        "command": "pytest -q", "timeout": 30000, "run_in_background": False}), at=100.0)
    post = translator.translate(_hook("PostToolUse", tool_name="Bash", duration_ms=1234), at=101.5)
    [start], [end] = pre.events, post.events
    assert (start.session, start.call_id, start.tool_name, start.command) == ("s1", "toolu_1", "Bash", "pytest -q")
    assert start.args["timeout"] == 30000 and start.at == 100.0 and start.harness == "claude-code"
    assert (end.call_id, end.duration_s, end.status, end.at) == ("toolu_1", 1.234, "ok", 101.5)
    assert pre.harness_session_id == "cc-123"


def test_monitor_input_is_kept_as_hint_args() -> None:
    [start] = ClaudeHookTranslator("s1").translate(_hook("PreToolUse", tool_name="Monitor", tool_input={
        "command": "tail -f log", "timeout_ms": 60000, "persistent": True}), at=1.0).events
    assert start.args == {"command": "tail -f log", "timeout_ms": 60000, "persistent": True}


@pytest.mark.parametrize(("extra", "status"), [({}, "error"), ({"is_interrupt": True}, "cancelled")])
def test_failure_hook_ends_the_call(extra: dict[str, Any], status: str) -> None:
    translator = ClaudeHookTranslator("s1")
    translator.translate(_hook("PreToolUse", tool_name="Bash", tool_input={"command": "false"}), at=1.0)
    [end] = translator.translate(_hook("PostToolUseFailure", tool_name="Bash", error="exit 1", **extra),
                                 at=2.0).events
    assert (end.status, end.duration_s) == (status, None)


def test_stop_closes_calls_left_open() -> None:
    translator = ClaudeHookTranslator("s1")
    translator.translate(_hook("PreToolUse", "a", tool_name="Bash", tool_input={"command": "sleep 9"}), at=1.0)
    translator.translate(_hook("PreToolUse", "b", tool_name="Bash", tool_input={"command": "ls"}), at=1.0)
    translator.translate(_hook("PostToolUse", "b", tool_name="Bash"), at=2.0)
    stop = translator.translate(_hook("Stop", None), at=3.0)
    assert [(e.call_id, e.status) for e in stop.events] == [("a", "cancelled")]
    assert translator.translate(_hook("Stop", None), at=4.0).events == ()


def test_bad_bodies_give_no_events() -> None:
    translator = ClaudeHookTranslator("s1")
    assert translator.translate({"hook_event_name": "PreToolUse"}, at=1.0).events == ()
    assert translator.translate(_hook("PostToolUse", tool_name="Bash", duration_ms="x"), at=1.0).events[0].duration_s is None


def test_settings_merge_keeps_the_users_hooks(tmp_path: Path) -> None:
    user = {"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo mine"}]}]}}
    ours = hook_settings("http://127.0.0.1:1/hooks/claude-code", 5)
    merged = merged_settings(user, ours)
    assert merged["model"] == "x"
    assert [m.get("matcher") for m in merged["hooks"]["PreToolUse"]] == ["Bash", "*"]
    assert set(merged["hooks"]) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop", "SessionEnd"}
    assert merged["hooks"]["Stop"][0]["hooks"][0] == {"type": "http", "url": ours["Stop"][0]["hooks"][0]["url"],
                                                       "timeout": 5}


def _context(tmp_path: Path, environ: dict[str, str] | None = None) -> LaunchContext:
    return LaunchContext("sess-1", "http://127.0.0.1:7001", "http://127.0.0.1:7002", tmp_path, environ or {})


def test_prepare_replaces_the_users_settings_with_a_merged_copy(tmp_path: Path) -> None:
    user_file = tmp_path / "mine.json"
    user_file.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}))
    before = user_file.read_text()
    launch = prepare(("claude", "-p", "hi", "--settings", str(user_file)), _context(
        tmp_path, {"ANTHROPIC_CUSTOM_HEADERS": "X-Team: a\nX-TAO-Session: stale"}))
    settings_path = Path(launch.argv[launch.argv.index("--settings") + 1])
    assert launch.argv[:3] == ("claude", "-p", "hi") and settings_path != user_file
    assert len(json.loads(settings_path.read_text())["hooks"]["Stop"]) == 2
    assert user_file.read_text() == before
    assert launch.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:7002/s/sess-1"
    assert launch.env["ANTHROPIC_CUSTOM_HEADERS"] == "X-Team: a\nX-TAO-Session: sess-1"
    assert launch.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_prepare_adds_settings_and_rejects_unreadable_user_settings(tmp_path: Path) -> None:
    launch = prepare(("claude", "-p", "hi"), _context(tmp_path))
    assert launch.argv[1] == "--settings" and launch.argv[3:] == ("-p", "hi")
    with pytest.raises(LaunchError, match="cannot read"):
        prepare(("claude", "--settings=/nonexistent.json"), _context(tmp_path))


async def _relay(tmp_path: Path, recorder: Recorder, http: aiohttp.ClientSession, aiohttp_server: Any):
    forwarder = Forwarder(CoordinatorPoster(recorder.url, http, 10.0), SpoolWriter(tmp_path), 100, 0.2)
    forwarder.start()
    state = RelayState(forwarder, SessionInfo("s1", "claude-code", {}, 1.0), ClaudeHookTranslator("s1"))
    server = await aiohttp_server(build_relay_app(state))
    return forwarder, str(server.make_url("")).rstrip("/") + state.prefix


async def test_relay_api_validates_and_forwards(tmp_path: Path, recorder: Recorder, aiohttp_server: Any) -> None:
    async with aiohttp.ClientSession() as http:
        forwarder, url = await _relay(tmp_path, recorder, http, aiohttp_server)
        good = {"type": "tool_start", "session": "s1", "call_id": "c1", "tool_name": "bash", "at": 5.0}
        async with http.post(url + "/v1/events", json={"events": [good, {**good, "at": -1}]}) as bad:
            assert bad.status == 400
            assert (await bad.json())["error"]["message"].startswith("events[1].at:")
        async with http.post(url + "/v1/events", data=b"{not json") as broken:
            assert broken.status == 400
        async with http.post(url + "/v1/events", json=good) as ok:
            assert (ok.status, await ok.json()) == (200, {"accepted": 1})
        async with http.post(url + "/v1/sessions", json={"session": "s1.i1", "harness": "x"}) as created:
            assert created.status == 200
        async with http.post(url + "/v1/sessions/s1.i1/end") as ended:
            assert ended.status == 200
        for body in (_hook("PreToolUse", tool_name="Bash", tool_input={"command": "sleep 1", "timeout": 30000}),
                     _hook("PostToolUse", tool_name="Bash", duration_ms=1001), {"junk": 1}):
            async with http.post(url + CLAUDE_HOOK_PATH, json=body) as answer:
                assert (answer.status, await answer.json()) == (200, {})
        await forwarder.close(2.0)
    assert [e["call_id"] for e in recorder.events] == ["c1", "toolu_1", "toolu_1"]
    assert recorder.events[2]["duration_s"] == 1.001
    assert [s["session"] for s in recorder.sessions] == ["s1.i1", "s1"]
    assert recorder.sessions[1]["harness_session_id"] == "cc-123"  # joined at the first hook
    assert recorder.ended == ["s1.i1"]


async def test_relay_refuses_callers_without_the_run_secret(tmp_path: Path, recorder: Recorder,
                                                            aiohttp_server: Any) -> None:
    # The relay forwards with the coordinator's token: another local process must not inject through it.
    async with aiohttp.ClientSession() as http:
        forwarder, url = await _relay(tmp_path, recorder, http, aiohttp_server)
        root = url.rsplit("/", 1)[0]
        other = RelayState(forwarder, SessionInfo("s1", "x", {}, 1.0), ClaudeHookTranslator("s1"))
        event = {"type": "tool_start", "session": "victim", "call_id": "c1", "tool_name": "bash", "at": 5.0}
        first = url[len(root) + 1]
        wrong_first = root + "/" + ("y" if first == "x" else "x") + url[len(root) + 2:]  # one character off
        for guess in (root, root + other.prefix, wrong_first):
            for path, body in (("/v1/events", event), ("/v1/sessions", {"session": "victim"}),
                               ("/v1/sessions/victim/end", {}), (CLAUDE_HOOK_PATH, _hook("SessionEnd"))):
                async with http.post(guess + path, json=body) as refused:
                    assert refused.status == 404, (guess, path)
        async with http.get(root + "/healthz") as health:
            assert health.status == 200
        async with http.post(url + "/v1/events", json=event) as accepted:
            assert accepted.status == 200
        await forwarder.close(2.0)
    assert len(url) - len(root) > 30 and [e["session"] for e in recorder.events] == ["victim"]
    assert recorder.sessions == [] and recorder.ended == []


async def test_big_and_unstorable_tool_input_is_fitted_before_it_is_spooled(tmp_path: Path, aiohttp_server: Any) -> None:
    # A Write hook carries the whole file; nothing leaves the relay bigger than the store keeps.
    forwarder = Forwarder(None, SpoolWriter(tmp_path / "spool"), 100, 0.2)
    forwarder.start()
    state = RelayState(forwarder, SessionInfo("s1", "claude-code", {}, 1.0), ClaudeHookTranslator("s1"))
    server = await aiohttp_server(build_relay_app(state))
    url = str(server.make_url("")).rstrip("/") + state.prefix
    content = "z" * 500_000 + "\x00\ud800"
    async with aiohttp.ClientSession() as http:
        write = _hook("PreToolUse", tool_name="Write", tool_input={"file_path": "/w/a.py", "content": content})
        async with http.post(url + CLAUDE_HOOK_PATH, data=json.dumps(write),
                             headers={"Content-Type": "application/json"}) as answer:
            assert answer.status == 200
        event = {"type": "tool_start", "session": "s1", "call_id": "c2", "tool_name": "Write", "at": 5.0,
                 "args": {"content": content}}
        async with http.post(url + "/v1/events", data=json.dumps(event),
                             headers={"Content-Type": "application/json"}) as answer:
            assert answer.status == 200
    await forwarder.close(0.5)
    [spooled] = (tmp_path / "spool").iterdir()
    lines = spooled.read_text().splitlines()
    bodies = [json.loads(line)["body"] for line in lines if '"/v1/events"' in line]
    assert [body["call_id"] for body in bodies] == ["toolu_1", "c2"]
    for body in bodies:
        assert body["args"]["content"] == "z" * TEXT_KEPT_CHARS + f"…[truncated {500_002 - TEXT_KEPT_CHARS} chars]"
    assert max(len(line) for line in lines) < 100_000


@pytest.mark.parametrize(("error", "status", "exit_code"), [
    ("Exit code 3", "error", 3),
    ("Exit code 124", "timeout", 124),
    ("Exit code 143\nCommand timed out after 3s", "timeout", 143),
])
def test_failure_hook_keeps_the_exit_code(error: str, status: str, exit_code: int) -> None:
    translator = ClaudeHookTranslator("s1")
    translator.translate(_hook("PreToolUse", tool_name="Bash", tool_input={"command": "x"}), at=1.0)
    [end] = translator.translate(_hook("PostToolUseFailure", tool_name="Bash", error=error, is_interrupt=False,
                                       duration_ms=3010), at=4.0).events
    assert (end.status, end.exit_code, end.duration_s) == (status, exit_code, 3.01)


def test_successful_shell_call_exited_zero_other_tools_have_no_code() -> None:
    translator = ClaudeHookTranslator("s1")
    translator.translate(_hook("PreToolUse", "b", tool_name="Bash", tool_input={"command": "true"}), at=1.0)
    translator.translate(_hook("PreToolUse", "r", tool_name="Read", tool_input={"file_path": "/x"}), at=1.0)
    [bash] = translator.translate(_hook("PostToolUse", "b", tool_name="Bash"), at=2.0).events
    [read] = translator.translate(_hook("PostToolUse", "r", tool_name="Read"), at=2.0).events
    assert (bash.exit_code, read.exit_code) == (0, None)


@pytest.mark.parametrize(("tool", "tool_input", "response"), [
    ("Bash", {"command": "sleep 3", "run_in_background": True, "description": "d"},
     {"stdout": "", "backgroundTaskId": "b1v3bpqog"}),
    ("Monitor", {"command": "tail -f log", "timeout_ms": 10000, "description": "d"},
     {"taskId": "b1v3bpqog", "timeoutMs": 10000, "persistent": False}),
])
def test_a_launch_opens_a_job(tool: str, tool_input: dict[str, Any], response: dict[str, Any]) -> None:
    translator = ClaudeHookTranslator("s1")
    translator.translate(_hook("PreToolUse", tool_name=tool, tool_input=tool_input,
                               transcript_path="/tmp/t.jsonl"), at=1.0)
    end, job = translator.translate(_hook("PostToolUse", tool_name=tool, tool_input=tool_input,
                                          tool_response=response, duration_ms=9), at=1.02).events
    assert (end.call_id, end.status, end.exit_code) == ("toolu_1", "ok", None)  # its work has not ended
    assert (job.call_id, job.kind, job.at, job.command) == ("toolu_1:job", "job", 1.0, tool_input["command"])
    assert job.args["task_id"] == "b1v3bpqog" and "run_in_background" not in job.args
    assert translator.jobs["b1v3bpqog"].call_id == "toolu_1:job"
    assert translator.transcript_path == "/tmp/t.jsonl"


@pytest.mark.parametrize(("argv", "expected"), [
    (("claude", "-p", "x", "--output-format", "stream-json", "--verbose"), True),
    (("claude", "-p", "x", "--output-format=stream-json"), True),
    (("claude", "-p", "x", "--output-format", "json"), False),
    (("claude", "-p", "--", "--output-format", "stream-json"), False),
])
def test_stream_json_output_is_observed(tmp_path: Path, argv: tuple[str, ...], expected: bool) -> None:
    assert prepare(argv, _context(tmp_path)).observe_stdout is expected
