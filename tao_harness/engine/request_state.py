"""Mutable per-request bookkeeping inside the engine (never leaves it; callers see `RequestOutput`)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from tao_harness.engine.api import RequestOutput
from tao_harness.engine.block_pool import BlockRun, Blocks

SYNTHETIC_TOKEN_BASE = 1000
SYNTHETIC_TOKEN_SPAN = 100_000
"""Synthetic replies use ids in [BASE, BASE + SPAN), offset per request id so replies differ."""


@dataclass(eq=False, slots=True)
class RequestState:
    """A request from admission to finish; `tokens` is the prompt followed by everything generated."""

    request_id: str
    session_id: str | None
    tokens: list[int]
    num_prompt_tokens: int
    max_output: int
    """Tokens it will generate at most: min(max_tokens, scripted length, room left in the KV capacity)."""
    script: Sequence[int] | None
    pin_ttl_s: float | None
    block_hashes: list[int]
    blocks: Blocks
    reuse_guess: BlockRun | None
    """Blocks that probably hold the prompt's cached prefix (the session's previous request's, or its own
    before a preemption), so admission can check them instead of looking every hash up."""
    num_computed: int = 0
    num_cached: int = -1
    num_output: int = 0
    finish_reason_at_end: str = "length"
    """Reason reported once `max_output` tokens exist."""

    def remaining(self) -> int:
        return self.max_output - self.num_output

    def is_decoding(self, num_new: int) -> bool:
        """A one-token step over an already computed context, after the first token (not a prefill)."""
        return num_new == 1 and self.num_output > 0 and self.num_computed == len(self.tokens) - 1

    def next_tokens(self, count: int) -> tuple[int, ...]:
        start = self.num_output
        if self.script is not None:
            return tuple(self.script[start : start + count])
        offset = zlib.crc32(self.request_id.encode()) + start
        return tuple(SYNTHETIC_TOKEN_BASE + (offset + i) % SYNTHETIC_TOKEN_SPAN for i in range(count))

    def preview(self, count: int) -> RequestOutput:
        """What sampling `count` more tokens will report, without changing anything."""
        new = self.next_tokens(count)
        produced = self.num_output + count
        finished = produced >= self.max_output
        return RequestOutput(
            request_id=self.request_id,
            new_token_ids=new,
            first_token=self.num_output == 0,
            finished=finished,
            finish_reason=self.finish_reason_at_end if finished else None,
            prompt_tokens=self.num_prompt_tokens,
            cached_tokens=max(self.num_cached, 0),
            completion_tokens=produced,
        )

    def emit(self, count: int) -> RequestOutput:
        """Sample `count` tokens (their KV is computed by the following steps) and report them."""
        return self.take(self.preview(count))

    def take(self, output: RequestOutput) -> RequestOutput:
        """Apply what `preview` reported: its tokens become part of the request."""
        self.tokens.extend(output.new_token_ids)
        self.num_output = output.completion_tokens
        return output
