"""Test helper: drives an EngineCore in virtual time the way the simulator does (imported by the tests)."""

from __future__ import annotations

from collections.abc import Sequence

from tao_harness.engine import EngineConfig, EngineCore, EngineRequest, RequestOutput, StepOutput


def distinct(start: int, count: int) -> list[int]:
    """Token ids start..start+count-1: stands in for text no other request shares (when ranges differ)."""
    return list(range(start, start + count))


def small_engine(num_gpu_blocks: int = 64, **overrides: object) -> EngineCore:
    return EngineCore(EngineConfig(profile="llama3-8b-1xh100", num_gpu_blocks=num_gpu_blocks, **overrides))


def run_until_idle(
    engine: EngineCore, now: float = 0.0, until: float | None = None, max_steps: int = 100_000
) -> tuple[float, list[StepOutput]]:
    """Step until no request is left (or only blocked ones); returns the final time and every step output.

    With `until`, macro-steps may run up to it; the clock never stops at `until` (it is only a horizon).
    """
    steps: list[StepOutput] = []
    for _ in range(max_steps):
        if not engine.has_unfinished_requests():
            return now, steps
        out = engine.step(now, until=until)
        steps.append(out)
        if out.num_steps == 0:
            expiry = engine.next_wakeup()
            if expiry is None:
                return now, steps
            now = max(now, expiry)
        now += out.duration_s
    raise AssertionError("engine did not go idle")


def outputs_of(steps: Sequence[StepOutput], request_id: str) -> list[RequestOutput]:
    return [out for step in steps for out in step.outputs if out.request_id == request_id]


def tokens_of(steps: Sequence[StepOutput], request_id: str) -> list[int]:
    return [token for out in outputs_of(steps, request_id) for token in out.new_token_ids]


def final_output(steps: Sequence[StepOutput], request_id: str) -> RequestOutput:
    outputs = outputs_of(steps, request_id)
    assert outputs and outputs[-1].finished, f"{request_id} did not finish"
    return outputs[-1]


def turn(
    engine: EngineCore,
    request_id: str,
    prompt: Sequence[int],
    max_tokens: int,
    now: float = 0.0,
    **kw: object,
) -> tuple[float, RequestOutput, list[int]]:
    """Run one request alone to completion; returns (end time, final output, generated tokens)."""
    request = EngineRequest(request_id, list(prompt), max_tokens, **kw)  # type: ignore[arg-type]
    engine.add_request(request, now)
    end, steps = run_until_idle(engine, now)
    return end, final_output(steps, request_id), tokens_of(steps, request_id)
