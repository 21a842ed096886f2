"""The forecast on real tool calls (the development half of the shared data set), replayed in time order.

The data is not part of the repository: it is read from `../shared/data/real-tool-calls/dev.jsonl` next
to the checkout (or `TAO_REAL_TOOL_CALLS`), and the test is skipped when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tao_harness.readiness.accuracy import CallSample, replay_accuracy
from tao_harness.store.transfer import read_calls

_RELATIVE = Path("shared/data/real-tool-calls/dev.jsonl")
_ROOT = Path(__file__).resolve().parents[2]


def _data_file() -> Path | None:
    named = os.environ.get("TAO_REAL_TOOL_CALLS")
    candidates = [Path(named)] if named else [_ROOT.parent / _RELATIVE, _ROOT.parent.parent / _RELATIVE]
    return next((path for path in candidates if path.is_file()), None)


@pytest.mark.slow
def test_forecast_beats_the_family_median_known_in_hindsight_on_real_calls() -> None:
    path = _data_file()
    if path is None:
        pytest.skip(f"real tool-call data not found at ../{_RELATIVE} (set TAO_REAL_TOOL_CALLS)")
    with path.open(encoding="utf-8") as source:
        samples = [
            CallSample(c.started_at or 0.0, c.tool_name or "", c.command, c.args, c.duration_s, c.env_timeout_s,
                       c.session_id, c.harness, c.status)
            for c in read_calls(source)
            if c.duration_s is not None and not c.session_id.startswith("claude-code-export/")  # 1 s clock
        ]
    overall = replay_accuracy(samples).overall
    assert overall is not None and overall.n > 2000
    forecast, hindsight = overall.predictors["forecast"], overall.predictors["hindsight_median"]
    assert forecast.mae_s < hindsight.mae_s and forecast.within_share > hindsight.within_share
    assert forecast.mae_s < overall.predictors["family_median"].mae_s
    assert overall.bounds["forecast"].coverage >= 0.9
    assert forecast.brier < overall.predictors["bound"].brier  # readiness answers, not only durations
