"""GNU duration words as `sleep` and `timeout` read them: a number with an optional s/m/h/d suffix."""

from __future__ import annotations

import math
import re

# ASCII only: `\d` would also take full-width or Arabic-Indic digits (`sleep ５`), which GNU refuses.
_DURATION = re.compile(r"^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?([smhd]?)$", re.ASCII)
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(word: str) -> float | None:
    """Seconds in `word` ("1.5m" → 90.0), or None when it is not a finite GNU duration."""
    match = _DURATION.match(word.strip())
    if match is None:
        return None
    number, exponent, unit = match.groups()
    seconds = float(number + (exponent or "")) * _UNIT_S[unit]
    return seconds if math.isfinite(seconds) else None
