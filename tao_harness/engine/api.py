"""The engine model's public records: its config, the requests it takes and the outputs a step returns.

`tao replica` (real time) and the simulator (virtual time) talk to `EngineCore` only through these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from tao_harness.engine.host_tier import HostTierStats


class EngineConfig(BaseModel):
    """One engine (one vLLM replica or one data-parallel rank)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    profile: str = "qwen3-32b-2xh100"
    """Step-time profile name (see `tao_harness.engine.profiles.PROFILES`)."""

    num_gpu_blocks: int | None = Field(None, ge=1)
    """KV capacity in blocks; None takes the profile's default."""

    block_size: int = Field(16, ge=1)
    """Tokens per KV block (vLLM's default 16)."""

    max_num_batched_tokens: int = Field(8192, ge=1)
    """Token budget of one step, shared by decodes and prefill chunks (vLLM's default on >=70 GiB GPUs)."""

    max_num_seqs: int = Field(1024, ge=1)
    """Most requests running at once."""

    enable_prefix_caching: bool = True
    """Reuse the KV of full blocks whose chained hash is still resident (vLLM's automatic prefix caching)."""

    kv_offloading_size_gib: float | None = Field(None, gt=0)
    """Host (CPU) memory for KV blocks, GiB in all (vLLM's `--kv-offloading-size`, native backend); None:
    no host tier. Blocks of the profile's `kv_bytes_per_token` × `block_size` bytes (`host_tier.py`)."""

    host_bandwidth_gb_s: float = Field(50.0, gt=0)
    """Host-to-GPU copy bandwidth, GB/s: ≈50 GB/s one way with DMA on an H100 over PCIe Gen5 x16 (64 GB/s
    in theory), as measured for vLLM's offloading connector (vLLM blog, "Inside vLLM's New KV Offloading
    Connector", 2026-01-08)."""

    hash_memo_sessions: int = Field(512, ge=0)
    """Sessions whose last token list and block hashes are remembered, so a session's next prompt hashes
    only its new blocks (requests without `session_id` or `block_hashes` hash the whole prompt). Least
    recently used sessions are forgotten first; `EngineCore.end_session` forgets one at once."""


@dataclass(frozen=True, eq=False)
class EngineRequest:
    """One generation request as the engine sees it: token ids in, a number of tokens out."""

    request_id: str
    """Unique among the engine's unfinished requests."""
    prompt_token_ids: Sequence[int]
    """The whole prompt, including earlier turns of the session (their reuse is the prefix cache's job)."""
    max_tokens: int
    """Most tokens to generate; reaching it finishes the request with reason "length"."""
    output_token_ids: Sequence[int] | None = None
    """Scripted reply: generated exactly, then it finishes with reason "stop". None: synthetic ids."""
    session_id: str | None = None
    """Agent session, for the block-hash memo and for pinning; None for one-off requests."""
    pin_ttl_s: float | None = None
    """Continuum: after finishing, keep this request's KV referenced (unevictable) for this many seconds."""
    block_hashes: Sequence[int] | None = None
    """`hashing.extend_block_hashes(prompt, block_size, ...)` for (a prefix of) the prompt's full blocks,
    kept by the caller per session and extended each turn; trusted as given (not re-checked). With them,
    a prompt that extends the session's finished previous request takes over that request's token list
    instead of being copied (the caller's list is never modified)."""


@dataclass(frozen=True)
class RequestOutput:
    """What one request produced during a step (or macro-step)."""

    request_id: str
    new_token_ids: tuple[int, ...]
    """Tokens sampled in this step, in order."""
    first_token: bool
    """True when `new_token_ids` starts with the request's first generated token (TTFT ends here)."""
    finished: bool
    finish_reason: str | None
    """"stop" (scripted reply done), "length" (max_tokens or the KV capacity reached), None while running."""
    prompt_tokens: int
    cached_tokens: int
    """Prompt tokens found cached when the request was first scheduled (vLLM's num_cached_tokens)."""
    completion_tokens: int
    """Tokens generated so far, this step's included."""


@dataclass(frozen=True)
class StepOutput:
    """Result of `EngineCore.step`: one step, or several identical-composition steps merged."""

    started_at: float
    duration_s: float
    """Outputs become visible at `started_at + duration_s`; 0 when nothing could run."""
    outputs: tuple[RequestOutput, ...]
    """Requests that produced tokens or finished; a request still prefilling produces none."""
    preempted: tuple[str, ...]
    """Requests preempted (by recompute) while scheduling this step, newest first."""
    num_steps: int
    """Engine steps merged into this output (0 for an idle step)."""

    @classmethod
    def make_empty(cls, now: float, preempted: tuple[str, ...] = ()) -> StepOutput:
        return cls(started_at=now, duration_s=0.0, outputs=(), preempted=preempted, num_steps=0)


@dataclass(frozen=True)
class EngineMetrics:
    """The engine's gauges and counters, named after vLLM's `/metrics`."""

    num_gpu_blocks: int
    block_size: int
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    """Fraction of blocks referenced by running requests or pins (vllm:kv_cache_usage_perc, 0..1)."""
    prefix_cache_queries: int
    """Prompt tokens looked up when requests were scheduled (vllm:prefix_cache_queries_total)."""
    prefix_cache_hits: int
    """Of those, tokens found cached (vllm:prefix_cache_hits_total)."""
    num_preemptions: int
    num_free_blocks: int
    """Blocks in the free queue (unreferenced; cached ones among them are still hits until reused)."""
    num_pinned: int
    """Finished requests whose KV is pinned (Continuum)."""
    host: HostTierStats | None = None
    """The host KV tier's counters; None without one."""
