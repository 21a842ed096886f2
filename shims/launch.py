"""Which harness a command runs, and how to launch it with its shim installed.

Every harness gets, in its own environment only: `TAO_SESSION`, `TAO_RELAY_URL`, `TAO_PROXY_URL`, and
`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` at the proxy under the `/s/{session}` path prefix, so even a
harness without a shim has its LLM requests attributed to the session. Each shim module then adds its
own pieces (settings file, plugin, launcher) in a `prepare(argv, context) -> Launch` function.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping
from urllib.parse import quote

from tao_harness.config import RunConfig

Harness = Literal["claude-code", "opencode", "mini-swe-agent", "generic"]
HARNESSES: tuple[str, ...] = ("claude-code", "opencode", "mini-swe-agent", "generic")

# Executable name -> harness.
EXECUTABLES: dict[str, Harness] = {
    "claude": "claude-code",
    "opencode": "opencode",
    "mini": "mini-swe-agent",
    "mini-extra": "mini-swe-agent",
    "mini-e": "mini-swe-agent",
    "mini-swe-agent": "mini-swe-agent",
}
# Harness -> module with its `prepare` function.
SHIM_MODULES: dict[str, str] = {
    "claude-code": "tao_harness.shims.claude_code.launch",
    "opencode": "tao_harness.shims.opencode.launch",
    "mini-swe-agent": "tao_harness.shims.mini_swe_agent.launch",
}


class LaunchError(ValueError):
    """The command cannot be set up for its harness (e.g. a malformed config variable); one-line message."""


@dataclass(frozen=True, slots=True)
class LaunchContext:
    session: str
    # The local relay's URL with this run's secret path segment, e.g. "http://127.0.0.1:41234/Zk3...";
    # shims append their paths ("/v1/events") to it.
    relay_url: str
    # The client proxy's root URL (no /v1).
    proxy_url: str
    # A private temporary directory for this run (settings files); removed after the run.
    workdir: Path
    # The environment the agent would have had without tao-run.
    environ: Mapping[str, str]
    settings: RunConfig = field(default_factory=RunConfig)

    @property
    def session_base_url(self) -> str:
        """The proxy with this session's path prefix: `{proxy}/s/{session}`."""
        return f"{self.proxy_url.rstrip('/')}/s/{quote(self.session, safe='')}"


@dataclass(frozen=True, slots=True)
class Launch:
    argv: tuple[str, ...]
    # The child's complete environment.
    env: dict[str, str]
    harness: Harness
    # The harness's own session id when it is known before the start.
    harness_session_id: str | None = None
    # The agent prints JSON lines the shim reads (Claude Code stream-json): `tao-run` passes its stdout
    # through unchanged and hands each line to the shim.
    observe_stdout: bool = False


def detect_harness(argv: list[str] | tuple[str, ...]) -> Harness | None:
    if not argv:
        return None
    return EXECUTABLES.get(os.path.basename(argv[0]))


def base_env(context: LaunchContext) -> dict[str, str]:
    env = dict(context.environ)
    env.update({
        "TAO_SESSION": context.session,
        "TAO_RELAY_URL": context.relay_url,
        "TAO_PROXY_URL": context.proxy_url,
        "OPENAI_BASE_URL": context.session_base_url + "/v1",
        "ANTHROPIC_BASE_URL": context.session_base_url,
    })
    return env


def prepare_launch(harness: Harness, argv: tuple[str, ...], context: LaunchContext) -> Launch:
    module_name = SHIM_MODULES.get(harness)
    if module_name is None:
        return Launch(argv, base_env(context), harness)
    module = importlib.import_module(module_name)
    launch: Launch = module.prepare(argv, context)
    return launch
