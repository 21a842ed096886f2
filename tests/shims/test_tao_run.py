"""`tao-run` as a process: exit codes, signal forwarding, bad flags, the child's environment, the spool."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from urllib.parse import urlsplit

import pytest

from tao_harness.cli.run import _plan, main
from tao_harness.shims.runner import pass_through, run_agent

from .conftest import TAO_RUN, Recorder, spool_dir


@pytest.fixture
def private_dirs(run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """In-process runs: the same private HOME / spool directory as `run_env`, in this process."""
    for key in ("HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(key, run_env[key])
    for key in ("TAO_COORDINATOR_URL", "TAO_DB_URL", "TAO_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    return run_env


async def tao_run(args: list[str]) -> int:
    """`tao-run ARGS` in this process and event loop (next to the recording coordinator)."""
    return await run_agent(_plan(args))

POST_EVENTS = (
    "import json, os, sys, time, urllib.request\n"
    "relay, session = os.environ['TAO_RELAY_URL'], os.environ['TAO_SESSION']\n"
    "for i in range(int(sys.argv[1])):\n"
    "    for kind in ('tool_start', 'tool_end'):\n"
    "        body = {'type': kind, 'session': session, 'call_id': f'c{i}', 'at': time.time(), 'tool_name': 'bash'}\n"
    "        request = urllib.request.Request(relay + '/v1/events', json.dumps(body).encode(),\n"
    "                                         {'Content-Type': 'application/json'})\n"
    "        assert urllib.request.urlopen(request).status == 200\n"
)


async def test_exit_code_and_session_lifecycle(recorder: Recorder, private_dirs: dict[str, str],
                                               capfd: pytest.CaptureFixture[str]) -> None:
    code = await tao_run(["--coordinator", recorder.url, "--session", "t1", "--labels", "task=a", "b=c",
                          "--", "sh", "-c", "exit 3"])
    assert code == 3
    assert "unknown harness 'sh'" in capfd.readouterr().err
    assert [(s["session"], s["harness"], s["labels"]) for s in recorder.sessions] == [
        ("t1", "generic", {"task": "a", "b": "c"})]
    assert recorder.ended == ["t1"]


def test_bad_flags_are_one_line_and_exit_2(private_dirs: dict[str, str],
                                          capfd: pytest.CaptureFixture[str]) -> None:
    for args in (["--labels", "novalue", "--", "true"], ["--harness", "vim", "--", "true"], [],
                 ["--session", "bad id", "--", "true"], ["--replica", "r0", "--", "true"], ["--bogus", "x"]):
        assert main(args) == 2, args
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tao-run: error:"), err


async def test_missing_command_is_127(recorder: Recorder, private_dirs: dict[str, str],
                                      capfd: pytest.CaptureFixture[str]) -> None:
    code = await tao_run(["--coordinator", recorder.url, "--harness", "generic", "--", "/nonexistent/agent"])
    assert code == 127 and "command not found" in capfd.readouterr().err


async def test_child_environment_points_at_the_proxy(recorder: Recorder, private_dirs: dict[str, str],
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    code = await tao_run(["--coordinator", recorder.url, "--session", "env1", "--harness", "generic", "--",
                          "sh", "-c", 'echo "$OPENAI_BASE_URL|$ANTHROPIC_BASE_URL|$TAO_SESSION|$TAO_RELAY_URL"'])
    assert code == 0
    openai, anthropic, session, relay = capfd.readouterr().out.strip().split("|")
    assert openai.endswith("/s/env1/v1") and anthropic.endswith("/s/env1") and session == "env1"
    assert relay.startswith("http://127.0.0.1:") and len(urlsplit(relay).path) > 30  # the run's relay secret
    assert "TAO_SESSION" not in os.environ  # only the child's environment was changed


async def _signalled(sig: signal.Signals, trap: str, recorder: Recorder, run_env: dict[str, str]) -> int:
    script = f"trap 'exit 42' {trap}; echo ready; while :; do sleep 0.05; done"
    process = await asyncio.create_subprocess_exec(
        *TAO_RUN, "--coordinator", recorder.url, "--harness", "generic", "--", "sh", "-c", script,
        env=run_env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
    assert line.strip() == b"ready"
    process.send_signal(sig)
    return await asyncio.wait_for(process.wait(), timeout=30)


async def test_sigterm_is_forwarded(recorder: Recorder, run_env: dict[str, str]) -> None:
    assert await _signalled(signal.SIGTERM, "TERM", recorder, run_env) == 42
    assert len(recorder.ended) == 1  # the session was still ended


async def test_sigint_is_forwarded_without_a_terminal(recorder: Recorder, run_env: dict[str, str]) -> None:
    assert await _signalled(signal.SIGINT, "INT", recorder, run_env) == 42


async def test_coordinator_down_then_next_run_delivers_the_spool(
        recorder: Recorder, private_dirs: dict[str, str]) -> None:
    recorder.down = True
    first = await tao_run(["--coordinator", recorder.url, "--session", "down1", "--harness", "generic", "--",
                           sys.executable, "-c", POST_EVENTS, "20"])
    assert first == 0
    assert recorder.events == []
    assert len(list(spool_dir(private_dirs).glob("*.jsonl"))) == 1
    recorder.down = False
    second = await tao_run(["--coordinator", recorder.url, "--session", "next", "--harness", "generic", "--",
                            "sh", "-c", "sleep 0.2"])
    assert second == 0
    down1 = recorder.calls("down1")
    assert sorted(down1) == sorted(f"c{i}" for i in range(20))
    assert all([e["type"] for e in events] == ["tool_start", "tool_end"] for events in down1.values())
    assert "down1" in recorder.ended and "next" in recorder.ended
    assert list(spool_dir(private_dirs).glob("*.jsonl")) == []


async def test_spool_cli_flush(recorder: Recorder, private_dirs: dict[str, str]) -> None:
    first = await tao_run(["--coordinator", "http://127.0.0.1:9", "--session", "late", "--harness", "generic",
                           "--", sys.executable, "-c", POST_EVENTS, "3"])
    assert first == 0
    from tao_harness.cli.main import main as tao_main

    # `tao spool flush` runs its own event loop: in a thread, next to the recording coordinator's loop.
    code = await asyncio.to_thread(tao_main, ["spool", "flush", "--coordinator", recorder.url, "--json"])
    assert code == 0
    assert len(recorder.events) == 6 and recorder.ended == ["late"]
    assert list(spool_dir(private_dirs).glob("*.jsonl")) == []


async def test_spool_cli_flush_says_why_records_were_kept(recorder: Recorder, private_dirs: dict[str, str],
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    assert await tao_run(["--coordinator", "http://127.0.0.1:9", "--session", "kept", "--harness", "generic",
                          "--", sys.executable, "-c", POST_EVENTS, "2"]) == 0
    capfd.readouterr()
    recorder.down = True  # up, but its store is not: 503
    from tao_harness.cli.main import main as tao_main

    code = await asyncio.to_thread(tao_main, ["spool", "flush", "--coordinator", recorder.url])
    err = capfd.readouterr().err
    assert code == 1 and "record(s) kept for later: coordinator answered 503 to /v1/" in err, err
    assert "unreachable" not in err and len(list(spool_dir(private_dirs).glob("*.jsonl"))) == 1


async def test_observed_stdout_passes_through_byte_for_byte(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    source = asyncio.StreamReader()
    data = b'{"type": "system", "subtype": "task_updated"}\n\xff\xfehalf a li' + b"ne\nno newline at the end"
    for start in range(0, len(data), 7):  # chunk borders inside lines
        source.feed_data(data[start:start + 7])
    source.feed_eof()
    lines: list[str] = []
    await pass_through(source, lines.append)
    assert capfdbinary.readouterr().out == data
    assert lines == ['{"type": "system", "subtype": "task_updated"}', "\ufffd\ufffdhalf a line"]


async def test_a_failing_line_reader_does_not_stop_the_agents_output(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    source = asyncio.StreamReader()
    source.feed_data(b"one\ntwo\nthree\n")
    source.feed_eof()

    def broken(line: str) -> None:
        raise RuntimeError(line)

    await pass_through(source, broken)
    assert capfdbinary.readouterr().out == b"one\ntwo\nthree\n"
