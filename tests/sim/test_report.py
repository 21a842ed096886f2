"""results.md / results.csv / plots from hand-made results: bold best, the % row, failures, files."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from tao_harness.sim.metrics import SimMetrics
from tao_harness.sim.report import (
    COLUMNS,
    BenchRun,
    BenchSettings,
    format_block,
    format_markdown,
    tao_vs_best_baseline,
)
from tao_harness.sim.report_plots import write_report

SETTINGS = BenchSettings(replicas=2, profile="qwen3-32b-2xh100", seed=0, sessions=10)
# Every field zero first, so a metric added to SimMetrics later does not break these hand-made results.
_ZEROS = {name: 0 for name in SimMetrics.__dataclass_fields__}
BASE = replace(
    SimMetrics(**_ZEROS),
    mean_latency_s=100.0,
    mean_ttft_s=0.5,
    decode_tok_s=1000.0,
    prefix_hit_rate=0.9,
    makespan_s=900.0,
    mean_tool_end_to_first_token_s=0.6,
    mean_pause_wait_s=0.2,
    admissions=50,
    interrupts=4,
    sessions=10,
)


def _run(policy: str, workers: int = 16, workload: str = "swe-lite", **metrics: float) -> BenchRun:
    return BenchRun(
        workload,
        workers,
        policy,
        replace(BASE, **metrics),
        timeline=((0.0, 0), (1.0, 3), (5.0, 1)),
        ttft_samples=(0.1, 0.2, 0.4),
        wait_samples=(0.0, 0.0, 3.0),
        wall_s=0.5,
    )


# The paper's SWE-Lite 64-worker cell: latency vs vLLM CA, TTFT vs Dynamo, decode vs vLLM CA.
PAPER = [
    _run("dynamo", mean_latency_s=269.8, mean_ttft_s=0.351, decode_tok_s=1548.5),
    _run("vllm-ca", mean_latency_s=253.2, mean_ttft_s=0.410, decode_tok_s=1561.3),
    _run(
        "tao-bfd", mean_latency_s=150.0, mean_ttft_s=0.100, decode_tok_s=3000.0
    ),  # an ablation, not a baseline
    _run("tao", mean_latency_s=185.4, mean_ttft_s=0.224, decode_tok_s=2021.5, interrupts=9),
]


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| Scheduler"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def test_percent_row_reproduces_the_papers_convention() -> None:
    gains = {c.key: tao_vs_best_baseline(PAPER, c) for c in COLUMNS}
    assert gains["mean_latency_s"] == pytest.approx(26.8, abs=0.05)
    assert gains["mean_ttft_s"] == pytest.approx(36.2, abs=0.1)  # (0.351-0.224)/0.351
    assert gains["decode_tok_s"] == pytest.approx(29.5, abs=0.05)
    assert gains["admissions"] is None and gains["interrupts"] is None
    last = _rows(format_block("swe-lite", 64, PAPER))["TAO vs best baseline"]
    assert last[:3] == ["+26.8%", "+36.2%", "+29.5%"]
    assert last[-2:] == ["-", "-"]  # admissions, interrupts


def test_best_value_per_column_is_bold_and_counts_never_are() -> None:
    rows = _rows(format_block("swe-lite", 64, PAPER))
    assert rows["tao-bfd"][0] == "**150.0**"  # best latency overall, even though not a baseline
    assert rows["tao"][0] == "185.4"
    assert rows["tao-bfd"][2] == "**3000.0**"
    assert all(
        cell == "**0.900**" for cell in (rows[p][3] for p in rows if p != "TAO vs best baseline")
    )  # ties
    assert "**" not in rows["tao"][-2] + rows["tao"][-1]
    assert rows["tao"][-1] == "9"


def test_tail_columns_show_p99_and_max_ttft_and_pool_wait() -> None:
    runs = [_run("vllm-ca", p99_ttft_s=40.0, max_ttft_s=300.0, p99_pause_wait_s=0.0, max_pause_wait_s=0.0),
            _run("tao", p99_ttft_s=10.0, max_ttft_s=35.5, p99_pause_wait_s=8.0, max_pause_wait_s=31.25)]
    headers = format_block("w", 8, runs).splitlines()[2]
    for header in ("p99 TTFT (s)", "max TTFT (s)", "p99 pool wait (s)", "max pool wait (s)"):
        assert header in headers
    rows = _rows(format_block("w", 8, runs))
    assert rows["tao"][6:10] == ["**10.00**", "**35.5**", "8.00", "31.2"]
    assert rows["TAO vs best baseline"][6:8] == ["+75.0%", "+88.2%"]


def test_a_losing_tao_gets_a_negative_percentage() -> None:
    runs = [_run("thunderagent", decode_tok_s=876.1), _run("tao", decode_tok_s=798.6)]
    decode = next(c for c in COLUMNS if c.key == "decode_tok_s")
    assert tao_vs_best_baseline(runs, decode) == pytest.approx(-8.8, abs=0.05)
    assert _rows(format_block("terminal-bench", 16, runs))["TAO vs best baseline"][2] == "-8.8%"


def test_no_percent_row_without_tao_or_without_a_baseline() -> None:
    assert "TAO vs best baseline" not in format_block("w", 16, [_run("vllm-ca"), _run("dynamo")])
    assert "TAO vs best baseline" not in format_block("w", 16, [_run("tao"), _run("tao-bfd")])


def test_markdown_has_one_block_per_workload_and_workers_in_order() -> None:
    runs = [_run("tao", 32), _run("tao", 16), _run("tao", 16, "terminal-bench"), _run("vllm-ca", 16)]
    text = format_markdown(runs, SETTINGS)
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert titles == [
        "### swe-lite · 16 workers",
        "### swe-lite · 32 workers",
        "### terminal-bench · 16 workers",
    ]
    assert "2 replicas" in text and "`qwen3-32b-2xh100`" in text


def test_failed_run_is_shown_and_does_not_break_the_table() -> None:
    failed = BenchRun("swe-lite", 16, "smetric", None, error="SimError: stuck")
    rows = _rows(format_block("swe-lite", 16, [*PAPER, failed]))
    assert rows["smetric"][0] == "failed: SimError: stuck"
    assert rows["TAO vs best baseline"][0] == "+26.8%"


def test_write_report_writes_markdown_csv_and_plots(tmp_path: Path) -> None:
    runs = [*PAPER, BenchRun("swe-lite", 16, "smetric", None, error="boom")]
    files = write_report(runs, SETTINGS, tmp_path / "out")
    names = sorted(p.name for p in files)
    assert names == [
        "results.csv",
        "results.md",
        "running_swe-lite_16.png",
        "throughput_swe-lite.png",
        "ttft_cdf_swe-lite_16.png",
        "wait_cdf_swe-lite_16.png",
    ]
    for path in files:
        assert path.stat().st_size > 0
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "out" / "results.md").read_text() == format_markdown(runs, SETTINGS)
    with (tmp_path / "out" / "results.csv").open() as handle:
        header = next(csv.reader(handle))
        handle.seek(0)
        rows = list(csv.DictReader(handle))
    assert len(header) == len(set(header)), header  # a column named twice hides one of them
    assert len(rows) == 5
    tao = next(r for r in rows if r["policy"] == "tao")
    assert float(tao["decode_tok_s"]) == pytest.approx(2021.5)
    assert tao["replicas"] == "2" and tao["workers"] == "16"
    assert next(r for r in rows if r["policy"] == "smetric")["error"] == "boom"


def test_values_that_print_equal_are_bold_together() -> None:
    runs = [
        _run("a", mean_latency_s=234.5001),
        _run("b", mean_latency_s=234.4999),
        _run("c", mean_latency_s=240.0),
    ]
    rows = _rows(format_block("w", 8, runs))
    assert rows["a"][0] == rows["b"][0] == "**234.5**"
    assert rows["c"][0] == "240.0"


def test_every_policy_gets_its_own_colour() -> None:
    from tao_harness.policies.registry import policy_names
    from tao_harness.sim.report_plots import policy_colours

    names = list(policy_names())
    assert len(names) > 10  # more than matplotlib's default colour cycle holds
    colours = policy_colours(names)
    assert set(colours) == set(names) and len(set(colours.values())) == len(names)


def test_running_requests_are_small_multiples_with_tao_behind_each_other_policy() -> None:
    from tao_harness.policies.registry import policy_names
    from tao_harness.sim.report_plots import _pyplot, policy_colours, running_figure

    policies = policy_names()  # all 11: one plot's overlaid lines were unreadable
    plt = _pyplot()
    fig = running_figure(plt, "swe-lite", 16, [_run(p) for p in policies], policy_colours(policies))
    try:
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.lines]
        assert [ax.get_title() for ax in panels] == list(policies)
        assert [len(ax.lines) for ax in panels] == [1 if p == "tao" else 2 for p in policies]
    finally:
        plt.close(fig)
