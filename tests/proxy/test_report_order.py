"""`ProxyState.send_report`: a session's messages to the coordinator go out in the order sent, whether or
not one is still on its way when the next is sent."""

from __future__ import annotations

import asyncio
from typing import Any

from tao_harness.proxy.app import ProxyState


def _state() -> ProxyState:
    return ProxyState(config=None, http=None, router=None, coordinator=None)  # type: ignore[arg-type]


async def test_a_report_waits_for_the_sessions_earlier_one() -> None:
    state, order = _state(), []
    release = asyncio.Event()

    async def first() -> None:
        await release.wait()
        order.append("first")

    async def second() -> None:
        order.append("second")

    state.send_report("s", first())
    state.send_report("s", second())  # chained behind `first`, still on its way
    state.send_report("t", _record(order, "other session"))  # another session's does not wait
    await asyncio.sleep(0.01)
    assert order == ["other session"]
    release.set()
    await asyncio.gather(*state.reports.values())
    assert order == ["other session", "first", "second"]
    assert state.reports == {}  # finished messages are forgotten


async def test_a_lone_report_goes_out_and_is_forgotten() -> None:
    state, order = _state(), []
    state.send_report("s", _record(order, "only"))
    task = state.reports["s"]
    await task
    await asyncio.sleep(0)  # the done callback runs in the next loop turn
    assert order == ["only"] and state.reports == {}


async def _record(order: list[Any], what: str) -> None:
    order.append(what)
