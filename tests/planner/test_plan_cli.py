"""`tao plan`: table and JSON output, and one-line errors with exit code 2 for bad snapshots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tao_harness.cli.main import main

SNAPSHOT = {
    "now": 1000.0,
    "nodes": [{"id": "r0", "capacity_tokens": 30000}, {"id": "r1", "capacity_tokens": 9000}],
    "sessions": [
        {"id": "warm", "tokens": 14000, "ready": 1, "cache": {"r0": {"tokens": 9000, "observed_at": 996.5}}},
        {"id": "huge", "tokens": 50000, "ready": 1},
        {"id": "cold", "tokens": 9000},
        {"id": "late", "tokens": 9000, "ready": 1, "arrived_at": 5},
    ],
}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    return path


def test_table_shows_admissions_and_who_waits_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(write(tmp_path, SNAPSHOT))]) == 0
    out = capsys.readouterr().out
    assert "solver dp" in out and "objective (K, R, T, N) = (7061, 2, 23000, 2)" in out
    lines = {line.split()[1]: line for line in out.splitlines()[2:] if line.split()}
    assert lines["warm"].split()[:4] == ["admit", "warm", "r0", "7061"]
    assert lines["late"].split()[:3] == ["admit", "late", "r0"]
    assert "cost 50512 > largest free capacity 30000" in lines["huge"]
    assert "room taken by higher-value sessions" in lines["cold"]


def test_json_output_is_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(write(tmp_path, SNAPSHOT)), "--policy", "thunderagent", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["policy"] == "thunderagent" and plan["fallback"] is False
    # warm's first request meets an empty queue and is placed at once on the node with the fewest program
    # tokens; at the tick, cold (smallest first, no cache term) goes to r0's 15,900 left; late's 9,000 + 100
    # buffer does not fit r1's 9,000.
    assert {a["session"] for a in plan["assignments"]} == {"warm", "cold"}
    assert plan["objective"] == [7061, 1, 23000, 2]  # warm's cache credit on r0, where it landed


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({**SNAPSHOT, "sessions": [{"id": "a", "tokens": 1,
                                    "cache": {"r9": {"tokens": 1, "observed_at": 0}}}]},
         "sessions[0].cache: unknown node 'r9'"),
        ({**SNAPSHOT, "sessions": [{"id": "a", "tokens": -4}]}, "sessions[0].tokens: must be >= 0"),
        ({**SNAPSHOT, "sessions": [{"id": "a", "tokens": 1}, {"id": "a", "tokens": 2}]},
         "sessions[1].id: duplicate session id 'a'"),
        ({"nodes": [], "sessions": []}, "now: missing field"),
        ([1, 2], "snapshot: expected a JSON object"),
    ],
)
def test_invalid_snapshot_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 data: object, message: str) -> None:
    assert main(["plan", str(write(tmp_path, data))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_bad_json_missing_file_and_unknown_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["plan", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["plan", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["plan", str(write(tmp_path, SNAPSHOT)), "--policy", "fifo"]) == 2
    assert "unknown policy 'fifo'; choose one of: tao," in capsys.readouterr().err
    assert main(["plan", str(write(tmp_path, SNAPSHOT)), "--state-budget", "0"]) == 2
    assert "--state-budget must be at least 1" in capsys.readouterr().err


def test_the_plan_shows_its_proven_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, SNAPSHOT)
    assert main(["plan", str(path)]) == 0
    assert "proven gap 0 (optimal)  bound (K, R, T, N) <= (7061, 2, 23000, 2)" in capsys.readouterr().out
    assert main(["plan", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound"] == [7061, 2, 23000, 2]
    assert main(["plan", str(path), "--deadline-ms", "0"]) == 2
    assert "--deadline-ms must be positive" in capsys.readouterr().err


# highspy 1.16 prints a banner from C++ onto descriptor 1 when the process builds its first solver (the
# pinned 1.15 does not): this stand-in does the same, so the test holds whichever version is installed.
_LOUD_HIGHS = """
import os, sys
import highspy

class Loud(highspy.Highs):
    built = False

    def __init__(self):
        if not Loud.built:
            os.write(1, b"Running HiGHS 1.16.0: Copyright (c) 2026 under MIT licence terms\\n")
            Loud.built = True
        super().__init__()

highspy.Highs = Loud
from tao_harness.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_plan_json_is_pure_json_when_highs_prints_a_banner() -> None:
    snapshot = Path(__file__).parent / "independent" / "mixed-3.json"  # its K level asks HiGHS
    done = subprocess.run([sys.executable, "-c", _LOUD_HIGHS, "plan", str(snapshot), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["policy"] == "tao"
