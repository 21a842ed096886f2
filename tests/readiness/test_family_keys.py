"""Family keys: a table of real agent commands and the key each must land in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tao_harness.readiness.family import family_key

CASES = [
    # structured tools keep their name
    ("Read", None, "Read"),
    ("Edit", "ignored", "Edit"),
    ("grep", None, "grep"),
    ("Monitor", "tail -f log", "Monitor"),
    ("mcp__github__search", None, "mcp__github__search"),
    ("", None, "?"),
    # shell tools of each harness
    ("Bash", "git status", "bash:git"),
    ("bash", "make -j8", "bash:make"),
    ("shell", "ls -la", "bash:ls"),
    ("run_shell_command", "npm test", "bash:npm"),
    ("Bash", None, "bash:?"),
    ("Bash", "   ", "bash:?"),
    ("Bash", " ;;; ", "bash:?"),
    # prefixes and launchers are stripped
    ("Bash", "cd /repo && python -m pytest -x tests/ 2>&1 | tail -50", "bash:pytest"),
    ("Bash", "cd /repo && source .venv/bin/activate && pytest -q", "bash:pytest"),
    ("Bash", "FOO=1 BAR='a b' pytest", "bash:pytest"),
    ("Bash", "env -i PATH=/bin:/usr/bin make", "bash:make"),
    ("Bash", "timeout 60 cargo test", "bash:cargo"),
    ("Bash", "timeout -k 5 -s KILL 1.5m go test ./...", "bash:go"),
    ("Bash", "timeout --signal=TERM --kill-after=3 30 npm run build", "bash:npm"),
    ("Bash", "time -p cargo build --release", "bash:cargo"),
    ("Bash", "sudo -u bob -E apt-get install -y jq", "bash:apt-get"),
    ("Bash", "nohup node server.js > log 2>&1 &", "bash:node"),
    ("Bash", "nice -n 10 make", "bash:make"),
    ("Bash", "uv run --with rich pytest -k slow", "bash:pytest"),
    ("Bash", "uv run python -m mypy src", "bash:mypy"),
    ("Bash", "poetry run python manage.py test", "bash:python"),
    ("Bash", "npx jest --ci", "bash:jest"),
    ("Bash", "conda run -n env37 pytest", "bash:pytest"),
    # python naming
    ("Bash", "python3 -m pytest", "bash:pytest"),
    ("Bash", "python3.11 -u -X dev -m http.server 8000", "bash:http.server"),
    ("Bash", "/usr/bin/python3 setup.py build", "bash:python"),
    ("Bash", "python -c 'print(1)'", "bash:python"),
    ("Bash", "pip3 install -e .", "bash:pip"),
    ("Bash", "./run_tests.sh --fast", "bash:run_tests.sh"),
    # the working command beats light and set-up ones, producers beat consumers
    ("Bash", "cat -n src/app.py", "bash:cat"),
    ("Bash", "cat log.txt | grep ERROR", "bash:grep"),
    ("Bash", "echo start; sleep 2 && curl -s localhost:8000", "bash:curl"),
    ("Bash", "sleep 10", "bash:sleep"),
    ("Bash", "cd /tmp", "bash:cd"),
    ("Bash", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "bash:echo"),
    ("Bash", "python -m http.server & sleep 1; curl localhost:8000", "bash:curl"),
    ("Bash", "git diff | head -100", "bash:git"),
    # compound commands and nested shells
    ("Bash", "for f in *.py; do python -m black $f; done", "bash:black"),
    ("Bash", "while sleep 1; do curl -s x; done", "bash:curl"),
    ("Bash", "if [ -f Makefile ]; then make; fi", "bash:make"),
    ("Bash", "(cd sub && make) && ./deploy.sh", "bash:make"),
    ("Bash", "bash -lc 'cd x && npm test'", "bash:npm"),
    ("Bash", "sh -e -c \"timeout 5 pytest\"", "bash:pytest"),
    ("Bash", "bash -o pipefail -c 'make | tee log'", "bash:make"),
    ("Bash", "bash script.sh", "bash:bash"),
    ("Bash", "'' x", "bash:?"),
    ("Bash", "cat <<'EOF' > t.py\nprint(\"don't\")\nEOF\npython t.py", "bash:python"),
    ("Bash", "# run the tests\npytest -x  # quick", "bash:pytest"),
    ("Bash", "cd /repo && \\\n  pytest", "bash:pytest"),
    # unparseable input falls back to the first word
    ("Bash", 'git commit -m "unclosed', "bash:git"),
]


@pytest.mark.parametrize(("tool", "command", "expected"), CASES)
def test_family_key_table(tool: str, command: str | None, expected: str) -> None:
    assert family_key(tool, command) == expected


@given(st.text(max_size=40), st.one_of(st.none(), st.text(max_size=200)))
def test_family_key_never_raises_and_is_a_nonempty_string(tool: str, command: str | None) -> None:
    key = family_key(tool, command)
    assert isinstance(key, str) and key
    if tool.strip().lower() == "bash":
        assert key.startswith("bash:")


PROGRAMS = st.sampled_from(["pytest", "make", "git", "npm", "cargo", "go", "node", "ruff", "mypy"])
ARGUMENTS = st.lists(st.sampled_from(["-x", "-q", "tests/", "--fast", "build", "'a b'", "2>&1", "> out"]), max_size=3)
PREFIXES = st.lists(
    st.sampled_from(["cd /repo &&", "FOO=1", "timeout 30", "time", "sudo", "env X=1", "nohup", "uv run",
                     "source .venv/bin/activate;", "export A=b;", "nice -n 5", "timeout -k 2 -s KILL 1m"]),
    max_size=4,
)


@given(PREFIXES, PROGRAMS, ARGUMENTS, st.sampled_from(["", " | tail -20", " 2>&1 | head", "; echo done"]))
def test_wrappers_and_setup_never_change_the_family(prefixes: list[str], program: str, arguments: list[str],
                                                    suffix: str) -> None:
    command = " ".join([*prefixes, program, *arguments]) + suffix
    assert family_key("Bash", command) == f"bash:{program}"
