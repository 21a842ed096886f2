"""`tao bench live --router thunderagent`: its command line, the program_id / release wiring of the scripted
sessions, the stall guard, and a run against the real ThunderAgent when the peers virtualenv has it."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tao_harness.cli.main import main
from tao_harness.clock import ScaledClock
from tao_harness.fleet.bench import LiveBenchConfig, RunRecord, run_one, write_results
from tao_harness.fleet.driver import run_fleet, summarize
from tao_harness.fleet.routers import RouterInfo, RouterUnavailable, find_peer, thunderagent_argv
from tao_harness.fleet.session import Endpoints, replay_session
from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn

TRACE = TraceSession("s1", 0.0, "sys", 200,
                     (TraceTurn(400, 8, TraceTool("bash", "ls", 0.01)), TraceTurn(50, 8)))


def test_argv_keeps_the_5_s_intervals_in_emulated_time() -> None:
    argv = thunderagent_argv(Path("/venv/bin/thunderagent"), ["http://a:1", "http://b:2"], 8300, 10.0)

    def flag(name: str, line: list[str] = argv) -> str:
        return line[line.index(name) + 1]

    assert argv[0] == "/venv/bin/thunderagent" and "--metrics" in argv
    assert flag("--backends") == "http://a:1,http://b:2" and flag("--router") == "tr"
    assert flag("--backend-type") == "vllm" and flag("--port") == "8300"
    assert flag("--scheduler-interval") == flag("--metrics-interval") == "0.5"  # 5 s at x10
    assert flag("--scheduler-interval", thunderagent_argv(Path("t"), ["http://a:1"], 1, 1.0)) == "5"


def chat_stand_in(release_answer: dict[str, Any]) -> tuple[web.Application, list[dict[str, Any]]]:
    """ThunderAgent's two endpoints the sessions use: a one-chunk SSE chat reply, and the release."""
    received: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        received.append({"path": request.path, **await request.json()})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
        await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return response

    async def release(request: web.Request) -> web.Response:
        received.append({"path": request.path, **await request.json()})
        return web.json_response(release_answer)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/programs/release", release)
    return app, received


async def test_every_request_names_the_program_and_the_session_end_releases_it(serve: Any) -> None:
    app, received = chat_stand_in({"program_id": "s1", "released": True})
    url = str((await serve(app)).make_url("")).rstrip("/")
    endpoints = Endpoints((url,), programs_url=url)
    async with aiohttp.ClientSession() as http:
        result = await replay_session(http, endpoints, TRACE, ScaledClock(100.0))
    assert result.error is None and len(result.turns) == 2
    assert [(r["path"], r["program_id"]) for r in received] == [
        ("/v1/chat/completions", "s1"), ("/v1/chat/completions", "s1"), ("/programs/release", "s1")]
    assert not endpoints.release_failures


async def test_a_release_it_does_not_confirm_is_counted(serve: Any) -> None:
    app, _ = chat_stand_in({"program_id": "s1", "released": False})
    url = str((await serve(app)).make_url("")).rstrip("/")
    endpoints = Endpoints((url,), programs_url=url)
    async with aiohttp.ClientSession() as http:
        await replay_session(http, endpoints, TRACE, ScaledClock(100.0))
    assert list(endpoints.release_failures.values()) == [1]
    assert "'released': False" in next(iter(endpoints.release_failures))


async def test_other_routers_get_no_program_id(serve: Any) -> None:
    app, received = chat_stand_in({})
    url = str((await serve(app)).make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as http:
        await replay_session(http, Endpoints((url,)), TRACE, ScaledClock(100.0))
    assert [r["path"] for r in received] == ["/v1/chat/completions"] * 2
    assert not any("program_id" in r for r in received)


async def test_a_router_that_holds_every_request_is_reported_as_stalled(serve: Any) -> None:
    held = asyncio.Event()  # never set: every request hangs, as behind a deadlocked router

    async def chat(request: web.Request) -> web.Response:
        await held.wait()
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    url = str((await serve(app)).make_url("")).rstrip("/")
    trace = [TRACE, TraceSession("s2", 0.0, "sys", 200, TRACE.turns)]
    metrics, results = await run_fleet(trace, Endpoints((url,)), 1, ScaledClock(100.0), stall_after_s=20.0)
    assert metrics.failed_sessions == 2 and [len(r.turns) for r in results] == [0, 0]
    assert all(r.error == "stalled: no turn of any session ended for 20 emulated s" for r in results)
    assert results[1].started_at == results[1].ended_at  # it never got a worker


def peers_bin() -> Path | None:
    venv = os.environ.get("TAO_PEERS_VENV")
    return Path(venv) / "bin" if venv else None


async def test_real_thunderagent_runs_sessions_on_emulated_replicas_and_releases_them() -> None:
    try:
        find_peer("thunderagent", peers_bin())
    except RouterUnavailable as exc:
        pytest.skip(f"{exc} (or set TAO_PEERS_VENV to that virtualenv)")
    turns = (TraceTurn(600, 16, TraceTool("bash", "pytest", 2.0)), TraceTurn(80, 16))
    trace = [TraceSession(f"s{k}", 0.0, "sys", 300, turns) for k in range(3)]
    config = LiveBenchConfig(("thunderagent",), (3,), replicas=2, time_scale=10.0, num_gpu_blocks=400,
                             peers_bin=peers_bin())
    record, info = await run_one(trace, config, "thunderagent", 3)
    assert (record.metrics.sessions, record.metrics.requests, record.metrics.failed_requests) == (3, 6, 0)
    assert record.metrics.programs_left == 0 and record.findings == ()
    assert "--scheduler-interval 0.5" in info.description and "--router tr" in info.description


def test_failures_and_leaks_are_listed_under_the_table(tmp_path: Path) -> None:
    metrics = replace(summarize([], 10.0, 0.0, 1.0), programs_left=1)
    leak = "left in the router after its session released it: s7 {'state': 'paused'}"
    records = [RunRecord("thunderagent", 32, 0, metrics, findings=(leak,)), RunRecord("tao", 32, 0, metrics)]
    infos = {"thunderagent": RouterInfo("thunderagent", "x")}
    text = write_results(records, infos, tmp_path, "t").read_text()
    section = text.split("## Failures, stalls and leaks", 1)[1]
    assert f"- thunderagent, 32 workers, run 1:\n  - {leak}" in section and "- tao," not in section


def test_bench_live_without_thunderagent_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nor on PATH
    assert main(["bench", "live", "--router", "thunderagent", "--peers-venv", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tao bench: error: ThunderAgent is not installed: ")
    assert "install_peers.sh" in error
