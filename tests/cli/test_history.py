"""`tao history` end to end: in-process through `main([...])`, and as a real subprocess."""

from __future__ import annotations

import json
import shutil
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
    assert code == 0 and text.splitlines()[0].split() == [
        "family",
        "n",
        "mean",
        "p50",
        "p90",
        "p99",
        "max",
        "bound",
    ]


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
    assert set(result) == {"family", "hints", "predicted_s", "source"}
    assert result["family"] == "bash:pytest" and result["source"] == "family"
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
    assert capped == {
        "family": "bash:npm",
        "hints": {"min_s": None, "max_s": 2.0, "background": False},
        "predicted_s": 2.0,
        "source": "hint",
    }
    monitor = _json(
        capsys, "predict", "--db", str(history_db), "--tool", "Monitor", "--args", '{"timeout_ms": 60000}'
    )
    assert monitor["hints"]["max_s"] == 60.0 and monitor["source"] in ("global", "hint")


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
    assert code == 0 and out.startswith("imported ")
    assert (
        _run(capsys, "export", "--db", str(tmp_path / "new.db"), "--format", fmt, "-o", str(second))[0] == 0
    )
    assert first.read_text() == second.read_text() and len(first.read_text().splitlines()) > 200


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], history_db: Path, tmp_path: Path) -> None:
    image = tmp_path / "plots" / "out.png"
    code, out, _ = _run(capsys, "plot", "--db", str(history_db), "--family", "bash:pytest", "-o", str(image))
    assert code == 0 and "bash:pytest" in out
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _run(capsys, "plot", "--db", str(history_db), "--family", "nope", "-o", str(image))
    assert code == 2 and "no completed calls in family nope" in err


def test_accuracy_report(capsys: pytest.CaptureFixture[str], history_db: Path) -> None:
    report = _json(capsys, "accuracy", "--db", str(history_db))
    assert report["n"] > 200 and 0 < report["mae_s"] and 0 < report["within_share"] <= 1
    assert sum(s["n"] for s in report["by_source"]) == report["n"]


def test_prune(capsys: pytest.CaptureFixture[str], db_copy: Path) -> None:
    assert _json(capsys, "prune", "--db", str(db_copy), "--older-than", "3650d") == {
        "tool_calls": 0,
        "llm_requests": 0,
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
    assert json.loads(done.stdout) == {
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
