"""Sleeps in a `python -c` script: `time.sleep(N)` statements that certainly run, read with `ast`.

Only statements at the top level count (also inside `with` and `try` bodies); a sleep in a loop, a
condition or a function may run any number of times, including zero, so it is no lower bound.
"""

from __future__ import annotations

import ast
import math


def python_c_script(args: tuple[str, ...]) -> str | None:
    """SCRIPT of `python [opts] -c SCRIPT` given the words after the interpreter, else None."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-c":
            return args[index + 1] if index + 1 < len(args) else None
        if arg.startswith("-c"):
            return arg[2:]
        if not arg.startswith("-") or arg == "-":
            return None
        index += 2 if arg in ("-W", "-X") else 1
    return None


def _sleep_statement_seconds(node: ast.stmt) -> float | None:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    func = call.func
    named_sleep = (isinstance(func, ast.Name) and func.id == "sleep") or (
        isinstance(func, ast.Attribute) and func.attr == "sleep" and isinstance(func.value, ast.Name)
        and func.value.id == "time"
    )
    if not named_sleep or len(call.args) != 1 or not isinstance(call.args[0], ast.Constant):
        return None
    value = call.args[0].value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if value > 0 else None


def python_sleep_seconds(script: str) -> float:
    """Sum of top-level `time.sleep(N)` statements (also inside `with`/`try` bodies) of a script."""
    try:
        body = ast.parse(script).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0.0
    total = 0.0
    pending = list(body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.With, ast.Try)):
            pending[:0] = node.body
        total += _sleep_statement_seconds(node) or 0.0
    return total
