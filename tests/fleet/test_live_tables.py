"""`tao bench live` results.md: tail columns, pool waits where the router reports them, the wait CDF."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tao_harness.fleet.bench import RunRecord, write_results
from tao_harness.fleet.driver import summarize
from tao_harness.fleet.plots import write_plots
from tao_harness.fleet.routers import RouterInfo
from tao_harness.fleet.session import SessionResult, TurnResult


def session(name: str, ttfts: list[float]) -> SessionResult:
    turns = [TurnResult(started_at=100.0 + i, ttft_s=t, latency_s=t + 1.0, prompt_tokens=1000, cached_tokens=500,
                        completion_tokens=50, tool_end_to_first_token_s=None, ok=True) for i, t in enumerate(ttfts)]
    return SessionResult(name, started_at=100.0, ended_at=110.0, turns=turns)


def test_tail_columns_and_pool_waits_only_where_reported(tmp_path: Path) -> None:
    tao_results = [session("a", [0.5] * 99 + [30.0])]
    peer_results = [session("a", [1.0] * 98 + [50.0, 400.0])]
    tao = summarize(tao_results, 10.0, 100.0, 110.0)
    assert (tao.p99_ttft_s, tao.max_ttft_s) == (0.5, 30.0)
    records = [
        RunRecord("tao", 16, repeat, replace(tao, max_pool_wait_s=29.0 + repeat, waits_over_bound=0), tao_results,
                  pool_waits=(0.0, 0.0, 29.0 + repeat))
        for repeat in range(2)
    ] + [RunRecord("vllm-router-ca", 16, repeat, summarize(peer_results, 10.0, 100.0, 110.0), peer_results)
         for repeat in range(2)]
    infos = {"tao": RouterInfo("tao", "ours"), "vllm-router-ca": RouterInfo("vllm-router-ca", "theirs")}
    text = write_results(records, infos, tmp_path, "t").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| router"))
    assert "p99 TTFT (s)" in header and "max TTFT (s)" in header and "max pool wait (s)" in header
    columns = [c.strip() for c in header.strip("|").split("|")]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| router")}
    wait = columns.index("max pool wait (s)")
    assert rows["tao"][wait] == "29.5 [29–30]" and rows["vllm-router-ca"][wait] == "–"
    assert rows["TAO vs best other"][wait] == "n/a"
    assert rows["tao"][columns.index("max TTFT (s)")] == "**30 [30–30]**"
    paths = write_plots([r for r in records if r.repeat == 0], 10.0, tmp_path, "t")
    assert {p.name for p in paths} == {"wait_cdf.png", "ttft_cdf.png", "in_flight.png"}
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
