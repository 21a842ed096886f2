"""Builders for hand-made snapshots: `snap(nodes=[...], sessions=[...])` with short dict specs."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tao_harness.types import Snapshot

NOW = 1000.0


def build_snapshot(nodes: list[dict[str, Any]], sessions: list[dict[str, Any]], **params: Any) -> Snapshot:
    return Snapshot.from_json({"now": NOW, "params": params, "nodes": nodes, "sessions": sessions})


@pytest.fixture
def snap() -> Callable[..., Snapshot]:
    return build_snapshot
