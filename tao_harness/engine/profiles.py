"""Named step-time profiles: how long one engine step takes for a given batch.

Every profile uses one additive form, so the constants of each published fit map onto it directly:

    step = step_base_s                                      (any work in the step)
         + prefill_base_s                                   (the step computes any prefill chunk)
         + prefill_token_s * Σ n                            (linear ops over uncached tokens)
         + prefill_attention_s * Σ (n·c + n²/2)             (attention of each chunk over its context)
         + decode_base_s                                    (the step decodes any request)
         + decode_seq_s * (number of decoding requests)
         + decode_context_s * Σ context of decoding requests

where a prefill chunk computes n tokens after c already-computed ones. The attention term counts the
(query, key) pairs a chunk touches, so a cold prefill of N tokens costs `prefill_attention_s·N²/2`
whether it runs in one chunk or many (the chunks' sums telescope to N²/2).

Profiles and their sources (DESIGN.md §5 and §9):

- "vllm-router-ref": the reference cost model shipped with vllm-router (PyPI `vllm-router` ≥ 0.1.17).
  Cold prefill `0.066 s + 0.0570 s/1k tokens + 0.00441 s/(1k tokens)²`, so prefill_attention_s =
  2·4.41e-9; decode step `10.6 ms + 0.419 ms per running request + 1.42e-7 s per context token`.
  Its prefill constant is charged once per step that computes a prefill chunk (a chunked prompt pays
  it once per chunk). It names no GPU; the KV default is the Qwen3-32B one below.
- "qwen3-32b-2xh100": Qwen3-32B, TP2 on 2×H100 80 GB. KV: 256 KiB per token (bf16) leaves ≈270k tokens
  → 16,875 blocks of 16. Linear prefill ≈19k tok/s and a 12.9 ms step floor from Vidur's CodeLlama-34B
  TP2 tables (same size class); attention over ~30k cached tokens doubles a token's prefill cost
  (→ 5.26e-5 / 30,000 s per (token, context token) pair); a decode step reads each context token's
  256 KiB of KV at ≈5.3 TB/s effective (2 × 3.35 TB/s at 80 %) → 4.9e-8 s per context token; 0.15 ms
  per decoding request for sampling, scheduling and its share of the linear ops (estimate).
- "llama3-8b-1xh100": BLIS's fit for Llama-3.1-8B TP1 on one H100, vLLM 0.8.4:
  `step_µs = 5753 + 17.25·uncached prefill tokens + 6.0·decode tokens`, 29,205 KV blocks.
  LLMServingSim reports 8.2 ms per decode step at batch 1 and 30 ms for a 1,024-token prefill on the
  same model; BLIS gives 5.8 ms and 23.4 ms, so this profile is the optimistic end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepTimeProfile:
    """Constants of the additive step-time form in the module docstring (all in seconds)."""

    name: str
    """Registry name, e.g. "qwen3-32b-2xh100"."""
    description: str
    """One line: model, hardware and where the constants come from."""
    num_gpu_blocks: int
    """Default KV capacity in blocks of 16 tokens when the engine config does not set one."""
    kv_bytes_per_token: int
    """KV cache bytes per token over the whole replica (all TP ranks): what a host-tier copy moves."""
    step_base_s: float = 0.0
    """Fixed cost of every non-empty step (launch, scheduling, reading the weights once)."""
    prefill_base_s: float = 0.0
    """Extra fixed cost of a step that computes at least one prefill chunk."""
    prefill_token_s: float = 0.0
    """Cost per uncached prompt token computed (linear layers)."""
    prefill_attention_s: float = 0.0
    """Cost per (query token, context token) pair of a prefill chunk's attention."""
    decode_base_s: float = 0.0
    """Extra fixed cost of a step that decodes at least one request."""
    decode_seq_s: float = 0.0
    """Cost per decoding request in the step."""
    decode_context_s: float = 0.0
    """Cost per context token of the decoding requests (reading their KV)."""

    def prefill_time_s(self, prefill_chunks: Sequence[tuple[int, int]]) -> float:
        """Prefill share of a step; each chunk is (tokens computed now, context before the chunk)."""
        if not prefill_chunks:
            return 0.0
        tokens = 0
        pairs = 0.0
        for computed, context in prefill_chunks:
            tokens += computed
            pairs += computed * context + computed * computed / 2
        return self.prefill_base_s + self.prefill_token_s * tokens + self.prefill_attention_s * pairs

    def decode_time_s(self, num_decodes: int, total_context: int) -> float:
        """Decode share of a step with `num_decodes` requests whose contexts sum to `total_context`."""
        if num_decodes == 0:
            return 0.0
        return self.decode_base_s + self.decode_seq_s * num_decodes + self.decode_context_s * total_context

    def step_time_s(self, prefill_chunks: Sequence[tuple[int, int]], decode_contexts: Sequence[int]) -> float:
        """Duration of one step: prefill chunks as (uncached tokens now, context before), decode contexts."""
        if not prefill_chunks and not decode_contexts:
            return 0.0
        return (
            self.step_base_s
            + self.prefill_time_s(prefill_chunks)
            + self.decode_time_s(len(decode_contexts), sum(decode_contexts))
        )


_QWEN3_32B_LINEAR_S = 1 / 19_000

PROFILES: dict[str, StepTimeProfile] = {
    profile.name: profile
    for profile in (
        StepTimeProfile(
            name="vllm-router-ref",
            description="vllm-router's reference cost model (no GPU named); KV as qwen3-32b-2xh100",
            num_gpu_blocks=16_875,
            kv_bytes_per_token=256 * 1024,
            prefill_base_s=0.066,
            prefill_token_s=0.0570e-3,
            prefill_attention_s=2 * 0.00441e-6,
            decode_base_s=10.6e-3,
            decode_seq_s=0.419e-3,
            decode_context_s=1.42e-7,
        ),
        StepTimeProfile(
            name="qwen3-32b-2xh100",
            description="Qwen3-32B TP2 on 2xH100: Vidur-class linear costs, KV-bound decode, ~270k KV tokens",
            num_gpu_blocks=16_875,
            kv_bytes_per_token=256 * 1024,
            step_base_s=12.9e-3,
            prefill_token_s=_QWEN3_32B_LINEAR_S,
            prefill_attention_s=_QWEN3_32B_LINEAR_S / 30_000,
            decode_seq_s=0.15e-3,
            decode_context_s=4.9e-8,
        ),
        StepTimeProfile(
            name="llama3-8b-1xh100",
            description="Llama-3.1-8B TP1 on 1xH100, BLIS fit (vLLM 0.8.4), 29,205 KV blocks",
            num_gpu_blocks=29_205,
            kv_bytes_per_token=128 * 1024,
            step_base_s=5753e-6,
            prefill_token_s=17.25e-6,
            decode_seq_s=6.0e-6,
        ),
    )
}


def host_tokens_per_s(profile: StepTimeProfile, bandwidth_bytes_per_s: float) -> float:
    """Context tokens per second a host KV tier loads back over a link of `bandwidth_bytes_per_s` (the
    planner's `host_tokens_per_s`)."""
    return bandwidth_bytes_per_s / profile.kv_bytes_per_token


def get_profile(name: str) -> StepTimeProfile:
    """The profile registered as `name`; ValueError listing the known names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown step-time profile {name!r}; known profiles: {known}") from None
