"""The generation endpoints: OpenAI chat/completions and responses, Anthropic messages, streamed or whole.

Each handler parses its API's body into a `ChatRequest`, asks the scripted agent for the reply, renders
prompt and reply to token ids, and runs them on the chosen rank; the API's formatter turns the generated
tokens into its wire shapes. A client that disconnects mid-stream aborts its engine request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError, model_validator

from tao_harness.replica import anthropic_format, openai_format, responses_format, tokenizer
from tao_harness.replica.agent import continue_reply, reasoning_text, script_reply
from tao_harness.replica.chat import (ChatRequest, Progress, Reply, ReplyFormatter, ReplyToken, Usage,
                                     WireModel)
from tao_harness.replica.errors import ApiError, error_body, is_anthropic_path, validation_message
from tao_harness.replica.generation import EngineFailure, RankDriver, ReplyStream, start_reply
from tao_harness.replica.keys import DRIVERS, RENDER_CACHE, ROUND_ROBIN, SCENARIO, SETTINGS, VOCABULARY
from tao_harness.replica.template import Special, prompt_ids, reply_tokens

Body = TypeVar("Body", bound=BaseModel)
EMULATED_VLLM_VERSION = "0.32.0"
SESSION_HEADERS = ("X-Claude-Code-Session-Id", "x-session-id", "X-TAO-Session", "x-session-affinity")


async def read_body(request: web.Request, model: type[Body]) -> Body:
    """The JSON body validated against `model`; bad JSON or wrong types → ApiError (400)."""
    try:
        data = json.loads(await request.read() or b"null")
    except ValueError as exc:
        raise ApiError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError("request body is JSON nested too deeply") from None
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


def check_model(request: web.Request, model: str) -> None:
    """vLLM's 404 for a model the server does not serve (only with `strict_model_name`)."""
    settings = request.app[SETTINGS]
    if settings.strict_model_name and model != settings.served_model_name:
        raise ApiError(
            f"The model `{model}` does not exist. Valid aliases: {settings.served_model_name}.", 404, "model"
        )


def request_id(request: web.Request) -> str:
    return request.headers.get("X-Request-Id") or uuid.uuid4().hex


def _session_id(request: web.Request) -> str | None:
    return next((request.headers[h] for h in SESSION_HEADERS if h in request.headers), None)


def reasoning_parser(request: web.Request) -> bool:
    return request.app[SETTINGS].reasoning_parser is not None


def usage_details(request: web.Request) -> bool:
    return request.app[SETTINGS].enable_prompt_tokens_details


class _Run:
    """Prompt and reply of one request, cut to its max_tokens."""

    def __init__(self, request: web.Request, chat: ChatRequest, prompt: list[int], tokens: list[ReplyToken],
                 reply: Reply, truncated: bool) -> None:
        self.driver = pick_driver(request)
        self.session_id = _session_id(request)
        self.chat = chat
        self.prompt = prompt
        self.reply = reply
        self.tokens = tokens
        self.truncated = truncated

    @classmethod
    async def prepare(cls, request: web.Request, chat: ChatRequest, script: Callable[[], tuple[Reply, int]]) -> _Run:
        """Checks max_tokens against the context, then scripts the reply off the event loop.

        `script` gives the reply and how many of its leading tokens the prompt already holds (a continued
        final message). A reply as long as the context (ignore_eos, legacy completions) takes seconds to
        build: in a thread, /health and the other streams keep being served meanwhile.
        """
        prompt = prompt_ids(chat, request.app[RENDER_CACHE])
        _check_max_tokens(chat, request.app[DRIVERS][0].engine.max_model_len)
        parser = reasoning_parser(request)

        def build() -> tuple[Reply, list[ReplyToken], bool]:
            reply, skip = script()
            tokens = reply_tokens(reply, parser)[skip:]
            limit = len(tokens) if chat.max_tokens is None else min(chat.max_tokens, len(tokens))
            # A run that reaches max_tokens ends "length", also when ignore_eos padded the reply to it (vLLM).
            return reply, tokens[:limit], limit < len(tokens) or (chat.ignore_eos and limit == chat.max_tokens)

        reply, tokens, truncated = await asyncio.to_thread(build)
        return cls(request, chat, prompt, tokens, reply, truncated)

    def start(self) -> ReplyStream:
        """Puts the request into the engine now; a request the engine refuses is a 400."""
        try:
            # X-Request-Id may repeat (client retries); the engine needs ids unique among its requests.
            engine_id = f"{self.chat.request_id}-{uuid.uuid4().hex[:8]}"
            return start_reply(self.driver, engine_id, self.prompt, self.tokens, self.session_id)
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


def _check_max_tokens(chat: ChatRequest, max_model_len: int) -> None:
    """vLLM 0.32 refuses a max_tokens past the context before any work (a prompt too long for the context
    is the engine's to refuse; a reply that meets the context's end stops there, "length")."""
    if chat.max_tokens is not None and chat.max_tokens > max_model_len:
        field = "max_completion_tokens" if chat.api == "anthropic" else "max_tokens"
        raise ApiError(
            f"{field}={chat.max_tokens} cannot be greater than max_model_len={max_model_len}. Please "
            f"request fewer output tokens. (parameter={field}, value={chat.max_tokens})", 400, field)


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
    check_model(request, chat.model)
    scenario, parser = request.app[SCENARIO], reasoning_parser(request)
    run = await _Run.prepare(request, chat,
                             lambda: continue_reply(chat, scenario, openai_format.TOOL_CALL_ID_PREFIX, parser))
    formatter = openai_format.ChatFormatter(chat, run.reply.tool_calls, run.truncated, usage_details(request),
                                            reasoning_parser(request))
    return await _openai_response(request, run, formatter)


async def completions(request: web.Request) -> web.StreamResponse:
    """Legacy completions: no script, `max_tokens` tokens of filler text (finish_reason "length")."""
    body = await read_body(request, openai_format.CompletionBody)
    chat = openai_format.parse_completion(body, request_id(request))
    check_model(request, chat.model)
    run = await _Run.prepare(request, chat, lambda: (Reply(reasoning_text(chat.max_tokens or 16, seed=0)), 0))
    formatter = openai_format.CompletionFormatter(chat, run.truncated, usage_details(request))
    return await _openai_response(request, run, formatter)


async def messages(request: web.Request) -> web.StreamResponse:
    body = await read_body(request, anthropic_format.MessagesBody)
    chat = anthropic_format.parse_messages(body, request_id(request))
    run = await _scripted(request, chat, anthropic_format.TOOL_CALL_ID_PREFIX)
    formatter = anthropic_format.MessagesFormatter(
        chat, run.reply.tool_calls, run.truncated, usage_details(request)
    )
    return await _named_events(request, run, formatter, formatter.message)


async def responses(request: web.Request) -> web.StreamResponse:
    """OpenAI Responses (the Codex CLI's only API): the scripted agent's reply as output items."""
    body = await read_body(request, responses_format.ResponsesBody)
    chat = responses_format.parse_responses(body, request_id(request))
    run = await _scripted(request, chat, responses_format.TOOL_CALL_ID_PREFIX)
    formatter = responses_format.ResponsesFormatter(chat, run.reply.tool_calls, run.truncated)
    return await _named_events(request, run, formatter, formatter.response)


async def _scripted(request: web.Request, chat: ChatRequest, call_id_prefix: str) -> _Run:
    """The scripted agent's reply to `chat`, ready to run."""
    check_model(request, chat.model)
    scenario = request.app[SCENARIO]
    return await _Run.prepare(request, chat, lambda: (script_reply(chat, scenario, call_id_prefix), 0))


async def _named_events(request: web.Request, run: _Run,
                        formatter: anthropic_format.MessagesFormatter | responses_format.ResponsesFormatter,
                        whole: Callable[[Usage], dict[str, Any]]) -> web.StreamResponse:
    """The reply whole (`whole` of its usage), or streamed as named events (Anthropic's and Responses')."""
    if not run.chat.stream:
        return web.json_response(whole(await run.collect(formatter)))
    return await _stream(request, run.start(), lambda step: [_event(*e) for e in formatter.stream_events(step)])


def _event(name: str, data: dict[str, Any]) -> bytes:
    """A named server-sent event (Anthropic's and the Responses API's streams)."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class TokenizeBody(WireModel):
    """vLLM's `POST /tokenize`: a prompt string, or chat messages rendered with the chat template."""

    model: str | None = None
    prompt: str | None = None
    messages: list[openai_format.ChatMessageBody] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeBody:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give either `prompt` or `messages`")
        if self.continue_final_message and self.add_generation_prompt:
            raise ValueError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        return self


async def tokenize(request: web.Request) -> web.Response:
    """vLLM's `/tokenize`: the token ids and count of a prompt or of rendered messages (the proxy sizes a
    failed-over stream with it)."""
    body = await read_body(request, TokenizeBody)
    if body.messages is not None:
        chat = openai_format.parse_tokenize(body.messages, body.add_generation_prompt, body.continue_final_message)
        ids = prompt_ids(chat, request.app[RENDER_CACHE])
        for message in chat.messages:  # so /detokenize can spell these ids
            request.app[VOCABULARY].encode(message.text)
    else:
        ids = [Special.BEGIN] if body.add_special_tokens else []
        ids += request.app[VOCABULARY].encode(body.prompt or "")
    max_model_len = request.app[DRIVERS][0].engine.max_model_len
    return web.json_response(
        {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": None}
    )


class DetokenizeBody(WireModel):
    model: str | None = None
    tokens: list[int]


async def detokenize(request: web.Request) -> web.Response:
    """vLLM's `/detokenize`, for the ids this server has handed out through `/tokenize`."""
    body = await read_body(request, DetokenizeBody)
    try:
        return web.json_response({"prompt": request.app[VOCABULARY].decode(body.tokens)})
    except KeyError as exc:
        raise ApiError(f"token id {exc.args[0]} is not one this emulated tokenizer has handed out", 400,
                       "tokens") from None


async def version(request: web.Request) -> web.Response:
    """vLLM's `/version`: the vLLM release whose API this replica emulates."""
    return web.json_response({"version": EMULATED_VLLM_VERSION})


async def count_tokens(request: web.Request) -> web.Response:
    body = await read_body(request, anthropic_format.CountTokensBody)
    chat = anthropic_format.parse_messages(body, request_id(request))
    count = len(prompt_ids(chat, request.app[RENDER_CACHE]))
    return web.json_response({"input_tokens": count, "context_management": {"original_input_tokens": count}})
