"""Capacity and load, as `tao coordinator` reads them from real vLLM's /metrics (single engine and DP2),
and the coordinator naming a replica whose usage carries no cached tokens."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import openai
import pytest

from .cluster import cluster
from .conftest import VllmServer
from .metrics import samples

pytestmark = pytest.mark.real_vllm


def test_capacity_is_one_engines_kv_cache_also_on_a_data_parallel_server(
        tmp_path: Path, vllm_single: VllmServer, vllm_dp2: VllmServer) -> None:
    single = samples(vllm_single.metrics(), "vllm:cache_config_info")["0"]
    dp = samples(vllm_dp2.metrics(), "vllm:cache_config_info")
    assert set(dp) == {"0", "1"}
    # The DP2 server's num_gpu_blocks is the sum over its engines (vLLM's choice): read per engine, it
    # would double each rank's capacity (the defect). kv_cache_size_tokens is per engine.
    per_engine = {rank: int(str(dp[rank]["kv_cache_size_tokens"])) for rank in dp}
    summed = int(str(dp["0"]["num_gpu_blocks"])) * int(str(dp["0"]["block_size"]))
    assert summed == per_engine["0"] + per_engine["1"]
    with cluster(tmp_path, [f"s={vllm_single.base_url}", f"d0={vllm_dp2.base_url}@0",
                            f"d1={vllm_dp2.base_url}@1"]) as tao:
        replicas = tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
    assert replicas["s"]["capacity_tokens"] == int(str(single["kv_cache_size_tokens"]))
    assert replicas["d0"]["capacity_tokens"] == per_engine["0"]
    assert replicas["d1"]["capacity_tokens"] == per_engine["1"]


class BackToBack(threading.Thread):
    """One session's long requests, one after another until stopped: its engine is busy whenever the
    coordinator polls, however fast the engine decodes compared with the poll interval."""

    def __init__(self, client: openai.OpenAI, model: str, prompt: str) -> None:
        super().__init__(daemon=True)
        self.client, self.model, self.prompt = client, model, prompt
        self.first_chunk, self.stop = threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                stream = self.client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": self.prompt}], max_tokens=3900,
                    stream=True, extra_body={"ignore_eos": True})
                with stream:
                    for _ in stream:
                        self.first_chunk.set()
                        if self.stop.is_set():
                            break  # closing the stream: vLLM aborts the request
        except BaseException as exc:  # noqa: BLE001 - asserted by the test
            self.error = exc
            self.first_chunk.set()


def test_load_follows_the_engine_the_session_runs_on(tmp_path: Path, vllm_dp2: VllmServer,
                                                     unique_prompt: str) -> None:
    with cluster(tmp_path, [f"d0={vllm_dp2.base_url}@0", f"d1={vllm_dp2.base_url}@1"]) as tao:
        tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
        load = BackToBack(tao.openai("load"), vllm_dp2.model, unique_prompt)
        load.start()
        try:
            assert load.first_chunk.wait(120) and load.error is None, load.error
            node = next(s["node"] for s in tao.state()["sessions"] if s["id"] == "load")
            other = "d1" if node == "d0" else "d0"
            busy = tao.wait_for("the engine's running request",
                                lambda r: r[node]["running_requests"] == 1 and r[node]["kv_usage"] > 0)
            assert busy[other]["running_requests"] == 0
        finally:
            load.stop.set()
            load.join(120)
        assert load.error is None, load.error
        tao.wait_for("the engine idle again", lambda r: r[node]["running_requests"] == 0)


def test_the_coordinator_names_a_replica_whose_usage_has_no_cached_tokens(
        tmp_path: Path, vllm_single: VllmServer, vllm_dp2: VllmServer, unique_prompt: str) -> None:
    assert vllm_single.cached_tokens_in_usage and not vllm_dp2.cached_tokens_in_usage
    with cluster(tmp_path, [f"s={vllm_single.base_url}", f"d0={vllm_dp2.base_url}@0"], policy="vllm-rr") as tao:
        tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
        for session in ("a", "b"):  # round robin: one request on each replica
            list(tao.openai(session).chat.completions.create(
                model=vllm_single.model, messages=[{"role": "user", "content": unique_prompt}], max_tokens=4,
                stream=True, stream_options={"include_usage": True}))
        replicas = tao.wait_for("usage reports", lambda r: all(
            x["reports_cached_tokens"] is not None for x in r.values()))
        with urllib.request.urlopen(tao.coordinator + "/metrics", timeout=5) as response:
            metrics = response.read().decode()
    assert (replicas["s"]["reports_cached_tokens"], replicas["d0"]["reports_cached_tokens"]) == (True, False)
    assert 'tao_replica_reports_cached_tokens{replica="d0"} 0.0' in metrics
    assert 'tao_replica_reports_cached_tokens{replica="s"} 1.0' in metrics
    log = tao.coordinator_log.read_text()
    assert "replica d0 reports no cached prompt tokens" in log and "--enable-prompt-tokens-details" in log
    assert "replica s reports no cached" not in log
