"""The coordinator's periodic sweeps end what nobody will finish (lost requests, idle sessions) without
stalling its event loop: a proxy killed with 2,000 requests in flight once cost a loaded coordinator an
8-second stall, in which every event POST and admission long-poll waited."""

from __future__ import annotations

import asyncio

import pytest

from tao_harness.config import load_config
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.service import SWEEP_SLICE, Coordinator

WAITING = 1000


async def _crowded_pool() -> Coordinator:
    """A coordinator with `WAITING` requests in its pool whose proxy stopped polling long ago."""
    config = load_config(overrides={"cluster.replicas": [
        {"id": "r0", "base_url": "http://127.0.0.1:9", "capacity_tokens": 20_000}]}, environ={})
    coordinator = build_coordinator(config, use_store=False)
    await asyncio.gather(*(coordinator.admit(f"s{i}", f"req-{i}", 3000, (), 0.001, proxy="p")
                           for i in range(WAITING)))
    for pending in coordinator._pending.values():
        pending.unpolled_since -= 3600.0
    assert len(coordinator._pending) == WAITING  # admissions come from plans; none ran
    return coordinator


async def test_ending_a_thousand_lost_requests_lets_the_event_loop_run(
        caplog: pytest.LogCaptureFixture) -> None:
    coordinator = await _crowded_pool()
    pending_when_others_ran: list[int] = []

    async def another_handler() -> None:
        pending_when_others_ran.append(len(coordinator._pending))

    other = asyncio.create_task(another_handler())
    ended = await coordinator.end_lost_requests()
    await other
    assert len(ended) == WAITING and not coordinator._pending
    assert pending_when_others_ran == [WAITING - SWEEP_SLICE]  # it ran after the first slice, not at the end
    summaries = [r.getMessage() for r in caplog.records if "ended unreported" in r.getMessage()]
    assert len(summaries) == 1, summaries
    assert summaries[0].startswith(f"{WAITING} request(s) ended unreported"), summaries


async def test_a_request_polled_again_during_the_sweep_is_kept() -> None:
    coordinator = await _crowded_pool()
    last = f"s{WAITING - 1}"

    async def poll_again() -> None:  # runs at the sweep's first return to the loop
        coordinator._pending[last].polls += 1

    other = asyncio.create_task(poll_again())
    ended = await coordinator.end_lost_requests()
    await other
    assert last not in ended and list(coordinator._pending) == [last]
