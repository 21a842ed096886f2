"""EngineCore: a vLLM-V1-like engine in model time — prefix cache, continuous batching, step timing.

Each `step(now)` schedules one batch the way vLLM's scheduler does (running requests first, then the
waiting queue in FCFS order, one shared token budget, chunked prefill, preemption by recompute), prices
it with a step-time profile and applies it. The caller owns the clock: `tao replica` sleeps for
`duration_s`, the simulator advances virtual time. With `until`, a run of pure-decode steps whose batch
cannot change is merged into one macro-step computed in closed form, which keeps simulations fast.
A macro-step is applied lazily, on the next call that reads or changes the engine other than
`add_request`, `has_unfinished_requests` and `truncate`. Until then a caller that learns of a new request
for this engine mid-run can call `truncate(t)`: the run is cut to the steps that started before t,
exactly as single steps would have gone. Callers that never truncate see eager semantics.

Continuum pinning: a request finished with `pin_ttl_s` keeps its blocks referenced until
`finish time + ttl`. Pins are released lazily, by the first `step()` starting at or after the expiry
(`next_wakeup()` tells an idle caller when to step again), or when the same session's next request
is scheduled (it has taken its own references on the reused blocks by then).

Host KV tier (`kv_offloading_size_gib`, `host_tier.py`): a request loading its prefix from host memory
holds its blocks but runs only once the copy is done; `next_wakeup()` includes that moment, and a
macro-step never runs past it (the request then joins the batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from tao_harness.engine.api import EngineConfig, EngineMetrics, EngineRequest, RequestOutput, StepOutput
from tao_harness.engine.block_pool import NO_BLOCKS, BlockPool, Blocks
from tao_harness.engine.hashing import SessionHashMemo, extend_block_hashes
from tao_harness.engine.host_tier import HostTier
from tao_harness.engine.macro_step import DecodeRunTiming, decode_run_length
from tao_harness.engine.profiles import StepTimeProfile, get_profile, host_tokens_per_s
from tao_harness.engine.request_state import RequestState
from tao_harness.engine.scheduler import Batch, Scheduler

__all__ = ["EngineConfig", "EngineCore", "EngineMetrics", "EngineRequest", "RequestOutput", "StepOutput"]


@dataclass(frozen=True)
class _Pin:
    expires_at: float
    blocks: Blocks


@dataclass(frozen=True)
class _PendingMacroStep:
    """A merged decode run already reported but not yet applied, so `truncate` can still shorten it."""

    batch: Batch
    started_at: float
    num_steps: int
    timing: DecodeRunTiming
    outputs: tuple[RequestOutput, ...]
    """What the run reports, in batch order; committing applies these rather than sampling again."""

    @classmethod
    def make(
        cls, batch: Batch, started_at: float, num_steps: int, timing: DecodeRunTiming
    ) -> _PendingMacroStep:
        outputs = tuple(state.preview(num_steps) for state, _ in batch.scheduled)
        return cls(batch, started_at, num_steps, timing, outputs)


class EngineCore:
    """One replica's engine. Not thread-safe: drive it from one task or one simulation loop."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.profile: StepTimeProfile = get_profile(config.profile)
        self.block_size = config.block_size
        self.num_gpu_blocks = config.num_gpu_blocks or self.profile.num_gpu_blocks
        self.max_model_len = self.num_gpu_blocks * self.block_size
        self._pool = BlockPool(self.num_gpu_blocks)
        self._memo = SessionHashMemo(config.hash_memo_sessions, config.block_size)
        self._host = self._host_tier(config)
        self._scheduler = Scheduler(config, self._pool, on_admit=self._take_over_pin, host=self._host)
        self._requests: dict[str, RequestState] = {}
        self._pins: dict[str, _Pin] = {}
        self._pending: _PendingMacroStep | None = None

    @property
    def host_tokens_per_s(self) -> float | None:
        """Tokens per second a context loads back from the host tier; None without one."""
        return None if self._host is None else host_tokens_per_s(self.profile, self._host.bandwidth_bytes_per_s)

    def _host_tier(self, config: EngineConfig) -> HostTier | None:
        if config.kv_offloading_size_gib is None:
            return None
        block_bytes = self.profile.kv_bytes_per_token * self.block_size
        blocks = int(config.kv_offloading_size_gib * 2**30 // block_bytes)
        return HostTier(max(1, blocks), block_bytes, config.host_bandwidth_gb_s * 1e9)

    # ----------------------------------------------------------------- requests in and out

    def add_request(self, request: EngineRequest, now: float) -> None:
        """Queue a request; ValueError if it is malformed or its prompt can never fit in the KV cache."""
        del now  # arrival order is queue order; the time is accepted for symmetry with step()
        num_prompt = len(request.prompt_token_ids)
        if request.request_id in self._requests:
            raise ValueError(f"request {request.request_id!r} is already in the engine")
        if not num_prompt:
            raise ValueError("prompt_token_ids must not be empty")
        if request.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {request.max_tokens}")
        if num_prompt >= self.max_model_len:
            raise ValueError(
                f"prompt of {num_prompt} tokens can never fit: the KV cache holds {self.max_model_len} "
                f"tokens ({self.num_gpu_blocks} blocks of {self.block_size})"
            )
        script = request.output_token_ids
        if script is not None and len(script) == 0:
            raise ValueError("output_token_ids must hold at least one token when given")
        # The KV capacity is this engine's max_model_len: a request reaching it stops, as in vLLM.
        max_output, reason = min(request.max_tokens, self.max_model_len - num_prompt), "length"
        if script is not None and len(script) <= max_output:
            max_output, reason = len(script), "stop"
        if request.block_hashes is not None:
            hashes = list(islice(request.block_hashes, num_prompt // self.block_size))  # one copy, not two
            adopted = self._memo.adopt_tokens(request.session_id, request.prompt_token_ids, hashes)
            prompt = list(request.prompt_token_ids) if adopted is None else adopted
        else:
            prompt = list(request.prompt_token_ids)
            hashes = self._memo.reusable_hashes(request.session_id, prompt)
        state = RequestState(
            request_id=request.request_id,
            session_id=request.session_id,
            tokens=prompt,
            num_prompt_tokens=num_prompt,
            max_output=max_output,
            script=script,
            pin_ttl_s=request.pin_ttl_s,
            block_hashes=hashes,
            blocks=NO_BLOCKS,
            reuse_guess=self._memo.last_blocks(request.session_id),
            finish_reason_at_end=reason,
        )
        self._memo.remember(request.session_id, state.tokens, state.block_hashes)
        self._requests[request.request_id] = state
        self._scheduler.waiting.append(state)

    def abort_request(self, request_id: str) -> bool:
        """Drop an unfinished request and free its blocks; False if the engine does not know it.

        During a macro-step, `truncate(now)` first, or the whole run counts as done before the abort.
        """
        self._commit()
        state = self._requests.pop(request_id, None)
        if state is None:
            return False
        self._scheduler.remove(state)
        return True

    def has_unfinished_requests(self) -> bool:
        """Whether anything is left once the reported steps (an in-flight macro-step included) are done."""
        scheduler = self._scheduler
        if scheduler.waiting or scheduler.loading:
            return True
        pending = self._pending
        if pending is None:
            return bool(scheduler.running)
        finishing = sum(state.remaining() <= pending.num_steps for state, _ in pending.batch.scheduled)
        return len(scheduler.running) > finishing

    def release_pin(self, key: str) -> bool:
        """Unpin now (key: the session id, or the request id of a request without one); False if none."""
        self._commit()
        if key not in self._pins:
            return False
        self._release_pin(key)
        return True

    def end_session(self, session_id: str) -> bool:
        """The session is over: drop its pin and its remembered tokens; False if the engine knew neither."""
        pinned = self.release_pin(session_id)
        return self._memo.forget(session_id) or pinned

    def next_wakeup(self) -> float | None:
        """Earliest time a pin runs out or a host-tier copy is done: an engine that could not run anything
        should step again then."""
        times = [pin.expires_at for pin in self._pins.values()]
        load_done = self._scheduler.next_load_done()
        return min(times if load_done is None else [*times, load_done], default=None)

    # ----------------------------------------------------------------- the step

    def step(self, now: float, until: float | None = None) -> StepOutput:
        """Run one step starting at `now` (with `until`: a macro-step of unchanged decode steps)."""
        self._commit()
        if self._pins:
            self._release_expired_pins(now)
        batch = self._scheduler.schedule(now)
        preempted = tuple(state.request_id for state in batch.preempted)
        if not batch.scheduled:
            return StepOutput.make_empty(now, preempted)
        prefill_chunks: list[tuple[int, int]] = []
        decode_contexts: list[int] = []
        for state, num_new in batch.scheduled:
            if state.is_decoding(num_new):
                decode_contexts.append(state.num_computed + 1)
            else:
                prefill_chunks.append((num_new, state.num_computed))
        duration = self.profile.step_time_s(prefill_chunks, decode_contexts)
        num_steps = 1
        if until is not None and not prefill_chunks and not batch.preempted and not batch.admitted_any:
            wakeup = self.next_wakeup()
            horizon = (until if wakeup is None else min(until, wakeup)) - now
            num_steps, timing = decode_run_length(
                [state for state, _ in batch.scheduled], self._pool.num_free, self.block_size,
                self.profile, duration, horizon,
            )
            if num_steps > 1:
                self._pending = _PendingMacroStep.make(batch, now, num_steps, timing)
                return self._pending_output(self._pending)
        outputs = self._apply(batch, num_steps, finished_at=now + duration)
        return StepOutput(
            started_at=now, duration_s=duration, outputs=outputs, preempted=preempted, num_steps=num_steps
        )

    def truncate(self, at: float) -> StepOutput | None:
        """Cut the in-flight macro-step to the steps that start before `at`; the replacement output, or
        None when nothing changes. Call it before adding a request that arrives during the run; it has no
        effect once another call (see the module docstring) has applied the run."""
        pending = self._pending
        if pending is None:
            return None
        num_steps = pending.timing.steps_starting_before(at - pending.started_at, pending.num_steps)
        if num_steps == pending.num_steps:
            return None
        self._pending = _PendingMacroStep.make(pending.batch, pending.started_at, num_steps, pending.timing)
        return self._pending_output(self._pending)

    def _pending_output(self, pending: _PendingMacroStep) -> StepOutput:
        return StepOutput(
            started_at=pending.started_at,
            duration_s=pending.timing.elapsed(pending.num_steps),
            outputs=pending.outputs,
            preempted=(),
            num_steps=pending.num_steps,
        )

    def _commit(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            finished_at = pending.started_at + pending.timing.elapsed(pending.num_steps)
            self._apply(pending.batch, pending.num_steps, finished_at, pending.outputs)

    def _apply(
        self, batch: Batch, num_steps: int, finished_at: float, previews: Sequence[RequestOutput] = ()
    ) -> tuple[RequestOutput, ...]:
        """Advance the batch by `num_steps`; `previews`: the outputs already reported for a macro-step."""
        outputs: list[RequestOutput] = []
        sampled: list[RequestState] = []
        for index, (state, num_new) in enumerate(batch.scheduled):
            state.num_computed += num_new if num_steps == 1 else num_steps
            if state.num_computed < len(state.tokens):
                continue  # a prefill chunk that has not reached the end of the prompt yet
            outputs.append(state.take(previews[index]) if previews else state.emit(num_steps))
            sampled.append(state)
        if num_steps > 1:
            # The first merged step's blocks were taken and cached when it was scheduled; the later
            # steps' blocks are covered by decode_run_length's check, their tokens exist only now.
            # One allocation for all takes the blocks one per request would: requests finishing in
            # between would only have appended to the free queue's tail, beyond the blocks taken.
            self._scheduler.grow_all(sampled)
            for state in sampled:
                self._scheduler.cache_blocks(state, state.num_computed - num_steps + 1, state.num_computed)
        finished = [state for state, output in zip(sampled, outputs) if output.finished]
        for state in finished:
            self._finish(state, finished_at)
        if finished:
            running = self._scheduler.running
            running[:] = [state for state in running if state.request_id in self._requests]
        return tuple(outputs)

    def _finish(self, state: RequestState, finished_at: float) -> None:
        del self._requests[state.request_id]
        if self._host is not None:
            self._host.finished(state.block_hashes[: state.num_prompt_tokens // self.block_size])
        cached = state.blocks[: state.num_computed // self.block_size]
        self._memo.settle(state.session_id, state.tokens, self._pool.run(cached, state.block_hashes))
        if state.pin_ttl_s is not None and state.pin_ttl_s > 0:
            key = state.session_id or state.request_id
            self._release_pin(key)
            self._pins[key] = _Pin(expires_at=finished_at + state.pin_ttl_s, blocks=state.blocks)
        else:
            self._pool.free(state.blocks)
        state.blocks = NO_BLOCKS

    def _take_over_pin(self, state: RequestState) -> None:
        if state.session_id is not None:
            self._release_pin(state.session_id)

    def _release_pin(self, key: str) -> None:
        pin = self._pins.pop(key, None)
        if pin is not None:
            self._pool.free(pin.blocks)

    def _release_expired_pins(self, now: float) -> None:
        for key in [key for key, pin in self._pins.items() if pin.expires_at <= now]:
            self._release_pin(key)

    # ----------------------------------------------------------------- observation

    def cached_prefix_tokens(
        self,
        token_ids: Sequence[int],
        block_hashes: Sequence[int] | None = None,
        session_id: str | None = None,
    ) -> int:
        """Prompt tokens a request for `token_ids` would find cached now (n−1 cap included); no LRU touch."""
        self._commit()
        if not self.config.enable_prefix_caching or not token_ids:
            return 0
        tokens = list(token_ids)
        if block_hashes is not None:
            hashes = list(block_hashes)
        else:
            hashes = self._memo.reusable_hashes(session_id, tokens)
        extend_block_hashes(tokens, self.block_size, hashes)
        max_hits = (len(tokens) - 1) // self.block_size
        return len(self._pool.lookup(hashes, max_hits, self._memo.last_blocks(session_id))) * self.block_size

    def metrics(self) -> EngineMetrics:
        self._commit()
        return EngineMetrics(
            num_gpu_blocks=self.num_gpu_blocks,
            block_size=self.block_size,
            num_running=len(self._scheduler.running),
            num_waiting=len(self._scheduler.waiting) + len(self._scheduler.loading),
            kv_cache_usage=self._pool.usage(),
            prefix_cache_queries=self._scheduler.prefix_queries,
            prefix_cache_hits=self._scheduler.prefix_hits,
            num_preemptions=self._scheduler.num_preemptions,
            num_free_blocks=self._pool.num_free,
            num_pinned=len(self._pins),
            host=None if self._host is None else self._host.stats(),
        )
