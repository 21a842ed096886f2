"""The planning loop ends when cancelled (the coordinator's shutdown cancels it, then waits for it), also
when the cancellation comes just as an event wakes it: Python 3.11's `asyncio.wait_for` returned the
wake then and swallowed the cancellation, and the loop, `while True`, ran on: shutdown waited forever."""

from __future__ import annotations

import asyncio

import pytest

from tao_harness.config import load_config
from tao_harness.coordinator.embedded import build_coordinator


async def test_a_cancellation_arriving_with_a_wake_ends_the_loop() -> None:
    config = load_config(overrides={"cluster.replicas": [{"id": "r0", "base_url": "http://127.0.0.1:9"}]},
                         environ={})
    coordinator = build_coordinator(config, use_store=False)
    loop_task = asyncio.create_task(coordinator.planning_loop())
    await asyncio.sleep(0.05)  # waiting for a wake
    coordinator.wake()
    loop_task.cancel()  # in the same turn of the event loop as the wake
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(loop_task, 10)
