"""`tao coordinator` + `tao proxy` as the users run them (the CLI, in processes of their own), in front of
real vLLM servers, with a SQLite history store the tests read after the coordinator has stopped."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai

from tao_processes import start, stop


@dataclass
class Cluster:
    coordinator: str  # coordinator root URL
    proxy: str  # proxy root URL (the agents' endpoint)
    db: Path  # the coordinator's history store (SQLite), complete once the cluster stopped
    coordinator_log: Path

    def state(self) -> dict[str, Any]:
        # Generous: on this shared 2-core machine a busy coordinator answered after more than 5 s once.
        with urllib.request.urlopen(self.coordinator + "/v1/state", timeout=60) as response:
            return dict(json.loads(response.read()))

    def replicas(self) -> dict[str, dict[str, Any]]:
        return {replica["id"]: replica for replica in self.state()["replicas"]}

    def wait_for(self, what: str, predicate: Any, timeout_s: float = 60.0) -> dict[str, dict[str, Any]]:
        """Polls /v1/state's replicas until `predicate(replicas)` holds."""
        deadline = time.monotonic() + timeout_s
        while True:
            replicas = self.replicas()
            if predicate(replicas):
                return replicas
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {replicas}")
            time.sleep(0.2)

    def openai(self, session: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.proxy}/v1", api_key="k", max_retries=0, timeout=300,
                             default_headers={"X-TAO-Session": session})

    def anthropic(self, session: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.proxy, api_key="k", max_retries=0, timeout=300,
                                   default_headers={"X-TAO-Session": session})


def rows(db: Path, query: str, *params: Any) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(query, params)]


@contextmanager
def cluster(tmp_path: Path, replicas: list[str], policy: str = "tao") -> Iterator[Cluster]:
    """A coordinator and a proxy for `replicas` ("ID=URL" or "ID=URL@RANK"); stopped on exit."""
    db = tmp_path / "history.db"
    flags = [arg for replica in replicas for arg in ("--replica", replica)]
    coordinator_log = tmp_path / "coordinator.log"
    coordinator, coordinator_url = start(
        ["coordinator", "--port", "0", "--db", f"sqlite:///{db}", "--policy", policy, *flags], coordinator_log)
    try:
        proxy, proxy_url = start(["proxy", "--port", "0", "--coordinator", coordinator_url, *flags],
                                 tmp_path / "proxy.log")
        try:
            yield Cluster(coordinator_url, proxy_url, db, coordinator_log)
        finally:
            stop(proxy)
    finally:
        stop(coordinator)
