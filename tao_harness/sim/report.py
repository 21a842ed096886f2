"""`tao bench compare` output: results.md tables like the paper's Table 1, results.csv, and the plots.

One markdown table per (workload, workers) block: a row per policy, the best value of each column in
bold, and a last row with TAO against the best *baseline* of that column, in percent, positive = TAO
better (the paper's convention: latency 185.4 s vs 253.2 s is +26.8%). Baselines are the policies whose
name does not start with `tao` (the ablations are variants of TAO, not competitors). Admissions and
interrupts are counts with no better direction: never bold, no percentage.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tao_harness.sim.metrics import SimMetrics

TAO = "tao"


@dataclass(frozen=True)
class Column:
    """One results.md column: a `SimMetrics` field, its header, format and which direction is better."""

    key: str
    header: str
    digits: int
    better: str | None  # "lower", "higher" or None (no best)


COLUMNS: tuple[Column, ...] = (
    Column("mean_latency_s", "Latency (s) ↓", 1, "lower"),
    Column("mean_ttft_s", "TTFT (s) ↓", 3, "lower"),
    Column("decode_tok_s", "Decode (tok/s) ↑", 1, "higher"),
    Column("prefix_hit_rate", "Prefix hit ↑", 3, "higher"),
    Column("makespan_s", "Makespan (s) ↓", 1, "lower"),
    Column("mean_tool_end_to_first_token_s", "Tool end→first token (s) ↓", 3, "lower"),
    Column("p99_ttft_s", "p99 TTFT (s) ↓", 2, "lower"),
    Column("max_ttft_s", "max TTFT (s) ↓", 1, "lower"),
    Column("p99_pause_wait_s", "p99 pool wait (s) ↓", 2, "lower"),
    Column("max_pause_wait_s", "max pool wait (s) ↓", 1, "lower"),
    Column("admissions", "Admissions", 0, None),
    Column("interrupts", "Interrupts", 0, None),
)


@dataclass(frozen=True)
class BenchSettings:
    """What every run of one comparison shares."""

    replicas: int
    profile: str
    seed: int
    sessions: int
    """Sessions per trace (all of them for a trace file)."""


@dataclass(frozen=True)
class BenchRun:
    """One simulated (workload, workers, policy) run, or its failure."""

    workload: str
    """Workload name, or the trace file's name."""
    workers: int
    policy: str
    metrics: SimMetrics | None
    """None when the run failed; `error` then says why."""
    timeline: tuple[tuple[float, int], ...] = ()
    """(virtual time, requests running on engines) at every change."""
    ttft_samples: tuple[float, ...] = ()
    wait_samples: tuple[float, ...] = ()
    """Pool (pause) waits, seconds."""
    wall_s: float = 0.0
    """Real seconds the simulation took."""
    error: str | None = None


def blocks(runs: Sequence[BenchRun]) -> list[tuple[str, int, list[BenchRun]]]:
    """Runs grouped by (workload, workers), in first-seen workload order and ascending workers."""
    order: dict[str, int] = {}
    grouped: dict[tuple[str, int], list[BenchRun]] = {}
    for run in runs:
        order.setdefault(run.workload, len(order))
        grouped.setdefault((run.workload, run.workers), []).append(run)
    keys = sorted(grouped, key=lambda k: (order[k[0]], k[1]))
    return [(workload, workers, grouped[(workload, workers)]) for workload, workers in keys]


def _value(run: BenchRun, column: Column) -> float | None:
    if run.metrics is None:
        return None
    value = float(getattr(run.metrics, column.key))
    return value if math.isfinite(value) else None


def _shown(run: BenchRun, column: Column) -> float | None:
    # Best is judged on the printed value, so equal-looking cells are bold together.
    value = _value(run, column)
    return None if value is None else round(value, column.digits)


def _best(values: Sequence[float | None], better: str) -> float | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return min(present) if better == "lower" else max(present)


def tao_vs_best_baseline(runs: Sequence[BenchRun], column: Column) -> float | None:
    """TAO's improvement over the best baseline in percent (positive = better); None if not defined."""
    if column.better is None:
        return None
    tao = next((_value(r, column) for r in runs if r.policy == TAO), None)
    best = _best([_value(r, column) for r in runs if not r.policy.startswith(TAO)], column.better)
    if tao is None or best is None or best == 0:
        return None
    gain = (best - tao) / best if column.better == "lower" else (tao - best) / best
    return 100.0 * gain


def _cell(value: float | None, column: Column, bold: bool) -> str:
    if value is None:
        return "-"
    text = f"{value:.{column.digits}f}" if column.digits else f"{int(round(value))}"
    return f"**{text}**" if bold else text


def format_block(workload: str, workers: int, runs: Sequence[BenchRun]) -> str:
    """One markdown table: policies as rows, COLUMNS as columns, the % row last."""
    headers = ["Scheduler", *(c.header for c in COLUMNS)]
    lines = [
        f"### {workload} · {workers} workers",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(["---"] + ["---:"] * len(COLUMNS)) + "|",
    ]
    bests = [_best([_shown(r, c) for r in runs], c.better) if c.better else None for c in COLUMNS]
    for run in runs:
        if run.metrics is None:
            error = (run.error or "unknown error").replace("|", "/")  # a pipe would split the cell
            lines.append(f"| {run.policy} | failed: {error} |" + " |" * (len(COLUMNS) - 1))
            continue
        cells = [
            _cell(_value(run, c), c, best is not None and _shown(run, c) == best)
            for c, best in zip(COLUMNS, bests, strict=True)
        ]
        lines.append(f"| {run.policy} | " + " | ".join(cells) + " |")
    if any(r.policy == TAO for r in runs) and any(not r.policy.startswith(TAO) for r in runs):
        gains = [tao_vs_best_baseline(runs, c) for c in COLUMNS]
        lines.append(
            "| TAO vs best baseline | " + " | ".join("-" if g is None else f"{g:+.1f}%" for g in gains) + " |"
        )
    return "\n".join(lines)


def format_markdown(runs: Sequence[BenchRun], settings: BenchSettings) -> str:
    """The whole results.md."""
    header = [
        "# Policy comparison (simulated)",
        "",
        f"{settings.replicas} replicas · profile `{settings.profile}` · seed {settings.seed} · "
        f"{settings.sessions} sessions per trace. Best value per column in **bold**; the last row is TAO vs "
        "the best baseline (policies not named `tao*`) in %, positive = TAO better.",
    ]
    body = [format_block(workload, workers, group) for workload, workers, group in blocks(runs)]
    return "\n\n".join(["\n".join(header), *body]) + "\n"


def write_csv(runs: Sequence[BenchRun], settings: BenchSettings, path: Path) -> None:
    """One row per run with every SimMetrics field (its `sessions` is the run's own count); failed runs keep
    their error."""
    metric_keys = list(SimMetrics.__dataclass_fields__)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(
            [
                "workload",
                "workers",
                "policy",
                "replicas",
                "profile",
                "seed",
                "wall_s",
                "error",
                *metric_keys,
            ]
        )
        for run in runs:
            values = run.metrics.to_json() if run.metrics is not None else {}
            writer.writerow(
                [
                    run.workload,
                    run.workers,
                    run.policy,
                    settings.replicas,
                    settings.profile,
                    settings.seed,
                    round(run.wall_s, 3),
                    run.error or "",
                    *(values.get(k, "") for k in metric_keys),
                ]
            )


def write_tables(runs: Sequence[BenchRun], settings: BenchSettings, out_dir: Path) -> list[Path]:
    """results.md and results.csv in `out_dir` (cheap: rewritten after every run of a long comparison)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown, table = out_dir / "results.md", out_dir / "results.csv"
    markdown.write_text(format_markdown(runs, settings), encoding="utf-8")
    write_csv(runs, settings, table)
    return [markdown, table]
