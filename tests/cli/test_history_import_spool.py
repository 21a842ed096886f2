"""`tao history import-spool`: spooled shim events land in the store without a coordinator."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tao_harness.cli.main import main
from tao_harness.shims.spool import SpoolRecord, SpoolWriter


def _spool(directory: Path, records: list[SpoolRecord]) -> None:
    writer = SpoolWriter(directory)
    writer.append(records)
    writer.close()


def test_events_and_sessions_are_stored_and_the_spool_emptied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spool, db = tmp_path / "spool", tmp_path / "h.db"
    start = {"type": "tool_start", "session": "s1", "call_id": "c1", "tool_name": "Bash", "at": 100.0,
             "command": "timeout 30 pytest -q", "harness": "claude-code"}
    end = {"type": "tool_end", "session": "s1", "call_id": "c1", "at": 104.5, "duration_s": 4.5, "status": "ok"}
    _spool(spool, [
        SpoolRecord("/v1/sessions", {"session": "s1", "harness": "claude-code", "labels": {"task": "t1"}}, 99.0),
        SpoolRecord("/v1/events", {"events": [start]}, 100.1),
        SpoolRecord("/v1/events", end, 104.6),
        SpoolRecord("/v1/events", {"type": "tool_end", "session": "s1"}, 105.0),  # malformed: dropped
        SpoolRecord("/v1/sessions/s1/end", {"ended_at": 108.0}, 110.0),  # spooled after a failed try
    ])
    assert main(["history", "import-spool", "--spool-dir", str(spool), "--db", str(db), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["files"], counts["records"], counts["rows"], counts["dropped"]) == (1, 5, 4, 1)
    assert list(spool.iterdir()) == []
    with sqlite3.connect(db) as conn:
        call = conn.execute("select family, duration_s, timeout_s, status from tool_calls").fetchall()
        session = conn.execute("select harness, ended_at from sessions where id = 's1'").fetchall()
    assert call == [("bash:pytest", 4.5, 30.0, "ok")]
    assert session == [("claude-code", 108.0)]  # when it ended, not when it was spooled


def test_a_spool_file_in_use_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spool = tmp_path / "spool"
    writer = SpoolWriter(spool)  # held open: a running tao-run owns it
    writer.append([SpoolRecord("/v1/events", {"type": "tool_end", "session": "s", "call_id": "c", "at": 1.0}, 1.0)])
    try:
        assert main(["history", "import-spool", "--spool-dir", str(spool), "--db", str(tmp_path / "h.db"),
                     "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["in_use"] == 1
        assert writer.path.exists()
    finally:
        writer.close()


def test_unstorable_records_are_dropped_or_fitted_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spool, db = tmp_path / "spool", tmp_path / "h.db"
    _spool(spool, [
        SpoolRecord("/v1/sessions", {"session": "s" * 201}, 1.0),  # dropped
        SpoolRecord("/v1/sessions", {"session": "a b", "labels": {"note": "x\x00y"}}, 1.0),  # fitted
        SpoolRecord("/v1/events", {"type": "tool_end", "session": "a b", "call_id": "c", "at": 2.0,
                                   "exit_code": 2**63}, 2.0),  # dropped
        SpoolRecord("/v1/sessions/a%20b/end", {}, 3.0),  # an older run's: no ended_at, so when spooled
    ])
    assert main(["history", "import-spool", "--spool-dir", str(spool), "--db", str(db), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["records"], counts["rows"], counts["dropped"]) == (4, 2, 2)
    with sqlite3.connect(db) as conn:
        [(session, labels, ended)] = conn.execute("select id, labels, ended_at from sessions").fetchall()
    assert (session, json.loads(labels), ended) == ("a b", {"note": "x\ufffdy"}, 3.0)
