"""`--json` output is JSON alone on stdout, whatever versions of the dependencies are installed.

CI also runs this file in a virtualenv of the newest versions pyproject.toml allows (`make test-latest`),
as `pip install .` gives a user: there highspy 1.16 printed its banner on stdout and `tao plan --json` and
`tao sim --json` were not JSON. The commands run as real processes: what reaches descriptor 1 counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tao_harness.sim.trace import write_trace
from tao_harness.sim.trace_records import trace_to_records
from tao_harness.sim.workloads import generate
from tao_harness.store.engine import open_store
from tao_harness.store.writer import StoreWriter

SNAPSHOT = Path(__file__).parent / "planner" / "independent" / "mixed-3.json"  # its K level asks HiGHS


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("recorded")
    sessions = generate("swe-lite", 6, seed=1)
    write_trace(sessions, folder / "trace.jsonl")
    with open_store(str(folder / "history.db")) as store, StoreWriter(store) as writer:
        writer.submit_many(trace_to_records(sessions))
    return {"trace": str(folder / "trace.jsonl"), "db": str(folder / "history.db"), "snapshot": str(SNAPSHOT)}


@pytest.mark.parametrize("command", [
    ["plan", "{snapshot}", "--json"],
    ["sim", "--trace", "{trace}", "--policy", "tao", "--replicas", "2", "--workers", "3", "--json"],
    ["trace", "stats", "{trace}", "--json"],
    ["history", "calls", "--db", "{db}", "--json"],
], ids=lambda command: " ".join(command[:2]))
def test_json_commands_print_json_alone(recorded: dict[str, str], command: list[str]) -> None:
    argv = [part.format(**recorded) for part in command]
    done = subprocess.run([sys.executable, "-m", "tao_harness.cli.main", *argv],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout), done.stdout[:500]
