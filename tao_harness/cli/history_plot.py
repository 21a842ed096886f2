"""`tao history plot`: per family, a log-scale duration histogram beside its empirical CDF."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from tao_harness.readiness.accuracy_report import AccuracyReport

_MIN_DURATION_S = 1e-4  # log-scale axes need a positive floor
_MIN_SPAN = 20.0  # any log range this wide (a factor) holds a power of ten, so the axis gets a label


def _axis_range(low: float, high: float) -> tuple[float, float]:
    """Log-axis limits around [low, high], at least `_MIN_SPAN` wide so a labelled decade tick shows."""
    low, high = low / 1.5, high * 1.5
    if high / low < _MIN_SPAN:
        middle = float(np.sqrt(low * high))
        low, high = middle / np.sqrt(_MIN_SPAN), middle * np.sqrt(_MIN_SPAN)
    return low, high


def plot_durations(samples: Iterable[tuple[str, float]], output: Path, *, max_families: int = 8) -> list[str]:
    """Write one row of (histogram, CDF) per family, most frequent first; return the families drawn."""
    import matplotlib

    matplotlib.use("Agg")  # chosen here, not at import: importing this module must not touch global state
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    by_family: dict[str, list[float]] = {}
    for family, duration in samples:
        by_family.setdefault(family, []).append(max(duration, _MIN_DURATION_S))
    counts = Counter({family: len(values) for family, values in by_family.items()})
    families = [family for family, _ in counts.most_common(max(1, max_families))]

    figure, axes = plt.subplots(len(families), 2, figsize=(11, 2.6 * len(families)), squeeze=False)
    try:
        for row, family in zip(axes, families, strict=True):
            values = np.sort(np.asarray(by_family[family]))
            low, high = _axis_range(values[0], values[-1])
            bins = np.geomspace(low, high, num=min(40, max(10, len(values) // 4)))
            row[0].hist(values, bins=bins, color="tab:blue", alpha=0.8)
            row[0].set_ylabel("calls")
            row[0].set_title(f"{family}  (n={len(values)}, p50={np.median(values):.3g} s)", fontsize=9)
            # The CDF starts at 0 on the left edge and ends at 1 on the right one, so even a family with
            # a single call draws its step.
            cdf = np.concatenate([[0.0], np.arange(1, len(values) + 1) / len(values), [1.0]])
            row[1].step(np.concatenate([[low], values, [high]]), cdf, where="post", color="tab:orange")
            row[1].plot(values, cdf[1:-1], ".", color="tab:orange")
            row[1].set_ylim(0, 1.02)
            for axis in row:
                axis.set_xscale("log")
                axis.set_xlim(low, high)
            row[1].set_ylabel("CDF")
            row[1].grid(True, which="both", alpha=0.3)
        for axis in axes.flat:
            axis.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on narrow log ranges
            axis.set_xlabel("duration (s)")
        figure.tight_layout()
        figure.savefig(output, dpi=100)
    finally:
        plt.close(figure)
    return families


def plot_accuracy(report: AccuracyReport, output: Path) -> None:
    """Reliability diagram of P(return within H | elapsed) beside MAE per harness and predictor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert report.overall is not None
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        filled = [b for b in report.overall.reliability if b.n]
        left.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
        left.plot([b.mean_p for b in filled], [b.observed for b in filled], marker="o", label="forecast")
        for b in filled:
            left.annotate(str(b.n), (b.mean_p or 0.0, b.observed or 0.0), fontsize=7, xytext=(3, -9),
                          textcoords="offset points")
        brier = report.overall.predictors["forecast"].brier
        left.set(xlabel=f"forecast P(return within {report.horizon_s:g} s | elapsed)", ylabel="observed share",
                 title=f"readiness calibration (Brier {brier:.3f})", xlim=(0, 1), ylim=(0, 1.02))
        left.legend(loc="upper left")
        groups = {"all": report.overall, **report.by_harness}
        names = list(report.overall.predictors)
        width = 0.8 / len(names)
        for index, name in enumerate(names):
            positions = np.arange(len(groups)) + index * width
            right.bar(positions, [g.predictors[name].mae_s for g in groups.values()], width, label=name)
        right.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, list(groups), fontsize=8)
        right.set(ylabel="MAE (s)", yscale="log", title="duration MAE by harness (replayed in time order)")
        right.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(output, dpi=100)
    finally:
        plt.close(figure)
