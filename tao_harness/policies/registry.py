"""Policies by name: `get_policy("tao", config.planner)` builds a fresh instance.

Every policy is built from the same `PlannerConfig`, so an ablation differs from `tao` in exactly one
switch. Factories import their module lazily: choosing one policy never imports the others.
"""

from __future__ import annotations

import importlib
from typing import Callable

from tao_harness.config import PlannerConfig
from tao_harness.policies.base import Policy

# name -> (module, factory name, keyword arguments, one-line description)
_ENTRIES: dict[str, tuple[str, str, dict[str, object], str]] = {
    "tao": ("tao_harness.policies.tao", "TaoPolicy", {},
            "exact lexicographic DP on (cache, readiness, tokens)"),
    "tao-bfd": ("tao_harness.policies.tao", "TaoPolicy", {"solver": "bfd"},
                "TAO values, best-fit-decreasing"),
    "tao-no-readiness": ("tao_harness.policies.tao", "TaoPolicy", {"use_readiness": False},
                         "TAO without the readiness term (r = 0)"),
    "tao-no-cache": ("tao_harness.policies.tao", "TaoPolicy", {"use_cache": False},
                     "TAO without cache credit (k = 0)"),
    "thunderagent": ("tao_harness.policies.thunderagent", "ThunderAgentPolicy", {},
                     "token admission, pause acting smallest-first, resume by class"),
    "vllm-rr": ("tao_harness.policies.vllm_rr", "RoundRobinPolicy", {}, "vLLM router round-robin"),
    "vllm-ca": ("tao_harness.policies.vllm_ca", "CacheAwarePolicy", {},
                "longest cached prefix, then least load"),
    "dynamo": ("tao_harness.policies.dynamo", "DynamoPolicy", {}, "Dynamo KV router cost (overlap vs load)"),
    "sglang-ca": ("tao_harness.policies.sglang_ca", "SglangCacheAwarePolicy", {},
                  "SGLang cache-aware router (64 / 1.5 / 0.3)"),
    "smetric": ("tao_harness.policies.smetric", "SmetricPolicy", {},
                "first turn least-loaded, later turns cache"),
    "continuum": ("tao_harness.policies.continuum", "ContinuumPolicy", {},
                  "FCFS by arrival, program admission, cache-affinity placement"),
}
# The policies that run the planner's compiled kernels, and the switches that plan the same values without
# them (best-fit-decreasing): what a server plans with while the kernels load (coordinator/policy_loading.py).
_WITHOUT_KERNELS: dict[str, dict[str, object]] = {name: {"solver": "bfd"}
                                                  for name in ("tao", "tao-no-readiness", "tao-no-cache")}


def _factory(name: str, **switches: object) -> Callable[[PlannerConfig], Policy]:
    module_name, class_name, kwargs, _ = _ENTRIES[name]

    def build(config: PlannerConfig) -> Policy:
        cls = getattr(importlib.import_module(module_name), class_name)
        return cls(config, name=name, **{**kwargs, **switches})  # type: ignore[no-any-return]

    return build


POLICIES: dict[str, Callable[[PlannerConfig], Policy]] = {name: _factory(name) for name in _ENTRIES}


def policy_names() -> tuple[str, ...]:
    return tuple(_ENTRIES)


def describe(name: str) -> str:
    """One-line description of a registered policy."""
    return _ENTRIES[name][3]


def check_policy_name(name: str) -> None:
    """ValueError listing the valid names for an unknown one, without building (or importing) the policy."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(policy_names())}")


def get_policy(name: str, config: PlannerConfig | None = None) -> Policy:
    """A fresh policy instance; unknown names raise ValueError listing the valid ones."""
    check_policy_name(name)
    return POLICIES[name](config or PlannerConfig())


def needs_kernels(name: str) -> bool:
    """Whether the policy `name` runs the planner's compiled kernels (planner/warm.py)."""
    return name in _WITHOUT_KERNELS


def without_kernels(name: str, config: PlannerConfig | None = None) -> Policy | None:
    """A policy planning `name`'s values without the planner's compiled kernels (its plans say solver "bfd"),
    or None when `name` needs none: what a server plans with while they load."""
    if not needs_kernels(name):
        return None
    return _factory(name, **_WITHOUT_KERNELS[name])(config or PlannerConfig())
