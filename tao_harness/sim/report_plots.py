"""The comparison's PNG plots: running requests over time, TTFT CDF (per block), decode throughput bars.

matplotlib is imported and switched to the Agg backend inside the function that draws, so importing
this module (or the report) never touches a display or matplotlib's global state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tao_harness.sim.report import BenchRun, blocks


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "trace"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _legend(ax: Any, ncol: int) -> None:
    # Failed runs draw nothing; an empty legend would only warn.
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", ncol=ncol)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _running(plt: Any, workload: str, workers: int, runs: Sequence[BenchRun], out_dir: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        if run.timeline:
            times, counts = zip(*run.timeline, strict=True)
            ax.step(times, counts, where="post", label=run.policy, linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("running requests")
    ax.set_title(f"{workload} · {workers} workers: requests running on engines")
    _legend(ax, ncol=2)
    return _save(plt, fig, out_dir / f"running_{_slug(workload)}_{workers}.png")


def _ttft_cdf(plt: Any, workload: str, workers: int, runs: Sequence[BenchRun], out_dir: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        if run.ttft_samples:
            samples = np.sort(np.asarray(run.ttft_samples))
            ax.plot(samples, np.arange(1, samples.size + 1) / samples.size, label=run.policy, linewidth=1)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{workload} · {workers} workers: TTFT CDF")
    _legend(ax, ncol=1)
    return _save(plt, fig, out_dir / f"ttft_cdf_{_slug(workload)}_{workers}.png")


def _throughput(plt: Any, workload: str, runs: Sequence[BenchRun], out_dir: Path) -> Path:
    workers = sorted({r.workers for r in runs})
    policies = list(dict.fromkeys(r.policy for r in runs))
    value = {(r.workers, r.policy): r.metrics.decode_tok_s for r in runs if r.metrics is not None}
    width = 0.8 / max(1, len(policies))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(workers) * len(policies)), 4))
    for i, policy in enumerate(policies):
        heights = [value.get((w, policy), 0.0) for w in workers]
        ax.bar(np.arange(len(workers)) + i * width, heights, width, label=policy)
    ax.set_xticks(
        np.arange(len(workers)) + width * (len(policies) - 1) / 2, [f"{w} workers" for w in workers]
    )
    ax.set_ylabel("decode tok/s")
    ax.set_title(f"{workload}: decode throughput")
    _legend(ax, ncol=2)
    return _save(plt, fig, out_dir / f"throughput_{_slug(workload)}.png")


def write_plots(runs: Sequence[BenchRun], out_dir: Path) -> list[Path]:
    """Every plot for `runs` into `out_dir`; returns the files written."""
    plt = _pyplot()
    written: list[Path] = []
    for workload, workers, group in blocks(runs):
        written.append(_running(plt, workload, workers, group, out_dir))
        written.append(_ttft_cdf(plt, workload, workers, group, out_dir))
    for workload in dict.fromkeys(r.workload for r in runs):
        written.append(_throughput(plt, workload, [r for r in runs if r.workload == workload], out_dir))
    return written
