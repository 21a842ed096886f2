"""Fixtures for the shims: a recording coordinator endpoint on loopback and helpers to run `tao-run`.

The recording coordinator serves the coordinator API surface the shims use (`/v1/events`,
`/v1/sessions`, `/v1/sessions/{id}/end`, `/healthz`) and keeps what it received; `down` makes it answer
503 (the forwarder then treats it as unreachable). It lets the shim side be tested without the real
coordinator; the e2e tests use the real one.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

REPO = Path(__file__).resolve().parents[2]
TAO_RUN = [sys.executable, "-m", "tao_harness.cli.run"]


@dataclass
class Recorder:
    url: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    requests: int = 0
    down: bool = False

    def calls(self, session: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Events grouped by call id (optionally of one session)."""
        grouped: dict[str, list[dict[str, Any]]] = {}
        for event in self.events:
            if session is None or event["session"] == session:
                grouped.setdefault(event["call_id"], []).append(event)
        return grouped


def recording_app(recorder: Recorder) -> web.Application:
    async def events(request: web.Request) -> web.Response:
        recorder.requests += 1
        if recorder.down:
            return web.json_response({"error": {"message": "down"}}, status=503)
        body = await request.json()
        items = body["events"] if "events" in body else [body]
        recorder.events.extend(items)
        return web.json_response({"accepted": len(items)})

    async def sessions(request: web.Request) -> web.Response:
        recorder.requests += 1
        if recorder.down:
            return web.json_response({"error": {"message": "down"}}, status=503)
        recorder.sessions.append(await request.json())
        return web.json_response({"status": "ok"})

    async def end(request: web.Request) -> web.Response:
        recorder.requests += 1
        if recorder.down:
            return web.json_response({"error": {"message": "down"}}, status=503)
        recorder.ended.append(request.match_info["session"])
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_post("/v1/events", events)
    app.router.add_post("/v1/sessions", sessions)
    app.router.add_post("/v1/sessions/{session}/end", end)
    return app


@pytest.fixture
async def recorder(aiohttp_server: Any) -> Recorder:
    rec = Recorder()
    server = await aiohttp_server(recording_app(rec))
    rec.url = str(server.make_url("")).rstrip("/")
    return rec


@dataclass
class RunResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_env(tmp_path: Path) -> dict[str, str]:
    """An environment for `tao-run` children with a private HOME and spool directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "OPENCODE_", "ANTHROPIC_"))}
    env["HOME"] = str(tmp_path / "home")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    (tmp_path / "home").mkdir()
    return env


def spool_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_DATA_HOME"]) / "tao_harness" / "spool"


async def run_tao(args: list[str], env: dict[str, str], timeout: float = 60.0,
                  cwd: Path | None = None) -> RunResult:
    process = await asyncio.create_subprocess_exec(
        *TAO_RUN, *args, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return RunResult(process.returncode, stdout.decode(), stderr.decode())
