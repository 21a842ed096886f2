"""What a newcomer meets first: a reader that stops early (`| head`), unusable URLs. One line or silence,
never a traceback. The pipe cases run as real subprocesses: a closed pipe is what is being tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tao_harness.cli.main import main as tao
from tao_harness.cli.run import main as tao_run
from tao_harness.sim.trace import write_trace
from tao_harness.sim.trace_records import trace_to_records
from tao_harness.sim.workloads import generate
from tao_harness.store.engine import open_store
from tao_harness.store.writer import StoreWriter

TAO = [sys.executable, "-m", "tao_harness.cli.main"]
SIGPIPE_EXIT = 141
UNREACHABLE_PG = "postgresql+psycopg://u@127.0.0.1:1/x?connect_timeout=2"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A history database of finished sessions (requests + calls) and a trace file."""
    folder = tmp_path_factory.mktemp("recorded")
    sessions = generate("swe-lite", 20, seed=3)
    trace = folder / "trace.jsonl"
    write_trace(sessions, trace)
    with open_store(str(folder / "history.db")) as store, StoreWriter(store) as writer:
        writer.submit_many(trace_to_records(sessions))
    return folder / "history.db", trace


def _to_closed_pipe(argv: list[str]) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone; (exit code, stderr)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # every write the command makes now fails with EPIPE
    err = process.stderr.read().decode()
    return process.wait(timeout=120), err


@pytest.mark.parametrize("command", [
    ["history", "calls", "--json", "--limit", "1000", "--db", "{db}"],
    ["trace", "generate", "--workload", "swe-lite", "--sessions", "50"],
    ["trace", "export", "--db", "{db}"],
    ["trace", "stats", "{trace}"],
])
def test_a_reader_that_stops_early_gets_silence_not_a_traceback(
    recorded: tuple[Path, Path], command: list[str]
) -> None:
    db, trace = recorded
    code, err = _to_closed_pipe([*TAO, *(part.format(db=db, trace=trace) for part in command)])
    assert (code, err) == (SIGPIPE_EXIT, "")


@pytest.mark.parametrize("argv", [
    ["--db", "foo://bar", "--", sys.executable, "-c", "pass"],
    ["--db", UNREACHABLE_PG, "--", sys.executable, "-c", "pass"],
    ["--coordinator", "notaurl", "--", sys.executable, "-c", "pass"],
])
def test_tao_run_with_an_unusable_url_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # its spool, not the user's
    for name in ("TAO_COORDINATOR_URL", "TAO_DB_URL"):
        monkeypatch.delenv(name, raising=False)
    assert tao_run(["--harness", "generic", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("tao-run: error: ") and len(err.splitlines()) == 1, err


def test_a_proxy_whose_coordinator_is_not_a_url_does_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert tao(["proxy", "--coordinator", "notaurl", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tao proxy: error: --coordinator") and "'notaurl'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("port", ["99999", "65536", "-5", "eighty"])
@pytest.mark.parametrize("command", [["coordinator"], ["replica"], ["proxy", "--replica", "r0=http://127.0.0.1:9"]],
                         ids=lambda command: command[0])
def test_a_port_out_of_range_is_refused_before_anything_binds(
    command: list[str], port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 99999 was bound as 99999 - 65536 = 34463 by the coordinator
    with pytest.raises(SystemExit) as exited:
        tao([*command, "--port", port])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (f"tao {command[0]}: error: argument --port: expected a port number from 0 to 65535 "
                   f"(0 picks a free one), got {port!r}")


def test_an_output_in_a_missing_folder_is_refused_and_no_folder_is_made(
    recorded: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = recorded
    image = tmp_path / "nonexistent" / "dir" / "x.png"
    with pytest.raises(SystemExit) as exited:
        tao(["history", "plot", "--db", str(db), "-o", str(image)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == f"tao history plot: error: argument -o/--output: {image}: no directory {image.parent}"
    assert not (tmp_path / "nonexistent").exists()


def test_a_database_in_a_missing_folder_is_refused_and_no_folder_is_made(
    recorded: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, trace = recorded
    db = tmp_path / "nonexistent2" / "x.db"
    assert tao(["trace", "export", "--db", str(db)]) == 2
    assert capsys.readouterr().err == f"tao trace: error: no history database at {db} (pass --db or set TAO_DB_URL)\n"
    assert tao(["history", "import", str(trace), "--db", str(db)]) == 2  # a command that creates its database
    assert capsys.readouterr().err == (f"tao history: error: cannot create the database {db}: "
                                       f"no directory {db.parent}\n")
    assert not db.parent.exists()


def test_a_failed_import_leaves_no_empty_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage, db = tmp_path / "garbage.jsonl", tmp_path / "new.db"
    garbage.write_text("not an export\n")
    assert tao(["history", "import", str(garbage), "--db", str(db)]) == 2
    assert capsys.readouterr().err.startswith(f"tao history: error: {garbage}: line 1:")
    assert list(tmp_path.iterdir()) == [garbage]


def test_an_empty_db_is_refused_not_taken_for_the_current_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert tao(["history", "tools", "--db", ""]) == 2
    assert capsys.readouterr().err == ("tao history: error: the database URL is empty: give a SQLite file path "
                                       "or a URL (sqlite:///..., postgresql+psycopg://...)\n")


def test_a_malformed_trace_is_named_by_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"bad": 1}\n')
    assert tao(["sim", "--trace", str(trace), "--policy", "tao", "--replicas", "1", "--workers", "1"]) == 2
    assert capsys.readouterr().err == f"tao sim: error: {trace}: line 1: missing field 'session'\n"


@pytest.mark.parametrize("command", [["bench", "compare", "--policies", "tao"], ["bench", "live"]],
                         ids=" ".join)
def test_an_output_directory_in_a_missing_folder_is_refused_and_none_is_made(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nonexistent" / "dir"
    with pytest.raises(SystemExit) as exited:
        tao([*command, "-o", str(out)])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"argument -o/--output: {out}: no directory {out.parent}")
    assert not out.parent.exists()
