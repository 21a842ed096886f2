"""The shell reader: words agree with shlex, and each simple command carries how it runs."""

from __future__ import annotations

import shlex

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tao_harness.readiness.shell import ShellCommand, parse_shell, tokenize


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab c'\"\\x\t")), max_size=30))
def test_words_match_shlex_split(text: str) -> None:
    # `$` is left out on purpose: sh unescapes "\$" to "$", shlex keeps the backslash.
    try:
        expected = shlex.split(text, comments=False)
    except ValueError:
        assume(False)
        return
    assert [word for word, is_op in tokenize(text)] == expected
    assert not any(is_op for _, is_op in tokenize(text))


def test_operators_comments_and_quoted_operators() -> None:
    assert tokenize("a&&b||c|d;e&f 2>&1") == [
        ("a", False), ("&&", True), ("b", False), ("||", True), ("c", False), ("|", True), ("d", False),
        (";", True), ("e", False), ("&", True), ("f", False), (">&", True), ("1", False),
    ]  # "2" directly before ">" is a file descriptor, not a word
    assert tokenize('find . -exec rm {} ";" # note; x\nls') == [
        ("find", False), (".", False), ("-exec", False), ("rm", False), ("{}", False), (";", False),
        ("\n", True), ("ls", False),
    ]
    assert tokenize('echo "unclosed ; y') == [("echo", False), ("unclosed ; y", False)]


def words(commands: list[ShellCommand]) -> list[tuple[str, ...]]:
    return [c.words for c in commands]


def test_flags_of_each_simple_command() -> None:
    commands = parse_shell("cd x && (sleep 1; make) & pytest -q 2>&1 | tail -5 || echo failed")
    assert words(commands) == [("cd", "x"), ("sleep", "1"), ("make",), ("pytest", "-q"), ("tail", "-5"),
                               ("echo", "failed")]
    assert [c.background for c in commands] == [True, True, True, False, False, False]
    assert [c.consumer for c in commands] == [False, False, False, False, True, False]
    assert [c.conditional for c in commands] == [False, False, False, False, False, True]


def test_loops_and_conditionals() -> None:
    commands = parse_shell("for f in a b; do lint $f; done; if make; then deploy; fi; after")
    assert words(commands) == [("lint", "$f"), ("make",), ("deploy",), ("after",)]
    assert [c.in_loop for c in commands] == [True, False, False, False]
    assert [c.conditional for c in commands] == [False, True, True, False]
    looped = parse_shell("while true; do sleep 1; done &")
    assert all(c.background and c.in_loop for c in looped)


def test_redirections_heredocs_and_continuations() -> None:
    commands = parse_shell("cat <<EOF > out.txt\nit's data; rm -rf /\nEOF\npython  \\\n  run.py < in.txt")
    assert words(commands) == [("cat",), ("python", "run.py")]

