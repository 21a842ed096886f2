"""A real vLLM server SIGKILLed while it streams an OpenAI and an Anthropic answer: another replica
continues both into one intact stream each, the client's usage counts what was generated, and the store
keeps every attempt and what the client got.

Runs last (it kills `vllm_single`). The coordinator places by round robin here, so the test knows where
each stream runs: request 1 (OpenAI) → s, 2 (filler) → d0, 3 (Anthropic) → s.

On these machines a vLLM CPU server that generates starves the other server's idle processes (its worker
spins on sched_yield between steps): a 1-token request to d0 waited 12–15 s, until s's 1,500-token stream
ended. So the filler is not waited for; the Anthropic request goes once the coordinator has placed it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, cluster, rows
from .conftest import VllmServer

pytestmark = [pytest.mark.real_vllm, pytest.mark.kills_vllm]
# Long enough that a stream the server has started is still being generated when it is paused; short
# enough that the continuation fits the 4,096-token context: its prompt holds the text already sent
# re-tokenized, which on the random model can be longer than the tokens that generated it (2,965
# generated tokens came back as ~3,250, and vLLM cut the continuation at the context's end).
MAX_TOKENS = 1800
# vLLM's /v1/messages has no ignore_eos, and the random model samples its end-of-turn token now and then
# (once after 2 tokens in 4 tries at temperature 1, and greedy output shifts with the batch): a try whose
# Anthropic stream ended before the kill is started over on a fresh cluster, with another prompt.
ANTHROPIC_PROMPT = "anthropic: fix the failing test in tests/test_parser.py, then run the suite again."
TRIES = 4


class Reader(threading.Thread):
    """Consumes one stream in the background, keeping every event."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream, self.events = stream, []  # type: ignore[var-annotated]
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for event in self.stream:
                self.events.append(event)
        except BaseException as exc:  # noqa: BLE001 - asserted by the test
            self.error = exc


def _start_streams(tao: Cluster, server: VllmServer, prompt: str, attempt: int) -> tuple[Reader, Any, Reader]:
    chat = tao.openai("oai").chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    openai_reader = Reader(chat)
    openai_reader.start()
    filler = threading.Thread(daemon=True, target=lambda: tao.openai("filler").chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": "filler " + prompt}], max_tokens=1))
    filler.start()  # round robin: this one to d0, the next to s again
    _wait_until_placed(tao, "filler", "d0")
    manager = tao.anthropic("ant").messages.stream(
        model=server.model, max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": f"{ANTHROPIC_PROMPT} ({attempt})"}],
        extra_body={"temperature": 0.0})
    anthropic_reader = Reader(manager.__enter__())
    anthropic_reader.start()
    return openai_reader, manager, anthropic_reader


def _wait_until_placed(tao: Cluster, session: str, replica: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(s["id"] == session and s.get("node") == replica for s in tao.state()["sessions"]):
        assert time.monotonic() < deadline, f"{session} was not placed on {replica}: {tao.state()['sessions']}"
        time.sleep(0.02)


def _openai_under_way(reader: Reader) -> bool:
    return any(c.choices and c.choices[0].delta.content for c in reader.events)


def _openai_ended(reader: Reader) -> bool:
    return not reader.is_alive() or any(c.choices and c.choices[0].finish_reason for c in reader.events)


def _anthropic_under_way(reader: Reader) -> bool:
    return any(e.type == "content_block_delta" for e in reader.events)


def _anthropic_ended(reader: Reader) -> bool:
    return not reader.is_alive() or any(e.type in ("message_delta", "message_stop") for e in reader.events)


def _progress(chat: Reader, messages: Reader) -> str:
    return (f"OpenAI {len(chat.events)} events (ended {_openai_ended(chat)}), "
            f"Anthropic {len(messages.events)} events (ended {_anthropic_ended(messages)})")


def _settle(chat: Reader, messages: Reader, quiet_s: float = 1.0, timeout_s: float = 30.0) -> None:
    """Waits until neither reader has received anything for `quiet_s`: what the paused server wrote
    before it stopped has reached the client."""
    deadline = time.monotonic() + timeout_s
    counts, since = (-1, -1), time.monotonic()
    while time.monotonic() < deadline:
        now = (len(chat.events), len(messages.events))
        if now != counts:
            counts, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def _kill_mid_generation(tao: Cluster, server: VllmServer, prompt: str,
                         attempt: int) -> tuple[Reader, Any, Reader] | str:
    """Starts both streams on `server` and SIGKILLs it while it provably generates both: paused (SIGSTOP)
    once each stream has delivered text, then killed only if, with everything it sent delivered, neither
    stream has ended. Otherwise says why not."""
    chat, manager, messages = _start_streams(tao, server, prompt, attempt)
    deadline = time.monotonic() + 300
    # The streams' own events, not vLLM's /metrics: no poll interval to race a fast engine.
    while not (_openai_under_way(chat) and _anthropic_under_way(messages)):
        if _openai_ended(chat) or _anthropic_ended(messages):
            return f"ended before both were under way: {_progress(chat, messages)}"
        assert time.monotonic() < deadline, (f"the streams never ran together: events {len(chat.events)}/"
                                             f"{len(messages.events)}, errors {chat.error!r}/{messages.error!r}")
        time.sleep(0.05)
    server.pause()
    _settle(chat, messages)
    if _openai_ended(chat) or _anthropic_ended(messages):
        server.resume()
        return f"ended while paused: {_progress(chat, messages)}"
    server.kill()
    return chat, manager, messages


def test_a_killed_replica_is_continued_into_one_intact_stream(tmp_path: Path, vllm_single: VllmServer,
                                                              vllm_dp2: VllmServer, unique_prompt: str) -> None:
    for attempt in range(1, TRIES + 1):
        folder = tmp_path / f"try{attempt}"
        folder.mkdir()
        with cluster(folder, [f"s={vllm_single.base_url}", f"d0={vllm_dp2.base_url}@0"], policy="vllm-rr") as tao:
            tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
            streams = _kill_mid_generation(tao, vllm_single, f"{attempt} {unique_prompt}", attempt)
            if isinstance(streams, str):
                print(f"\ntry {attempt} of {TRIES} started over: {streams}")
                continue  # leaving the cluster stops its proxy, which ends what still streams
            chat, manager, messages = streams
            print(f"\nkilled mid-generation on try {attempt} of {TRIES}")
            chat.join(300)
            messages.join(300)
            final = messages.stream.current_message_snapshot
            manager.__exit__(None, None, None)
            break
    else:
        pytest.fail(f"in {TRIES} tries a stream always ended before both were under way")
    assert chat.error is None and messages.error is None

    # OpenAI: one stream, one role chunk, ended by max_tokens, with the closing usage the client asked for
    # and no other (the proxy's per-chunk counts from vLLM stay in the proxy).
    chunks = chat.events
    assert len({c.id for c in chunks}) == 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert [c for c in chunks if c.usage is not None] == [chunks[-1]]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == MAX_TOKENS

    # Anthropic: one message, its text block continued in place. The continuation (chat completions,
    # no ignore_eos) may end the turn before max_tokens.
    kinds = [e.type for e in messages.events]
    assert kinds.count("message_start") == 1 and kinds.count("message_stop") == 1
    assert [e.index for e in messages.events if e.type == "content_block_start"] == [0]
    text = "".join(e.delta.text for e in messages.events if e.type == "content_block_delta")
    assert final.content[0].text == text and final.stop_reason in ("max_tokens", "end_turn")
    assert (final.usage.output_tokens == MAX_TOKENS) == (final.stop_reason == "max_tokens")

    # The store: each attempt, and the request as its client saw it.
    for session, usage in (("oai", (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens)),
                           ("ant", (final.usage.input_tokens, final.usage.output_tokens))):
        [request] = rows(tao.db, "SELECT * FROM llm_requests WHERE session_id = ?", session)
        attempts = rows(tao.db, "SELECT * FROM llm_attempts WHERE request_id = ? ORDER BY attempt", request["id"])
        assert [(a["attempt"], a["replica"], a["status"]) for a in attempts] == [(1, "s", "error"), (2, "d0", "ok")], \
            session
        assert (request["replica"], request["status"], request["attempts"]) == ("d0", "ok", 2)
        assert (request["prompt_tokens"], request["completion_tokens"]) == usage
        prompt_tokens = usage[0]
        # The continuation's prompt held the text already sent; its output is the rest of the answer.
        assert attempts[1]["prompt_tokens"] > prompt_tokens and 0 < attempts[1]["completion_tokens"] < MAX_TOKENS
        assert request["ttft_s"] is not None and request["ttft_s"] < attempts[0]["latency_s"]
    # Exact for the OpenAI stream: the killed replica's own count (from vLLM's per-chunk usage, which the
    # proxy asked for) and the continuation's add up to the client's; a re-tokenized estimate would not.
    oai_attempts = rows(tao.db, "SELECT a.* FROM llm_attempts a JOIN llm_requests r ON a.request_id = r.id "
                                "WHERE r.session_id = 'oai' ORDER BY a.attempt")
    assert sum(a["completion_tokens"] for a in oai_attempts) == MAX_TOKENS, oai_attempts
