"""scripts/bench_versus.py as a user runs it: two trees side by side, its JSON rows, a revision exported,
and its errors."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_versus.py"
INDEPENDENT = ROOT / "tests" / "planner" / "independent"


def _versus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240)


@pytest.fixture
def versus(monkeypatch: pytest.MonkeyPatch) -> Any:
    """scripts/bench_versus.py imported, for its functions."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("bench_versus")


def test_a_tree_against_itself_plans_the_same_snapshots_alike_and_a_folder_is_one_more_row() -> None:
    """The same tree on both sides: every snapshot planned by both, the same K (the planner is a
    deterministic function of the snapshot when it proves its plans), both sides timed; a folder of recorded
    snapshots is one more row. One run for both (each run starts two workers that import and load the
    planner: ~20 s on a busy machine)."""
    done = _versus("--base", str(ROOT), "--shapes", "ours,ties", "--sizes", "8x2,12x3", "--trials", "3",
                   "--repeat", "2", "--replay", str(INDEPENDENT), "--json")
    assert done.returncode == 0, done.stderr
    *rows, replayed = json.loads(done.stdout)
    assert [(row["shape"], row["size"]) for row in rows] == [
        ("ours", "8x2"), ("ours", "12x3"), ("ties", "8x2"), ("ties", "12x3")]
    for row in rows:
        assert row["snapshots"] == 3
        base, this = row["base"], row["this"]
        assert base["k_total"] == this["k_total"] > 0
        assert base["k_proven"] == this["k_proven"] == 1.0  # small snapshots are proven
        assert base["worst_gap"] == this["worst_gap"] == 0.0 and row["differ"] == 0
        assert 0 <= base["exact"] <= base["k_proven"] and 0 <= this["exact"] <= this["k_proven"]
        for side in (base, this):
            p50, p95, p99 = side["cpu_ms"]
            assert 0 < p50 <= p95 <= p99 and side["total_ms"] >= p99
    assert replayed["shape"] == "replay independent"
    assert replayed["snapshots"] == len(list(INDEPENDENT.glob("*.json")))
    assert replayed["base"]["k_total"] > 0 and replayed["this"]["k_total"] > 0


def test_k_change_counts_the_planners_own_admissions_when_both_trees_report_them(versus: Any) -> None:
    """A recorded snapshot's plan also admits sessions that interrupts made room for: K is compared on
    `solved` when both sides report it, and on the whole objective against a revision that does not."""

    def side(objective: int, solved: int | None, bound: int | None = None) -> SimpleNamespace:
        plan = {"cpu_ms": 1.0, "objective": [objective, 0, 0, 1], "bound": [bound or objective, 0, 0, 1],
                "solved": None if solved is None else [solved, 0, 0, 1], "fallback": False}
        return SimpleNamespace(plan=lambda line: plan)

    snapshot = SimpleNamespace(to_json=lambda: {})
    both = versus.versus("recorded", "1", [snapshot], (side(120, 100), side(110, 105)), repeat=1)
    assert (both.base.k_total, both.this.k_total) == (100, 105) and both.differ == 1
    gaps = versus.versus("recorded", "1", [snapshot], (side(120, 100, 125), side(120, 100)), repeat=1)
    assert (gaps.base.worst_gap, gaps.this.worst_gap, gaps.differ) == (0.04, 0.0, 0)  # (125 - 120) / 125
    older = versus.versus("recorded", "1", [snapshot], (side(120, None), side(110, 105)), repeat=1)
    assert (older.base.k_total, older.this.k_total) == (120, 110)


def test_the_table_names_its_columns() -> None:
    done = _versus("--base", str(ROOT), "--shapes", "ours", "--sizes", "8x2", "--trials", "2",
                   "--repeat", "1")
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert header[:3] == ["shape", "size", "base"] and "ratio" in header
    assert done.stdout.splitlines()[2].split()[:2] == ["ours", "8x2"]


def test_a_revision_is_exported_once_into_the_cache(versus: Any, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """`--base HEAD`: the package as committed, in a folder named by the commit, reused by the next run."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.setattr(versus, "CACHE", tmp_path)
    tree = versus.tree_of("HEAD")
    assert tree == tmp_path / head.stdout.strip()
    committed = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:tao_harness/planner/solve.py"],
                               capture_output=True, text=True, check=True).stdout
    assert (tree / "tao_harness" / "planner" / "solve.py").read_text() == committed
    marker = tree / "tao_harness" / "marker"
    marker.write_text("kept")
    assert versus.tree_of("HEAD") == tree and marker.read_text() == "kept"  # not exported again


@pytest.mark.parametrize(("args", "message"), [
    (["--base", "no-such-revision-xyz"], "neither a folder holding tao_harness nor a git revision"),
    (["--base", str(ROOT), "--shapes", "nope"], "unknown shape 'nope'"),
    (["--base", str(ROOT), "--sizes", "8by2"], "is not SESSIONSxNODES"),
    (["--base", str(ROOT), "--trials", "0"], "must be ≥ 1"),
    (["--base", str(ROOT), "--replay", "/no/such/folder"], "no such folder"),
    (["--base", str(ROOT), "--cpu", "4096"], "is not one of this process's cores"),
])
def test_bad_arguments_are_one_line_errors(args: list[str], message: str, versus: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # in this process: a subprocess each cost its imports, 4-5 s on a busy machine
    with pytest.raises(SystemExit) as exited:  # argparse's exit, as the script's own
        versus.main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert message in err and "Traceback" not in err
