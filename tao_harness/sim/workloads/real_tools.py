"""The `real-tools` workload: sessions whose tool calls are real recorded ones, with synthetic token counts.

Input is a tool-call file as `tao history export` writes it (JSON Lines or CSV, read by the store's own
reader). Each generated session replays one recorded session's calls in `started_at` order: tool name,
command, args, the deadline the harness exposed (`timeout_s`, else `env_timeout_s`) and the measured
`duration_s`, unchanged. The recordings hold no token counts, so those are drawn from the synthetic spec
of the same harness (`SPEC_BY_HARNESS`) with the generator's per-session random stream.

Rules where the recording does not map 1:1 onto the trace format (one tool per turn):
- Calls of a session that started at the same instant ran in parallel (one reply asked for all of
  them): they become one turn whose tool is the longest call, so the turn waits exactly as long as the
  agent did. The same rule as `tao trace export`; the shorter calls' names are not in the trace.
- Sessions with fewer than MIN_TOOL_TURNS turns are left out: in the development data they are Codex
  recordings of a single call (357 of its 413 sessions), which would otherwise be two thirds of the
  sessions and say nothing about how tool time interleaves with LLM turns.
- Calls without a start time or a duration (never finished) are left out; they have nothing to replay.
- Generated session k replays recorded session `order[k % count]`, `order` a permutation drawn from the
  seed and `count` only: no recorded session repeats before all have been used, and session k does not
  depend on how many are generated. Repeats get fresh token counts (their own random stream).
- As in `generate()`, a session ends where its drawn tokens would pass the spec's context limit: the
  recorded calls after that point are dropped.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tao_harness.sim.trace import TraceSession, TraceTool
from tao_harness.sim.workloads.catalog import SWE_LITE, TERMINAL_BENCH
from tao_harness.sim.workloads.generator import build_session, pick_index, session_phase, session_rng
from tao_harness.sim.workloads.model import ToolFamily, WorkloadSpec
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.transfer import ImportFormatError, read_calls

REAL_TOOLS = "real-tools"
MIN_TOOL_TURNS = 2

# mini-SWE-agent's prompt, one `bash` tool and truncated observations are what the swe-lite spec models,
# whatever the task set. Claude Code's tools and prompt size are the terminal-bench spec's; Codex CLI and
# OpenHands (structured tools, multi-thousand-token system prompts) are closer to it than to swe-lite.
SPEC_BY_HARNESS: dict[str, WorkloadSpec] = {"mini_swe_agent": SWE_LITE, "claude_code": TERMINAL_BENCH}
DEFAULT_SPEC = TERMINAL_BENCH


class ToolCallsError(ValueError):
    """A tool-call file that cannot be replayed; the message starts with the file name."""


@dataclass(frozen=True)
class RecordedSession:
    """One recorded session, ready to replay: one tool per turn, in the order the agent ran them."""

    session_id: str
    harness: str | None
    tools: tuple[TraceTool, ...]


def _replayable(record: ToolCallRecord) -> TraceTool | None:
    if record.started_at is None or record.duration_s is None:
        return None
    return TraceTool(
        name=record.tool_name or "tool",
        command=record.command,
        duration_s=record.duration_s,
        timeout_s=record.timeout_s if record.timeout_s is not None else record.env_timeout_s,
        args=record.args,
    )


def _turn_tools(records: list[ToolCallRecord]) -> tuple[TraceTool, ...]:
    """One tool per distinct start time; parallel calls collapse into the longest (stable: file order)."""
    timed = [(record.started_at, tool) for record in records if (tool := _replayable(record)) is not None]
    timed.sort(key=lambda pair: pair[0])
    return tuple(
        max((tool for _, tool in group), key=lambda tool: tool.duration_s)
        for _, group in itertools.groupby(timed, key=lambda pair: pair[0])
    )


def read_recorded_sessions(path: Path) -> list[RecordedSession]:
    """Sessions of a tool-call export with at least MIN_TOOL_TURNS turns, in order of first appearance."""
    by_session: dict[str, list[ToolCallRecord]] = defaultdict(list)
    try:
        with path.open(encoding="utf-8", newline="") as source:
            for record in read_calls(source):
                if record.duration_s is not None and record.duration_s < 0:
                    raise ToolCallsError(f"{path}: call {record.id!r} has a negative duration_s")
                by_session[record.session_id].append(record)
    except OSError as exc:
        raise ToolCallsError(f"cannot read tool calls {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ToolCallsError(f"tool calls {path} are not UTF-8 text") from None
    except ImportFormatError as exc:
        raise ToolCallsError(f"{path}: {exc}") from None
    sessions = [
        RecordedSession(session_id, records[0].harness, _turn_tools(records))
        for session_id, records in by_session.items()
    ]
    kept = [session for session in sessions if len(session.tools) >= MIN_TOOL_TURNS]
    if not kept:
        raise ToolCallsError(
            f"{path}: no session has {MIN_TOOL_TURNS} or more timed tool calls at distinct start times"
        )
    return kept


def _family_for(spec: WorkloadSpec, tool: TraceTool, phase: int, rng: np.random.Generator) -> ToolFamily:
    # Token sizes follow the spec's families of the same tool (a Read returns a file, a Write's reply
    # carries one), weighted as the generator weights them at this point of a session; a tool the spec
    # does not model draws from all its families.
    candidates = [family for family in spec.families if family.tool_name == tool.name] or list(spec.families)
    return candidates[pick_index(rng, list(itertools.accumulate(f.weights[phase] for f in candidates)))]


def replay_session(recorded: RecordedSession, session_id: str, rng: np.random.Generator) -> TraceSession:
    """`recorded`'s tools, one per turn, with token counts drawn from its harness's spec."""
    spec = SPEC_BY_HARNESS.get(recorded.harness or "", DEFAULT_SPEC)
    planned = len(recorded.tools) + 1  # the final reply is a turn of its own, as in generate()
    return build_session(
        spec,
        session_id,
        recorded.harness or spec.prefix_group,  # one system prompt per harness
        planned,
        rng,
        choose_family=lambda turn: _family_for(spec, recorded.tools[turn], session_phase(turn, planned), rng),
        tool_for=lambda turn, _family: recorded.tools[turn],
    )


def generate_real_tools(recorded: Sequence[RecordedSession], sessions: int, seed: int) -> list[TraceSession]:
    """`sessions` sessions replaying `recorded` in a seeded order; identical for the same seed and file."""
    # The order has a stream of its own (not a session's), so it depends on the seed and the file only.
    order = np.random.default_rng([seed, len(recorded)]).permutation(len(recorded))
    out: list[TraceSession] = []
    for index in range(sessions):
        source = recorded[int(order[index % len(recorded)])]
        session_id = f"{REAL_TOOLS}-{index:05d}:{source.session_id}"  # keeps where the calls came from
        out.append(replay_session(source, session_id, session_rng(seed, REAL_TOOLS, index)))
    return out
