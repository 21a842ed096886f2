"""`tao trace generate | stats | export`: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tao_harness.store.engine import open_store
from tao_harness.store.upsert import write_batch

from tao_harness.cli.main import main
from tao_harness.sim.trace import read_trace
from tao_harness.sim.trace_records import trace_to_records
from tao_harness.sim.workloads import generate


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def test_generate_to_file_and_stdout_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert (
        main(
            [
                "trace",
                "generate",
                "--workload",
                "terminal-bench",
                "--sessions",
                "7",
                "--seed",
                "3",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert read_trace(out) == generate("terminal-bench", 7, 3)
    capsys.readouterr()
    assert main(["trace", "generate", "--workload", "terminal-bench", "--sessions", "7", "--seed", "3"]) == 0
    assert capsys.readouterr().out == out.read_text()


def test_generate_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "generate", "--workload", "swe-lite", "--sessions", "0"]) == 2
    assert "sessions must be at least 1" in _error_line(capsys)
    with pytest.raises(SystemExit) as caught:
        main(["trace", "generate", "--workload", "nope", "--sessions", "3"])
    assert caught.value.code == 2


def test_stats_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    main(["trace", "generate", "--workload", "swe-lite", "--sessions", "20", "--seed", "1", "-o", str(out)])
    capsys.readouterr()
    assert main(["trace", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("sessions 20 ")
    assert "tool duration per call (s)" in text and "bash:pytest" in text
    assert main(["trace", "stats", str(out), "--json", "--decode-tok-s", "50"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sessions"] == 20 and data["nominal_decode_tok_s"] == 50
    assert 0 < data["tool_share"] < 1
    assert data["turns"] == sum(len(s.turns) for s in read_trace(out))


def test_stats_reports_malformed_and_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": "a", "turns": [{"input_tokens": 5, "output_tokens": 1}]}\n\n{"session": 3}\n')
    assert main(["trace", "stats", str(bad)]) == 2
    assert "bad.jsonl: line 3: 'session' must be a non-empty string" in _error_line(capsys)
    assert main(["trace", "stats", str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot read trace" in _error_line(capsys)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["trace", "stats", str(empty)]) == 2
    assert "no sessions" in _error_line(capsys)


def test_export_from_a_sqlite_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions = generate("automation", 3, seed=9)
    db = tmp_path / "h.db"
    with open_store(str(db)) as store, store.engine.begin() as conn:
        write_batch(conn, trace_to_records(sessions))
    out = tmp_path / "exported.jsonl"
    assert main(["trace", "export", "--db", str(db), "-o", str(out)]) == 0
    capsys.readouterr()
    exported = read_trace(out)
    assert [s.session for s in exported] == [s.session for s in sessions]
    assert [len(s.turns) for s in exported] == [len(s.turns) for s in sessions]
    assert main(["trace", "export", "--db", str(db), "--session", "nobody"]) == 2
    assert "no finished sessions" in _error_line(capsys)
    assert main(["trace", "export", "--db", str(db), "--limit", "0"]) == 2
    assert "--limit must be at least 1" in _error_line(capsys)
    assert main(["trace", "export", "--db", str(tmp_path / "missing.db")]) == 2
    assert "no history database" in _error_line(capsys)
    assert not (tmp_path / "missing.db").exists()
