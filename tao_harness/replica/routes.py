"""The generation endpoints: OpenAI chat/completions and Anthropic messages, streamed or whole.

Each handler parses its API's body into a `ChatRequest`, asks the scripted agent for the reply, renders
prompt and reply to token ids, and runs them on the chosen rank; the API's formatter turns the generated
tokens into its wire shapes. A client that disconnects mid-stream aborts its engine request.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from tao_harness.replica import anthropic_format, openai_format, tokenizer
from tao_harness.replica.agent import continue_reply, reasoning_text, script_reply
from tao_harness.replica.chat import (ChatRequest, Progress, Reply, ReplyFormatter, ReplyToken, Usage,
                                     WireModel)
from tao_harness.replica.errors import ApiError, error_body, is_anthropic_path, validation_message
from tao_harness.replica.generation import EngineFailure, RankDriver, ReplyStream, start_reply
from tao_harness.replica.keys import DRIVERS, RENDER_CACHE, ROUND_ROBIN, SCENARIO
from tao_harness.replica.template import Special, prompt_ids, reply_tokens

Body = TypeVar("Body", bound=BaseModel)
SESSION_HEADERS = ("X-Claude-Code-Session-Id", "x-session-id", "X-TAO-Session", "x-session-affinity")


async def read_body(request: web.Request, model: type[Body]) -> Body:
    """The JSON body validated against `model`; bad JSON or wrong types → ApiError (400)."""
    try:
        data = json.loads(await request.read() or b"null")
    except ValueError as exc:
        raise ApiError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError("request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(validation_message(exc)) from None


def pick_driver(request: web.Request) -> RankDriver:
    """The rank named by `X-data-parallel-rank`, else the next one round-robin (like vLLM)."""
    drivers = request.app[DRIVERS]
    header = request.headers.get("X-data-parallel-rank")
    if header is None:
        counter: itertools.count[int] = request.app[ROUND_ROBIN]
        return drivers[next(counter) % len(drivers)]
    try:
        rank = int(header)
    except ValueError:
        raise ApiError(f"X-data-parallel-rank must be an integer, got {header!r}") from None
    if not 0 <= rank < len(drivers):
        raise ApiError(f"X-data-parallel-rank {rank} is out of range: this server has {len(drivers)} rank(s)")
    return drivers[rank]


def request_id(request: web.Request) -> str:
    return request.headers.get("X-Request-Id") or uuid.uuid4().hex


def _session_id(request: web.Request) -> str | None:
    return next((request.headers[h] for h in SESSION_HEADERS if h in request.headers), None)


class _Run:
    """Prompt and reply of one request, cut to its max_tokens."""

    def __init__(self, request: web.Request, chat: ChatRequest, reply: Reply, skip: int = 0) -> None:
        """`skip`: leading reply tokens already in the prompt (a continued final message)."""
        self.driver = pick_driver(request)
        self.render_cache = request.app[RENDER_CACHE]
        self.session_id = _session_id(request)
        self.chat = chat
        self.reply = reply
        tokens = reply_tokens(reply)[skip:]
        limit = len(tokens) if chat.max_tokens is None else min(chat.max_tokens, len(tokens))
        self.tokens: list[ReplyToken] = tokens[:limit]
        self.truncated = limit < len(tokens)

    def start(self) -> ReplyStream:
        """Puts the request into the engine now; a request the engine refuses is a 400."""
        try:
            # X-Request-Id may repeat (client retries); the engine needs ids unique among its requests.
            engine_id = f"{self.chat.request_id}-{uuid.uuid4().hex[:8]}"
            prompt = prompt_ids(self.chat, self.render_cache)
            return start_reply(self.driver, engine_id, prompt, self.tokens, self.session_id)
        except ValueError as exc:
            raise ApiError(str(exc)) from None

    async def collect(self, formatter: ReplyFormatter) -> Usage:
        """Runs the request to the end, feeding `formatter`; the final usage."""
        usage = Usage(0, 0, 0)
        try:
            async with aclosing(self.start()) as stream:
                async for step in stream:
                    formatter.absorb(step)
                    usage = step.usage
        except EngineFailure as exc:
            raise ApiError(str(exc), 500) from None
        return usage


async def _stream(
    request: web.Request, stream: ReplyStream, encode: Callable[[Progress], list[bytes]], trailer: bytes = b""
) -> web.StreamResponse:
    """Streams `stream` as server-sent events; the request is aborted if the client goes away."""
    async with aclosing(stream):
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        try:
            async for step in stream:
                for chunk in encode(step):
                    await response.write(chunk)
        except EngineFailure as exc:  # headers are gone: report it in the stream, as vLLM and Anthropic do
            body = error_body(request.path, str(exc), 500)
            event = "event: error\n" if is_anthropic_path(request.path) else ""
            await response.write(f"{event}data: {json.dumps(body)}\n\n".encode())
        await response.write(trailer)
        await response.write_eof()
    return response


def _data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


async def _openai_response(
    request: web.Request,
    run: _Run,
    formatter: openai_format.ChatFormatter | openai_format.CompletionFormatter,
) -> web.StreamResponse:
    if not run.chat.stream:
        return web.json_response(formatter.completion(await run.collect(formatter)))
    return await _stream(
        request, run.start(), lambda step: [_data(c) for c in formatter.stream_chunks(step)], _data("[DONE]")
    )


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = await read_body(request, openai_format.ChatBody)
    chat = openai_format.parse_chat(body, request_id(request))
    run = _Run(request, chat, *continue_reply(chat, request.app[SCENARIO], openai_format.TOOL_CALL_ID_PREFIX))
    formatter = openai_format.ChatFormatter(chat, run.reply.tool_calls, run.truncated)
    return await _openai_response(request, run, formatter)


async def completions(request: web.Request) -> web.StreamResponse:
    """Legacy completions: no script, `max_tokens` tokens of filler text (finish_reason "length")."""
    body = await read_body(request, openai_format.CompletionBody)
    chat = openai_format.parse_completion(body, request_id(request))
    run = _Run(request, chat, Reply(reasoning_text(chat.max_tokens or 16, seed=0)))
    return await _openai_response(request, run, openai_format.CompletionFormatter(chat, run.truncated))


async def messages(request: web.Request) -> web.StreamResponse:
    body = await read_body(request, anthropic_format.MessagesBody)
    chat = anthropic_format.parse_messages(body, request_id(request))
    run = _Run(request, chat, script_reply(chat, request.app[SCENARIO], anthropic_format.TOOL_CALL_ID_PREFIX))
    formatter = anthropic_format.MessagesFormatter(chat, run.reply.tool_calls, run.truncated)
    if not chat.stream:
        return web.json_response(formatter.message(await run.collect(formatter)))

    def encode(step: Progress) -> list[bytes]:
        return [
            f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
            for name, data in formatter.stream_events(step)
        ]

    return await _stream(request, run.start(), encode)


class TokenizeBody(WireModel):
    """vLLM's `POST /tokenize`, completion form (a prompt string)."""

    model: str | None = None
    prompt: str
    add_special_tokens: bool = True


async def tokenize(request: web.Request) -> web.Response:
    """vLLM's `/tokenize`: the prompt's token ids and count (the proxy sizes a failed-over stream with it)."""
    body = await read_body(request, TokenizeBody)
    ids = [Special.BEGIN] if body.add_special_tokens else []
    ids += tokenizer.encode(body.prompt)
    max_model_len = request.app[DRIVERS][0].engine.max_model_len
    return web.json_response({"count": len(ids), "max_model_len": max_model_len, "tokens": ids})


async def count_tokens(request: web.Request) -> web.Response:
    body = await read_body(request, anthropic_format.CountTokensBody)
    chat = anthropic_format.parse_messages(body, request_id(request))
    return web.json_response({"input_tokens": len(prompt_ids(chat, request.app[RENDER_CACHE]))})
