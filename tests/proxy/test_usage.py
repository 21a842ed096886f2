from __future__ import annotations

import json

from tao_harness.proxy.usage import Usage, UsageTracker


def _sse(*events: dict, done: bool = True, event_names: bool = False) -> bytes:
    parts = []
    for event in events:
        head = f"event: {event['type']}\n" if event_names else ""
        parts.append(f"{head}data: {json.dumps(event)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def test_openai_stream_split_at_every_byte_boundary() -> None:
    stream = _sse(
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"content": "hi"}}]},
        {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 2,
                                  "prompt_tokens_details": {"cached_tokens": 96}}},
    )
    content_event_end = stream.index(b"\n\n", stream.index(b'"hi"')) + 2
    for cut in range(1, len(stream)):
        tracker = UsageTracker("openai", streaming=True)
        flagged_first = tracker.feed(stream[:cut])
        flagged_second = tracker.feed(stream[cut:])
        assert tracker.finish() == Usage(100, 96, 2)
        # The first-token flag fires exactly once, on the chunk that completed the content event.
        assert flagged_first + flagged_second == 1
        assert flagged_first == (cut >= content_event_end)


def test_openai_missing_details_is_unknown_not_error() -> None:
    tracker = UsageTracker("openai", streaming=False)
    tracker.feed(json.dumps({"usage": {"prompt_tokens": 5, "completion_tokens": 1}}).encode())
    assert tracker.finish() == Usage(5, None, 1)
    broken = UsageTracker("openai", streaming=False)
    broken.feed(b"not json")
    assert broken.finish() == Usage()


def test_anthropic_stream_adds_cache_reads_to_prompt() -> None:
    stream = _sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 20, "cache_read_input_tokens": 480,
                                                        "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
        done=False,
        event_names=True,
    )
    tracker = UsageTracker("anthropic", streaming=True)
    firsts = [tracker.feed(stream[i : i + 7]) for i in range(0, len(stream), 7)]
    assert sum(firsts) == 1
    assert tracker.finish() == Usage(500, 480, 7)


def test_anthropic_error_event_and_crlf_separators() -> None:
    body = b'event: error\r\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}\r\n\r\n'
    tracker = UsageTracker("anthropic", streaming=True)
    tracker.feed(body)
    assert tracker.error == "busy"
    assert tracker.finish() == Usage()


def test_a_vllm_reasoning_delta_is_the_first_token() -> None:
    # vLLM 0.32 with --reasoning-parser streams the thinking as `delta.reasoning` (not `reasoning_content`);
    # the proxy held such a stream back until its end and stored no TTFT.
    stream = _sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"reasoning": "Let me"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"reasoning": " think"}, "finish_reason": "length"}]},
    )
    tracker = UsageTracker("openai", streaming=True)
    role_end = stream.index(b"\n\n") + 2
    assert tracker.feed(stream[:role_end]) is False
    assert tracker.feed(stream[role_end:]) is True
