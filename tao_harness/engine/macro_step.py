"""How many identical-composition decode steps can be merged into one macro-step, and their total time.

Steps after the first are merged while (a) no request finishes before the last merged step, (b) the free
queue still covers every new block the decodes need (a shortfall would preempt), and (c) each merged step
starts before the horizon (the caller's `until` or the next pin expiry). The batch is pure decode, so a
step's time is linear in the batch's total context, which grows by one token per request per step:
`d_j = d_1 + decode_context_s · n · (j − 1)`, and k steps take `k·d_1 + decode_context_s · n · k(k−1)/2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tao_harness.engine.profiles import StepTimeProfile
from tao_harness.engine.request_state import RequestState


def _blocks_needed(states: Sequence[RequestState], block_size: int, num_steps: int) -> int:
    """New blocks the batch needs beyond what it holds to compute `num_steps` decode tokens each."""
    total = 0
    for state in states:
        missing = -(-(state.num_computed + num_steps) // block_size) - len(state.blocks)
        if missing > 0:
            total += missing
    return total


def _largest(low: int, high: int, fits) -> int:  # type: ignore[no-untyped-def]
    """Largest k in [low, high] with fits(k), given fits(low) and fits monotone (true then false)."""
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class DecodeRunTiming:
    """Step times of a pure-decode run: step j takes first_step_s + slope_s · (j − 1)."""

    first_step_s: float
    slope_s: float

    def elapsed(self, num_steps: int) -> float:
        return num_steps * self.first_step_s + self.slope_s * num_steps * (num_steps - 1) / 2

    def steps_starting_before(self, offset_s: float, most: int) -> int:
        """How many of the first `most` steps start before `offset_s` (at least 1: the first always runs)."""
        return _largest(1, most, lambda k: self.elapsed(k - 1) < offset_s)


def decode_run_length(
    states: Sequence[RequestState],
    num_free_blocks: int,
    block_size: int,
    profile: StepTimeProfile,
    first_step_s: float,
    horizon_s: float,
) -> tuple[int, DecodeRunTiming]:
    """(steps to merge ≥ 1, their timing) for a scheduled pure-decode batch.

    `states` are as scheduled for the first step: blocks cover `num_computed + 1` tokens each.
    `horizon_s` is measured from the first step's start.
    """
    timing = DecodeRunTiming(first_step_s, profile.decode_context_s * len(states))
    cap = min(state.remaining() for state in states)
    # Usually the free queue covers the whole run: one count instead of a bisection's dozen over the batch.
    if _blocks_needed(states, block_size, cap) > num_free_blocks:
        cap = _largest(1, cap, lambda k: _blocks_needed(states, block_size, k) <= num_free_blocks)
    return timing.steps_starting_before(horizon_s, cap), timing
