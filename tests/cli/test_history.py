"""`tao history` end to end: in-process through `main([...])`, and as a real subprocess."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tao_harness.cli.main import main
from tao_harness.store.engine import open_store
from tao_harness.store.synthetic import generate_history
from tao_harness.store.writer import StoreWriter

STAT_KEYS = {"family", "n", "mean", "p50", "p90", "p99", "max", "bound"}


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "history.db"
    with open_store(str(path)) as store, StoreWriter(store) as writer:
        writer.submit_many(generate_history(sessions=12, calls_per_session=(20, 40), seed=7))
    return path


@pytest.fixture
def db_copy(history_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.db"
    shutil.copy(history_db, copy)
    return copy


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["history", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_tools_lists_every_family(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    rows = _json(capsys, "tools", "--db", str(history_db))
    assert isinstance(rows, list) and all(set(row) == STAT_KEYS for row in rows)
    families = {row["family"]: row for row in rows}
    assert {"Read", "bash:pytest", "bash:git", "*"} <= set(families)
    pytest_row = families["bash:pytest"]
    assert pytest_row["p50"] <= pytest_row["p90"] <= pytest_row["p99"] <= pytest_row["max"]
    assert pytest_row["bound"] > pytest_row["mean"]
    code, text, _ = _run(capsys, "tools", "--db", str(history_db))
    # the table's headers name the unit (the JSON keys above stay the fields' names)
    assert code == 0 and text.splitlines()[0].split() == [
        "family", "n", "mean_s", "p50_s", "p90_s", "p99_s", "max_s", "bound_s"]


def test_calls_filters(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    rows = _json(capsys, "calls", "--db", str(history_db), "--family", "bash:git", "--limit", "5")
    assert len(rows) == 5 and {row["family"] for row in rows} == {"bash:git"}
    starts = [row["started_at"] for row in rows]
    assert starts == sorted(starts, reverse=True)
    session = rows[0]["session_id"]
    assert {
        r["session_id"] for r in _json(capsys, "calls", "--db", str(history_db), "--session", session)
    } == {session}
    assert (
        _json(capsys, "calls", "--db", str(history_db), "--since", "2h") == []
    )  # the history is from 2026-09
    assert len(_json(capsys, "calls", "--db", str(history_db), "--since", "2026-09-01T00:00")) == 50


def test_predict_json_shape(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    result = _json(
        capsys, "predict", "--db", str(history_db), "--tool", "Bash", "--command", "python -m pytest tests -x"
    )
    documented = {"family", "hints", "predicted_s", "source"}
    assert documented | {"bound_s", "elapsed_s", "horizon_s", "p_return_within_horizon", "remaining_s",
                         "predicted_at_start_s", "quantiles_s"} == set(result)
    assert result["family"] == "bash:pytest" and result["source"] == "neighbors"
    assert result["bound_s"] >= result["quantiles_s"]["p90"] >= result["predicted_s"] > 0
    assert 0.0 <= result["p_return_within_horizon"] <= 1.0
    assert result["hints"] == {"min_s": None, "max_s": None, "background": False}
    assert isinstance(result["predicted_s"], float) and result["predicted_s"] > 1.0
    capped = _json(
        capsys,
        "predict",
        "--db",
        str(history_db),
        "--tool",
        "Bash",
        "--args",
        '{"command": "npm test", "timeout": 2000}',
    )
    assert {k: capped[k] for k in ("family", "hints", "predicted_s", "source")} == {
        "family": "bash:npm",
        "hints": {"min_s": None, "max_s": 2.0, "background": False},
        "predicted_s": 2.0,
        "source": "hint",
    }
    monitor = _json(
        capsys, "predict", "--db", str(history_db), "--tool", "Monitor", "--args", '{"timeout_ms": 60000}'
    )
    assert monitor["hints"]["max_s"] == 60.0 and monitor["source"] in ("neighbors", "hint")
    late = _json(capsys, "predict", "--db", str(history_db), "--tool", "Bash", "--args",
                 '{"command": "npm test", "timeout": 2000}', "--elapsed", "1.5")
    assert late["p_return_within_horizon"] == 1.0 and late["remaining_s"] == pytest.approx(0.5)
    code, _, err = _run(capsys, "predict", "--db", str(history_db), "--tool", "Bash", "--elapsed", "-1")
    assert code == 2 and "--elapsed" in err


def test_a_prediction_is_conditioned_on_the_time_the_call_has_run(
    capsys: pytest.CaptureFixture[str], history_db: Path
) -> None:
    ask = ["predict", "--db", str(history_db), "--tool", "Bash", "--command", "python -m pytest tests -x"]
    fresh = _json(capsys, *ask)
    assert fresh["predicted_s"] == fresh["predicted_at_start_s"]
    elapsed = 2 * fresh["predicted_s"]  # past its prediction at the start: it must say longer now
    running = _json(capsys, *ask, "--elapsed", f"{elapsed}")
    assert running["predicted_s"] == pytest.approx(elapsed + running["remaining_s"]) and running["predicted_s"] > elapsed
    assert running["predicted_at_start_s"] == fresh["predicted_s"]
    code, out, _ = _run(capsys, *ask, "--elapsed", f"{elapsed}")
    assert code == 0 and f"predicted  {running['predicted_s']:.3f} s in all, given it has run {elapsed:g} s" in out


def test_predict_text(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    code, out, _ = _run(
        capsys, "predict", "--db", str(history_db), "--tool", "Bash", "--command", "sleep 2 &"
    )
    assert code == 0 and "background yes" in out and "predicted" in out


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_import_round_trip(
    capsys: pytest.CaptureFixture[str], history_db: Path, tmp_path: Path, fmt: str
) -> None:
    first, second = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    assert _run(capsys, "export", "--db", str(history_db), "--format", fmt, "-o", str(first))[0] == 0
    code, out, _ = _run(capsys, "import", str(first), "--db", str(tmp_path / "new.db"))
    calls = len(first.read_text().splitlines()) - (fmt == "csv")  # the CSV header is not a call
    assert code == 0 and out.startswith(f"read {calls} calls: {calls} new, 0 already in ")
    assert (
        _run(capsys, "export", "--db", str(tmp_path / "new.db"), "--format", fmt, "-o", str(second))[0] == 0
    )
    assert first.read_text() == second.read_text() and len(first.read_text().splitlines()) > 200


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], history_db: Path, tmp_path: Path) -> None:
    image = tmp_path / "out.png"  # in a folder that exists: a missing one is an error (test_cli_errors)
    code, out, _ = _run(capsys, "plot", "--db", str(history_db), "--family", "bash:pytest", "-o", str(image))
    assert code == 0 and "bash:pytest" in out
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _run(capsys, "plot", "--db", str(history_db), "--family", "nope", "-o", str(image))
    assert code == 2 and "no completed calls in family nope" in err


def test_accuracy_report(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    report = _json(capsys, "accuracy", "--db", str(history_db))
    assert report["n"] > 200 and 0 < report["mae_s"] and 0 < report["within_share"] <= 1
    assert sum(s["n"] for s in report["by_source"]) == report["n"]
    overall = report["overall"]
    assert set(overall["predictors"]) == {"forecast", "zero", "family_median", "hindsight_median", "bound"}
    assert overall["predictors"]["forecast"]["mae_s"] == report["mae_s"]
    assert set(overall["bounds"]) == {"forecast", "bound"}
    assert sum(b["n"] for b in overall["reliability"]) == overall["questions"] >= report["n"]
    assert sum(g["n"] for g in report["by_harness"].values()) == report["n"]
    assert sum(g["n"] for g in report["by_family"].values()) == report["n"]


def test_accuracy_session_filter_text_and_plot(capsys: pytest.CaptureFixture[str], history_db: Path,
                                               tmp_path: Path) -> None:
    session = _json(capsys, "calls", "--db", str(history_db), "--limit", "1")[0]["session_id"]
    own = _json(capsys, "accuracy", "--db", str(history_db), "--sessions", session)
    rest = _json(capsys, "accuracy", "--db", str(history_db), "--exclude-sessions", session)
    everything = _json(capsys, "accuracy", "--db", str(history_db))
    assert 0 < own["n"] < everything["n"] and own["n"] + rest["n"] == everything["n"]
    image = tmp_path / "accuracy.png"
    code, out, _ = _run(capsys, "accuracy", "--db", str(history_db), "-o", str(image))
    assert code == 0 and "family_median" in out and "readiness calibration" in out
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_accuracy_folds_replay_each_group_of_sessions_alone(capsys: pytest.CaptureFixture[str],
                                                            history_db: Path) -> None:
    everything = _json(capsys, "accuracy", "--db", str(history_db))
    folds = _json(capsys, "accuracy", "--db", str(history_db), "--folds", "3")["folds"]
    assert len(folds) == 3 and all(fold["n"] > 0 for fold in folds)
    assert sum(fold["n"] for fold in folds) == everything["n"]
    code, out, _ = _run(capsys, "accuracy", "--db", str(history_db), "--folds", "3")
    assert code == 0 and "fold 2" in out and out.count("hindsight_median") == 3
    for bad in (["--folds", "0"], ["--folds", "2", "-o", "x.png"]):
        code, _, err = _run(capsys, "accuracy", "--db", str(history_db), *bad)
        assert code == 2 and "--folds" in err


def test_prune(capsys: pytest.CaptureFixture[str], db_copy: Path) -> None:
    assert _json(capsys, "prune", "--db", str(db_copy), "--older-than", "3650d") == {
        "tool_calls": 0,
        "llm_requests": 0,
        "llm_attempts": 0,
        "plans": 0,
        "sessions": 0,
    }
    pruned = _json(capsys, "prune", "--db", str(db_copy), "--older-than", "1d")  # the history is weeks old
    assert pruned["tool_calls"] > 200 and pruned["sessions"] == 12
    assert _json(capsys, "calls", "--db", str(db_copy)) == []


def test_db_url_from_environment(
    capsys: pytest.CaptureFixture[str], history_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAO_DB_URL", f"sqlite:///{history_db}")
    assert len(_json(capsys, "calls", "--limit", "3")) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tools", "--db", "{missing}"], "no history database at"),
        (["tools", "--db", "{corrupt}"], "is not a usable SQLite database"),
        (["predict", "--db", "{db}", "--tool", "Bash", "--args", "{bad"], "--args is not valid JSON"),
        (["predict", "--db", "{db}", "--tool", "Bash", "--args", "[1]"], "--args must be a JSON object"),
        (["prune", "--db", "{db}", "--older-than", "soon"], "not a duration: 'soon'"),
        (["calls", "--db", "{db}", "--since", "yesterday"], "not a time: 'yesterday'"),
        (["import", "{missing}", "--db", "{db}"], "cannot read"),
        (["import", "{corrupt}", "--db", "{db}"], "CSV header must name"),
        (["tools", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/x"], "cannot open database"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], db_copy: Path, tmp_path: Path, argv: list[str], message: str
) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_text("garbage, not a database\n" * 100)
    names = {"{missing}": str(tmp_path / "missing.db"), "{corrupt}": str(corrupt), "{db}": str(db_copy)}
    code, _, err = _run(capsys, *[names.get(arg, arg) for arg in argv])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "missing.db").exists()


def test_subprocess_cli(history_db: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tao_harness.cli.main",
            "history",
            "predict",
            "--db",
            str(history_db),
            "--tool",
            "Bash",
            "--args",
            '{"command": "sleep 3", "timeout": 10000}',
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["p_return_within_horizon"] == 0.0  # not before 3 s
    assert 3.0 < shown["bound_s"] < 3.5  # a sleep returns a little after its N: its bound covers that
    assert {k: shown[k] for k in ("family", "hints", "predicted_s", "source")} == {
        "family": "bash:sleep",
        "hints": {"min_s": 3.0, "max_s": 10.0, "background": False},
        "predicted_s": 3.0,
        "source": "hint",
    }


def test_every_option_is_explained() -> None:
    import argparse

    from tao_harness.cli.main import build_parser

    parser = build_parser(["history"])
    history = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["history"]
    subcommands = next(a for a in history._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(subcommands) == {"tools", "calls", "predict", "export", "import", "import-spool", "plot", "accuracy",
                                "prune"}
    for name, sub in subcommands.items():
        options = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        assert all(a.help for a in options), name
        listing = name not in ("export", "import", "plot")
        assert not listing or any("--json" in a.option_strings for a in options), name


def test_database_failure_mid_command_is_one_line(capsys: pytest.CaptureFixture[str], db_copy: Path) -> None:
    import sqlite3

    with sqlite3.connect(db_copy) as conn:
        conn.execute("DROP TABLE tool_calls")
    code, _, err = _run(capsys, "calls", "--db", str(db_copy))
    assert code == 2 and err.strip() == "tao history: error: database error: no such table: tool_calls"


def test_import_keeps_sessions_that_share_call_ids_and_is_idempotent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    calls = [
        {"id": f"call_{n}", "session_id": session, "tool_name": "Bash", "started_at": 100.0 + n, "duration_s": d}
        for session, d in (("s1", 1.0), ("s2", 2.0))
        for n in (1, 2, 3)
    ]
    source, db = tmp_path / "calls.jsonl", tmp_path / "h.db"
    source.write_text("".join(json.dumps(call) + "\n" for call in calls))
    for _ in range(2):
        assert _run(capsys, "import", str(source), "--db", str(db))[0] == 0
    code, out, _ = _run(capsys, "export", "--db", str(db), "--format", "jsonl")
    exported = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(exported) == 6
    assert {(c["session_id"], c["id"], c["duration_s"]) for c in exported} == {
        (c["session_id"], c["id"], c["duration_s"]) for c in calls
    }


def test_read_only_command_on_a_foreign_file_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    before = foreign.read_bytes()
    code, _, err = _run(capsys, "calls", "--db", str(foreign))
    assert code == 2 and "holds no tao_harness history" in err and len(err.strip().splitlines()) == 1
    assert foreign.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]


def test_importing_the_same_file_again_stores_nothing_new(
    capsys: pytest.CaptureFixture[str], history_db: Path, tmp_path: Path
) -> None:
    export, db = tmp_path / "calls.jsonl", str(tmp_path / "again.db")
    assert _run(capsys, "export", "--db", str(history_db), "-o", str(export))[0] == 0
    calls = len(export.read_text().splitlines())
    assert _run(capsys, "import", str(export), "--db", db)[1].startswith(f"read {calls} calls: {calls} new")
    code, out, _ = _run(capsys, "import", str(export), "--db", db)
    assert code == 0 and out.startswith(f"read {calls} calls: 0 new, {calls} already in ")


@pytest.mark.parametrize("extra", [["--command", "sleep 5"], []])
def test_predict_error_names_the_subcommand(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    code, out, err = _run(capsys, "predict", "--tool", "Bash", *extra, "--args", "notjson")
    assert code == 2 and out == ""
    assert err.startswith("tao history: error: --args is not valid JSON") and len(err.splitlines()) == 1


def test_predict_refuses_a_command_that_is_not_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "predict", "--db", str(tmp_path / "h.db"), "--tool", "Bash",
                        "--args", '{"command": 5}')
    assert code == 2 and err == 'tao history: error: --args: "command" must be a string, got 5\n'


def test_predict_answers_from_hints_without_a_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "none" / "history.db"
    answer = _json(capsys, "predict", "--db", str(missing), "--tool", "Bash", "--command", "sleep 5")
    assert answer["family"] == "bash:sleep" and answer["hints"]["min_s"] == 5.0
    assert answer["predicted_s"] >= 5.0
    assert not missing.parent.exists()  # a question creates no database


def test_plot_axes_of_a_single_call_family_hold_a_labelled_decade() -> None:
    from tao_harness.cli.history_plot import _axis_range

    for value in (5.0, 0.031, 1.0, 12.0, 9.99):
        low, high = _axis_range(value, value)
        assert low < value < high
        assert any(low <= 10.0**power <= high for power in range(-5, 5)), (value, low, high)


def test_calls_keeps_a_multi_line_command_on_its_row(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tao_harness.store.records import ToolCallRecord

    db = tmp_path / "h.db"
    heredoc = "cat <<'EOF' > train.py\nimport torch\n\tprint(1)\nEOF"
    with open_store(str(db)) as store, StoreWriter(store) as writer:
        writer.submit_many([ToolCallRecord(id=f"c{i}", session_id="s1", tool_name="Bash", family="bash:cat",
                                           command=heredoc, started_at=100.0 + i, duration_s=0.1)
                            for i in range(3)])
    code, out, _ = _run(capsys, "calls", "--db", str(db))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 + 3  # header, rule, one line per call
    assert all(line.endswith("cat <<'EOF' > train.py ⏎ import torch ⏎ print(1) ⏎ EOF") for line in lines[2:])
