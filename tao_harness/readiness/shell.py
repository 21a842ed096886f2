"""Just enough of the shell grammar to read an agent's one-line (or few-line) command.

`parse_shell(command)` returns one `ShellCommand` per simple command with the facts the family key and
the hint parser need: its words, whether it runs in the background (`... &`, also for a `( ... ) &`
group or a loop ended by `done &`), inside a loop, only conditionally (after `||`, inside `if`/`case`),
or as a pipeline consumer (after `|`).

It is a reader, not an interpreter: words are split and unquoted as POSIX sh does (single and double
quotes, backslashes; checked against `shlex.split` in the tests); runs of `; & | ( ) < >` and newlines
are operators; redirections with their targets, heredoc bodies and `#` comments are dropped; an unclosed
quote runs to the end of the line. One regular expression does the splitting instead of `shlex`: it is
several times faster (a family key is computed at every tool start and for every stored call), it keeps
a quoted operator (`find -exec rm {} ";"`) a word, and with the reader below it takes linear time even
on hostile input (see `scripts/bench_readiness.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Operators longest first, so a run of punctuation like ";\n" or "2>&1" splits the way the shell reads it.
_OPERATORS = ("&>>", "<<<", "<<-", "&&", "||", ";;", "|&", "&>", ">>", "<<", ">&", "<&", ">|", "<>",
              ";", "&", "|", "(", ")", "<", ">", "\n")
_OPERATOR_SET = frozenset(_OPERATORS)
_OPERATOR_SPLIT = re.compile("|".join(re.escape(op) for op in _OPERATORS))  # longest first wins
_LIST_ENDS = frozenset({";", "\n", ";;"})
_PIPES = frozenset({"|", "|&"})
_REDIRECTIONS = frozenset({"&>>", "<<<", "<<-", "&>", ">>", "<<", ">&", "<&", ">|", "<>", "<", ">"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
# Every character belongs to one alternative, so the scan never skips text. A `#` only starts a
# comment at the start of a word, as in sh; quoted operators stay words.
_TOKEN = re.compile(
    r"""(?P<space>[ \t\r]+)
      | (?P<op>[;&|()<>\n]+)
      | (?P<comment>\#[^\n]*)
      | (?P<fd>\d+(?=[<>]))
      | (?P<word>(?:[^ \t\r\n;&|()<>'"\\]+ | '[^']*'? | "(?:[^"\\]|\\.)*"? | \\.?)+)""",
    re.VERBOSE | re.DOTALL,
)
_WORD_PART = re.compile(r"""'([^']*)'?|"((?:[^"\\]|\\.)*)"?|\\(.?)|([^'"\\]+)""", re.DOTALL)
_QUOTING = re.compile(r"""['"\\]""")
_DQ_ESCAPE = re.compile(r"""\\([$`"\\\n])""")

_LOOP_OPENERS = frozenset({"for", "while", "until", "select"})
_CONDITIONAL_OPENERS = frozenset({"if", "case"})
_CLOSERS = {"done": "loop", "fi": "if", "esac": "case", "}": "{"}
_PREFIX_KEYWORDS = frozenset({"do", "then", "else", "elif", "!", "{"})
# These openers are followed by a header, not by a command (`for x in a b`).
_HEADER_OPENERS = frozenset({"for", "select", "case"})
_MAX_DEPTH = 64


@dataclass(frozen=True)
class ShellCommand:
    """One simple command of a shell line, keywords and redirections removed."""

    words: tuple[str, ...]
    """The command words, program first (never empty: pure keyword lines like `for x in a b` are left out)."""
    background: bool
    """Its list was sent to the background with `&`: the shell does not wait for it."""
    in_loop: bool
    """Inside `for`/`while`/`until`: it may run any number of times, including zero."""
    conditional: bool
    """After `||` or inside `if`/`case`: it may not run at all."""
    consumer: bool
    """Right-hand side of a pipe: it ends when its producer ends."""


@dataclass
class _Frame:
    # One open compound: (...), { }, a loop, if, case. Its commands, and those of the list being read
    # inside it, are contiguous in the output, so index ranges stand in for member lists.
    kind: str
    list_start: int  # first command of the list being read (reset by `;`, newline, `&`)
    after_or: bool = False  # an `||` came earlier in this list: what follows may not run


def _strip_heredocs(command: str) -> str:
    # Heredoc bodies are data, and often hold unbalanced quotes that would defeat shlex.
    lines = command.split("\n")
    kept: list[str] = []
    delimiters: list[str] = []
    for line in lines:
        if delimiters:
            if line.strip() == delimiters[0]:
                delimiters.pop(0)
            continue
        kept.append(line)
        delimiters.extend(match.group(2) for match in _HEREDOC.finditer(line))
    return "\n".join(kept)


def _split_operators(run: str) -> list[str]:
    return [run] if run in _OPERATOR_SET else _OPERATOR_SPLIT.findall(run)


def _unquote(word: str) -> str:
    if _QUOTING.search(word) is None:
        return word
    parts: list[str] = []
    for match in _WORD_PART.finditer(word):
        single, double, escaped, plain = match.groups()
        if single is not None:
            parts.append(single)
        elif double is not None:
            parts.append(_DQ_ESCAPE.sub(r"\1", double))
        elif escaped is not None:
            parts.append(escaped)
        else:
            parts.append(plain)
    return "".join(parts)


def tokenize(command: str) -> list[tuple[str, bool]]:
    """(text, is_operator) pairs with quotes removed as POSIX sh does; never raises on odd input.

    An unclosed quote runs to the end of the text (where `shlex` would refuse the whole line).
    """
    text = _strip_heredocs(command.replace("\\\n", " "))
    tokens: list[tuple[str, bool]] = []
    skipping_comment = False
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind == "op":
            skipping_comment = skipping_comment and "\n" not in value
            if not skipping_comment:
                tokens.extend((op, True) for op in _split_operators(value))
        elif kind == "comment":
            skipping_comment = True
        elif kind == "word" and not skipping_comment:
            tokens.append((_unquote(value), False))
    return tokens


class _Reader:
    # Walks the tokens once. `&` backgrounds the whole list it ends, including every command inside a
    # `( ... )` group or loop in that list: the range from the list's start to the newest command.
    # Depth counters keep each step O(1); nesting beyond _MAX_DEPTH is read as flat.

    def __init__(self) -> None:
        self.commands: list[ShellCommand] = []
        self.stack: list[_Frame] = [_Frame("top", 0)]
        self.depth: dict[str, int] = {"loop": 0, "if": 0, "case": 0, "(": 0, "{": 0}
        self.words: list[str] = []
        self.after_pipe = False

    def _inherited_or(self) -> bool:
        return len(self.stack) > 1 and self.stack[-2].after_or

    def _open(self, kind: str) -> None:
        if len(self.stack) <= _MAX_DEPTH:
            self.stack.append(_Frame(kind, len(self.commands), after_or=self.stack[-1].after_or))
            self.depth[kind] += 1

    def _close(self, kind: str) -> None:
        if len(self.stack) > 1 and self.stack[-1].kind == kind:
            self.stack.pop()
            self.depth[kind] -= 1

    def _strip_keywords(self, words: list[str]) -> list[str]:
        for index, head in enumerate(words):
            if head in _CLOSERS:
                self._close(_CLOSERS[head])
            elif head in _LOOP_OPENERS or head in _CONDITIONAL_OPENERS:
                self._open("loop" if head in _LOOP_OPENERS else head)
                if head in _HEADER_OPENERS:
                    return []
            elif head == "{":
                self._open("{")
            elif head not in _PREFIX_KEYWORDS:
                return words[index:]
        return []

    def flush(self) -> None:
        words = self._strip_keywords(self.words)
        self.words = []
        if words:
            self.commands.append(ShellCommand(
                words=tuple(words),
                background=False,
                in_loop=self.depth["loop"] > 0,
                conditional=self.depth["if"] > 0 or self.depth["case"] > 0 or self.stack[-1].after_or,
                consumer=self.after_pipe,
            ))

    def operator(self, op: str) -> None:
        self.flush()
        frame = self.stack[-1]
        self.after_pipe = op in _PIPES
        if op in _LIST_ENDS or op == "&":
            if op == "&":
                for index in range(frame.list_start, len(self.commands)):
                    self.commands[index] = _replace_background(self.commands[index])
            frame.list_start = len(self.commands)
            frame.after_or = self._inherited_or()
        elif op == "||":
            frame.after_or = True
        elif op == "(" and not self.depth["case"]:
            self._open("(")
        elif op == ")" and not self.depth["case"]:
            self._close("(")

    def finish(self) -> list[ShellCommand]:
        self.flush()
        return self.commands


def _replace_background(command: ShellCommand) -> ShellCommand:
    return ShellCommand(command.words, True, command.in_loop, command.conditional, command.consumer)


def parse_shell(command: str) -> list[ShellCommand]:
    """The simple commands of `command`, in order, each with how it runs."""
    reader = _Reader()
    tokens = tokenize(command)
    skip_target = False
    for text, is_op in tokens:
        if skip_target and not is_op:
            skip_target = False
            continue
        skip_target = False
        if is_op and text in _REDIRECTIONS:
            skip_target = True
        elif is_op:
            reader.operator(text)
        else:
            reader.words.append(text)
    return reader.finish()

