"""The shape of a synthetic workload: clipped log-normal distributions, tool families and the workload spec.

Pure data plus sampling; the numbers live in `catalog.py`, the session loop in `generator.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LogNormal:
    """A log-normal given by its median and log-space sigma, clipped to [low, high].

    Median + sigma is how the published statistics are stated (p50 and a tail quantile), so the
    parameters stay readable: p90 = median · e^(1.2816·sigma).
    """

    median: float
    sigma: float
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        value = self.median * math.exp(self.sigma * float(rng.standard_normal()))
        return min(self.high, max(self.low, value))

    def sample_int(self, rng: np.random.Generator) -> int:
        return int(round(self.sample(rng)))

    @classmethod
    def from_quantiles(cls, p50: float, p90: float, low: float, high: float) -> LogNormal:
        """Fit sigma from the median and the 90th percentile."""
        return cls(p50, math.log(p90 / p50) / 1.2815515655446004, low, high)


@dataclass(frozen=True)
class ToolFamily:
    """One kind of tool call: its name, command templates, how long it runs and what it returns.

    Templates are `str.format` strings over the vocabulary in `commands.py`. Two placeholders tie the
    duration to the command so readiness hints stay truthful: `{sleep}` adds exactly that many seconds
    to the sampled duration; `{limit}` (e.g. `timeout {limit} make test`) caps the duration at it.
    """

    key: str
    """Short family id used in stats and tests (`explore`, `test`, `build`, ...)."""
    tool_name: str
    """Tool name template: `bash` (mini-SWE-agent), `Bash`/`Read` (Claude Code), `{app}_{read}` (APIs)."""
    templates: tuple[str, ...]
    """Command templates; empty for structured tools without command text (their args are recorded)."""
    duration_s: LogNormal
    """Wall time of the call (excluding any `{sleep}`)."""
    observation_tokens: LogNormal
    """Tokens the tool's result appends to the context for the next turn."""
    weights: tuple[float, float, float]
    """Relative frequency in the early, middle and late third of a session (explore, edit, then test)."""
    args: tuple[tuple[str, str], ...] = ()
    """Structured tool input as (name, template) pairs, e.g. Claude Code Read's `file_path`."""
    timeout_s: float | None = None
    """The harness kills the call at this many seconds."""
    exposes_timeout: bool = True
    """Whether the agent/harness reports that deadline with the call (mini-SWE-agent's environment.timeout,
    a Bash `timeout` argument the model set); Claude Code's 2-minute default is not reported."""
    sleeps_s: tuple[int, ...] = ()
    """Values for `{sleep}` in seconds."""
    limits_s: tuple[int, ...] = ()
    """Values for `{limit}` in seconds."""
    reply_tokens: LogNormal | None = None
    """Output tokens of the reply that asks for this tool, if not the workload default (file writes)."""


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything that shapes one workload's sessions."""

    name: str
    """Workload name as given on the command line."""
    prefix_group: str
    """Name of the shared prompt prefix (system prompt + tool schemas) all sessions start with."""
    shared_prefix_tokens: int
    """Tokens of that shared prefix."""
    task_tokens: LogNormal
    """Task-specific part of the first prompt (issue text, instruction)."""
    turns: LogNormal
    """LLM turns per session (rounded)."""
    reply_tokens: LogNormal
    """Output tokens of an ordinary turn."""
    final_reply_tokens: LogNormal
    """Output tokens of the last turn (submission / final answer)."""
    turn_overhead_tokens: int
    """Template text wrapped around each observation (mini-SWE-agent's `<returncode>` block etc.)."""
    max_context_tokens: int
    """Context limit: a session stops early rather than overflow it."""
    families: tuple[ToolFamily, ...]
    """Tool families the agent chooses from."""
    vocabulary: str
    """Which command vocabulary fills the templates (`swe`, `terminal`, `automation`; see commands.py)."""
