"""Benchmark the TAO planner per snapshot shape (and on recorded snapshots); print one table.

Shapes (scripts/planner_bench/shapes.py): `ours` (credit on ≤ 1 node, all eligible), `multi`, `ties`,
`eligible`, `skewed`, `all` (the four at once), `everywhere` (credit on most nodes), `copies` (copies
written together), `replicated` (copies written together on one to all nodes), `adversarial`, `crowded`,
`degenerate`, `forks` (sessions of a few task templates: equal sizes, credits tied), `templates` (the
same as a live benchmark shows it: credit graded over each template's homes, sizes all different), `long`
(long contexts with aged copies on the replicas they ran on), `fleet` (a repository's system prompt cached
on most replicas, beside each session's own context), `clones` (bursts of identical forked children), `busy`
(`all` under load, every replica's used tokens held by acting and reasoning sessions: the policy's interrupt
rule runs).
`--replay DIR` adds every `*.json` snapshot under DIR (as dumped by `tao sim --dump-snapshots DIR` or the
coordinator's `--dump-snapshots DIR`).

Columns: CPU time of the whole `tao` policy call (`time.process_time`, robust to a busy machine),
p50 / p95 / p99 ms; `K proven`: plans whose certified bound's K equals their K; `exact`: plans whose
bound equals their objective (proven gap 0); `worst K gap`: the largest proven K gap, (K̄ − K) / K̄;
`vs MILP`: the first `--milp-samples` snapshots of each row solved for K by scipy's HiGHS (`mip_rel_gap`
0): how many plans reach the MILP's K, and the largest true shortfall in K; with `--milp-levels 4` the MILP
goes on to R, T and N (K fixed, then R, ...) and `lex` counts the plans equal to that whole lexicographic
optimum (the issue's "exact on all MILP checks"). `unproven vs MILP`: the same
for the first `--milp-unproven` plans of each row whose K is not proven: whether the plan or the bound is
short (issue 15's "no plan more than 0.5% short in K" is about the plan). A planner without bounds (older
versions) counts as proven exactly when it did not fall back.

    .venv/bin/python scripts/bench_planner.py [--shapes ours,all] [--sizes 32x4,160x8] [--trials 200]
        [--milp-samples 5] [--milp-unproven 0] [--milp-seconds 120] [--milp-levels 1|4] [--replay DIR]
        [--deadline-ms 30] [--deadline-clock cpu|wall] [--quantum-tokens 16] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from time import process_time
from typing import Iterable, Iterator

from planner_bench.reference import milp_lexicographic
from planner_bench.shapes import SHAPES
from tao_harness.cli.common import print_json
from tao_harness.config import PlannerConfig
from tao_harness.policies.tao import TaoPolicy
from tao_harness.tables import format_table
from tao_harness.types import Plan, Snapshot


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def k_gap(plan: Plan) -> float | None:
    """The plan's proven relative gap in K, or None when the planner gives no bound."""
    bound = getattr(plan, "bound", None)
    if bound is None:
        return 0.0 if not plan.fallback else None
    return (bound[0] - plan.objective[0]) / bound[0] if bound[0] else 0.0


def is_exact(plan: Plan) -> bool:
    bound = getattr(plan, "bound", None)
    return not plan.fallback if bound is None else tuple(bound) == tuple(plan.objective)


@dataclass(frozen=True, slots=True)
class MilpCheck:
    """Which plans of a row to check against the MILP's K*, and for how long each."""

    samples: int  # the first this many snapshots
    unproven: int  # the first this many plans whose K is not proven
    seconds: float  # HiGHS's time limit per snapshot (per level)
    levels: int = 1  # 1: K* only; 4: the whole lexicographic optimum (K*, R*, T*, N*)


@dataclass(frozen=True, slots=True)
class MilpOutcome:
    """How checked plans compare with the MILP's K*."""

    checked: int  # plans whose K* HiGHS proved
    at_optimum: int  # of which reach it
    worst_shortfall: float  # the largest (K* − K) / K*
    unsolved: int  # plans whose K* (with 4 levels: any level) HiGHS did not prove in its time
    lexicographic: int | None = None  # with 4 levels: plans equal to the whole optimum (K*, R*, T*, N*)

    def describe(self) -> str:
        if not self.checked and not self.unsolved:
            return "-"
        summary = f"{self.at_optimum}/{self.checked} at K*, worst {100 * self.worst_shortfall:.2f}%"
        if self.lexicographic is not None:
            summary += f", {self.lexicographic}/{self.checked} lex"
        return summary + (f" ({self.unsolved} MILP unsolved)" if self.unsolved else "")


@dataclass(frozen=True, slots=True)
class Row:
    """One shape and size (or one folder of recorded snapshots): what the planner did on its snapshots."""

    shape: str
    size: str
    snapshots: int
    cpu_ms: tuple[float, float, float]  # p50, p95, p99 of the policy call's CPU time
    k_proven: float  # share of plans whose bound's K equals their K
    exact: float  # share of plans whose bound equals their objective
    worst_k_gap: float | None  # the largest proven (K̄ − K) / K̄; None when some plan has no bound
    milp_samples: MilpOutcome  # the first `--milp-samples` snapshots
    milp_unproven: MilpOutcome  # the first `--milp-unproven` plans whose K is not proven
    repeat: int = 1  # plans per snapshot (`--repeat`): the CPU times are each snapshot's median

    def cells(self) -> list[object]:
        if not self.snapshots:
            return [self.shape, self.size, "-", "-", "-", "-", "-", "-", "-", "-"]
        gap = "unbounded" if self.worst_k_gap is None else f"{100 * self.worst_k_gap:.2f}%"
        return [self.shape, self.size, *self.cpu_ms, f"{100 * self.k_proven:.1f}%",
                f"{100 * self.exact:.1f}%", gap, self.milp_samples.describe(), self.milp_unproven.describe()]


HEADERS = ["shape", "size", "cpu p50", "cpu p95", "cpu p99", "K proven", "exact", "worst K gap",
           "vs MILP (K)", "unproven vs MILP"]


def bench_row(label: str, size: str, snapshots: Iterable[Snapshot], milp: MilpCheck, config: PlannerConfig,
              repeat: int = 1) -> Row:
    """The row of `snapshots`, each planned `repeat` times in a row: its CPU time is the median of them,
    and every plan counts in the shares (a plan at the deadline's edge proven in some passes only shows as
    a fraction); the MILP checks take the first pass's plans."""
    policy = TaoPolicy(config)
    cpu, gaps, exact = [], [], 0
    sampled: list[tuple[Snapshot, Plan]] = []
    unproven: list[tuple[Snapshot, Plan]] = []
    for trial, snapshot in enumerate(snapshots):
        times, plans = [], []
        for _ in range(repeat):
            started = process_time()
            plans.append(policy.plan(snapshot))
            times.append((process_time() - started) * 1000)
        cpu.append(statistics.median(times))
        gaps.extend(k_gap(plan) for plan in plans)
        exact += sum(is_exact(plan) for plan in plans)
        if trial < milp.samples:
            sampled.append((snapshot, plans[0]))
        if k_gap(plans[0]) != 0.0 and len(unproven) < milp.unproven:
            unproven.append((snapshot, plans[0]))
    count, known = len(cpu), [g for g in gaps if g is not None]
    p50, p95, p99 = (statistics.median(cpu), percentile(cpu, .95), percentile(cpu, .99)) if cpu else (0, 0, 0)
    return Row(
        shape=label, size=size, snapshots=count, cpu_ms=(round(p50, 2), round(p95, 2), round(p99, 2)),
        k_proven=sum(1 for g in gaps if g == 0.0) / max(len(gaps), 1), exact=exact / max(len(gaps), 1),
        worst_k_gap=max(known, default=0.0) if len(known) == len(gaps) else None,
        milp_samples=versus_milp(sampled, milp, policy), milp_unproven=versus_milp(unproven, milp, policy),
        repeat=repeat,
    )


def versus_milp(checked: list[tuple[Snapshot, Plan]], milp: MilpCheck, policy: TaoPolicy) -> MilpOutcome:
    """How many of the plans reach K* (HiGHS, `mip_rel_gap` 0), the largest true shortfall in K, and with
    4 levels how many equal the whole lexicographic optimum. Each plan's exact program is checked on the
    problem it solved (`Plan.solved`): a recorded snapshot's plan also admits overdue sessions and sessions
    that interrupts of acting ones made room for, which no MILP of the waiting pool accounts for (they
    made 31 of 39 plans of an independent 64 x 8 set look short of the lexicographic optimum)."""
    shortfalls, unsolved, lexicographic = [], 0, 0
    for snapshot, plan in checked:
        try:
            with _native_stdout_silenced():
                optimum = milp_lexicographic(policy.admission_problem(snapshot), milp.seconds,
                                             levels=milp.levels)
        except RuntimeError:
            unsolved += 1
            continue
        solved = plan.solved
        assert solved is not None  # a TaoPolicy plan always reports it
        k_star = optimum[0]
        shortfalls.append((k_star - solved[0]) / k_star if k_star else 0.0)
        lexicographic += tuple(solved[:milp.levels]) == optimum
    return MilpOutcome(len(shortfalls), sum(1 for s in shortfalls if s <= 0), max(shortfalls, default=0.0),
                       unsolved, lexicographic if milp.levels == 4 else None)


@contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """File descriptor 1 sent to /dev/null: HiGHS's MIP solver prints debugging lines there from C++
    ("HighsMipSolverData::transformNewIntegerFeasibleSolution ..."), whatever its output options, and they
    would land in the table."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def drawn(shape: str, sessions: int, nodes: int, trials: int, seed: int, quantum_tokens: int | None = None
          ) -> Iterable[Snapshot]:
    """`trials` snapshots of `shape`, planned in quanta of `quantum_tokens` when given (else the shape's)."""
    rng = random.Random(f"{seed}/{shape}/{sessions}x{nodes}")
    for _ in range(trials):
        snapshot = SHAPES[shape](rng, sessions, nodes)
        if quantum_tokens is not None:
            snapshot = replace(snapshot, params=replace(snapshot.params, quantum_tokens=quantum_tokens))
        yield snapshot


def recorded(folder: Path) -> list[Snapshot]:
    return [Snapshot.from_json(json.loads(path.read_text())) for path in sorted(folder.rglob("*.json"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="snapshots per shape and size")
    parser.add_argument("--milp-samples", type=int, default=3, help="snapshots per row checked by MILP")
    parser.add_argument("--milp-unproven", type=int, default=0,
                        help="plans per row whose K is not proven, checked by MILP (is the plan short, or "
                             "the bound?)")
    parser.add_argument("--milp-seconds", type=float, default=120.0,
                        help="HiGHS's time limit per checked snapshot (past it: counted as MILP unsolved)")
    parser.add_argument("--sizes", default="32x4,32x8,64x8,160x8", help="sessions x nodes, comma separated")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"of: {', '.join(SHAPES)}")
    parser.add_argument("--milp-levels", type=int, choices=(1, 4), default=1,
                        help="1: the MILP checks K only; 4: the whole lexicographic optimum (K, R, T, N), "
                             "slower (T is the hard level)")
    parser.add_argument("--replay", type=Path, action="append", default=[],
                        help="a folder of recorded snapshots (*.json, searched recursively)")
    parser.add_argument("--quantum-tokens", type=int, default=None,
                        help="plan the drawn snapshots in quanta of this many tokens (default: the shapes' "
                             "256); 16, vLLM's block size, makes rooms thousands of quanta, where each "
                             "node's knapsack costs the most")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--repeat", type=int, default=1,
                        help="plan each snapshot this many times in a row: its CPU time is the median, the "
                             "shares count every plan (on a shared machine one pass's p95 moves by ±15%%)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON objects, not a table")
    parser.add_argument("--deadline-ms", type=float, default=PlannerConfig().deadline_ms,
                        help="the planner's deadline (default: planner.deadline_ms)")
    parser.add_argument("--deadline-clock", choices=("cpu", "wall"), default="cpu",
                        help="what the deadline counts (default cpu: on a shared machine wall time depends "
                             "on the other processes; the live coordinator uses wall)")
    args = parser.parse_args(argv)
    try:
        config = PlannerConfig(deadline_ms=args.deadline_ms, deadline_clock=args.deadline_clock)
    except ValueError as exc:
        parser.error(str(exc).splitlines()[0])
    if min(args.trials, args.milp_samples, args.milp_unproven) < 0 or args.milp_seconds <= 0:
        parser.error("--trials, --milp-samples and --milp-unproven must be ≥ 0, --milp-seconds > 0")
    if args.repeat < 1:
        parser.error("--repeat must be ≥ 1")
    if args.quantum_tokens is not None and args.quantum_tokens < 1:
        parser.error("--quantum-tokens must be ≥ 1")
    milp = MilpCheck(args.milp_samples, args.milp_unproven, args.milp_seconds, args.milp_levels)
    shapes, sizes = shapes_and_sizes(parser, args.shapes, args.sizes)
    # as a coordinator starts (the TAO policy built, so the compiled kernels loaded): what the imports left
    # moved out of the collector's way, else the first full collection (~50 ms) lands in some snapshot's time
    TaoPolicy(config)
    gc.collect()
    gc.freeze()
    rows: list[Row] = []
    for shape in shapes:
        for n, m in sizes:
            snapshots = drawn(shape, n, m, args.trials, args.seed, args.quantum_tokens)
            rows.append(bench_row(shape, f"{n}x{m}", snapshots, milp, config, args.repeat))
            print(" ".join(str(cell) for cell in rows[-1].cells()), file=sys.stderr, flush=True)  # progress
    for folder in args.replay:
        snapshots = recorded(folder)
        rows.append(bench_row(f"replay {folder.name}", f"{len(snapshots)} snaps", snapshots, milp, config,
                              args.repeat))
        print(" ".join(str(cell) for cell in rows[-1].cells()), file=sys.stderr, flush=True)
    if args.json:
        print_json([asdict(row) for row in rows])
    else:
        print(format_table([row.cells() for row in rows], HEADERS))
    return 0


def shapes_and_sizes(parser: argparse.ArgumentParser, shapes: str, sizes: str
                     ) -> tuple[list[str], list[tuple[int, int]]]:
    """`--shapes` and `--sizes` (comma separated) parsed; an unknown shape or a bad size is the parser's
    one-line error (exit 2)."""
    names = [s for s in shapes.split(",") if s]
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape {unknown[0]!r}; known: {', '.join(SHAPES)}")
    try:
        return names, [parse_size(size) for size in sizes.split(",") if size]
    except ValueError as exc:
        parser.error(str(exc))


def parse_size(text: str) -> tuple[int, int]:
    """"160x8" as (sessions, nodes)."""
    parts = text.split("x")
    if len(parts) != 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"size {text!r} is not SESSIONSxNODES with both counts > 0 (e.g. 160x8)")
    return int(parts[0]), int(parts[1])


if __name__ == "__main__":
    sys.exit(main())
