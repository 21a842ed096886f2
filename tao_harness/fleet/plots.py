"""Plots of a live fleet benchmark, one line per router: TTFT CDF, in-flight requests over time, and the
CDF of pool waits as the routers that report them (TAO's coordinator) measured them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tao_harness.fleet.session import SessionResult

if TYPE_CHECKING:
    from tao_harness.fleet.bench import RunRecord


def in_flight(results: Sequence[SessionResult], time_scale: float) -> tuple[list[float], list[int]]:
    """Step function of LLM requests in flight (emulated seconds from the first request)."""
    edges = [(t.started_at, 1) for r in results for t in r.turns]
    edges += [(t.started_at + t.latency_s / time_scale, -1) for r in results for t in r.turns]
    if not edges:
        return [], []
    edges.sort()
    origin = edges[0][0]
    times, counts, level = [], [], 0
    for at, step in edges:
        level += step
        times.append((at - origin) * time_scale)
        counts.append(level)
    return times, counts


def write_plots(records: Sequence[RunRecord], time_scale: float, out: Path, title: str) -> list[Path]:
    """One run per router (the caller picks which) into `out`; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tao_harness.sim.report_plots import cdf_plot

    runs = {r.router: r.results for r in records}
    paths = [cdf_plot(plt, [(r.router, r.pool_waits) for r in records if r.pool_waits], "pool wait (emulated s)",
                      f"Pool wait CDF — {title}", out / "wait_cdf.png")]
    figure, axis = plt.subplots(figsize=(7, 4))
    for router, results in runs.items():
        ttfts = sorted(t.ttft_s for r in results for t in r.turns if t.ttft_s is not None)
        if ttfts:
            axis.step(ttfts, [(i + 1) / len(ttfts) for i in range(len(ttfts))], where="post", label=router)
    axis.set(xlabel="TTFT (emulated s)", ylabel="fraction of requests", title=f"TTFT CDF — {title}")
    axis.set_xscale("log")
    axis.legend()
    figure.tight_layout()
    paths.append(out / "ttft_cdf.png")
    figure.savefig(paths[-1], dpi=120)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(7, 4))
    for router, results in runs.items():
        times, counts = in_flight(results, time_scale)
        axis.step(times, counts, where="post", label=router)
    axis.set(xlabel="emulated time (s)", ylabel="LLM requests in flight", title=f"Load over time — {title}")
    axis.legend()
    figure.tight_layout()
    paths.append(out / "in_flight.png")
    figure.savefig(paths[-1], dpi=120)
    plt.close(figure)
    return paths
