"""The comparison's PNG plots: running requests over time, TTFT and pool-wait CDFs (per block), decode throughput
bars; and the whole report, its tables (`tao_harness.sim.report`) with these plots.

matplotlib is imported and switched to the Agg backend inside the function that draws, so importing
this module (or the report) never touches a display or matplotlib's global state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tao_harness.sim.report import BenchRun, BenchSettings, blocks, write_tables


REFERENCE_POLICY = "tao"  # drawn in grey in every other policy's panel of the running-requests plot
_PANEL_COLUMNS = 3


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "trace"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def policy_colours(policies: Sequence[str]) -> dict[str, Any]:
    """A distinct colour per policy, the same in every plot of a comparison (up to 20 policies).

    matplotlib's default cycle has 10 colours, so the 11th policy would repeat the first. tab20 holds
    10 hues in a dark and a light shade: all dark shades first, then the light ones.
    """
    import matplotlib

    table = matplotlib.colormaps["tab20"].colors
    order = [*table[0::2], *table[1::2]]
    return {policy: order[i % len(order)] for i, policy in enumerate(dict.fromkeys(policies))}


def _legend(ax: Any, ncol: int) -> None:
    # Failed runs draw nothing; an empty legend would only warn.
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", ncol=ncol)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def running_figure(plt: Any, workload: str, workers: int, runs: Sequence[BenchRun],
                   colours: dict[str, Any]) -> Any:
    """Requests running on the engines over time: a small panel per policy on shared axes (the 11
    registered policies' lines overlaid in one were unreadable), TAO in grey behind each other policy."""
    drawn = [run for run in runs if run.timeline]
    columns = min(_PANEL_COLUMNS, max(1, len(drawn)))
    rows = max(1, math.ceil(len(drawn) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 2.2 * rows + 0.8), sharex=True,
                             sharey=True, squeeze=False)
    reference = next((run for run in drawn if run.policy == REFERENCE_POLICY), None)
    for ax, run in zip(axes.flat, drawn):
        if reference is not None and run is not reference:
            ax.step(*zip(*reference.timeline), where="post", linewidth=1, color="0.75")
        ax.step(*zip(*run.timeline), where="post", linewidth=1, color=colours[run.policy])
        ax.set_title(run.policy, fontsize="small")
    for ax in axes.flat[len(drawn):]:
        ax.set_visible(False)
    fig.supxlabel("time (s)")
    fig.supylabel("running requests")
    grey = f" (grey: {REFERENCE_POLICY})" if reference is not None and len(drawn) > 1 else ""
    fig.suptitle(f"{workload} · {workers} workers: requests running on engines{grey}")
    return fig


def _running(plt: Any, workload: str, workers: int, runs: Sequence[BenchRun], out_dir: Path,
             colours: dict[str, Any]) -> Path:
    fig = running_figure(plt, workload, workers, runs, colours)
    return _save(plt, fig, out_dir / f"running_{_slug(workload)}_{workers}.png")


def cdf_plot(plt: Any, series: Sequence[tuple[str, Sequence[float]]], what: str, title: str, path: Path,
             colours: dict[str, Any] | None = None) -> Path:
    """Empirical CDFs of one quantity, one line per labelled sample set; the tail on a log scale."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, values in series:
        if len(values):
            samples = np.sort(np.asarray(values))
            ax.plot(samples, np.arange(1, samples.size + 1) / samples.size, label=label, linewidth=1,
                    color=(colours or {}).get(label))
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel(what)
    ax.set_ylabel("fraction of requests")
    ax.set_title(title)
    _legend(ax, ncol=1)
    return _save(plt, fig, path)


def _cdfs(plt: Any, workload: str, workers: int, runs: Sequence[BenchRun], out_dir: Path,
          colours: dict[str, Any]) -> list[Path]:
    slug = f"{_slug(workload)}_{workers}"
    return [
        cdf_plot(plt, [(r.policy, r.ttft_samples) for r in runs], "TTFT (s)",
                 f"{workload} · {workers} workers: TTFT CDF", out_dir / f"ttft_cdf_{slug}.png", colours),
        cdf_plot(plt, [(r.policy, r.wait_samples) for r in runs], "pool wait (s)",
                 f"{workload} · {workers} workers: pool wait CDF", out_dir / f"wait_cdf_{slug}.png", colours),
    ]


def _throughput(plt: Any, workload: str, runs: Sequence[BenchRun], out_dir: Path,
                colours: dict[str, Any]) -> Path:
    workers = sorted({r.workers for r in runs})
    policies = list(dict.fromkeys(r.policy for r in runs))
    value = {(r.workers, r.policy): r.metrics.decode_tok_s for r in runs if r.metrics is not None}
    width = 0.8 / max(1, len(policies))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(workers) * len(policies)), 4))
    for i, policy in enumerate(policies):
        heights = [value.get((w, policy), 0.0) for w in workers]
        ax.bar(np.arange(len(workers)) + i * width, heights, width, label=policy, color=colours[policy])
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
    colours = policy_colours([r.policy for r in runs])
    written: list[Path] = []
    for workload, workers, group in blocks(runs):
        written.append(_running(plt, workload, workers, group, out_dir, colours))
        written += _cdfs(plt, workload, workers, group, out_dir, colours)
    for workload in dict.fromkeys(r.workload for r in runs):
        written.append(_throughput(plt, workload, [r for r in runs if r.workload == workload], out_dir, colours))
    return written


def write_report(runs: Sequence[BenchRun], settings: BenchSettings, out_dir: Path) -> list[Path]:
    """results.md, results.csv and the PNG plots in `out_dir`; returns the files written."""
    return [*write_tables(runs, settings, out_dir), *write_plots(runs, out_dir)]
