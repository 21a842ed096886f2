"""The outcome vocabulary and what each harness's own report maps to (texts as the real CLIs send them)."""

from __future__ import annotations

import pytest

from tao_harness.outcomes import (TOOL_STATUSES, claude_failure, is_censored, normalize_status,
                                  status_of_exit)


@pytest.mark.parametrize(("code", "status"), [
    (0, "ok"), (1, "error"), (3, "error"), (2, "error"), (126, "error"), (127, "error"), (128, "error"),
    (124, "timeout"), (130, "killed"), (137, "killed"), (143, "killed"), (192, "killed"), (255, "error"),
    (-1, "error"),
])
def test_exit_codes(code: int, status: str) -> None:
    assert status_of_exit(code) == status


# PostToolUseFailure `error` texts from Claude Code 2.1.328
@pytest.mark.parametrize(("error", "interrupted", "expected"), [
    ("Exit code 3", False, ("error", 3)),
    ("Exit code 124", False, ("timeout", 124)),  # GNU timeout
    ("Exit code 143\nCommand timed out after 3s", False, ("timeout", 143)),  # its own Bash timeout
    ("Exit code 137", False, ("killed", 137)),
    ("Exit code 3", True, ("cancelled", None)),
    ("File does not exist.", False, ("error", None)),  # a non-shell tool's failure
    (None, False, ("error", None)),
])
def test_claude_code_failures(error: object, interrupted: bool, expected: tuple[str, int | None]) -> None:
    assert claude_failure(error, interrupted) == expected


def test_vocabulary_and_censoring() -> None:
    assert TOOL_STATUSES == ("ok", "error", "timeout", "killed", "cancelled")
    assert normalize_status("interrupted") == "cancelled" and normalize_status("weird") is None
    assert [s for s in TOOL_STATUSES if is_censored(s)] == ["timeout", "cancelled"]
