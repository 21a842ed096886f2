"""What a client or the coordinator can tell about a vLLM-compatible server, reduced to comparable shapes.

`python -m tao_harness.replica.conformance URL MODEL [REASONING_URL]` prints a server's shapes as JSON
(how tests/replica/vllm_0_32_shapes.json was recorded from real vLLM 0.32 servers).

`probe(base_url, model)` sends one fixed request set (OpenAI chat and completions, streamed and whole,
a reasoning request, a repeated prompt for the prefix cache, Anthropic messages, the error cases, the
tokenizer and info routes, /metrics) and returns, per probe, a shape: JSON values reduced to their key
structure and value types, streams reduced to the sequence of chunk kinds (runs of one kind collapsed),
metrics reduced to their names and label names. Text, ids, timings and token counts differ between a
tiny random model and the emulated replica and are left out; finish reasons, status codes and which
usage fields are present are kept, since clients branch on them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import aiohttp

from tao_harness.config import ReplicaConfig

Shape = Any

# Long enough (> 2 blocks of 128 tokens on real vLLM's CPU backend) for a repeated prompt to hit the cache.
LONG_PROMPT = " ".join(f"line {i}: the quick brown fox jumps over the lazy dog." for i in range(60))
METRIC_SERIES = (
    "vllm:cache_config_info",
    "vllm:kv_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
)
# cache_config_info labels the coordinator reads; the real server has ~40, the replica the ones that matter.
CACHE_CONFIG_LABELS = ("engine", "block_size", "num_gpu_blocks", "kv_cache_size_tokens", "enable_prefix_caching")


def shape(value: Any) -> Shape:
    """Keys and value types, recursively; a list is the shape of its first element."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "str"


def _collapse(kinds: list[str]) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        if not out or out[-1] != kind:
            out.append(kind)
    return out


def sse_payloads(body: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event."""
    events = []
    for block in body.split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            events.append((name, "\n".join(data)))
    return events


def _chat_chunk_kind(chunk: dict[str, Any]) -> str:
    if not chunk["choices"]:
        return "usage" if "usage" in chunk else "empty-choices"
    choice = chunk["choices"][0]
    delta = choice["delta"]
    if "role" in delta:
        kind = "role"
    elif delta.get("tool_calls"):
        kind = "tool_call"
    elif delta.get("reasoning") is not None:
        kind = "reasoning"
    elif "content" in delta:
        kind = "content"
    else:
        kind = "no-delta"
    if choice.get("finish_reason"):
        kind += f"+finish:{choice['finish_reason']}"
    return kind


def openai_stream_shape(body: str) -> dict[str, Any]:
    """Chunk kinds in order, the envelope of a content chunk and the usage chunk's usage shape."""
    kinds: list[str] = []
    content_chunk: Shape = None
    usage: Shape = None
    done = False
    for _, data in sse_payloads(body):
        if data == "[DONE]":
            done = True
            continue
        chunk = json.loads(data)
        if "choices" in chunk and chunk["choices"] and "text" in chunk["choices"][0]:  # legacy completions
            choice = chunk["choices"][0]
            kinds.append("text" + (f"+finish:{choice['finish_reason']}" if choice["finish_reason"] else ""))
        elif "choices" in chunk and chunk["choices"] or "usage" not in chunk:
            kinds.append(_chat_chunk_kind(chunk))
            if kinds[-1].startswith("content") and content_chunk is None:
                content_chunk = shape(chunk)
        else:
            kinds.append("usage")
        if chunk.get("usage") is not None:
            usage = shape(chunk["usage"])
    return {"kinds": _collapse(kinds), "done": done, "content_chunk": content_chunk, "usage": usage}


def running_usage_shape(body: str) -> dict[str, Any]:
    """How a stream with `continuous_usage_stats` counts: usage on which chunks, its shape on the role
    and content chunks, and whether the counts rise to the closing usage chunk's."""
    chunks = [json.loads(data) for _, data in sse_payloads(body) if data != "[DONE]"]
    counted = [chunk["usage"]["completion_tokens"] for chunk in chunks if chunk.get("usage")]
    content = [chunk for chunk in chunks if chunk["choices"] and "role" not in chunk["choices"][0]["delta"]]
    return {"usage_on_every_chunk": all(chunk.get("usage") for chunk in chunks),
            "role_chunk_usage": shape(chunks[0].get("usage")), "content_chunk_usage": shape(content[0].get("usage")),
            "counts": ("from 0" if counted[:1] == [0] else "not from 0")
            + (", rising" if counted == sorted(counted) else ", not rising")
            + (", last content = total" if content[-1]["usage"]["completion_tokens"] == counted[-1] else ", differ")}


def anthropic_stream_shape(body: str) -> dict[str, Any]:
    names: list[str] = []
    start_usage: Shape = None
    delta_usage: Shape = None
    stop_reason = None
    for name, data in sse_payloads(body):
        event = json.loads(data)
        kind = event.get("type", name)
        if kind == "content_block_start":
            kind += ":" + event["content_block"]["type"]
        names.append(kind)
        if kind == "message_start":
            start_usage = shape(event["message"]["usage"])
        elif kind == "message_delta":
            delta_usage = shape(event["usage"])
            stop_reason = event["delta"].get("stop_reason")
    return {"events": _collapse(names), "message_start_usage": start_usage,
            "message_delta_usage": delta_usage, "stop_reason": stop_reason}


def metrics_shape(text: str) -> dict[str, Any]:
    """For each series of interest: its label names; cache_config_info: which of the read labels it has."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        if name not in METRIC_SERIES or name in out:
            continue
        labels = sorted(part.split("=", 1)[0] for part in rest.rsplit("}", 1)[0].split('",') if "=" in part)
        if name == "vllm:cache_config_info":
            labels = [label for label in labels if label in CACHE_CONFIG_LABELS]
        out[name] = labels
    return out


def _chat(model: str, prompt: str, **extra: Any) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "ignore_eos": True}
    return body | extra


async def _post(session: aiohttp.ClientSession, url: str, body: Any, **headers: str) -> tuple[int, str]:
    async with session.post(url, json=body, headers=headers) as response:
        return response.status, await response.text()


async def probe(base_url: str, model: str, reasoning_url: str | None = None) -> dict[str, Shape]:
    """The shapes of one server's answers to the fixed request set (see the module docstring).

    `reasoning_url`: where to send the reasoning requests, if not to `base_url` (the emulated replica
    separates thinking only when started with a reasoning parser, which would also turn the padding of
    every other reply into thinking).
    """
    shapes: dict[str, Shape] = {}
    v1 = f"{base_url}/v1"
    reasoning_v1 = f"{reasoning_url or base_url}/v1"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        status, text = await _post(session, f"{v1}/chat/completions", _chat(model, "Say hi."))
        body = json.loads(text)
        shapes["chat"] = {"status": status, "body": shape(body),
                          "finish_reason": body["choices"][0]["finish_reason"]}

        status, text = await _post(session, f"{v1}/chat/completions", _chat(
            model, "Say hi.", stream=True, stream_options={"include_usage": True}))
        shapes["chat_stream"] = {"status": status} | openai_stream_shape(text)

        status, text = await _post(session, f"{v1}/chat/completions", _chat(model, "Say hi.", stream=True))
        shapes["chat_stream_no_usage"] = {"status": status} | openai_stream_shape(text)

        status, text = await _post(session, f"{v1}/chat/completions", _chat(
            model, "Say hi.", stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True}))
        shapes["chat_stream_continuous"] = {"status": status} | openai_stream_shape(text) | running_usage_shape(text)

        # ignore_eos: both the random model and the scripted one think until max_tokens.
        thinking = {"chat_template_kwargs": {"enable_thinking": True}, "ignore_eos": True}
        status, text = await _post(session, f"{reasoning_v1}/chat/completions", _chat(
            model, "Think, then say hi.", stream=True, stream_options={"include_usage": True}, **thinking))
        shapes["reasoning_stream"] = {"status": status} | openai_stream_shape(text)
        status, text = await _post(session, f"{reasoning_v1}/chat/completions", _chat(model, "Think.", **thinking))
        body = json.loads(text)
        shapes["reasoning"] = {"status": status, "message": shape(body["choices"][0]["message"])}

        cached = []
        fresh = f"{uuid.uuid4().hex} {LONG_PROMPT}"  # unseen by the server: the first request cannot hit
        for _ in range(2):
            status, text = await _post(session, f"{v1}/chat/completions", _chat(model, fresh, max_tokens=2))
            details = json.loads(text)["usage"].get("prompt_tokens_details")
            cached.append(None if details is None else details.get("cached_tokens", 0) > 0)
        shapes["prefix_cache_hit"] = cached

        status, text = await _post(session, f"{v1}/completions",
                                   {"model": model, "prompt": "Once upon", "max_tokens": 5})
        body = json.loads(text)
        shapes["completion"] = {"status": status, "body": shape(body),
                                "finish_reason": body["choices"][0]["finish_reason"]}
        status, text = await _post(session, f"{v1}/completions", {
            "model": model, "prompt": "Once upon", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}})
        shapes["completion_stream"] = {"status": status} | openai_stream_shape(text)

        # No ignore_eos on this route: 2 tokens cut both the random model and the scripted answer short.
        anthropic = {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "Say hi."}]}
        status, text = await _post(session, f"{v1}/messages", anthropic)
        body = json.loads(text)
        shapes["messages"] = {"status": status, "body": shape(body), "stop_reason": body.get("stop_reason")}
        status, text = await _post(session, f"{v1}/messages", anthropic | {"stream": True})
        shapes["messages_stream"] = {"status": status} | anthropic_stream_shape(text)
        status, text = await _post(session, f"{v1}/messages/count_tokens", anthropic)
        shapes["count_tokens"] = {"status": status, "body": shape(json.loads(text))}

        errors = {
            "unknown_model": (f"{v1}/chat/completions", _chat("no-such-model", "hi"), {}),
            "max_tokens_past_context": (f"{v1}/chat/completions", _chat(model, "hi", max_tokens=10**6), {}),
            "rank_out_of_range": (f"{v1}/chat/completions", _chat(model, "hi"), {"X-data-parallel-rank": "7"}),
            "continue_and_generation_prompt": (f"{v1}/chat/completions", {
                "model": model, "messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Hel"}],
                "continue_final_message": True, "add_generation_prompt": True}, {}),
            "anthropic_unknown_model": (f"{v1}/messages", anthropic | {"model": "no-such-model"}, {}),
        }
        for name, (url, body, headers) in errors.items():
            status, text = await _post(session, url, body, **headers)
            shapes[name] = {"status": status, "body": shape(json.loads(text))}

        status, text = await _post(session, f"{base_url}/tokenize", {"model": model, "prompt": "hello world"})
        shapes["tokenize_prompt"] = {"status": status, "body": shape(json.loads(text))}
        status, text = await _post(session, f"{base_url}/tokenize", {
            "model": model, "messages": [{"role": "user", "content": "hello"}], "add_generation_prompt": True})
        tokens = json.loads(text).get("tokens", [])
        shapes["tokenize_messages"] = {"status": status, "body": shape(json.loads(text))}
        status, text = await _post(session, f"{base_url}/detokenize", {"model": model, "tokens": tokens})
        shapes["detokenize"] = {"status": status, "body": shape(json.loads(text))}
        for route in ("/version", "/v1/models"):
            async with session.get(f"{base_url}{route}") as response:
                shapes[route] = {"status": response.status, "body": shape(await response.json())}
        async with session.get(f"{base_url}/metrics") as response:
            shapes["metrics"] = metrics_shape(await response.text())
    return shapes


# Every way the emulated replica still differs from vLLM 0.32 where a client could tell, and why.
DELIBERATE_DIFFERENCES = {
    "vllm-extras": "vLLM's always-null extras (kv/ec transfer params, routed experts, token-id and prompt echo, "
    "service tier, request metrics) and system_fingerprint: features the replica does not have; absent here",
    "unthinking-reply": "a random-weight model never closes its think block, so asked to think the real "
    "server's reply is all reasoning, while the emulated one thinks, then answers; only which keys exist "
    "and that reasoning comes first are compared",
}
_VLLM_EXTRAS = {"ec_transfer_params", "kv_transfer_params", "metrics", "prompt_text", "prompt_token_ids",
                "service_tier", "system_fingerprint", "routed_experts", "token_ids", "prompt_logprobs"}
_KEEP_NULL = {"prompt_logprobs"}  # null extras the replica does send


def _drop_extras(value: Shape) -> Shape:
    if isinstance(value, dict):
        return {k: _drop_extras(v) for k, v in value.items()
                if k not in _VLLM_EXTRAS or (k in _KEEP_NULL and v == "null" and "choices" in value)}
    if isinstance(value, list):
        return [_drop_extras(v) for v in value]
    return value


def _merge_runs(kinds: list[str]) -> list[str]:
    """A run of chunks of one kind as one chunk, with the finish reason of the run's last: how many
    chunks vLLM merges a stream's deltas into depends on how far its API server lags behind the engine
    (a loaded machine sent all of a short reasoning stream in one chunk, a quiet one in several)."""
    out: list[str] = []
    for kind in kinds:
        if out and out[-1].split("+", 1)[0] == kind.split("+", 1)[0]:
            out[-1] = kind
        else:
            out.append(kind)
    return out


def comparable(shapes: dict[str, Shape]) -> dict[str, Shape]:
    """`shapes` with the deliberate differences above taken out, from either side."""
    out = _drop_extras(shapes)
    for shape_of in out.values():
        if isinstance(shape_of, dict) and isinstance(shape_of.get("kinds"), list):
            shape_of["kinds"] = _merge_runs(shape_of["kinds"])
    if "reasoning" in out:
        out["reasoning"]["message"]["content"] = "str|null"
    if "reasoning_stream" in out:
        stream = out["reasoning_stream"]
        # Role, then reasoning (where the real stream's reasoning ends, the emulated one's answer begins).
        stream["kinds"] = [kind.split("+", 1)[0] for kind in stream["kinds"][:2]]
        stream["content_chunk"] = None
    return out


def emulated_settings(model: str) -> tuple[ReplicaConfig, ReplicaConfig]:
    """Replicas set up like the real servers the shapes are compared with: (plain, reasoning), see `probe`."""
    common = {"port": 0, "time_scale": 50.0, "served_model_name": model, "strict_model_name": True}
    return (ReplicaConfig(**common),
            ReplicaConfig(**common, reasoning_parser="deepseek_r1", enable_prompt_tokens_details=False))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python -m tao_harness.replica.conformance URL MODEL [REASONING_URL]")
    shapes = asyncio.run(probe(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None))
    print(json.dumps(shapes, indent=1, sort_keys=True))
