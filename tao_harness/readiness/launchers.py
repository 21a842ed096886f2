"""Peel wrappers and launchers off one simple command to find the program that does the work.

`unwrap(words)` strips, repeatedly and in any nesting: `NAME=value` assignments; `env [-i] [-u N]`;
`sudo`/`doas` and their options; `time [-p]`, `nohup`, `nice -n N`, `ionice`, `stdbuf`, `setsid`,
`command`, `exec`, `builtin`, `chronic`, `unbuffer`, `taskset`; GNU `timeout [-k D] [-s SIG] N` (its
limit is kept); launchers `uv run`, `poetry run`, `pipenv run`, `pdm run`, `hatch run`, `rye run`,
`pixi run`, `conda|mamba|micromamba run [-n ENV]`, `pipx run`, `bundle exec`, `pnpm exec`, `npx`,
`bunx`, `uvx`. `bash|sh|zsh|dash -c SCRIPT` hands SCRIPT back for the caller to read as a shell line.
`program_name(argv)` then names the program: the path's basename, `python3.11` → `python`,
`pip3` → `pip`, and `python [opts] -m MODULE` → MODULE.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from tao_harness.readiness.units import parse_duration

# wrapper -> its options that take a separate value
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "nohup": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "builtin": frozenset(),
    "chronic": frozenset(),
    "unbuffer": frozenset(),
    "npx": frozenset({"-p", "--package", "-c", "--call"}),
    "bunx": frozenset({"-p", "--package"}),
    "uvx": frozenset({"--from", "--with", "--python", "-p"}),
}
_LAUNCHER_VALUE_OPTIONS = frozenset({
    "--with", "--python", "-p", "--project", "--directory", "--package", "--extra", "--group", "--env-file",
    "--index", "-w", "-n", "--name", "--prefix", "-e", "--environment", "--spec", "--filter", "-C",
})
_LAUNCHERS = frozenset({
    ("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"), ("rye", "run"),
    ("pixi", "run"), ("conda", "run"), ("mamba", "run"), ("micromamba", "run"), ("pipx", "run"),
    ("bundle", "exec"), ("pnpm", "exec"),
})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
_PIP = re.compile(r"^pip\d+(\.\d+)*$")
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "-Q"})
_TASKSET_VALUE_OPTIONS = frozenset({"-c", "--cpu-list"})


@dataclass(frozen=True)
class Unwrapped:
    """A simple command with its wrappers peeled off."""

    argv: tuple[str, ...]
    """The remaining words, program first (empty if only wrappers were left)."""
    timeout_s: float | None
    """Upper limit set by `timeout` wrappers (limit plus `-k` grace); None when there is none."""
    nohup: bool
    """A `nohup` wrapper was present."""
    script: str | None
    """The SCRIPT of `bash -c SCRIPT`, to be read as a shell line of its own."""


def basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1] or word


def _skip_options(words: deque[str], value_options: frozenset[str]) -> None:
    # Options end at the first non-option word or after `--`.
    while words and words[0].startswith("-") and words[0] != "-":
        option = words.popleft()
        if option == "--":
            break
        if option in value_options and words:
            words.popleft()


def _strip_env(words: deque[str]) -> None:
    _skip_options(words, _WRAPPERS["env"])
    while words and (_ASSIGNMENT.match(words[0]) or words[0] == "-"):
        words.popleft()


def _strip_timeout(words: deque[str]) -> float | None:
    grace = 0.0
    while words and words[0].startswith("-") and words[0] != "--":
        option = words.popleft()
        value: str | None = None
        if option in ("-k", "--kill-after", "-s", "--signal") and words:
            value = words.popleft()
        elif option.startswith(("--kill-after=", "--signal=")):
            option, _, value = option.partition("=")
        elif option[:2] in ("-k", "-s") and len(option) > 2:
            option, value = option[:2], option[2:]
        if option in ("-k", "--kill-after") and value is not None:
            grace = parse_duration(value) or 0.0
    if words and words[0] == "--":
        words.popleft()
    if not words:
        return None
    limit = parse_duration(words.popleft())
    # `timeout 0` means no limit; an unreadable duration makes timeout fail at once (also no limit).
    return limit + grace if limit else None


def _shell_script(words: deque[str]) -> str | None:
    # `bash -lc 'x'`, `sh -e -c 'x'`, `bash -o pipefail -c 'x'`: the first word after the options.
    wants_script = False
    index = 1
    while index < len(words):
        option = words[index]
        if not option.startswith("-") or option in ("-", "--"):
            return option if wants_script else None
        if option in ("-o", "+o"):
            index += 1  # its value
        elif not option.startswith("--") and "c" in option[1:]:
            wants_script = True
        index += 1
    return None


def unwrap(words: tuple[str, ...] | list[str]) -> Unwrapped:
    """Strip wrappers and launchers until the working program is first."""
    rest = deque(words)
    timeout: float | None = None
    nohup = False
    while rest:
        head = basename(rest[0])
        if _ASSIGNMENT.match(rest[0]):
            rest.popleft()
            continue
        if len(rest) > 1 and (head, rest[1]) in _LAUNCHERS:
            rest.popleft()
            rest.popleft()
            _skip_options(rest, _LAUNCHER_VALUE_OPTIONS)
            continue
        if head not in _WRAPPERS and head not in ("timeout", "taskset"):
            break
        rest.popleft()
        if head == "env":
            _strip_env(rest)
        elif head == "timeout":
            limit = _strip_timeout(rest)
            if limit is not None:
                timeout = limit if timeout is None else min(timeout, limit)
        elif head == "taskset":
            _skip_options(rest, _TASKSET_VALUE_OPTIONS)
            if rest and rest[0][:1].isdigit():
                rest.popleft()  # the affinity mask
        else:
            nohup = nohup or head == "nohup"
            _skip_options(rest, _WRAPPERS[head])
    script = _shell_script(rest) if rest and basename(rest[0]) in _SHELLS else None
    return Unwrapped(argv=tuple(rest), timeout_s=timeout, nohup=nohup, script=script)


def _python_module(args: tuple[str, ...]) -> str | None:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-m" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if not arg.startswith("-") or arg in ("-c", "-", "--") or arg.startswith("-c"):
            return None
        index += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
    return None


def is_python(program: str) -> bool:
    return bool(_PYTHON.match(basename(program)))


def program_name(argv: tuple[str, ...]) -> str:
    """The family's program: basename, versions folded, `python -m X` → X."""
    name = basename(argv[0]) if argv else ""
    if not name:
        return "?"
    if _PYTHON.match(name):
        return _python_module(argv[1:]) or "python"
    if _PIP.match(name):
        return "pip"
    return name
