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
    # gaps an adversarial probe found (issue 16 #8)
    ("curl -u alice:s3cret https://h/x", f"curl -u alice:{MASK} https://h/x"),
    ("curl --user 'alice:s3cret' https://h", f"curl --user 'alice:{MASK}' https://h"),
    ("mysql -u root -ps3cret -h db shop", f"mysql -u root -p{MASK} -h db shop"),
    ("sshpass -p s3cret ssh admin@10.0.0.1", f"sshpass -p {MASK} ssh admin@10.0.0.1"),
    (
        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG",
        f"aws configure set aws_secret_access_key {MASK}",
    ),
    ("curl -H 'X-Auth-Token: abc123' https://h", f"curl -H 'X-Auth-Token: {MASK}' https://h"),
    ('curl -H "api-key: 0123abcd" https://x.openai.azure.com', f'curl -H "api-key: {MASK}" https://x.openai.azure.com'),
    ("docker login -u bot -p s3cret registry.io", f"docker login -u bot -p {MASK} registry.io"),
    ("redis-cli -h cache -a s3cret ping", f"redis-cli -h cache -a {MASK} ping"),
    ("git clone https://ghtoken123@github.com/a/b.git", f"git clone https://{MASK}@github.com/a/b.git"),
    ("curl -H 'Cookie: session=abc; csrftoken=x' https://h", f"curl -H 'Cookie: {MASK}' https://h"),
    (
        "printf '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz\n-----END OPENSSH PRIVATE KEY-----\n' > k",
        f"printf '{MASK}\n' > k",
    ),
    ("echo -----BEGIN RSA PRIVATE KEY-----\nMIIEow", f"echo {MASK}"),
    ("OPENAI_KEY_FILE=x echo sk-abc123", f"OPENAI_KEY_FILE={MASK} echo {MASK}"),
    ("python call.py sk-1a2b3c4d", f"python call.py {MASK}"),
]
UNCHANGED = [
    "mysql -u root -p shop",
    "git add -u && sort -u names.txt",
    "ssh -p 2222 host",
    "docker run -p 8080:80 nginx",
    "mkdir -p build && cp -pr a b",
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


def test_argument_fields_named_like_secrets_are_masked() -> None:
    args = {"password": "hunter2", "api_key": 1234, "ssh_passphrase": "p", "accessToken": "x", "X-Auth-Token": "t",
            "max_tokens": 100, "token_count": 3, "path": "secrets.txt", "auth": {"user": "bob"}, "pwd": ""}
    assert Redactor().value(args) == {
        "password": MASK, "api_key": MASK, "ssh_passphrase": MASK, "accessToken": MASK, "X-Auth-Token": MASK,
        "max_tokens": 100, "token_count": 3, "path": "secrets.txt", "auth": {"user": "bob"}, "pwd": "",
    }
    assert Redactor(enabled=False).value({"password": "hunter2"}) == {"password": "hunter2"}
