"""`tao sim` from the command line: table, JSON with the issue's keys, one-line errors with exit 2."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tao_harness.cli.main import main
from tao_harness.sim.trace import write_trace
from tao_harness.sim.workloads import generate

ISSUE_KEYS = {
    "mean_latency_s", "mean_ttft_s", "decode_tok_s", "prefix_hit_rate", "makespan_s",
    "mean_tool_end_to_first_token_s", "mean_pause_wait_s", "admissions", "interrupts", "solve_ms_p50",
    "solve_ms_p95", "fallback_rate", "discard_rate",
}


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    write_trace(generate("automation", 3, seed=7), path)
    return path


def test_json_output_has_every_metric_key(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--trace", str(trace_file), "--policy", "tao", "--replicas", "2", "--workers", "2",
                 "--seed", "3", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert ISSUE_KEYS <= set(out["metrics"])
    assert out["metrics"]["admissions"] >= 3 and out["config"]["policy"] == "tao"
    assert out["config"]["seed"] == 3 and out["events"] > 0


def test_table_output_names_the_run(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--trace", str(trace_file), "--policy", "vllm-ca", "--replicas", "1",
                 "--workers", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vllm-ca: 3 sessions, 3 workers, 1 replicas")
    assert "prefix_hit_rate" in out and "mean_tool_end_to_first_token_s" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "nope", "--replicas", "1", "--workers", "1"], "unknown policy 'nope'"),
        (["--policy", "tao", "--replicas", "0", "--workers", "1"], "--replicas: Input should be greater"),
        (["--policy", "tao", "--replicas", "1", "--workers", "1", "--profile", "h200"], "profile"),
        (["--policy", "tao", "--replicas", "1", "--workers", "1", "--num-gpu-blocks", "50"], "grows to"),
    ],
)
def test_bad_options_exit_2_with_one_line(trace_file: Path, argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--trace", str(trace_file), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_host_tier_size_that_is_not_positive_names_the_flag(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:  # argparse's own exit, as for every malformed flag
        main(["sim", "--trace", str(trace_file), "--policy", "tao", "--replicas", "1", "--workers", "1",
              "--kv-offloading-size", "-1"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (  # the flag's name, not the config field's
        "tao sim: error: argument --kv-offloading-size: expected a positive number of GiB, got '-1'")


def test_malformed_trace_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": "a", "turns": [{"input_tokens": 10, "output_tokens": 5}]}\n{"session": 3}\n')
    assert main(["sim", "--trace", str(bad), "--policy", "tao", "--replicas", "1", "--workers", "1"]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["sim", "--trace", str(tmp_path / "missing.jsonl"), "--policy", "tao", "--replicas", "1",
                 "--workers", "1"]) == 2


def test_help_explains_every_option() -> None:
    proc = subprocess.run([sys.executable, "-m", "tao_harness.cli.main", "sim", "--help"],
                          capture_output=True, text=True, check=True)
    for option in ("--trace", "--policy", "--replicas", "--workers", "--profile", "--seed", "--json",
                   "--oracle-readiness", "--num-gpu-blocks"):
        assert option in proc.stdout


def test_dump_snapshots_records_every_plan_for_replay(trace_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "snapshots"
    assert main(["sim", "--trace", str(trace_file), "--policy", "tao", "--replicas", "2", "--workers", "2",
                 "--dump-snapshots", str(folder), "--json"]) == 0
    admissions = json.loads(capsys.readouterr().out)["metrics"]["admissions"]
    recorded = sorted(folder.glob("*.json"))
    assert recorded and admissions >= 3
    assert main(["plan", str(recorded[0]), "--json"]) == 0  # each one replays as it was planned
    assert json.loads(capsys.readouterr().out)["policy"] == "tao"


def test_config_file_sets_the_planner_and_a_host_tier_changes_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "tb.jsonl"
    write_trace(generate("terminal-bench", 8, seed=3), trace)  # contexts of 21k-73k tokens, 128k of KV
    base = ["sim", "--trace", str(trace), "--policy", "tao", "--replicas", "1", "--workers", "6",
            "--num-gpu-blocks", "8000", "--json"]

    def run(*extra: str) -> dict:  # type: ignore[type-arg]
        assert main([*base, *extra]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    unbounded = tmp_path / "unbounded.yaml"
    unbounded.write_text("planner:\n  max_wait_s: null\n  tool_time_release: true\n")
    default, configured = run(), run("--config", str(unbounded))
    assert default["metrics"]["waits_over_bound"] >= 0 and configured["metrics"]["waits_over_bound"] == 0
    assert default["metrics"] != configured["metrics"]  # the file's planner fields took effect
    hosted = run("--kv-offloading-size", "64")
    assert hosted["config"]["kv_offloading_size_gib"] == 64.0
    assert hosted["metrics"]["prefix_hit_rate"] > default["metrics"]["prefix_hit_rate"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("planner:\n  max_wait_s: -3\n")
    assert main([*base, "--config", str(bad)]) == 2
    assert "--config: config field planner.max_wait_s" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_sessions_done_and_json_or_a_pipe_sees_no_bar(
    trace_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sim", "--trace", str(trace_file), "--policy", "vllm-ca", "--replicas", "1", "--workers", "3"]
    terminal = _Terminal()
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", terminal)
        assert main(argv) == 0
    assert "simulating vllm-ca: 100%" in terminal.getvalue() and "3/3" in terminal.getvalue()
    capsys.readouterr()
    assert main(argv) == 0 and capsys.readouterr().err == ""  # not a terminal
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", terminal := _Terminal())
        assert main([*argv, "--json"]) == 0
    assert terminal.getvalue() == ""
