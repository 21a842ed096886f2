"""What the coordinator stores for a request a replica failed mid-answer: every attempt, and one request
row with what the client got (it used to merge both attempts into one row, the continuation's usage
overwriting the request's)."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiohttp


def _report(attempt: int, replica: str, status: str, usage: tuple[int | None, int | None, int | None],
            **extra: Any) -> dict[str, Any]:
    prompt, cached, completion = usage
    return {"session": "s1", "request_id": "req-1", "replica": replica, "status": status, "http_status": 200,
            "prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": completion,
            "ttft_s": 0.05 if attempt == 1 else 1.2, "latency_s": 1.0 * attempt, "queue_wait_s": 0.0,
            "started_at": 1000.0, "attempt": attempt, **extra}


async def test_a_continued_request_keeps_each_attempt_and_the_clients_answer(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=2)
    answer = {"status": "ok", "replica": "r1", "prompt_tokens": 20, "cached_tokens": 0, "completion_tokens": 300,
              "ttft_s": 0.05, "latency_s": 2.5, "attempts": 2, "queue_wait_s": 0.01}
    async with aiohttp.ClientSession() as http:
        for report in (_report(1, "r0", "error", (None, None, None)),
                       _report(2, "r1", "ok", (366, 256, 120), answer=answer)):
            async with http.post(cluster.coordinator_url + "/v1/requests/done", json=report) as response:
                assert response.status == 200, await response.text()
        bad = _report(3, "r1", "ok", (1, 0, 1), answer={**answer, "status": "maybe"})
        async with http.post(cluster.coordinator_url + "/v1/requests/done", json=bad) as response:
            assert response.status == 400 and "answer.status" in (await response.json())["error"]["message"]
    cluster.coordinator.writer.flush(5)
    with sqlite3.connect(cluster.db_url.removeprefix("sqlite:///")) as db:
        requests = db.execute("select replica, status, attempts, prompt_tokens, cached_tokens, completion_tokens, "
                              "ttft_s, latency_s from llm_requests").fetchall()
        attempts = db.execute("select id, attempt, replica, status, prompt_tokens, cached_tokens, completion_tokens "
                              "from llm_attempts order by attempt").fetchall()
    assert requests == [("r1", "ok", 2, 20, 0, 300, 0.05, 2.5)]
    assert attempts == [("req-1#1", 1, "r0", "error", None, None, None), ("req-1#2", 2, "r1", "ok", 366, 256, 120)]
