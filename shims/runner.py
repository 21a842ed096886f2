"""One `tao-run`: endpoints, relay and forwarder up; the agent launched with its shim; all torn down.

Order matters at the end: after the agent exits, the relay is stopped first (it finishes requests in
flight, so the last tool events are in), then the session end is queued after them, then the forwarder
gets a bounded last chance to deliver and leaves the rest in this run's spool file.
Signals: SIGTERM and SIGHUP are forwarded to the agent. SIGINT is forwarded too, except when it came
from the terminal (the agent shares our foreground process group and already received it; sending it
twice would make e.g. Claude Code exit on a single Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tao_harness.config import TaoConfig
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
from tao_harness.serving import start_site
from tao_harness.shims.endpoints import open_endpoints
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.launch import Harness, Launch, LaunchContext, prepare_launch
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app, session_end_path
from tao_harness.shims.spool import SpoolWriter, default_spool_dir

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class RunPlan:
    argv: tuple[str, ...]
    harness: Harness
    session: str
    config: TaoConfig
    labels: dict[str, str] = field(default_factory=dict)
    coordinator_url: str | None = None
    proxy_url: str | None = None
    token: str | None = None


def exit_status(returncode: int) -> int:
    """The shell's convention: killed by signal N -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _terminal_delivers_sigint() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


async def _spawn(launch: Launch) -> asyncio.subprocess.Process | int:
    try:
        return await asyncio.create_subprocess_exec(*launch.argv, env=launch.env)
    except FileNotFoundError:
        print(f"tao-run: command not found: {launch.argv[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"tao-run: permission denied: {launch.argv[0]}", file=sys.stderr)
        return 126


class SignalForwarder:
    """Installed before the agent starts, so a signal that arrives while it is starting is not lost."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._early: list[int] = []
        self._loop = asyncio.get_running_loop()
        skip_sigint = _terminal_delivers_sigint()
        for sig in FORWARDED_SIGNALS:
            if sig == signal.SIGINT and skip_sigint:
                self._loop.add_signal_handler(sig, lambda: None)  # the agent got it from the terminal
            else:
                self._loop.add_signal_handler(sig, self._forward, sig)

    def _forward(self, sig: int) -> None:
        if self._process is None:
            self._early.append(sig)
        elif self._process.returncode is None:
            self._process.send_signal(sig)

    def attach(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        for sig in self._early:
            self._forward(sig)

    def close(self) -> None:
        for sig in FORWARDED_SIGNALS:
            self._loop.remove_signal_handler(sig)


async def run_agent(plan: RunPlan) -> int:
    settings = plan.config.run
    spool = SpoolWriter(default_spool_dir(settings.spool_dir))
    info = SessionInfo(plan.session, plan.harness, dict(plan.labels), time.time())
    code = 1
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(spool.close)  # idempotent; covers a failure before the forwarder takes over
        http = await stack.enter_async_context(aiohttp.ClientSession())
        endpoints = await stack.enter_async_context(
            open_endpoints(plan.config, plan.coordinator_url, plan.proxy_url, plan.token))
        poster = (CoordinatorPoster(endpoints.coordinator_url, http, settings.delivery_timeout_s, plan.token)
                  if endpoints.coordinator_url else None)
        forwarder = Forwarder(poster, spool, settings.batch_max, settings.retry_s)
        forwarder.start()
        backlog = (asyncio.create_task(flush_spool(spool.path.parent, poster, settings.batch_max, spool.path))
                   if poster is not None else None)
        relay = RelayState(forwarder, info, ClaudeHookTranslator(plan.session))
        relay_runner, relay_url = await start_site(build_relay_app(relay))
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tao-run-")))
        context = LaunchContext(plan.session, relay_url, endpoints.proxy_url, workdir, dict(os.environ),
                                settings)
        launch = prepare_launch(plan.harness, plan.argv, context)
        if launch.harness_session_id:
            relay.session = info = SessionInfo(info.session, info.harness, info.labels, info.started_at,
                                               launch.harness_session_id)
        forwarder.submit("/v1/sessions", info.to_json())
        signals = SignalForwarder()
        try:
            process = await _spawn(launch)
            if isinstance(process, int):
                code = process
            else:
                signals.attach(process)
                code = exit_status(await process.wait())
        finally:
            signals.close()
            await relay_runner.cleanup()
            forwarder.submit(session_end_path(plan.session), {})
            await forwarder.close(settings.final_delivery_s)
            if backlog is not None:
                # Older runs' spool: finish it if it is quick, otherwise the next run continues it.
                await asyncio.wait({backlog}, timeout=settings.final_delivery_s)
                backlog.cancel()
                await asyncio.gather(backlog, return_exceptions=True)
    return code
