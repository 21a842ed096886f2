"""Launching Claude Code with the shim: a temporary `--settings` file and proxy environment.

The settings file holds only the relay hooks (see `hooks.hook_settings`); Claude Code merges it with the
user's own settings files, which are never touched. If the command already has `--settings X` (a file
or a JSON string), X is read, our hooks are appended to its hooks, and the combined copy replaces it.
LLM requests go to the proxy (`ANTHROPIC_BASE_URL`, no `/v1`) and carry `X-TAO-Session` through
`ANTHROPIC_CUSTOM_HEADERS` (appended to any the user set) as well as the session path prefix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tao_harness.shims.claude_code.hooks import CLAUDE_HOOK_PATH, hook_settings
from tao_harness.shims.launch import Launch, LaunchContext, LaunchError, base_env

SETTINGS_FLAG = "--settings"


def _find_settings(argv: tuple[str, ...]) -> tuple[int, int, str] | None:
    """(first index, index after, value) of the user's `--settings` option, if any."""
    for index, arg in enumerate(argv[1:], start=1):
        if arg == "--":
            return None
        if arg == SETTINGS_FLAG:
            if index + 1 >= len(argv):
                raise LaunchError("claude: --settings needs a value")
            return index, index + 2, argv[index + 1]
        if arg.startswith(SETTINGS_FLAG + "="):
            return index, index + 1, arg[len(SETTINGS_FLAG) + 1:]
    return None


def _load_user_settings(value: str) -> dict[str, Any]:
    text = value if value.lstrip().startswith("{") else None
    if text is None:
        try:
            text = Path(value).expanduser().read_text()
        except OSError as exc:
            raise LaunchError(f"claude --settings {value}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LaunchError(f"claude --settings {value}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise LaunchError(f"claude --settings {value}: expected a JSON object")
    return data


def merged_settings(user: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The user's settings with our hooks (event -> matchers) appended after theirs, per hook event."""
    hooks = dict(user.get("hooks") or {})
    for event, matchers in ours.items():
        hooks[event] = [*(hooks.get(event) or []), *matchers]
    return {**user, "hooks": hooks}


def _custom_headers(existing: str | None, session: str) -> str:
    lines = [line for line in (existing or "").splitlines() if line.strip()
             and not line.lower().startswith("x-tao-session:")]
    return "\n".join([*lines, f"X-TAO-Session: {session}"])


def prepare(argv: tuple[str, ...], context: LaunchContext) -> Launch:
    ours = hook_settings(context.relay_url.rstrip("/") + CLAUDE_HOOK_PATH, context.settings.hook_timeout_s)
    found = _find_settings(argv)
    user = _load_user_settings(found[2]) if found else {}
    settings_path = context.workdir / "claude-settings.json"
    settings_path.write_text(json.dumps(merged_settings(user, ours), indent=2))
    if found:
        new_argv = (*argv[:found[0]], SETTINGS_FLAG, str(settings_path), *argv[found[1]:])
    else:
        new_argv = (argv[0], SETTINGS_FLAG, str(settings_path), *argv[1:])
    env = base_env(context)
    env["ANTHROPIC_CUSTOM_HEADERS"] = _custom_headers(context.environ.get("ANTHROPIC_CUSTOM_HEADERS"),
                                                      context.session)
    env.setdefault("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    # Without credentials Claude Code stops at "Not logged in". The proxy and the replicas behind it do
    # not check this key; a key the user set is kept.
    env.setdefault("ANTHROPIC_API_KEY", "tao-proxy")
    return Launch(new_argv, env, "claude-code", observe_stdout=prints_stream_json(argv))


def prints_stream_json(argv: tuple[str, ...]) -> bool:
    """`--output-format stream-json`: its task_updated lines carry background jobs' exact end times."""
    for index, arg in enumerate(argv[1:], start=1):
        if arg == "--":
            return False
        if arg == "--output-format" and index + 1 < len(argv):
            return argv[index + 1] == "stream-json"
        if arg == "--output-format=stream-json":
            return True
    return False
