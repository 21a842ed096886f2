"""Sample sessions from a WorkloadSpec: one LLM turn after another, each followed by a tool call.

Each session has its own random stream seeded by (seed, workload, index), so session k is the same
whether 10 or 10,000 sessions are generated, and a seed reproduces a trace exactly.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn
from tao_harness.sim.workloads.commands import World, call_fields, draw_world
from tao_harness.sim.workloads.model import ToolFamily, WorkloadSpec

# Early / middle / late third of a session: agents explore first, edit in the middle, test at the end.
_PHASES = 3


def session_rng(seed: int, workload: str, index: int) -> np.random.Generator:
    """The random stream of one session; crc32 keeps the workload's part stable across runs."""
    return np.random.default_rng([seed, zlib.crc32(workload.encode()), index])


def pick_index(rng: np.random.Generator, cumulative: Sequence[float]) -> int:
    # One uniform draw against cumulative weights: much cheaper than Generator.choice per call.
    return min(bisect.bisect_right(cumulative, rng.random() * cumulative[-1]), len(cumulative) - 1)


def _phase_cumulative(spec: WorkloadSpec) -> list[list[float]]:
    return [list(itertools.accumulate(f.weights[phase] for f in spec.families)) for phase in range(_PHASES)]


def session_phase(turn: int, turns: int) -> int:
    """Which third of a session (0 early, 1 middle, 2 late) turn `turn` of `turns` falls in."""
    return min(_PHASES - 1, turn * _PHASES // max(1, turns))


def _choose_family(
    spec: WorkloadSpec, cumulative: list[list[float]], turn: int, turns: int, rng: np.random.Generator
) -> ToolFamily:
    return spec.families[pick_index(rng, cumulative[session_phase(turn, turns)])]


def _option(rng: np.random.Generator, options: tuple[int, ...]) -> int:
    return options[int(rng.random() * len(options))]


def sample_tool(family: ToolFamily, world: World, rng: np.random.Generator) -> TraceTool:
    """One call of `family`: command text and a duration that agrees with the command's own hints."""
    template = family.templates[int(rng.random() * len(family.templates))] if family.templates else None
    sleep = _option(rng, family.sleeps_s) if template and "{sleep}" in template else None
    limit = _option(rng, family.limits_s) if template and "{limit}" in template else None
    fields = call_fields(world, rng, sleep, limit)
    duration = family.duration_s.sample(rng) + (sleep or 0)
    if limit is not None:
        duration = min(duration, float(limit))
    if family.timeout_s is not None:
        duration = min(duration, family.timeout_s)
    args = {name: value.format(**fields) for name, value in family.args} or None
    return TraceTool(
        name=family.tool_name.format(**fields),
        command=None if template is None else template.format(**fields),
        duration_s=round(duration, 3),
        timeout_s=family.timeout_s if family.exposes_timeout else None,
        args=args,
    )


def build_session(
    spec: WorkloadSpec,
    session_id: str,
    prefix_group: str,
    planned: int,
    rng: np.random.Generator,
    choose_family: Callable[[int], ToolFamily],
    tool_for: Callable[[int, ToolFamily], TraceTool],
) -> TraceSession:
    """A first prompt (shared prefix + task), then `planned` - 1 tool turns and a final reply, fewer if the
    context limit comes first. Turn k's token sizes are those of `choose_family(k)`; its tool is
    `tool_for(k, family)`. Draws in a fixed order per turn (family, reply, tool, observation)."""
    pending_input = spec.shared_prefix_tokens + spec.task_tokens.sample_int(rng)
    final_reply = spec.final_reply_tokens.sample_int(rng)
    context = 0
    turns: list[TraceTurn] = []
    for turn in range(planned - 1):
        family = choose_family(turn)
        reply = (family.reply_tokens or spec.reply_tokens).sample_int(rng)
        tool = tool_for(turn, family)
        observation = family.observation_tokens.sample_int(rng) + spec.turn_overhead_tokens
        if context + pending_input + reply + observation + final_reply > spec.max_context_tokens:
            break  # the agent would hit the model's context limit; it submits instead
        turns.append(TraceTurn(pending_input, reply, tool))
        context += pending_input + reply
        pending_input = observation
    turns.append(TraceTurn(pending_input, final_reply, None))
    return TraceSession(
        session=session_id,
        arrival_s=0.0,  # closed-loop batch runs: every task is available at the start (catalog S1)
        prefix_group=prefix_group,
        shared_prefix_tokens=spec.shared_prefix_tokens,
        turns=tuple(turns),
    )


def generate_session(spec: WorkloadSpec, session_id: str, rng: np.random.Generator) -> TraceSession:
    """One synthetic session: a sampled number of turns, each with a tool call sampled from its family."""
    world = draw_world(spec.vocabulary, rng)
    planned = max(1, spec.turns.sample_int(rng))
    cumulative = _phase_cumulative(spec)
    return build_session(
        spec,
        session_id,
        spec.prefix_group,
        planned,
        rng,
        choose_family=lambda turn: _choose_family(spec, cumulative, turn, planned, rng),
        tool_for=lambda _turn, family: sample_tool(family, world, rng),
    )
