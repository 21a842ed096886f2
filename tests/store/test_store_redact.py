from __future__ import annotations

import pytest

from tao_harness.store.redact import MASK, Redactor

CASES = [
    ("OPENAI_API_KEY=sk-abc123 python eval.py", f"OPENAI_API_KEY={MASK} python eval.py"),
    ("export GITHUB_TOKEN='ghp abc' && git push", f"export GITHUB_TOKEN={MASK} && git push"),
    ('env MY_TOKEN=1 DB_PASSWORD="a b" HOST=x ./run', f"env MY_TOKEN={MASK} DB_PASSWORD={MASK} HOST=x ./run"),
    ('curl -H "Authorization: Bearer abcdefghijkl" https://x', f'curl -H "Authorization: {MASK}" https://x'),
    ("curl -H 'authorization: token abc123' x", f"curl -H 'authorization: {MASK}' x"),
    ("http GET api Bearer eyJhbGciOiJIUzI1NiJ9.payload", f"http GET api Bearer {MASK}"),
    ("curl -H 'x-api-key: abc' https://api", f"curl -H 'x-api-key: {MASK}' https://api"),
    (
        "git clone https://user:hunter2@github.com/a/b.git",
        f"git clone https://user:{MASK}@github.com/a/b.git",
    ),
    (
        "curl 'https://h/v1?token=abc&page=2&api_key=zz'",
        f"curl 'https://h/v1?token={MASK}&page=2&api_key={MASK}'",
    ),
    ("echo sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", f"echo {MASK}"),
    ("gh auth login --with-token ghp_0123456789abcdefghijABCDEF", f"gh auth login --with-token {MASK}"),
    ("aws s3 ls # AKIAABCDEFGHIJKLMNOP", f"aws s3 ls # {MASK}"),
    ("mysql --password=secret -u root", f"mysql --password={MASK} -u root"),
    ("tool --api-key abc123 run", f"tool --api-key {MASK} run"),
]
UNCHANGED = [
    "python -m pytest tests/test_keys.py -k key_value -x",
    "git log --oneline -5",
    "ls -la /home/user/tokens/",
    "curl https://example.com/page?id=7",
    "grep -rn 'password' src/",
]


@pytest.mark.parametrize(("command", "expected"), CASES)
def test_built_in_rules(command: str, expected: str) -> None:
    assert Redactor().text(command) == expected


@pytest.mark.parametrize("command", UNCHANGED)
def test_ordinary_commands_are_untouched(command: str) -> None:
    assert Redactor().text(command) == command


def test_extra_patterns_and_disabling() -> None:
    redactor = Redactor(extra_patterns=(r"corp-[0-9]{4,}",))
    assert redactor.text("deploy corp-123456 now") == f"deploy {MASK} now"
    assert Redactor().text("deploy corp-123456 now") == "deploy corp-123456 now"
    assert Redactor(enabled=False).text("API_KEY=abc") == "API_KEY=abc"


def test_invalid_extra_pattern_names_itself() -> None:
    with pytest.raises(ValueError, match=r"redact pattern '\(unclosed'"):
        Redactor(extra_patterns=("(unclosed",))


def test_nested_argument_values() -> None:
    args = {
        "command": "TOKEN=abc make",
        "env": ["X=1", "API_KEY=z"],
        "timeout": 5,
        "headers": {"h": "Bearer abcdefghij"},
    }
    assert Redactor().value(args) == {
        "command": f"TOKEN={MASK} make",
        "env": ["X=1", f"API_KEY={MASK}"],
        "timeout": 5,
        "headers": {"h": f"Bearer {MASK}"},
    }
