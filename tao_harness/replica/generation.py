"""Real-time driving of the engine model: one `RankDriver` per data-parallel rank.

Invariant: engine time only moves forward and tracks the wall clock scaled by `time_scale`
(engine seconds = wall seconds × time_scale). The driver task runs a macro-step capped at
`max_step_wall_s` of wall time, sleeps until that step's end, then hands each request its new tokens, so
a token is delivered when the step that produced it ends (TTFT stays honest, late by at most one
macro-step), never before. Handlers add and abort requests directly: the engine is synchronous and the
event loop single-threaded, so that always happens between two steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tao_harness.engine.api import EngineRequest, RequestOutput
from tao_harness.engine.core import EngineCore
from tao_harness.replica.chat import Progress, ReplyToken, Usage

_log = logging.getLogger(__name__)


class EngineFailure(RuntimeError):
    """The engine model raised while stepping; every request then on the rank fails with it."""


@dataclass
class RankCounters:
    """Totals the engine does not keep, for /metrics (vllm:prompt_tokens_total and friends)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    aborted_requests: int = 0
    finished_by_reason: Counter[str] = field(default_factory=Counter)  # engine finish reason -> requests


@dataclass
class RankDriver:
    """Runs one engine in real time; `run()` is the background task, `generate()` the per-request API."""

    rank: int
    engine: EngineCore
    time_scale: float = 1.0
    max_step_wall_s: float = 0.004
    clock: Callable[[], float] = time.monotonic
    counters: RankCounters = field(default_factory=RankCounters)
    _queues: dict[str, asyncio.Queue[RequestOutput | EngineFailure]] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _engine_now: float = 0.0
    _wall_origin: float | None = None

    def _to_engine_time(self, wall: float) -> float:
        if self._wall_origin is None:
            self._wall_origin = wall
        return (wall - self._wall_origin) * self.time_scale

    def _to_wall_time(self, engine_time: float) -> float:
        assert self._wall_origin is not None
        return self._wall_origin + engine_time / self.time_scale

    def _deliver(self, outputs: tuple[RequestOutput, ...]) -> None:
        for output in outputs:
            queue = self._queues.get(output.request_id)
            if queue is None:
                continue
            self.counters.generation_tokens += len(output.new_token_ids)
            if output.finished:
                del self._queues[output.request_id]
                self.counters.finished_by_reason[output.finish_reason or "stop"] += 1
                self.counters.prompt_tokens += output.prompt_tokens
            queue.put_nowait(output)

    async def run(self) -> None:
        """The driver loop; cancel the task to stop it."""
        while True:
            if not self.engine.has_unfinished_requests():
                self._wake.clear()
                await self._wake.wait()
                continue
            now = max(self._engine_now, self._to_engine_time(self.clock()))
            try:
                out = self.engine.step(now, until=now + self.max_step_wall_s * self.time_scale)
            except Exception as exc:  # a bug in the engine model must not hang every client forever
                _log.exception("engine step failed on rank %d", self.rank)
                self._fail_all(EngineFailure(f"engine model failed on rank {self.rank}: {exc}"))
                await asyncio.sleep(self.max_step_wall_s)
                continue
            if out.num_steps == 0 and not out.outputs:  # nothing could run: do not spin
                await asyncio.sleep(self.max_step_wall_s)
                continue
            self._engine_now = max(now, out.started_at + out.duration_s)
            delay = self._to_wall_time(self._engine_now) - self.clock()
            await asyncio.sleep(max(0.0, delay))
            self._deliver(out.outputs)

    def _fail_all(self, failure: EngineFailure) -> None:
        for request_id, queue in list(self._queues.items()):
            self.abort(request_id)
            queue.put_nowait(failure)

    def start(self, request: EngineRequest) -> asyncio.Queue[RequestOutput | EngineFailure]:
        """Adds `request` to the engine now and returns the queue its outputs arrive on.

        ValueError if the engine refuses it (e.g. a prompt larger than the KV cache, a duplicate id).
        """
        queue: asyncio.Queue[RequestOutput | EngineFailure] = asyncio.Queue()
        self.engine.add_request(request, max(self._engine_now, self._to_engine_time(self.clock())))
        self._queues[request.request_id] = queue
        self._wake.set()
        return queue

    def abort(self, request_id: str) -> None:
        """Drops an unfinished request (client gone); no-op once it has finished."""
        if self._queues.pop(request_id, None) is not None:
            self.counters.aborted_requests += 1
            try:
                self.engine.abort_request(request_id)
            except Exception:  # after an engine failure its state may be broken; the request is gone anyway
                _log.exception("aborting %s failed on rank %d", request_id, self.rank)


class ReplyStream:
    """A started request's reply tokens as they are generated; `aclose()` before the end aborts it."""

    def __init__(self, driver: RankDriver, request: EngineRequest, reply: list[ReplyToken]) -> None:
        self.driver = driver
        self.request_id = request.request_id
        self.reply = reply
        self.queue = driver.start(request)
        self.finished = False
        self._cursor = 0

    def __aiter__(self) -> ReplyStream:
        return self

    async def __anext__(self) -> Progress:
        """The next delivery; EngineFailure if the engine model broke."""
        if self.finished:
            raise StopAsyncIteration
        try:
            output = await self.queue.get()
        except BaseException:  # cancelled: the client went away
            await self.aclose()
            raise
        if isinstance(output, EngineFailure):
            self.finished = True
            raise output
        self.finished = output.finished
        new = self.reply[self._cursor : self._cursor + len(output.new_token_ids)]
        self._cursor += len(new)
        block = self.driver.engine.block_size
        usage = Usage(
            output.prompt_tokens,
            output.cached_tokens,
            output.completion_tokens,
            # vLLM's created_cache_tokens: the prompt's full blocks, less those that were already cached.
            created_cache_tokens=max(0, output.prompt_tokens // block * block - output.cached_tokens),
            reasoning_tokens=sum(1 for t in self.reply[: self._cursor] if t.kind == "reasoning"),
        )
        cut_short = output.finished and self._cursor < len(self.reply)
        if output.finished:
            _log.info(
                "%s rank=%d prompt=%d cached=%d completion=%d%s",
                self.request_id,
                self.driver.rank,
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                " (cut)" if cut_short else "",
            )
        return Progress(tuple(new), usage, output.finished, cut_short)

    async def aclose(self) -> None:
        if not self.finished:
            self.finished = True
            self.driver.abort(self.request_id)


def start_reply(
    driver: RankDriver, request_id: str, prompt: list[int], reply: list[ReplyToken], session_id: str | None
) -> ReplyStream:
    """Starts generating `reply` after `prompt` on `driver` now; ValueError if the engine refuses it."""
    request = EngineRequest(
        request_id=request_id,
        prompt_token_ids=prompt,
        max_tokens=len(reply),
        output_token_ids=[t.token_id for t in reply],
        session_id=session_id,
    )
    return ReplyStream(driver, request, reply)
