"""The fuzz generator really produces input the servers must refuse, and the report/CLI around the campaign."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from tao_harness.cli import bench_live
from tao_harness.events import EventError, events_from_body
from tao_harness.fleet.faults import table, write_report
from tao_harness.fleet.faults.common import FaultRow, FaultSettings, agent_trace, failed_requests
from tao_harness.fleet.faults.fuzz import FuzzCase, cases, endpoints
from tao_harness.fleet.session import SessionResult, TurnResult
from tao_harness.replica import anthropic_format, openai_format


def _all_cases(seed: int) -> list[FuzzCase]:
    rng = random.Random(seed)
    return [case for endpoint in endpoints() for case in cases(endpoint, rng, per_field=4, huge=False)]


def test_cases_are_deterministic_and_cover_every_route() -> None:
    first, again = _all_cases(3), _all_cases(3)
    assert [(c.endpoint.path, c.label, c.body) for c in first] == [(c.endpoint.path, c.label, c.body) for c in again]
    assert {(e.server, e.path) for e in endpoints()} == {(c.endpoint.server, c.endpoint.path) for c in first}
    assert {"coordinator", "proxy", "replica"} == {e.server for e in endpoints()}


def test_huge_case_is_just_over_the_limit() -> None:
    endpoint = next(e for e in endpoints() if e.path == "/v1/admit")
    huge = [c for c in cases(endpoint, random.Random(0)) if c.label == "over the size limit"]
    assert len(huge) == 1 and endpoint.limit < len(huge[0].body) <= endpoint.limit + 2048


VALIDATORS = {
    ("replica", "/v1/chat/completions"): openai_format.ChatBody.model_validate,
    ("replica", "/v1/completions"): openai_format.CompletionBody.model_validate,
    ("replica", "/v1/messages"): anthropic_format.MessagesBody.model_validate,
    ("replica", "/v1/messages/count_tokens"): anthropic_format.CountTokensBody.model_validate,
    ("coordinator", "/v1/events"): events_from_body,  # with the store limits (fit_for_store)
}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_json_object_case_is_refused_by_the_real_validator(seed: int) -> None:
    checked = 0
    for case in _all_cases(seed):
        validate = VALIDATORS.get((case.endpoint.server, case.endpoint.path))
        try:
            body = json.loads(case.body)
        except ValueError:
            continue
        if validate is None or not isinstance(body, dict):
            continue
        with pytest.raises((ValidationError, EventError)):
            validate(body)
        checked += 1
    assert checked > 40


def _turn(ok: bool, tokens: int | None) -> TurnResult:
    return TurnResult(0.0, 0.1, 0.2, 10, 0, tokens, None, ok)


def test_a_reply_that_stops_early_counts_as_failed() -> None:
    trace = agent_trace("t", 1, 3, 1.0)
    wanted = [t.output_tokens for t in trace[0].turns]
    whole = SessionResult("t-0", turns=[_turn(True, n) for n in wanted])
    assert failed_requests([whole], trace) == 0
    short = SessionResult("t-0", turns=[_turn(True, wanted[0]), _turn(True, wanted[1] - 5), _turn(False, None)])
    assert failed_requests([short], trace) == 2
    assert failed_requests([SessionResult("t-0", error="ClientPayloadError")], trace) == 1


def test_report_has_table_json_and_marks_missed_goals(tmp_path: Path) -> None:
    rows = [FaultRow("soak", "sessions left", 0, "0", True, "2 waves"),
            FaultRow("replica killed", "requests lost", 3, "0", False, "cut streams")]
    path = write_report(rows, FaultSettings.ci(), tmp_path)
    text = path.read_text()
    assert "1 of 2 goals met" in text and "| replica killed | requests lost | 3 | 0 | **NO** |" in text
    data = json.loads((tmp_path / "faults.json").read_text())
    assert data["rows"][1]["met"] is False and data["settings"]["soak_sessions"] == 32
    assert "NO" in table(rows).splitlines()[-1]


def test_cli_rejects_an_unknown_campaign_size(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="tao bench live")
    bench_live.add_arguments(parser)
    assert parser.parse_args(["--faults"]).faults == "full"
    assert parser.parse_args(["--faults", "ci"]).faults == "ci"
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--faults", "huge"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
