"""`SimConfig`: everything one simulation run depends on (with the trace, it fixes the result)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tao_harness.config import ConfigError, PlannerConfig, ReadinessConfig, SessionsConfig, load_config


class SimConfig(BaseModel):
    """One simulated run: policy, cluster shape, engine profile and the simulator's own knobs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    policy: str
    """Registered policy name (`tao_harness.policies.registry.policy_names()`)."""

    replicas: int = Field(ge=1)
    """Engine replicas (vLLM servers or data-parallel ranks), each an `EngineCore` in virtual time."""

    workers: int = Field(ge=1)
    """Closed loop: at most this many sessions in progress; a finished session lets the next one start."""

    profile: str = "qwen3-32b-2xh100"
    """Engine step-time profile (`tao_harness.engine.profiles`)."""

    seed: int = 0
    """Seeds the synthetic token ids; with the trace and the other fields it fixes the result."""

    oracle_readiness: bool = False
    """Ablation: the readiness estimator is told each tool's true duration instead of predicting it."""

    tool_events: bool = True
    """Whether the harness reports tool calls (a shim): their names, commands and ends feed the tool-duration
    history and readiness. False is the ablation without readiness: the coordinator sees only the LLM
    traffic, and a holder's return is judged by its quiet time (`coordinator.views.predicted_return`)."""

    num_gpu_blocks: int | None = Field(None, ge=1)
    """KV blocks per replica; None takes the profile's default."""

    kv_offloading_size_gib: float | None = Field(None, gt=0)
    """Host KV tier per replica, GiB (vLLM's `--kv-offloading-size`); None: no host tier."""

    tick_s: float = Field(1.0, gt=0)
    """Period of the housekeeping tick: refresh predictions, give back stale admissions, plan."""

    max_macro_step_s: float | None = Field(None, gt=0)
    """Longest stretch of identical decode steps merged into one event; None = up to the next event
    (exact: nothing can join the batch before it). A cap only trades speed for finer timeline points."""

    targeted_wakeups: bool = True
    """Speed: a held session's tool end and a replica's non-finishing step only cut that replica's
    macro-steps (False: every event cuts every replica's, the exact reference)."""

    pinning: bool | None = None
    """Continuum-style KV pinning after a tool-call reply; None = on exactly for the `continuum` policy."""

    pin_ttl_s: float = Field(2.0, gt=0)
    """Pin length; Continuum's released code pins for a fixed 2 s ..."""

    pin_max_mean_s: float = Field(2.0, gt=0)
    """... and only when the tool family's mean duration (learned online) is at most this."""

    max_turn_output_tokens: int = Field(32_768, ge=1)
    """Cap on one turn's reply (the engine's `max_tokens`)."""

    planner: PlannerConfig = PlannerConfig(deadline_clock="cpu")
    """Value-triple and DP constants handed to the policy; the planner's deadline counts CPU time, so a
    simulation does not depend on how busy the machine is."""

    readiness: ReadinessConfig = ReadinessConfig()
    """Readiness estimator constants."""

    sessions: SessionsConfig = SessionsConfig()
    """Session state machine constants (admission give-back bound)."""

    @model_validator(mode="after")
    def _oracle_needs_tool_events(self) -> SimConfig:
        if self.oracle_readiness and not self.tool_events:
            raise ValueError("oracle_readiness needs tool_events: without tool calls there is nothing to predict")
        return self

    @property
    def pinning_enabled(self) -> bool:
        return self.policy == "continuum" if self.pinning is None else self.pinning


def sim_sections(path: Path | None, planner: dict[str, Any] | None = None) -> dict[str, BaseModel]:
    """The planner, readiness and sessions sections of config file `path` (defaults without one), as a
    simulation uses them: `planner` fields set on top, and the planner's deadline counting CPU time, so a
    run does not depend on how busy the machine is. ConfigError names a bad file or field."""
    config = load_config(path)
    try:  # validated as the file's fields are; None is a value here (max_wait_s: no bound)
        planner_config = PlannerConfig.model_validate(
            {**config.planner.model_dump(), **(planner or {}), "deadline_clock": "cpu"})
    except ValidationError as exc:
        raise ConfigError(f"planner: {exc.errors()[0]['msg']}") from None
    return {"planner": planner_config, "readiness": config.readiness, "sessions": config.sessions}
