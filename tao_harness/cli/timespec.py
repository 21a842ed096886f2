"""Parsing and printing the times and ages users type: `30d`, `2h`, `90m`, ISO dates, epoch seconds."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from tao_harness.cli.common import UsageError

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text` ("30d", "12h", "90m", "45s", "45"); a bad value is a UsageError."""
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(f"not a duration: {text!r} (use a number with s, m, h, d or w, e.g. 30d)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def parse_since(text: str, now: float) -> float:
    """Epoch seconds for `text`: an age before `now` ("2h"), an ISO time (UTC unless it says), or epoch."""
    if _DURATION.match(text) and text.strip()[-1].isalpha():
        return now - parse_duration(text)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"not a time: {text!r} (use an age such as 2h or 7d, or an ISO time)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def format_time(epoch: float | None) -> str | None:
    """UTC time to the second, or None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
