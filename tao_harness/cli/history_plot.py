"""`tao history plot`: per family, a log-scale duration histogram beside its empirical CDF."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

_MIN_DURATION_S = 1e-4  # log-scale axes need a positive floor


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
            low, high = values[0], max(values[-1], values[0] * 1.01)
            bins = np.geomspace(low, high, num=min(40, max(5, len(values) // 4)))
            row[0].hist(values, bins=bins, color="tab:blue", alpha=0.8)
            row[0].set_xscale("log")
            row[0].set_ylabel("calls")
            row[0].set_title(f"{family}  (n={len(values)}, p50={np.median(values):.3g} s)", fontsize=9)
            row[1].step(values, np.arange(1, len(values) + 1) / len(values), where="post", color="tab:orange")
            row[1].set_xscale("log")
            row[1].set_ylim(0, 1.02)
            row[1].set_ylabel("CDF")
            row[1].grid(True, which="both", alpha=0.3)
        for axis in axes.flat:
            axis.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on narrow log ranges
        for column in range(2):
            axes[-1][column].set_xlabel("duration (s)")
        figure.tight_layout()
        output.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(output, dpi=100)
    finally:
        plt.close(figure)
    return families
