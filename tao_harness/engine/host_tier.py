"""The host (CPU) KV tier of vLLM's native offloading connector (`--kv-offloading-size GiB`), v0.32.

What it follows, from vLLM 0.32's source (`distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py`,
`v1/kv_offload/cpu/manager.py`, `v1/kv_offload/cpu/policies/lru.py`):
- Stores: every step, each scheduled request offers the full blocks of its prompt that this step's tokens
  complete, from block 0 on (`_build_store_jobs`; `offload_prompt_only` is the default, so generated
  tokens are stored only once a later turn sends them as prompt). Blocks already in the tier are skipped.
  The copy runs on its own stream after the step: it costs no step time and is modelled as instant.
- Eviction: LRU over chunks of one GPU block each (`blocks_per_chunk` = 1). A block's recency is set when
  it is stored and, when a request that offered or loaded it finishes, renewed in reverse prefix order, so
  a prompt's head is the most recently used and its tail goes first (`on_request_finished`). Lookups do
  not touch.
- Loads: a request the scheduler admits first takes its GPU prefix hit, then the consecutive blocks after
  it that the tier holds (`_maximal_prefix_lookup`). GPU blocks are allocated for them at once and the
  request waits (WAITING_FOR_REMOTE_KVS) while they are copied in: `blocks × block bytes / bandwidth`
  after the step that admitted it. The loaded blocks then become ordinary prefix-cache blocks, and
  `cached_tokens` counts them (local + external).
The CPU platform cannot offload (REAL-VLLM.md fact 14): this follows the source, it was not run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HostTierStats:
    """Counters named after vLLM's offloading metrics."""

    num_blocks: int
    """Capacity in blocks."""
    resident_blocks: int
    """Blocks held now (`vllm:kv_offload_cpu_cache_usage_perc` is resident / capacity)."""
    queried_tokens: int
    """Prompt tokens looked up past the GPU hit (`vllm:external_prefix_cache_queries_total`)."""
    hit_tokens: int
    """Of those, tokens loaded from the tier (`vllm:external_prefix_cache_hits_total`,
    `vllm:prompt_tokens_cached_by_source_total{source="host"}`)."""
    loaded_bytes: int
    """`vllm:kv_offload_load_bytes_total`."""
    stored_bytes: int
    """`vllm:kv_offload_store_bytes_total`."""
    load_time_s: float
    """`vllm:kv_offload_load_time_total`: seconds spent copying blocks in."""


class HostTier:
    """Block hashes resident in host memory, least recently used first."""

    def __init__(self, num_blocks: int, block_bytes: int, bandwidth_bytes_per_s: float) -> None:
        if num_blocks < 1 or block_bytes < 1 or bandwidth_bytes_per_s <= 0:
            raise ValueError("a host tier needs at least one block, a block size and a bandwidth")
        self.num_blocks = num_blocks
        self.block_bytes = block_bytes
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s
        self._lru: OrderedDict[int, None] = OrderedDict()
        self._queried = self._hits = self._loaded = self._stored = 0
        self._load_time = 0.0

    def store(self, hashes: Sequence[int]) -> None:
        """Offer blocks (by hash, in prefix order); the absent ones are stored, evicting the LRU ones."""
        lru = self._lru
        for block_hash in hashes:
            if block_hash in lru:
                continue
            if len(lru) >= self.num_blocks:
                lru.popitem(last=False)
            lru[block_hash] = None
            self._stored += self.block_bytes

    def lookup(self, hashes: Sequence[int], start: int, stop: int) -> int:
        """How many consecutive blocks from `hashes[start]` (before `hashes[stop]`) the tier holds."""
        count = start
        lru = self._lru
        while count < stop and hashes[count] in lru:
            count += 1
        return count - start

    def record_lookup(self, queried_tokens: int, blocks: int, block_size: int) -> float:
        """Count an admitted request's lookup of `queried_tokens` past its GPU hit that loads `blocks` (0: a
        miss); returns the copy's duration in seconds."""
        self._queried += queried_tokens
        self._hits += blocks * block_size
        size = blocks * self.block_bytes
        self._loaded += size
        seconds = size / self.bandwidth_bytes_per_s
        self._load_time += seconds
        return seconds

    def finished(self, hashes: Sequence[int]) -> None:
        """A request that offered or loaded these blocks finished: its prefix head becomes the most recent."""
        lru = self._lru
        for block_hash in reversed(hashes):
            if block_hash in lru:
                lru.move_to_end(block_hash)

    def stats(self) -> HostTierStats:
        return HostTierStats(self.num_blocks, len(self._lru), self._queried, self._hits, self._loaded,
                             self._stored, self._load_time)
