import logging

import pytest

from tao_harness.log_summary import SummarizedWarning


def test_a_flood_of_warnings_is_one_line_per_interval_counting_what_happened(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warning = SummarizedWarning(logging.getLogger("flood"), "%d waited (longest %.1f s)", interval_s=60.0,
                                clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="flood"):
        warning.occurred(61.0)  # the first one at once
        for second in range(1, 120):  # one a second for two minutes
            now[0] = float(second)
            warning.occurred(61.0 + second)
    # The 59 of the last minute wait for the next occurrence after it (the metric has them meanwhile).
    assert [r.getMessage() for r in caplog.records] == ["1 waited (longest 61.0 s)", "60 waited (longest 121.0 s)"]
