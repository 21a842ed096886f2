"""Per-chunk usage the proxy asks vLLM for, and takes out again before the client sees it."""

from __future__ import annotations

import json

from tao_harness.proxy.running_usage import strip_running_usage, with_running_usage

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi \ud800"}], "stream": True,
        "stream_options": {"include_usage": True}}


def test_a_client_asking_for_the_closing_usage_gets_running_usage_asked_for_upstream() -> None:
    running = with_running_usage(BODY)
    assert running is not None
    asked, raw = running
    assert asked["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert json.loads(raw) == asked  # the lone surrogate the client sent goes on, escaped


def test_bodies_left_as_they_came() -> None:
    assert with_running_usage(BODY | {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}) is None
    assert with_running_usage(BODY | {"stream_options": {"include_usage": False}}) is None
    assert with_running_usage({k: v for k, v in BODY.items() if k != "stream_options"}) is None
    # NaN cannot be written back as it came (msgspec would make it null): the replica judges the original.
    assert with_running_usage(BODY | {"temperature": float("nan")}) is None


def test_the_usage_of_chunks_with_choices_is_taken_out_and_the_closing_usage_kept() -> None:
    events = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],'
        b'"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0,"completion_tokens_details":null}}\n\n'
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a}{b"}}],'
        b'"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2,'
        b'"completion_tokens_details":{"reasoning_tokens":1}},"token_ids":null}\n\n'
        b'data: {"id": "c", "choices": [{"index": 0, "delta": {}}], "usage": {"completion_tokens": 3}}\n\n'
        b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,'
        b'"prompt_tokens_details":{"cached_tokens":0}}}\n\n'
        b"data: [DONE]\n\n"
    )
    stripped = strip_running_usage(events)
    chunks = [json.loads(line[6:]) for line in stripped.split(b"\n\n") if line.startswith(b"data: {")]
    assert [chunk.get("usage") for chunk in chunks] == [None, None, None, {
        "prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}]
    assert chunks[1] == {"id": "c", "choices": [{"index": 0, "delta": {"content": "a}{b"}}], "token_ids": None}
    assert stripped.endswith(b"data: [DONE]\n\n") and stripped.count(b"\n\n") == events.count(b"\n\n")


def test_events_without_running_usage_pass_unchanged() -> None:
    events = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    assert strip_running_usage(events) is events
