"""Claude Code under tao-run starts without a login of its own; a key the user set is left alone."""

from __future__ import annotations

from pathlib import Path

from tao_harness.shims.claude_code.launch import prepare
from tao_harness.shims.launch import LaunchContext


def _env(tmp_path: Path, environ: dict[str, str]) -> dict[str, str]:
    context = LaunchContext("sess-1", "http://127.0.0.1:7001", "http://127.0.0.1:7002", tmp_path, environ)
    return prepare(("claude", "-p", "hi"), context).env


def test_a_placeholder_key_is_set_when_the_user_has_none(tmp_path: Path) -> None:
    env = _env(tmp_path, {})
    assert env["ANTHROPIC_API_KEY"] and env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:7002")


def test_the_users_key_is_kept(tmp_path: Path) -> None:
    assert _env(tmp_path, {"ANTHROPIC_API_KEY": "sk-mine"})["ANTHROPIC_API_KEY"] == "sk-mine"
