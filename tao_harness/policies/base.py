"""The policy interface: a pure function of a frozen `Snapshot` that returns a `Plan`.

The simulator and the live coordinator each build their own policy instances (through
`tao_harness.policies.registry.get_policy`) and call `plan()` at every restart decision. A policy does
no I/O. Policies are deterministic given the snapshot; the one stateful baseline (round-robin) keeps its
cursor on the instance, in plain sight.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tao_harness.types import Plan, Snapshot


@runtime_checkable
class Policy(Protocol):
    """Decides which waiting sessions to admit, where, and which acting sessions to interrupt."""

    name: str
    """Registry name, e.g. "tao" or "thunderagent"."""

    admission_control: bool
    """True if the policy holds sessions back for capacity (tao*, thunderagent); False for request-level
    routers, which place every waiting request at once and let the engine queue or preempt."""

    plans_on_timer: bool
    """True if the system it stands for runs its loop on a timer whether or not anything waits
    (ThunderAgent's scheduler loop): the simulator then plans on every tick, not only when a plan could
    admit or relieve something."""

    def plan(self, snapshot: Snapshot) -> Plan: ...
