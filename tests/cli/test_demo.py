"""`tao demo` (the README's main job) end to end: replicas as child processes, coordinator, proxy, agents."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_drives_sessions_through_the_live_system(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-m", "tao_harness.cli.main", "demo", "--sessions", "3", "--workers", "2",
         "--time-scale", "100", "--workload", "swe-lite", "--db", f"sqlite:///{db}", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["sessions"] == 3 and summary["failed_sessions"] == 0 and summary["failed_requests"] == 0
    assert summary["admissions"] >= 3 and summary["requests"] > 3
    assert summary["prefix_hit_rate"] > 0.5
    with sqlite3.connect(db) as conn:
        requests = conn.execute("select count(*) from llm_requests where status = 'ok'").fetchone()[0]
        calls = conn.execute("select count(*) from tool_calls where duration_s is not null").fetchone()[0]
    assert requests == summary["requests"]
    assert calls == summary["requests"] - summary["sessions"]  # every turn but the last calls a tool


def test_demo_rejects_bad_numbers() -> None:
    done = subprocess.run([sys.executable, "-m", "tao_harness.cli.main", "demo", "--workers", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "must be positive" in done.stderr
