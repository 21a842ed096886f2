"""Family keys: the name a tool call's duration history is grouped under.

Rules, in order:
1. A structured tool keeps its name exactly (`Read`, `Edit`, `grep`, `Monitor`, `mcp__x__y`); an empty
   name becomes `?`.
2. A shell tool — `Bash` (Claude Code), `bash` (OpenCode, mini-SWE-agent), `shell`, `sh`, `zsh`,
   `terminal`, `run_shell_command`, `execute_bash`, `execute_command`, `local_shell`, `exec_command`
   (any letter case) — becomes `bash:<program>`; no command text gives `bash:?`.
3. The command line is split into simple commands (`;`, `&&`, `||`, `|`, `&`, newlines, subshells,
   loop and `if` keywords; see `shell.py`). Each is unwrapped (env assignments, `env`, `sudo`, `time`,
   `timeout N`, `nohup`, `nice`, `uv run`, `poetry run`, `npx`, ...; see `launchers.py`) and named:
   basename of the program, `python3.11` → `python`, `pip3` → `pip`, `python -m X` → `X`
   (so `python -m pytest` → `bash:pytest`), and `bash -c 'SCRIPT'` is read recursively.
4. The family is the first command of the best rank: work commands (anything else) before light ones
   (`echo`, `printf`, `sleep`, `cat`, `ls`, `pwd`), which come before set-up ones (`cd`, `export`,
   `source`, `set`, `[`, `true`, ...); within a rank, a foreground pipeline producer beats a pipe
   consumer (`| tail`), which beats a backgrounded command. So `cd /repo && source .venv/bin/activate
   && python -m pytest -x 2>&1 | tail -5` → `bash:pytest`, and `cat -n a.py` → `bash:cat`.
5. Nothing readable → `bash:<first word>` or `bash:?`. `family_key` never raises.
"""

from __future__ import annotations

from tao_harness.readiness.launchers import program_name, unwrap
from tao_harness.readiness.shell import parse_shell

SHELL_TOOLS = frozenset({
    "bash", "shell", "sh", "zsh", "terminal", "run_shell_command", "execute_bash", "execute_command",
    "local_shell", "exec_command",
})
SETUP_PROGRAMS = frozenset({
    "cd", "pushd", "popd", "export", "source", ".", "set", "unset", "umask", "ulimit", "alias", "shopt",
    "true", "false", ":", "[", "[[", "test", "wait", "trap", "local", "declare", "readonly", "hash",
    "activate", "deactivate", "clear",
})
_LIGHT = frozenset({"echo", "printf", "sleep", "cat", "ls", "pwd", "date", "which"})
_MAX_SCRIPT_DEPTH = 3
_UNKNOWN = "?"


def is_shell_tool(tool_name: str) -> bool:
    return tool_name.strip().lower() in SHELL_TOOLS


def _candidates(command: str, depth: int) -> list[tuple[tuple[int, int], str]]:
    # (rank, program) for every simple command, nested `bash -c` scripts inlined in place.
    found: list[tuple[tuple[int, int], str]] = []
    for simple in parse_shell(command):
        unwrapped = unwrap(simple.words)
        if not unwrapped.argv:
            continue
        if unwrapped.script is not None and depth < _MAX_SCRIPT_DEPTH:
            found.extend(_candidates(unwrapped.script, depth + 1))
            continue
        program = program_name(unwrapped.argv)
        weight = 2 if program in SETUP_PROGRAMS else 1 if program in _LIGHT else 0
        placement = 2 if simple.background else 1 if simple.consumer else 0
        found.append(((weight, placement), program))
    return found


def shell_program(command: str | None) -> str:
    """The program a shell command line is about (rule 4), or `?`."""
    if not command or not command.strip():
        return _UNKNOWN
    try:
        candidates = _candidates(command, 0)
    except Exception:  # noqa: BLE001 - a family key must always come out; fall back to the first word
        return command.split()[0].rsplit("/", 1)[-1] or _UNKNOWN
    return min(candidates, key=lambda item: item[0])[1] if candidates else _UNKNOWN


def family_key(tool_name: str, command: str | None = None) -> str:
    """`Read` → `Read`; (`Bash`, `cd x && python -m pytest -q`) → `bash:pytest`. Never raises."""
    name = tool_name.strip() if isinstance(tool_name, str) else ""
    if not name:
        return _UNKNOWN
    if name.lower() not in SHELL_TOOLS:
        return name
    return f"bash:{shell_program(command if isinstance(command, str) else None)}"
