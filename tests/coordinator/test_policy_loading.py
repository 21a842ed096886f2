"""A coordinator serves from its first second, also on a first start, when numba's cache is empty and the
planner's kernels take about a minute to compile (49 s before the coordinator listened, and `make demo`
printed nothing for 67 s): it plans best-fit-decreasing until they are ready (coordinator/policy_loading.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tao_harness.config import PlannerConfig, ReplicaConfig
from tao_harness.coordinator.policy_loading import LoadingPolicy, load_in_background
from tao_harness.planner import warm_up
from tao_harness.policies.registry import get_policy
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario
from tao_harness.types import Snapshot
from tao_processes import start, stop

SNAPSHOT = Path(__file__).parents[1] / "planner" / "fuzzed" / "interrupt-used-below-holders.json"


async def test_a_first_start_admits_while_the_kernels_compile(
    tmp_path: Path, serve: Callable[[Any], Awaitable[TestServer]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))  # empty: nothing compiled yet
    replica = await serve(build_replica_app(ReplicaConfig(port=0, time_scale=50.0, num_gpu_blocks=4096),
                                            load_scenario("swe-short")))
    replica_url = str(replica.make_url("")).rstrip("/")
    # The test's event loop serves the replica while the coordinator starts
    coordinator, url = await asyncio.to_thread(
        start, ["coordinator", "--port", "0", "--no-store", "--replica", f"r0={replica_url}"],
        tmp_path / "coordinator.log")
    try:
        async with aiohttp.ClientSession() as http:
            admitted = await _post(http, url + "/v1/admit", {"session": "s1", "request_id": "q1",
                                                             "prompt_tokens_estimate": 100, "wait_s": 60})
            async with http.get(url + "/healthz") as response:
                health = await response.json()
            async with http.get(url + "/v1/state") as response:
                plans = (await response.json())["recent_plans"]
    finally:
        stop(coordinator)
    assert admitted["status"] == "admitted" and admitted["replica"] == "r0"
    # ... before the kernels were ready: planned without them
    assert health == {"status": "ok", "planner": "loading"}
    assert [plan["solver"] for plan in plans if plan["assigned"]] == ["bfd"]
    assert "compiling the planner's kernels (first start" in (tmp_path / "coordinator.log").read_text()


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


def test_planning_without_the_kernels_compiles_none(tmp_path: Path) -> None:
    """The stand-in (here `tao-bfd`, the same policy) runs no compiled kernel: numba's cache stays empty."""
    cache = tmp_path / "numba-cache"
    done = subprocess.run([sys.executable, "-m", "tao_harness.cli.main", "plan", str(SNAPSHOT), "--policy",
                           "tao-bfd", "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["solver"] == "bfd"
    assert not cache.exists() or not any(cache.rglob("*.nbi"))


def test_the_loading_policy_plans_with_the_policy_once_it_is_ready() -> None:
    snapshot = Snapshot.from_json(json.loads(SNAPSHOT.read_text()))
    warm_up()  # compiled here if need be (at full priority: the planner tests do it too), then only loaded
    policy = load_in_background("tao", PlannerConfig())
    assert isinstance(policy, LoadingPolicy) and policy.name == "tao" and policy.admission_control
    assert policy.ready.wait(60)
    assert policy.plan(snapshot).solver == get_policy("tao").plan(snapshot).solver != "bfd"
    assert not isinstance(load_in_background("vllm-rr", PlannerConfig()), LoadingPolicy)  # no kernels
