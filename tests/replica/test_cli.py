"""`tao replica` as a process: prints its bound URL, serves, and reports bad flags in one line (exit 2)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tao_harness.cli.main import main


def test_serves_on_an_os_chosen_port_and_prints_the_url(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "tao_harness.cli.main",
        "replica",
        "--port",
        "0",
        "--data-parallel-size",
        "2",
        "--scenario",
        "sleep-then-answer",
        "--time-scale",
        "10",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            text = response.read().decode()
        assert 'vllm:num_requests_running{engine="1"' in text
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--scenario", "no-such-scenario"], "no scenario file or built-in scenario"),
        (["--profile", "no-such-gpu"], "unknown step-time profile"),
        (["--time-scale", "0"], "replica.time_scale"),
        (["--data-parallel-size", "0"], "replica.data_parallel_size"),
    ],
)
def test_bad_flags_are_one_line_errors(
    flags: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replica", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_list_scenarios_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["replica", "--list-scenarios", "--json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert {"sleep-then-answer", "swe-short", "monitor"} <= names
