"""One `tao-run`: endpoints, relay and forwarder up; the agent launched with its shim; all torn down.

Order matters at the end: after the agent exits, the relay is stopped first (it finishes requests in
flight, so the last tool events are in), then the Claude Code background jobs still open are read from
the transcript a last time (the ones it never reported end as cancelled), then the session end is queued
after them, then the forwarder
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
from typing import Callable

import aiohttp

from tao_harness.config import TaoConfig
from tao_harness.events import event_to_json
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.shims.claude_code.transcript import JobFollower
from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
from tao_harness.serving import start_site
from tao_harness.shims.endpoints import open_endpoints
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.launch import Harness, Launch, LaunchContext, prepare_launch
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app, session_end_request
from tao_harness.shims.spool import SpoolWriter, default_spool_dir
from tao_harness.store.redact import redactor_from

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
    stdout = asyncio.subprocess.PIPE if launch.observe_stdout else None
    try:
        return await asyncio.create_subprocess_exec(*launch.argv, env=launch.env, stdout=stdout)
    except FileNotFoundError:
        print(f"tao-run: command not found: {launch.argv[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"tao-run: permission denied: {launch.argv[0]}", file=sys.stderr)
        return 126


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def pass_through(source: asyncio.StreamReader, on_line: Callable[[str], None]) -> None:
    """Copy the agent's stdout to ours byte for byte, handing each complete line to `on_line`."""
    partial = b""
    while chunk := await source.read(65536):
        try:
            _write_all(sys.stdout.fileno(), chunk)
        except (OSError, ValueError):
            pass  # our stdout is gone; the agent keeps running and its lines are still read
        *lines, partial = (partial + chunk).split(b"\n")
        for line in lines:
            try:
                on_line(line.decode("utf-8", errors="replace"))
            except Exception:  # noqa: BLE001 - the agent's output must keep flowing whatever a reader does
                log.exception("reading a line of the agent's output failed")


async def _wait_agent(process: asyncio.subprocess.Process, on_line: Callable[[str], None],
                      drain_s: float) -> int:
    """The agent's return code; its stdout, when piped, is passed through meanwhile."""
    if process.stdout is None:
        return await process.wait()
    copying = asyncio.create_task(pass_through(process.stdout, on_line))
    try:
        returncode = await process.wait()
        # The pipe ends once the agent and its children closed it; a child left running with it open
        # must not keep the run from ending.
        await asyncio.wait({copying}, timeout=drain_s)
        return returncode
    finally:
        copying.cancel()
        await asyncio.gather(copying, return_exceptions=True)


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
        redactor = redactor_from(plan.config.store.redact_patterns, plan.config.store.redact)
        forwarder = Forwarder(poster, spool, settings.batch_max, settings.retry_s, redactor)
        forwarder.start()
        backlog = (asyncio.create_task(flush_spool(spool.path.parent, poster, settings.batch_max, spool.path,
                                                    redactor))
                   if poster is not None else None)
        translator = ClaudeHookTranslator(plan.session)
        relay = RelayState(forwarder, info, translator)
        jobs = JobFollower(translator, lambda end: forwarder.submit("/v1/events", event_to_json(end)))
        relay_runner, relay_root = await start_site(build_relay_app(relay))
        relay_url = relay_root + relay.prefix
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tao-run-")))
        context = LaunchContext(plan.session, relay_url, endpoints.proxy_url, workdir, dict(os.environ),
                                settings)
        launch = prepare_launch(plan.harness, plan.argv, context)
        if launch.harness_session_id:
            relay.session = info = SessionInfo(info.session, info.harness, info.labels, info.started_at,
                                               launch.harness_session_id)
        forwarder.submit("/v1/sessions", info.to_json())
        signals = SignalForwarder()
        following = asyncio.create_task(jobs.run(settings.job_poll_s))
        try:
            process = await _spawn(launch)
            if isinstance(process, int):
                code = process
            else:
                signals.attach(process)
                code = exit_status(await _wait_agent(process, jobs.feed_stream_line, settings.final_delivery_s))
        finally:
            signals.close()
            await relay_runner.cleanup()
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
            ended_at = time.time()
            jobs.close(ended_at)
            forwarder.submit(*session_end_request(plan.session, ended_at))
            await forwarder.close(settings.final_delivery_s)
            if backlog is not None:
                # Older runs' spool: finish it if it is quick, otherwise the next run continues it.
                await asyncio.wait({backlog}, timeout=settings.final_delivery_s)
                backlog.cancel()
                await asyncio.gather(backlog, return_exceptions=True)
    return code
