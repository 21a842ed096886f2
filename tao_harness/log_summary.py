"""A warning that can fire thousands of times a minute under load, logged as one line per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class SummarizedWarning:
    """Logs the first occurrence at once, then at most one line per `interval_s` that counts what happened
    since the last line and the largest value seen (e.g. the longest wait). Occurrences in a quiet tail are
    logged by the next one after the interval, or never: the exact count lives in a metric, not the log."""

    def __init__(self, logger: logging.Logger, message: str, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # `message` is formatted with (count, largest): "%d request(s) waited past the bound (longest %.1f s)".
        self._logger, self._message, self._interval_s, self._clock = logger, message, interval_s, clock
        self._logged_at = float("-inf")
        self._count = 0
        self._largest = float("-inf")

    def occurred(self, value: float) -> None:
        self._count += 1
        self._largest = max(self._largest, value)
        now = self._clock()
        if now - self._logged_at >= self._interval_s:
            self._logger.warning(self._message, self._count, self._largest)
            self._logged_at, self._count, self._largest = now, 0, float("-inf")
