"""`tao bench compare`: validation exit codes, a real simulated run, failures reported, parallel jobs."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tao_harness.cli.main import main
from tao_harness.sim.trace import TraceSession, TraceTurn, write_trace
from tao_harness.sim.workloads import generate


def _small_trace(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    write_trace(generate("swe-lite", 3, seed=1), path)
    return path


def _compare(*extra: str) -> int:
    return main(["bench", "compare", "--quiet", *extra])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workload", "swe-huge"], "unknown workload 'swe-huge'"),
        (["--workload", "swe-lite", "--policies", "tao,magic"], "unknown policy 'magic'"),
        (["--workload", "swe-lite", "--workers", "16,many"], "--workers takes comma-separated integers"),
        (["--workload", "swe-lite", "--workers", "0"], "--workers needs positive integers"),
        (["--workload", "swe-lite", "--profile", "h200-dream"], "unknown profile 'h200-dream'"),
        (["--workload", "swe-lite", "--replicas", "0"], "--replicas and --jobs must be at least 1"),
        (["--workload", "swe-lite", "--sessions", "0"], "--sessions must be at least 1"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert _compare(*flags, "-o", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_malformed_trace_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    assert _compare("--trace", str(bad), "-o", str(tmp_path / "out")) == 2
    assert "line 1: not valid JSON" in capsys.readouterr().err


def test_unwritable_output_exits_2_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exited:  # refused as the command line is read
        _compare("--trace", str(_small_trace(tmp_path)), "--policies", "vllm-rr", "-o", str(blocker / "out"))
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"argument -o/--output: {blocker / 'out'}: no directory {blocker}\n")
    assert not (blocker.parent / "out").exists()


def test_workload_and_trace_are_exclusive_and_output_required(tmp_path: Path) -> None:
    for argv in (
        ["--workload", "swe-lite", "--trace", "x.jsonl", "-o", str(tmp_path)],
        ["--workload", "swe-lite"],
    ):
        with pytest.raises(SystemExit) as caught:
            _compare(*argv)
        assert caught.value.code == 2


def test_a_run_that_cannot_fit_is_reported_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One prompt larger than a replica's whole KV cache: the simulator (or a missing policy) fails the run.
    huge = TraceSession("huge", 0.0, None, 0, (TraceTurn(2_000_000, 10, None),))
    path = tmp_path / "huge.jsonl"
    write_trace([huge], path)
    out = tmp_path / "out"
    assert (
        _compare(
            "--trace", str(path), "--workers", "1", "--policies", "vllm-rr", "--replicas", "1", "-o", str(out)
        )
        == 1
    )
    captured = capsys.readouterr()
    assert "failed: huge.jsonl 1 workers vllm-rr" in captured.err
    assert "| vllm-rr | failed: " in (out / "results.md").read_text()
    assert "(0/1 runs ok)" in captured.out


@pytest.mark.skipif(
    importlib.util.find_spec("tao_harness.policies.vllm_rr") is None,
    reason="the vllm-rr policy module is not in the tree yet",
)
def test_real_runs_in_parallel_write_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = _compare(
        "--trace",
        str(_small_trace(tmp_path)),
        "--workers",
        "2",
        "--policies",
        "vllm-rr,vllm-ca",
        "--replicas",
        "1",
        "--jobs",
        "2",
        "-o",
        str(out),
    )
    text = (out / "results.md").read_text()
    assert code == 0, text
    assert "### small.jsonl · 2 workers" in text
    assert "| vllm-rr | " in text and "| vllm-ca | " in text and "failed" not in text
    assert sorted(p.name for p in out.glob("*.png")) == [
        "running_small.jsonl_2.png",
        "throughput_small.jsonl.png",
        "ttft_cdf_small.jsonl_2.png",
        "wait_cdf_small.jsonl_2.png",
    ]
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[0].startswith("workload,workers,policy")
    assert "(2/2 runs ok)" in capsys.readouterr().out


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["bench", "compare", "--help"])
    assert caught.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--workload",
        "--trace",
        "--workers",
        "--policies",
        "--replicas",
        "--profile",
        "--seed",
        "--jobs",
        "--sessions",
        "-o",
    ):
        assert flag in text


def test_live_subcommand_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["bench", "live", "--help"])
    assert caught.value.code == 0
    assert "--router" in capsys.readouterr().out


def test_the_ablation_rows_change_one_part_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tao_harness.cli.bench import BenchJob, run_job
    from tao_harness.sim.variants import ABLATION, variant

    labels = [row.label for row in ABLATION]
    assert labels[0] == "tao" and "thunderagent" in labels and len(set(labels)) == len(labels)
    assert variant("tao-no-bound").planner == {"max_wait_s": None}
    assert variant("tao+oracle-readiness").oracle_readiness and variant("vllm-ca").policy == "vllm-ca"
    trace = tmp_path / "tb.jsonl"
    write_trace(generate("terminal-bench", 8, seed=3), trace)

    def job(label: str, host: float | None = None) -> BenchJob:
        return BenchJob(str(trace), True, 8, 0, 6, label, 1, "qwen3-32b-2xh100", False, host)

    runs = {label: run_job(job(label)) for label in ("tao", "tao-no-bound", "tao+oracle-readiness")}
    assert all(run.error is None and run.policy == label for label, run in runs.items())
    # --oracle-readiness over the whole ablation: the row without tool events runs as it is.
    blind, oracle_blind = run_job(job("tao-no-tool-events")), run_job(replace(job("tao-no-tool-events"),
                                                                               oracle_readiness=True))
    assert blind.error is None and oracle_blind.error is None
    assert oracle_blind.metrics.deterministic_json() == blind.metrics.deterministic_json()  # type: ignore[union-attr]
    assert runs["tao-no-bound"].metrics.waits_over_bound == 0  # type: ignore[union-attr]
    hosted = run_job(job("tao", 64.0))
    assert hosted.metrics.prefix_hit_rate >= runs["tao"].metrics.prefix_hit_rate  # type: ignore[union-attr]
    out = tmp_path / "out"
    assert _compare("--trace", str(trace), "--workers", "3", "--replicas", "1", "--policies", "tao-no-bound",
                    "--kv-offloading-size", "32", "-o", str(out)) == 0
    assert "| tao-no-bound | " in (out / "results.md").read_text()
    capsys.readouterr()
    assert _compare("--workload", "swe-lite", "--policies", "ablation,nope", "-o", str(tmp_path / "x")) == 2
    assert "tao-value-release" in capsys.readouterr().err
