"""The spool and delivery: coordinator down -> spooled -> delivered later; none lost, none duplicated."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.spool import SpoolRecord, SpoolWriter, claim, describe
from tao_harness.store.limits import TEXT_KEPT_CHARS
from tao_harness.store.redact import MASK

from .conftest import Recorder


def _event(session: str, call: str, kind: str = "tool_start", at: float = 1.0) -> dict:
    if kind == "tool_start":
        return {"type": kind, "session": session, "call_id": call, "tool_name": "bash", "at": at}
    return {"type": kind, "session": session, "call_id": call, "at": at}


def _records(n: int, session: str = "s1") -> list[SpoolRecord]:
    return [SpoolRecord("/v1/events", _event(session, f"c{i}"), 1.0) for i in range(n)]


def test_writer_holds_its_file_until_closed(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(_records(3))
    assert claim(writer.path) is None  # in use: a flusher must not take it
    [info] = describe(tmp_path)
    assert (info.records, info.in_use) == (3, True)
    writer.close()
    claimed = claim(writer.path)
    assert claimed is not None and [r.body["call_id"] for r in claimed.records] == ["c0", "c1", "c2"]
    claimed.finish(claimed.records[2:])
    again = claim(writer.path)
    assert again is not None and [r.body["call_id"] for r in again.records] == ["c2"]


def test_empty_writer_leaves_no_file(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.close()
    assert list(tmp_path.iterdir()) == []


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(_records(2))
    writer.close()
    with open(writer.path, "a") as handle:
        handle.write('{"path": "/v1/ev')  # a crash mid-write
    claimed = claim(writer.path)
    assert claimed is not None and len(claimed.records) == 2


async def test_flush_delivers_in_order_once_and_deletes(tmp_path: Path, recorder: Recorder) -> None:
    for session in ("a", "b"):
        writer = SpoolWriter(tmp_path)
        writer.append([SpoolRecord("/v1/sessions", {"session": session}, 1.0), *_records(600, session),
                       SpoolRecord(f"/v1/sessions/{session}/end", {}, 2.0)])
        writer.close()
    async with aiohttp.ClientSession() as http:
        poster = CoordinatorPoster(recorder.url, http, 10.0)
        # Two flushers at once (two tao-run starting together): each file goes to exactly one of them.
        results = await asyncio.gather(flush_spool(tmp_path, poster, 250), flush_spool(tmp_path, poster, 250))
    assert sum(r.delivered for r in results) == 2 * 602
    assert len(recorder.events) == 1200
    assert len({(e["session"], e["call_id"]) for e in recorder.events}) == 1200
    assert [e["call_id"] for e in recorder.events if e["session"] == "a"] == [f"c{i}" for i in range(600)]
    assert sorted(recorder.ended) == ["a", "b"]
    assert list(tmp_path.iterdir()) == []


async def test_flush_keeps_what_the_coordinator_did_not_take(tmp_path: Path, recorder: Recorder) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(_records(5))
    writer.close()
    recorder.down = True
    async with aiohttp.ClientSession() as http:
        poster = CoordinatorPoster(recorder.url, http, 10.0)
        first = await flush_spool(tmp_path, poster, 500)
        recorder.down = False
        second = await flush_spool(tmp_path, poster, 500)
    assert (first.delivered, first.remaining) == (0, 5)
    assert (second.delivered, second.remaining) == (5, 0)
    assert [e["call_id"] for e in recorder.events] == ["c0", "c1", "c2", "c3", "c4"]


async def test_forwarder_spools_while_down_and_catches_up(tmp_path: Path, recorder: Recorder) -> None:
    recorder.down = True
    async with aiohttp.ClientSession() as http:
        writer = SpoolWriter(tmp_path)
        forwarder = Forwarder(CoordinatorPoster(recorder.url, http, 10.0), writer, 100, retry_s=0.2)
        forwarder.start()
        for i in range(10):
            forwarder.submit("/v1/events", _event("s", f"c{i}"))
        await asyncio.sleep(0.3)
        assert recorder.events == [] and writer.count == 10 and forwarder.pending == 10
        recorder.down = False
        for i in range(10, 15):
            forwarder.submit("/v1/events", _event("s", f"c{i}"))
        for _ in range(100):
            if forwarder.pending == 0:
                break
            await asyncio.sleep(0.05)
        await forwarder.close(1.0)
    assert [e["call_id"] for e in recorder.events] == [f"c{i}" for i in range(15)]
    assert list(tmp_path.iterdir()) == []  # delivered everything: the spool file is gone


async def test_forwarder_without_coordinator_leaves_a_spool_for_the_next_run(
        tmp_path: Path, recorder: Recorder) -> None:
    writer = SpoolWriter(tmp_path)
    forwarder = Forwarder(None, writer, 100, retry_s=0.2)
    forwarder.start()
    for i in range(3):
        forwarder.submit("/v1/events", _event("s", f"c{i}"))
    await forwarder.close(0.5)
    assert [f.records for f in describe(tmp_path)] == [3]
    async with aiohttp.ClientSession() as http:
        result = await flush_spool(tmp_path, CoordinatorPoster(recorder.url, http, 10.0), 100)
    assert result.delivered == 3 and len(recorder.events) == 3


async def test_refused_events_are_dropped_alone_not_retried(tmp_path: Path, aiohttp_server) -> None:
    from aiohttp import web

    hits: list[int] = []
    stored: list[str] = []

    async def events(request: web.Request) -> web.Response:
        batch = (await request.json())["events"]
        hits.append(len(batch))
        bad = [i for i, event in enumerate(batch) if event["call_id"].startswith("bad")]
        if bad:
            return web.json_response({"error": {"message": f"events[{bad[0]}].at: bad"}}, status=400)
        stored.extend(event["call_id"] for event in batch)
        return web.json_response({"accepted": len(batch)})

    app = web.Application()
    app.router.add_post("/v1/events", events)
    server = await aiohttp_server(app)
    writer = SpoolWriter(tmp_path)
    records = _records(64)
    records[5] = SpoolRecord("/v1/events", _event("s1", "bad-5"), 1.0)
    records[40] = SpoolRecord("/v1/events", _event("s1", "bad-40"), 1.0)
    writer.append(records)
    writer.close()
    async with aiohttp.ClientSession() as http:
        result = await flush_spool(tmp_path, CoordinatorPoster(str(server.make_url("")), http, 10.0), 100)
    assert (result.delivered, result.rejected, result.remaining) == (62, 2, 0)
    assert stored == [f"c{i}" for i in range(64) if i not in (5, 40)]  # in order, none lost
    assert len(hits) <= 1 + 2 * 2 * 6  # a bisection per refused event, not one request per event
    assert list(tmp_path.iterdir()) == []


async def test_spool_holds_only_redacted_text_in_private_files(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    forwarder = Forwarder(None, SpoolWriter(directory), 100, 0.2)
    forwarder.start()
    forwarder.submit("/v1/events", {**_event("s1", "c1"), "command": "mysql -u root -pS3cr3tPw shop",
                                    "args": {"command": "mysql -u root -pS3cr3tPw shop", "password": "hunter2"}})
    forwarder.submit("/v1/sessions", {"session": "s1", "labels": {"task": "t"}})
    await forwarder.close(1.0)
    [path] = directory.iterdir()
    text = path.read_text()
    assert "S3cr3tPw" not in text and "hunter2" not in text and text.count(MASK) == 3
    assert [r.body.get("call_id") for r in claim(path).records] == ["c1", None]  # nothing else lost
    assert (path.stat().st_mode & 0o777, directory.stat().st_mode & 0o777) == (0o600, 0o700)


def test_a_spool_directory_open_to_others_is_made_private(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    SpoolWriter(directory).close()
    assert directory.stat().st_mode & 0o777 == 0o700


async def test_an_old_unredacted_spool_is_redacted_and_fitted_when_flushed(tmp_path: Path,
                                                                           recorder: Recorder) -> None:
    # A file an older tao-run wrote: commands in clear, a Write call with the whole file.
    old = {**_event("s1", "c1"), "command": "sshpass -p S3cr3t ssh host", "args": {"content": "q" * 200_000}}
    writer = SpoolWriter(tmp_path)
    writer.append([SpoolRecord("/v1/events", old, 1.0)])
    writer.close()
    recorder.down = True
    async with aiohttp.ClientSession() as http:
        kept = await flush_spool(tmp_path, CoordinatorPoster(recorder.url, http, 10.0), 100)
        [path] = tmp_path.iterdir()
        assert kept.remaining == 1 and "S3cr3t" not in path.read_text() and len(path.read_text()) < 70_000
        recorder.down = False
        sent = await flush_spool(tmp_path, CoordinatorPoster(recorder.url, http, 10.0), 100)
    [event] = recorder.events
    assert sent.delivered == 1 and event["command"] == f"sshpass -p {MASK} ssh host"
    assert event["args"]["content"] == "q" * TEXT_KEPT_CHARS + f"…[truncated {200_000 - TEXT_KEPT_CHARS} chars]"
