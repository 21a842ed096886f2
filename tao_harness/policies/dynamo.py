"""NVIDIA Dynamo KV router: minimize prefill work left after the cache overlap plus decode load.

Source: ai-dynamo/dynamo KV router scheduler (DESIGN.md §5):
``logit = overlap_weight · prefill_blocks + decode_blocks``, argmin at temperature 0, where
prefill_blocks = the worker's pending prefill plus this request's uncached tokens, and decode_blocks =
the worker's active blocks plus this request's, both in KV blocks. Defaults: weight 1.0, block 16 tokens.
Ties go to snapshot order. Simplification: pending prefill is what this plan has already sent there.
"""

from __future__ import annotations

from tao_harness.policies.request_router import NodeLoad, RequestRouter, overlap_tokens
from tao_harness.types import NodeState, SessionView, Snapshot

OVERLAP_WEIGHT = 1.0  # Dynamo's default overlap_score_weight
BLOCK_TOKENS = 16  # KV block size (vLLM default)


def _blocks(tokens: int) -> int:
    return -(-tokens // BLOCK_TOKENS)


def dynamo_cost(session: SessionView, node_id: str, load: NodeLoad) -> float:
    uncached = max(0, session.tokens - overlap_tokens(session, node_id))
    prefill_blocks = _blocks(load.pending_prefill_tokens + uncached)
    decode_blocks = _blocks(load.active_tokens + session.tokens)
    return OVERLAP_WEIGHT * prefill_blocks + decode_blocks


class DynamoPolicy(RequestRouter):
    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        costs = [(dynamo_cost(session, node.id, loads[node.id]), b) for b, node in enumerate(nodes)]
        return nodes[min(costs)[1]].id
