"""The ablation: TAO with one part changed at a time, each run as its own row of `tao bench compare`.

A variant is a registered policy plus planner-field overrides and the simulator's readiness switches, so a part
that is a setting (the wait bound, the release rule) is ablated the same way as one that is a policy
switch (readiness, cache credit, the exact program). `tao bench compare --policies ablation` runs them all
beside ThunderAgent; any of their labels can also be named in `--policies`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Variant:
    """One row: which policy, with which planner fields changed, with or without the oracle."""

    label: str
    """The row's name in the tables (a registered policy's own name when nothing else changes)."""
    policy: str
    """Registered policy name (`tao_harness.policies.registry`)."""
    planner: dict[str, Any] = field(default_factory=dict)
    """PlannerConfig fields set on top of the run's config."""
    oracle_readiness: bool = False
    """The readiness estimator is told each tool's true duration."""
    tool_events: bool = True
    """False: no tool calls reported, so no tool-duration history and no readiness (`SimConfig.tool_events`)."""


ABLATION: tuple[Variant, ...] = (
    Variant("tao", "tao"),
    Variant("tao-no-readiness", "tao-no-readiness"),
    Variant("tao-no-tool-events", "tao", tool_events=False),
    Variant("tao+oracle-readiness", "tao", oracle_readiness=True),
    Variant("tao-no-cache", "tao-no-cache"),
    Variant("tao-bfd", "tao-bfd"),
    Variant("tao-no-bound", "tao", {"max_wait_s": None}),
    Variant("tao-value-release", "tao", {"tool_time_release": False}),
    Variant("thunderagent", "thunderagent"),
)
"""Each part of TAO taken out (or made perfect) once, and the peer it must beat."""

_BY_LABEL = {variant.label: variant for variant in ABLATION}


def variant(name: str) -> Variant:
    """The ablation row called `name`, else the registered policy of that name as it is."""
    return _BY_LABEL.get(name) or Variant(name, name)


def variant_names() -> tuple[str, ...]:
    return tuple(_BY_LABEL)
