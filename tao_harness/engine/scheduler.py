"""Forms one engine step's batch the way vLLM V1's scheduler does (`vllm/v1/core/sched/scheduler.py`).

Invariant: every request in `running` holds blocks for all its computed tokens; `waiting` requests hold
none. A step first serves running requests in order (a decode needs one token, a partly prefilled
prompt its next chunk) from one token budget; a running request that cannot get blocks preempts the
newest running request (recompute: blocks freed, hashes kept, back to the front of `waiting`), possibly
itself. Only a step without preemptions admits waiting requests, in FCFS order: the head takes its
cache hits (capped at n−1 tokens) and blocks for its first chunk, or waits, and everyone behind it too.

With a host tier (`host_tier.py`), a waiting request whose prefix continues in host memory past its GPU
hit takes blocks for those tokens and leaves the queue for `loading` (vLLM's WAITING_FOR_REMOTE_KVS)
without computing anything; once its copy is done it returns to the queue's front, its loaded blocks
published as prefix-cache blocks, and is admitted like any other (it already holds its hits).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tao_harness.engine.api import EngineConfig
from tao_harness.engine.block_pool import NO_BLOCKS, BlockPool, Blocks
from tao_harness.engine.hashing import extend_block_hashes
from tao_harness.engine.host_tier import HostTier
from tao_harness.engine.request_state import RequestState


_LOADING = -1
"""`_admit`'s answer for a request that left the queue to copy its prefix in from the host tier."""


@dataclass
class Batch:
    """One scheduling decision."""

    scheduled: list[tuple[RequestState, int]] = field(default_factory=list)
    """(request, tokens it computes this step), in batch order."""
    preempted: list[RequestState] = field(default_factory=list)
    """Requests preempted while forming the batch, newest first."""
    admitted_any: bool = False
    """Whether a waiting request joined the batch (the batch composition changed)."""


class Scheduler:
    """Owns the running list and the waiting queue; allocates through the shared block pool."""

    def __init__(
        self, config: EngineConfig, pool: BlockPool, on_admit: Callable[[RequestState], None],
        host: HostTier | None = None,
    ) -> None:
        self.config = config
        self.block_size = config.block_size
        self.pool = pool
        self.host = host if config.enable_prefix_caching else None  # its blocks are found by their hashes
        self.running: list[RequestState] = []
        self.waiting: deque[RequestState] = deque()
        self.loading: list[tuple[float, RequestState]] = []  # (copy done at, request), admission order
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.num_preemptions = 0
        self._on_admit = on_admit  # called once an admitted request holds its hits (e.g. to drop a pin)

    def next_load_done(self) -> float | None:
        """When the earliest host-tier copy in flight is done; None without one."""
        return min((done_at for done_at, _ in self.loading), default=None)

    def schedule(self, now: float = 0.0) -> Batch:
        if self.loading:
            self._finish_loads(now)
        budget = self.config.max_num_batched_tokens
        batch = Batch()
        index = 0
        while index < len(self.running) and budget > 0:
            state = self.running[index]
            num_new = min(len(state.tokens) - state.num_computed, budget)
            while not self.grow(state, num_new):
                victim = self.running.pop()  # the newest request, possibly `state` itself
                self._preempt(victim)
                batch.preempted.append(victim)
                if victim is state:
                    break
            else:
                self.cache_blocks(state, state.num_computed, state.num_computed + num_new)
                batch.scheduled.append((state, num_new))
                budget -= num_new
                index += 1
        if batch.preempted:
            return batch
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            num_new = self._admit(self.waiting[0], budget, now)
            if num_new == _LOADING:
                self.waiting.popleft()
                continue
            if num_new == 0:
                break
            state = self.waiting.popleft()
            self.cache_blocks(state, state.num_computed, state.num_computed + num_new)
            self.running.append(state)
            batch.scheduled.append((state, num_new))
            batch.admitted_any = True
            budget -= num_new
        return batch

    def grow(self, state: RequestState, num_new: int) -> bool:
        """Allocate blocks so `num_new` more tokens can be computed; False when the pool is short."""
        missing = -(-(state.num_computed + num_new) // self.block_size) - len(state.blocks)
        if missing <= 0:
            return True
        if missing > self.pool.num_free:
            return False
        state.blocks = np.concatenate((state.blocks, self.pool.allocate(missing)))
        return True

    def grow_all(self, states: Sequence[RequestState]) -> None:
        """`grow(state, 0)` for each of `states` in order, as one allocation; the pool must have room."""
        missing = [max(0, -(-state.num_computed // self.block_size) - len(state.blocks)) for state in states]
        fresh = self.pool.allocate(sum(missing))
        start = 0
        for state, count in zip(states, missing):
            if count:
                state.blocks = np.concatenate((state.blocks, fresh[start : start + count]))
                start += count

    def cache_blocks(self, state: RequestState, start_token: int, end_token: int) -> None:
        """Publish the full blocks among tokens [start_token, end_token) as prefix-cache entries.

        Called when a chunk is scheduled, as vLLM's allocate_slots does, so a request admitted later in
        the same step already hits the blocks this step computes.
        """
        first, end = start_token // self.block_size, end_token // self.block_size
        if end > first and self.config.enable_prefix_caching:
            extend_block_hashes(state.tokens, self.block_size, state.block_hashes)
            self.pool.cache_blocks(state.blocks, state.block_hashes, first, end)
            if self.host is not None:  # the prompt's blocks this step completes go to host memory too
                self.host.store(state.block_hashes[first:min(end, state.num_prompt_tokens // self.block_size)])

    def remove(self, state: RequestState) -> None:
        """Forget an aborted request and free its blocks."""
        if state in self.running:
            self.running.remove(state)
        elif state in self.waiting:
            self.waiting.remove(state)
        else:
            self.loading = [(done_at, s) for done_at, s in self.loading if s is not state]
        self.pool.free(state.blocks)
        state.blocks = NO_BLOCKS

    def _preempt(self, state: RequestState) -> None:
        self.pool.free(state.blocks)
        cached = state.blocks[: state.num_computed // self.block_size]
        state.reuse_guess, state.blocks = self.pool.run(cached, state.block_hashes), NO_BLOCKS
        state.num_computed = 0
        self.waiting.appendleft(state)
        self.num_preemptions += 1

    def _finish_loads(self, now: float) -> None:
        """Requests whose host-tier copy is done go back to the queue's front, in admission order."""
        done = [state for done_at, state in self.loading if done_at <= now]
        if not done:
            return
        self.loading = [(done_at, state) for done_at, state in self.loading if done_at > now]
        for state in reversed(done):
            self.pool.cache_blocks(state.blocks, state.block_hashes, 0, state.num_computed // self.block_size)
            self.waiting.appendleft(state)

    def _admit(self, state: RequestState, budget: int, now: float) -> int:
        """Take cache hits and blocks for a waiting request's first chunk; tokens scheduled, 0 if it waits,
        `_LOADING` if it left the queue to load its prefix from the host tier."""
        if len(state.blocks):  # back from the host tier: its hits are loaded and held
            return self._grow_first_chunk(state, budget)
        hits = NO_BLOCKS
        max_hits = (len(state.tokens) - 1) // self.block_size
        if self.config.enable_prefix_caching:
            extend_block_hashes(state.tokens, self.block_size, state.block_hashes)
            hits = self.pool.lookup(state.block_hashes, max_hits, state.reuse_guess)
        if self.host is not None:
            loaded = self.host.lookup(state.block_hashes, len(hits), max_hits)
            if loaded:
                return self._start_load(state, hits, loaded, now)
        num_computed = len(hits) * self.block_size
        num_new = min(len(state.tokens) - num_computed, budget)
        missing = -(-(num_computed + num_new) // self.block_size) - len(hits)
        if missing > self.pool.num_free - self.pool.count_free(hits):
            return 0
        self.pool.touch(hits)
        state.blocks = np.concatenate((hits, self.pool.allocate(missing)))
        self._took_hits(state, num_computed, num_computed)
        if self.host is not None:  # vLLM offers a prompt's blocks from the first, GPU hits included
            self.host.record_lookup(len(state.tokens) - num_computed, 0, self.block_size)
            self.host.store(state.block_hashes[: len(hits)])
        return num_new

    def _took_hits(self, state: RequestState, local_tokens: int, num_computed: int) -> None:
        state.reuse_guess = None
        state.num_computed = num_computed
        if state.num_cached < 0:
            state.num_cached = num_computed  # usage counts local and host hits alike
        if self.config.enable_prefix_caching:
            # Counted per admission (vLLM also counts lookups of requests that then keep waiting).
            self.prefix_queries += len(state.tokens)
            self.prefix_hits += local_tokens
        self._on_admit(state)

    def _start_load(self, state: RequestState, hits: Blocks, loaded: int, now: float) -> int:
        """Blocks for the whole prompt past its GPU hits, the `loaded` host blocks first; the copy starts (or
        it waits). Taking the prompt's remaining blocks now keeps requests that hold loaded blocks from
        filling the pool between them with none able to compute (vLLM reserves them the same way)."""
        needed = -(-len(state.tokens) // self.block_size) - len(hits)
        if needed > self.pool.num_free - self.pool.count_free(hits):
            return 0
        assert self.host is not None
        self.pool.touch(hits)
        state.blocks = np.concatenate((hits, self.pool.allocate(needed)))
        self._took_hits(state, len(hits) * self.block_size, (len(hits) + loaded) * self.block_size)
        copy_s = self.host.record_lookup(len(state.tokens) - len(hits) * self.block_size, loaded, self.block_size)
        self.loading.append((now + copy_s, state))
        return _LOADING

    def _grow_first_chunk(self, state: RequestState, budget: int) -> int:
        num_new = min(len(state.tokens) - state.num_computed, budget)
        return num_new if self.grow(state, num_new) else 0
