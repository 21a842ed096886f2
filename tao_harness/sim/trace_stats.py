"""Summary statistics of a trace: what `tao trace stats` prints and the workload tests check.

The share of time in tools needs an LLM time per turn, which only an engine model knows; here it is the
nominal `output_tokens / decode_tok_s` (prefill ignored: with append-only contexts ≈ 96% of input tokens
are cache hits, TraceLab). The simulator measures the real share for a given engine profile.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tao_harness.readiness.family import family_key
from tao_harness.sim.trace import TraceSession

NOMINAL_DECODE_TOK_S = 100.0
"""Per-sequence decode speed for the nominal tool share: between the vllm-router reference cost model
for a 30B-class model at ~10 running requests (≈ 65 tok/s) and BLIS's Llama-8B fit (≈ 170 tok/s)."""


@dataclass(frozen=True)
class Distribution:
    """Count, mean and tail quantiles of one quantity."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution:
        data = np.fromiter(values, dtype=float)
        if data.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0)
        p50, p90, p99 = np.percentile(data, [50, 90, 99])
        return cls(int(data.size), float(data.mean()), float(p50), float(p90), float(p99), float(data.max()))


@dataclass(frozen=True)
class ToolSummary:
    """Calls of one tool family, keyed as the readiness estimator keys them (`bash:pytest`, `Read`)."""

    family: str
    calls: int
    mean_s: float
    p90_s: float


@dataclass(frozen=True)
class TraceStats:
    """Everything `tao trace stats` reports."""

    sessions: int
    turns: int
    tool_calls: int
    turns_per_session: Distribution
    input_tokens_per_turn: Distribution
    output_tokens_per_turn: Distribution
    output_tokens_per_session: Distribution
    context_tokens_per_session: Distribution
    tool_duration_s: Distribution
    tool_time_per_session_s: Distribution
    nominal_decode_tok_s: float
    """Decode speed assumed for `tool_share`."""
    tool_share: float
    """Tool time / (tool time + nominal LLM time), over the whole trace."""
    prefix_groups: tuple[tuple[str, int], ...]
    """(group, sessions), most common first; ungrouped sessions count under "-"."""
    families: tuple[ToolSummary, ...]
    """Tool families by total time, largest first."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _families(sessions: Sequence[TraceSession]) -> tuple[ToolSummary, ...]:
    durations: dict[str, list[float]] = defaultdict(list)
    for session in sessions:
        for turn in session.turns:
            if turn.tool is not None:
                durations[family_key(turn.tool.name, turn.tool.command)].append(turn.tool.duration_s)
    summaries = [
        ToolSummary(family, len(values), float(np.mean(values)), float(np.percentile(values, 90)))
        for family, values in durations.items()
    ]
    return tuple(sorted(summaries, key=lambda s: (-s.calls * s.mean_s, s.family)))


def trace_stats(sessions: Sequence[TraceSession], decode_tok_s: float = NOMINAL_DECODE_TOK_S) -> TraceStats:
    """Summarize `sessions`; `decode_tok_s` sets the nominal LLM time used for the tool share."""
    if decode_tok_s <= 0:
        raise ValueError(f"decode_tok_s must be > 0, got {decode_tok_s}")
    turns = [turn for session in sessions for turn in session.turns]
    durations = [turn.tool.duration_s for turn in turns if turn.tool is not None]
    tool_time = float(sum(durations))
    llm_time = sum(turn.output_tokens for turn in turns) / decode_tok_s
    groups = Counter(session.prefix_group or "-" for session in sessions)
    return TraceStats(
        sessions=len(sessions),
        turns=len(turns),
        tool_calls=len(durations),
        turns_per_session=Distribution.of(len(s.turns) for s in sessions),
        input_tokens_per_turn=Distribution.of(t.input_tokens for t in turns),
        output_tokens_per_turn=Distribution.of(t.output_tokens for t in turns),
        output_tokens_per_session=Distribution.of(sum(t.output_tokens for t in s.turns) for s in sessions),
        context_tokens_per_session=Distribution.of(s.total_tokens for s in sessions),
        tool_duration_s=Distribution.of(durations),
        tool_time_per_session_s=Distribution.of(s.tool_time_s for s in sessions),
        nominal_decode_tok_s=decode_tok_s,
        tool_share=tool_time / (tool_time + llm_time) if tool_time + llm_time > 0 else 0.0,
        prefix_groups=tuple(groups.most_common()),
        families=_families(sessions),
    )
