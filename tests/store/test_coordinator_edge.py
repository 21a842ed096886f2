"""Input the coordinator's API accepts must be storable: poison values are refused with a 400 naming the
field or fitted, the store reports failures only to the request whose records failed, and a shim's spool
drains (on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import pytest
from sqlalchemy import select

from tao_harness.config import load_config
from tao_harness.coordinator.api import build_app
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.service import Coordinator
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app, session_end_request
from tao_harness.shims.spool import SpoolRecord, SpoolWriter
from tao_harness.store.engine import open_store
from tao_harness.store.limits import TEXT_KEPT_CHARS, TOO_DEEP
from tao_harness.store.models import Session, ToolCall
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.writer import CommitResult, StoreWriter


@pytest.fixture
async def coordinator(db_url: str) -> Coordinator:
    config = load_config(overrides={"store.url": db_url, "store.flush_interval_s": 0.02,
                                    "cluster.replicas": [{"id": "r0", "base_url": "http://127.0.0.1:9"}]},
                         environ={})
    return build_coordinator(config, "tao", tick_s=0.05)


@pytest.fixture
async def coordinator_url(coordinator: Coordinator, aiohttp_server: Any) -> AsyncIterator[str]:
    server = await aiohttp_server(build_app(coordinator))
    yield str(server.make_url("")).rstrip("/")


def _start(call: str, **extra: Any) -> dict[str, Any]:
    # Events this recent open a live session (older ones are only recorded).
    return {"type": "tool_start", "session": "s1", "call_id": call, "tool_name": "Bash", "at": time.time()} | extra


def _end(call: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_end", "session": "s1", "call_id": call, "at": time.time(), "duration_s": 1.0} | extra


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def _calls(db_url: str) -> dict[str, Any]:
    with open_store(db_url, create=False) as store, store.engine.connect() as conn:
        return {row.id: row for row in conn.execute(select(ToolCall))}


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(url, data=data, headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.json()


REFUSED = [
    (_end("c1", exit_code=2**63), "events[0].exit_code"),
    (_end("c1", exit_code=2**31), "events[0].exit_code"),
    (_start("c" * 201), "events[0].call_id"),
    (_start("c1", session="s\x001"), "events[0].session"),
    (_start("c1", harness="h" * 65), "events[0].harness"),
    (_start("c1", at=10**400), "events[0].at"),
    (_end("c1", duration_s=10**400), "events[0].duration_s"),
]


async def test_poison_events_get_a_400_naming_the_field_or_are_fitted(db_url: str, coordinator_url: str) -> None:
    async with aiohttp.ClientSession() as http:
        for event, field in REFUSED:
            status, body = await _post(http, coordinator_url + "/v1/events", {"events": [event]})
            assert (status, body["error"]["message"].split(":")[0]) == (400, field), event
        deep = b'{"events": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        status, body = await _post(http, coordinator_url + "/v1/events", deep)
        assert status == 400 and body["error"]["message"].startswith("body:")
        fitted = [_start("surrogate", command="echo \ud800"), _start("nul", command="printf 'a\x00b'"),
                  _start("deep", args=_nested(900)), _start("big", args={"content": "x" * 200_000}),
                  _end("surrogate", exit_code=-1)]
        status, body = await _post(http, coordinator_url + "/v1/events", {"events": fitted})
        assert (status, body) == (200, {"accepted": 5, "not_stored": 0})
        path, ended = session_end_request("s1", time.time())
        assert (await _post(http, coordinator_url + path, ended))[0] == 200
    calls = _calls(db_url)
    assert set(calls) == {"surrogate", "nul", "deep", "big"}
    assert (calls["surrogate"].command, calls["surrogate"].exit_code) == ("echo \ufffd", -1)
    assert calls["nul"].command == "printf 'a\ufffdb'"
    depth, value = 0, calls["deep"].args
    while isinstance(value, dict):
        depth, value = depth + 1, value["a"]
    assert (depth, value) == (32, TOO_DEEP)
    content = calls["big"].args["content"]
    assert content == "x" * TEXT_KEPT_CHARS + f"…[truncated {200_000 - TEXT_KEPT_CHARS} chars]"
    with open_store(db_url, create=False) as store, store.engine.connect() as conn:
        assert conn.execute(select(Session.ended_at).where(Session.id == "s1")).scalar_one() is not None


async def test_other_routes_refuse_what_the_store_cannot_hold(coordinator_url: str) -> None:
    cases = [
        ("/v1/sessions", {"session": "s", "started_at": 10**400}, "started_at"),
        ("/v1/sessions", {"session": "s", "harness": "h" * 65}, "harness"),
        ("/v1/sessions", {"session": "s" * 201}, "session"),
        ("/v1/admit", {"session": "s", "request_id": "r", "wait_s": 10**400}, "wait_s"),
        ("/v1/admit", {"session": "s", "request_id": "r" * 201}, "request_id"),
        ("/v1/requests/done", {"session": "s", "request_id": "r", "status": "connect_error", "replica": "nope"},
         "replica"),
        ("/v1/requests/done", {"session": "s", "request_id": "r", "status": "ok", "prompt_tokens": 2**40},
         "prompt_tokens"),
        ("/v1/requests/done", {"session": "s", "request_id": "r", "status": "ok", "started_at": 10**400},
         "started_at"),
    ]
    async with aiohttp.ClientSession() as http:
        for path, payload, field in cases:
            status, body = await _post(http, coordinator_url + path, payload)
            assert (status, body["error"]["message"].split(":")[0]) == (400, field), (path, payload)


def test_a_refused_record_is_reported_only_to_its_own_caller(db_url: str) -> None:
    with open_store(db_url) as store, StoreWriter(store) as writer:
        bad = writer.submit(ToolCallRecord(id="bad", session_id="s", exit_code=2**63))  # past validation
        good = writer.submit(ToolCallRecord(id="good", session_id="s", duration_s=1.0))
        assert writer.commit(good, good + 1) == CommitResult(None, 0)  # the valid request hears nothing of "bad"
        assert writer.commit(bad, bad + 1) == CommitResult(None, 1)
        assert writer.unwritable == 1
        writer.flush()  # already reported to its caller: not raised again
    assert set(_calls(db_url)) == {"good"}


async def test_a_spool_with_big_and_poison_events_drains_and_ends_its_session(
        db_url: str, coordinator_url: str, tmp_path: Path) -> None:
    # 100 Write calls of 200 KB (20 MB: past the 16 MB body limit in one batch), two poison events and
    # the session end, as a run would have spooled them during an outage.
    records = [SpoolRecord("/v1/sessions", {"session": "s1", "harness": "claude-code"}, 1.0)]
    for index in range(100):
        args = {"file_path": f"/w/f{index}.py", "content": f"{index:03d}" + "y" * 200_000}
        records += [SpoolRecord("/v1/events", _start(f"w{index}", args=args), 1.0),
                    SpoolRecord("/v1/events", _end(f"w{index}"), 1.0)]
        if index in (10, 70):
            records.append(SpoolRecord("/v1/events", _end(f"w{index}", exit_code=2**63), 1.0))
    records.append(SpoolRecord(*session_end_request("s1", 1.0), 1.0))
    spool = tmp_path / "spool"
    writer = SpoolWriter(spool)
    writer.append(records)
    writer.close()
    async with aiohttp.ClientSession() as http:
        result = await flush_spool(spool, CoordinatorPoster(coordinator_url, http, 30.0), 500)
    assert (result.delivered, result.rejected, result.remaining, result.problem) == (len(records) - 2, 2, 0, "")
    assert list(spool.iterdir()) == []
    calls = _calls(db_url)
    assert len(calls) == 100 and all(call.duration_s == 1.0 for call in calls.values())
    assert calls["w42"].args["content"].startswith("042y")
    with open_store(db_url, create=False) as store, store.engine.connect() as conn:
        assert conn.execute(select(Session.ended_at).where(Session.id == "s1")).scalar_one() is not None


async def test_records_the_store_refuses_are_counted_in_metrics(coordinator: Coordinator, coordinator_url: str) -> None:
    writer = coordinator.writer
    assert writer is not None
    number = writer.submit(ToolCallRecord(id="bad", session_id="s", exit_code=2**63))  # past validation
    assert await writer.acommit(number, number + 1) == CommitResult(None, 1)
    async with aiohttp.ClientSession() as http, http.get(coordinator_url + "/metrics") as response:
        text = await response.text()
    assert "tao_store_refused_records_total 1.0" in text


async def test_a_session_end_delivered_late_records_when_it_ended(
        db_url: str, coordinator_url: str, tmp_path: Path, aiohttp_server: Any) -> None:
    # Two sessions of a run whose coordinator was unreachable: their ends wait in the spool and are
    # delivered much later. The run's own session ends on the relay's clock; the mini-SWE-agent launcher's
    # instance sends its own end time.
    run_end, instance_end = time.time() - 30.0, time.time() - 40.0
    spool = tmp_path / "spool"
    async with aiohttp.ClientSession() as http:
        unreachable = CoordinatorPoster("http://127.0.0.1:9", http, 1.0)
        forwarder = Forwarder(unreachable, SpoolWriter(spool), 100, 0.2)
        forwarder.start()
        state = RelayState(forwarder, SessionInfo("s1", "mini-swe-agent", {}, run_end - 60),
                           ClaudeHookTranslator("s1"), clock=lambda: run_end)
        relay = str((await aiohttp_server(build_relay_app(state))).make_url(state.prefix))
        for session in ("s1", "s1.i1"):
            assert (await _post(http, relay + "/v1/sessions", {"session": session, "started_at": run_end - 60}))[0] == 200
        async with http.post(relay + "/v1/sessions/s1/end") as ended:  # no body: the relay's clock
            assert ended.status == 200
        assert (await _post(http, relay + "/v1/sessions/s1.i1/end", {"ended_at": instance_end}))[0] == 200
        status, refused = await _post(http, relay + "/v1/sessions/s1.i1/end", {"ended_at": 10**400})
        assert (status, refused["error"]["message"]) == (400, "ended_at: must be finite")
        await forwarder.close(2.0)
        delivered = await flush_spool(spool, CoordinatorPoster(coordinator_url, http, 10.0), 500)
    assert (delivered.delivered, delivered.remaining) == (4, 0)
    with open_store(db_url, create=False) as store, store.engine.connect() as conn:
        ends = dict(conn.execute(select(Session.id, Session.ended_at)).all())
    assert ends == {"s1": pytest.approx(run_end, abs=1e-3), "s1.i1": pytest.approx(instance_end, abs=1e-3)}


POISON = [  # (route, body, the field a 400 names, or None when the value is fitted and stored)
    ("/v1/events", _end("c1", session="p1", exit_code=2**63), "exit_code"),
    ("/v1/events", _start("c1", session="p\ud800"), "session"),
    ("/v1/events", _start("c1", session="p2", args=_nested(900)), None),
    ("/v1/requests/done", {"session": "p3", "request_id": "r", "status": "ok", "ttft_s": 10**400}, "ttft_s"),
    ("/v1/sessions", {"session": "p4", "labels": {"\ud800": "\ud800"}}, None),
]


@pytest.mark.parametrize(("path", "poison", "refused"), POISON, ids=[f"{p[0]} {i}" for i, p in enumerate(POISON)])
async def test_a_poison_value_never_blocks_the_next_clients_valid_event(
        db_url: str, coordinator_url: str, path: str, poison: dict[str, Any], refused: str | None) -> None:
    async with aiohttp.ClientSession() as http:
        status, body = await _post(http, coordinator_url + path, poison)
        if refused:
            assert (status, body["error"]["message"].split(":")[0]) == (400, refused)
        else:
            assert status == 200, body
        status, body = await _post(http, coordinator_url + "/v1/events", _start("valid", session="other"))
        assert (status, body) == (200, {"accepted": 1, "not_stored": 0})
    assert _calls(db_url)["valid"].session_id == "other"
