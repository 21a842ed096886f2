"""What the history store can hold, checked where input enters (coordinator API, shims' relay).

A value the API would accept but a column cannot take (an id over 200 characters, an exit code past
32 bits, NUL or a lone surrogate in text, JSON nested hundreds deep) would fail its write every time it
was retried. Names and numbers that do not fit are refused with a `LimitError` naming the field; free
text (commands, argument objects, labels) is made to fit instead, so the event is kept: NUL and lone
surrogates become U+FFFD, a string longer than `MAX_TEXT_CHARS` is cut with a marker saying how much
was dropped (Write tools carry whole files), and containers nested deeper than `MAX_JSON_DEPTH` are
replaced by a marker.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_ID_CHARS = 200  # sessions.id, tool_calls.id/tool_name, llm_requests.id/replica: String(200)
MAX_HARNESS_CHARS = 64  # sessions.harness, tool_calls.harness: String(64)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # Integer columns (PostgreSQL's integer is 32-bit)
MAX_TEXT_CHARS = 64 * 1024
TEXT_KEPT_CHARS = MAX_TEXT_CHARS - 40  # a cut string keeps this much, so with its marker it still fits
MAX_JSON_DEPTH = 32
TOO_DEEP = "[nested too deep]"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL (PostgreSQL text) and lone surrogates (UTF-8)
_NOT_IN_A_NAME = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class LimitError(ValueError):
    """A value the store cannot hold; the message names the field."""


def identifier(name: str, value: str, max_chars: int = MAX_ID_CHARS) -> str:
    """`value` if it can be stored as a name: at most `max_chars`, no control characters or surrogates."""
    if len(value) > max_chars:
        raise LimitError(f"{name}: longer than {max_chars} characters")
    if _NOT_IN_A_NAME.search(value):
        raise LimitError(f"{name}: contains a control character or an unpaired surrogate")
    return value


def int32(name: str, value: int) -> int:
    if not INT32_MIN <= value <= INT32_MAX:
        raise LimitError(f"{name}: out of range (a 32-bit integer)")
    return value


def finite(name: str, value: int | float) -> float:
    """`value` as a float; an integer too large for one (10**400) is refused like infinity."""
    try:
        number = float(value)
    except OverflowError:
        raise LimitError(f"{name}: must be finite") from None
    if not math.isfinite(number):
        raise LimitError(f"{name}: must be finite")
    return number


def fit_text(value: str) -> str:
    """`value` with unstorable characters replaced and, past `MAX_TEXT_CHARS`, cut with a marker (to at
    most `MAX_TEXT_CHARS` in all, so fitting twice changes nothing more)."""
    if len(value) > MAX_TEXT_CHARS:
        value = f"{value[:TEXT_KEPT_CHARS]}…[truncated {len(value) - TEXT_KEPT_CHARS} chars]"
    return _UNSTORABLE.sub("\ufffd", value)


def fit_json(value: Any, depth: int = 0) -> Any:
    """A JSON-like value with every string fitted and containers past `MAX_JSON_DEPTH` replaced."""
    if isinstance(value, str):
        return fit_text(value)
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_JSON_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return {fit_text(str(key)): fit_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [fit_json(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/Infinity (Python's parser takes them); PostgreSQL's json refuses them
    return value
