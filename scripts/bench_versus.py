"""The TAO planner of this tree against another revision, side by side in one run; print one table.

On a shared machine one pass of bench_planner.py moves by ±15-25% from run to run of the same tree, which
passes for a gain. Here both trees plan the same snapshots in two long-lived worker processes
(scripts/versus_worker.py) pinned to one core and alternated snapshot by snapshot (and within a snapshot's
repeats, which side goes first), so the machine's drift hits both alike. A tree against itself (160 x 8, 40
snapshots, 3 repeats, four shapes): time ratios 0.977-1.011, p95s up to 8% apart.

`--base` is a git revision (exported once into ~/.cache/tao-harness/versus/<commit>, where numba's compiled
kernels then stay: the first run compiles them, ~20-60 s) or a folder holding a `tao_harness` package.

Columns: each side's p50 / p95 / p99 of the per-snapshot CPU time (the fastest of `--repeat` plans: the
least disturbed), `time ratio` = this tree's summed time over the base's, each side's `K proven` and
`exact` (bound = objective) shares over every plan, each side's `worst gap` (the largest proven K gap,
(K̄ − K) / K̄, over every plan), `K change`: this tree's summed K over the base's, minus 1 (plans proven at a
deadline's edge make both move a little), and `differ`: the snapshots whose first plans differ in (K, R, T, N).
K of the exact program (`Plan.solved`) when both trees report it, so admissions that interrupts made room for
do not count.

    .venv/bin/python scripts/bench_versus.py --base HEAD [--shapes long,multi] [--sizes 160x8]
        [--trials 40] [--repeat 3] [--seed 21] [--replay DIR] [--cpu N] [--deadline-ms 30] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_planner import drawn, is_exact, k_gap, percentile, recorded, shapes_and_sizes
from planner_bench.shapes import SHAPES
from tao_harness.cli.common import print_json
from tao_harness.config import PlannerConfig
from tao_harness.tables import format_table
from tao_harness.types import Snapshot

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().with_name("versus_worker.py")
CACHE = Path.home() / ".cache" / "tao-harness" / "versus"


class TreeError(ValueError):
    """`--base` names neither a revision of this repository nor a folder holding tao_harness."""


def tree_of(base: str) -> Path:
    """The folder whose tao_harness the base worker imports: `base` itself when it holds one, else the
    git revision `base` exported (once) into the cache."""
    folder = Path(base)
    if (folder / "tao_harness" / "__init__.py").is_file():
        return folder.resolve()
    revision = f"{base}^{{commit}}"
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", revision],
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise TreeError(f"--base {base!r} is neither a folder holding tao_harness nor a git revision "
                        f"of {ROOT}")
    commit = found.stdout.strip()
    target = CACHE / commit
    if not (target / "tao_harness" / "__init__.py").is_file():
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "tao_harness"],
                                 capture_output=True, check=True).stdout
        staging = CACHE / f"{commit}.partial-{os.getpid()}"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        staging.replace(target)  # whole or not at all: a run stopped midway leaves only the staging folder
    return target


class Worker:
    """One side: a worker process planning with the tao_harness of `tree`."""

    def __init__(self, tree: Path, config: PlannerConfig) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(config.deadline_ms), config.deadline_clock],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._read()  # its policy built (numba's kernels loaded or compiled) before any plan is timed

    def plan(self, snapshot_line: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(snapshot_line)
        self.process.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the planner worker exited with code {self.process.wait()} (its error above)")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


@dataclass(frozen=True, slots=True)
class Side:
    """One tree's plans of a row's snapshots."""

    cpu_ms: tuple[float, float, float]  # p50, p95, p99 of the per-snapshot time (fastest of the repeats)
    total_ms: float
    k_proven: float  # share of all plans
    exact: float  # share of all plans proven optimal outright (bound = objective)
    k_total: int  # summed K of each snapshot's first plan
    worst_gap: float  # the largest proven K gap of its plans (0 when a plan has no bound: older revisions)


@dataclass(frozen=True, slots=True)
class Pair:
    shape: str
    size: str
    snapshots: int
    base: Side
    this: Side
    differ: int  # snapshots whose first plans differ in (K, R, T, N)

    def cells(self) -> list[object]:
        ratio = self.this.total_ms / self.base.total_ms if self.base.total_ms else None
        change = self.this.k_total / self.base.k_total - 1 if self.base.k_total else 0.0
        return [self.shape, self.size, *self.base.cpu_ms, *self.this.cpu_ms,
                None if ratio is None else round(ratio, 3), f"{100 * self.base.k_proven:.1f}%",
                f"{100 * self.this.k_proven:.1f}%", f"{100 * self.base.exact:.1f}%",
                f"{100 * self.this.exact:.1f}%", f"{100 * self.base.worst_gap:.2f}%",
                f"{100 * self.this.worst_gap:.2f}%", f"{100 * change:+.3f}%", self.differ]


HEADERS = ["shape", "size", "base p50", "base p95", "base p99", "this p50", "this p95", "this p99",
           "time ratio", "base K proven", "this K proven", "base exact", "this exact", "base worst gap",
           "this worst gap", "K change", "differ"]


def versus(label: str, size: str, snapshots: list[Snapshot], sides: tuple[Worker, Worker], repeat: int
           ) -> Pair:
    """Both sides on `snapshots`, alternated: who goes first flips with every snapshot and every repeat."""
    times: tuple[list[float], list[float]] = ([], [])
    proven, exact, k_total, worst_gap, differ = [0, 0], [0, 0], [0, 0], [0.0, 0.0], 0
    for index, snapshot in enumerate(snapshots):
        line = json.dumps({"snapshot": snapshot.to_json()}, separators=(",", ":")) + "\n"
        fastest = [float("inf"), float("inf")]
        first: list[dict[str, Any]] = [{}, {}]
        for turn in range(repeat):
            for side in ((0, 1) if (index + turn) % 2 == 0 else (1, 0)):
                plan = sides[side].plan(line)
                fastest[side] = min(fastest[side], plan["cpu_ms"])
                outcome = SimpleNamespace(**plan)
                gap = k_gap(outcome)  # type: ignore[arg-type]
                proven[side] += gap == 0.0
                worst_gap[side] = max(worst_gap[side], gap or 0.0)
                exact[side] += is_exact(outcome)  # type: ignore[arg-type]
                if turn == 0:
                    first[side] = plan
        # the planners' own K when both report it: a recorded snapshot's plan also admits sessions that
        # interrupts made room for, which follow the placement but are not the planner's choice
        key = "solved" if all(plan.get("solved") for plan in first) else "objective"
        for side in (0, 1):
            k_total[side] += first[side][key][0]
        differ += first[0][key] != first[1][key]
        for side in (0, 1):
            times[side].append(fastest[side])
    plans = max(len(snapshots) * repeat, 1)

    def side(k: int) -> Side:
        cpu = times[k] or [0.0]
        quantiles = tuple(round(percentile(cpu, q), 2) for q in (0.5, 0.95, 0.99))
        total = round(sum(times[k]), 1)
        shares = proven[k] / plans, exact[k] / plans
        return Side(quantiles, total, *shares, k_total[k], worst_gap[k])  # type: ignore[arg-type]

    return Pair(label, size, len(snapshots), side(0), side(1), differ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True,
                        help="a git revision (e.g. HEAD, main~3) or a folder holding a tao_harness package")
    parser.add_argument("--shapes", default="long,multi,all,everywhere", help=f"of: {', '.join(SHAPES)}")
    parser.add_argument("--sizes", default="160x8", help="sessions x nodes, comma separated")
    parser.add_argument("--trials", type=int, default=40, help="snapshots per shape and size")
    parser.add_argument("--repeat", type=int, default=3,
                        help="plans per snapshot and side (the fastest counts)")
    parser.add_argument("--seed", type=int, default=21, help="random seed of the drawn snapshots")
    parser.add_argument("--replay", type=Path, action="append", default=[],
                        help="a folder of recorded snapshots (*.json, searched recursively): one more row")
    parser.add_argument("--cpu", type=int, default=None,
                        help="the core both workers are pinned to (default: the first this process may use)")
    parser.add_argument("--deadline-ms", type=float, default=PlannerConfig().deadline_ms,
                        help="the planner's deadline (default: planner.deadline_ms)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON objects, not a table")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.repeat < 1:
        parser.error("--trials and --repeat must be ≥ 1")
    shapes, sizes = shapes_and_sizes(parser, args.shapes, args.sizes)
    try:
        config = PlannerConfig(deadline_ms=args.deadline_ms, deadline_clock="cpu")
        base_tree = tree_of(args.base)
    except TreeError as exc:
        parser.error(str(exc))
    except ValueError as exc:
        parser.error(str(exc).splitlines()[0])
    missing = [folder for folder in args.replay if not folder.is_dir()]
    if missing:
        parser.error(f"--replay {missing[0]}: no such folder")
    if args.cpu is None:
        args.cpu = min(os.sched_getaffinity(0))
    if args.cpu not in os.sched_getaffinity(0):
        parser.error(f"--cpu {args.cpu} is not one of this process's cores {sorted(os.sched_getaffinity(0))}")
    os.sched_setaffinity(0, {args.cpu})  # the workers inherit it: one core, taken in turns
    sides = (Worker(base_tree, config), Worker(ROOT, config))
    try:
        rows = []
        for shape in shapes:
            for n, m in sizes:
                snapshots = list(drawn(shape, n, m, args.trials, args.seed))
                rows.append(versus(shape, f"{n}x{m}", snapshots, sides, args.repeat))
                progress = " ".join(str(cell) for cell in rows[-1].cells())
                print(progress, file=sys.stderr, flush=True)
        for folder in args.replay:
            snapshots = recorded(folder)
            label, size = f"replay {folder.name}", f"{len(snapshots)} snaps"
            rows.append(versus(label, size, snapshots, sides, args.repeat))
    finally:
        for worker in sides:
            worker.close()
    if args.json:
        print_json([asdict(row) for row in rows])
    else:
        print(format_table([row.cells() for row in rows], HEADERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
