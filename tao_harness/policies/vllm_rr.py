"""vLLM router round-robin: each request goes to the next replica in turn.

Source: vllm-project router `round_robin` policy. Stateful by nature: the cursor lives on this
instance (the simulator and the coordinator each own one), advancing once per placed request and
skipping replicas the session may not use.
"""

from __future__ import annotations

from tao_harness.config import PlannerConfig
from tao_harness.policies.request_router import NodeLoad, RequestRouter
from tao_harness.types import NodeState, SessionView, Snapshot


class RoundRobinPolicy(RequestRouter):
    def __init__(self, config: PlannerConfig, *, name: str = "vllm-rr") -> None:
        super().__init__(config, name=name)
        self.cursor = 0  # index into the snapshot's node list of the next replica to use

    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        allowed = {node.id for node in nodes}
        for step in range(len(snapshot.nodes)):
            node = snapshot.nodes[(self.cursor + step) % len(snapshot.nodes)]
            if node.id in allowed:
                self.cursor = (self.cursor + step + 1) % len(snapshot.nodes)
                return node.id
        raise AssertionError("pick() is only called with at least one allowed node")
