"""The environment the real agent CLIs run with in these tests: dummy credentials and a model on the
emulated replicas, and every fetch they would make from the internet turned off (a machine without
egress may drop such connects instead of refusing them, and the agent then waits on them)."""

from __future__ import annotations

AGENT_ENV = {
    "IS_SANDBOX": "1",
    "ANTHROPIC_API_KEY": "dummy",
    "ANTHROPIC_MODEL": "m",
    "OPENAI_API_KEY": "dummy",
    "MSWEA_CONFIGURED": "true",
    "OPENCODE_CONFIG_CONTENT": '{"autoupdate": false, "share": "disabled", "model": "tao/m"}',
    # OpenCode otherwise fetches its model list and checks for updates and LSP servers on start
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # Claude Code: no telemetry, error reporting or update checks (tao-run's launcher sets it too)
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
