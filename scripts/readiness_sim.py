"""Readiness where it matters: a simulated run whose tool calls are real ones, under three readiness rules.

    .venv/bin/python scripts/readiness_sim.py --history ../shared/data/real-tool-calls/dev.jsonl \
        [--exclude-sessions claude-code-export/] [--min-calls 8] [--workload terminal-bench] \
        [--sessions 300] [--workers 64] [--replicas 2] [--policy tao] [--seed 0]

The trace keeps a synthetic workload's token counts (`tao trace generate`), but each session's tool
calls — name, command, arguments, harness timeout and true duration — are the calls of one real session
of the history (a `tao history export` file, sessions of at least `--min-calls` calls), in their recorded
order; a session has as many tools as both allow. The same trace then runs with

- "distribution": readiness from P(return within H | elapsed) of similar earlier calls (the default);
- "bernstein": the family's empirical-Bernstein bound as the predicted duration (the rule until now);
- "oracle": every tool's true duration known in advance (`--oracle-readiness`);
- "no-readiness": the `tao-no-readiness` policy (r = 0), for scale.

Every run starts with an empty history and learns online, as a fresh coordinator would. Printed: one
row per rule with the simulator's metrics (latency, TTFT, tool-end-to-first-token, makespan, ...).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tao_harness.config import ReadinessConfig  # noqa: E402
from tao_harness.sim.config import SimConfig  # noqa: E402
from tao_harness.sim.simulator import simulate  # noqa: E402
from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn  # noqa: E402
from tao_harness.sim.workloads import generate  # noqa: E402
from tao_harness.store.records import ToolCallRecord  # noqa: E402
from tao_harness.store.transfer import read_calls  # noqa: E402
from tao_harness.tables import format_table  # noqa: E402

COLUMNS = ("mean_latency_s", "mean_ttft_s", "p95_ttft_s", "mean_tool_end_to_first_token_s", "makespan_s",
           "decode_tok_s", "prefix_hit_rate", "admissions", "interrupts", "expirations")


def real_sessions(path: Path, exclude: list[str], min_calls: int) -> list[list[ToolCallRecord]]:
    """The history's sessions with at least `min_calls` timed calls, each in start order (sorted by id)."""
    sessions: dict[str, list[ToolCallRecord]] = defaultdict(list)
    with path.open(encoding="utf-8") as source:
        for call in read_calls(source):
            if call.duration_s is None or call.started_at is None:
                continue
            if exclude and call.session_id.startswith(tuple(exclude)):
                continue
            sessions[call.session_id].append(call)
    return [sorted(calls, key=lambda c: c.started_at or 0.0) for _, calls in sorted(sessions.items())
            if len(calls) >= min_calls]


def with_real_tools(trace: list[TraceSession], sessions: list[list[ToolCallRecord]], seed: int) -> list[TraceSession]:
    """Each synthetic session's tools replaced by one real session's calls (drawn with `seed`)."""
    rng = random.Random(seed)
    out = []
    for synthetic in trace:
        calls = rng.choice(sessions)
        tools = min(len(synthetic.turns) - 1, len(calls))
        turns = [
            TraceTurn(turn.input_tokens, turn.output_tokens,
                      TraceTool(call.tool_name or "?", call.command, float(call.duration_s or 0.0),
                                call.env_timeout_s, call.args) if index < tools else None)
            for index, (turn, call) in enumerate(zip(synthetic.turns[: tools + 1], [*calls[:tools], calls[0]]))
        ]
        out.append(TraceSession(synthetic.session, synthetic.arrival_s, synthetic.prefix_group,
                                synthetic.shared_prefix_tokens, tuple(turns)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True, help="a `tao history export` JSON Lines file")
    parser.add_argument("--exclude-sessions", action="append", default=None, metavar="PREFIX",
                        help="leave out sessions with this id prefix (default: claude-code-export/)")
    parser.add_argument("--min-calls", type=int, default=8,
                        help="use real sessions with at least this many calls (agent loops, not one-shots)")
    parser.add_argument("--workload", default="terminal-bench")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--policy", default="tao")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    exclude = ["claude-code-export/"] if args.exclude_sessions is None else args.exclude_sessions

    sessions = real_sessions(args.history, exclude, args.min_calls)
    if not sessions:
        print(f"{args.history}: no timed calls outside {exclude}", file=sys.stderr)
        return 2
    trace = with_real_tools(generate(args.workload, args.sessions, args.seed), sessions, args.seed)
    tools = [t.tool for s in trace for t in s.turns if t.tool is not None]
    print(f"{args.workload} tokens, tools from {len(sessions)} real sessions of {args.history.name}: "
          f"{len(trace)} sessions, {len(tools)} tool calls, {sum(t.duration_s for t in tools):.0f} s of tool time; "
          f"{args.workers} workers, {args.replicas} replicas, policy {args.policy}")
    runs = {
        "distribution": SimConfig(policy=args.policy, replicas=args.replicas, workers=args.workers, seed=args.seed),
        "bernstein": SimConfig(policy=args.policy, replicas=args.replicas, workers=args.workers, seed=args.seed,
                               readiness=ReadinessConfig(estimator="bernstein")),
        "oracle": SimConfig(policy=args.policy, replicas=args.replicas, workers=args.workers, seed=args.seed,
                            oracle_readiness=True),
        "no-readiness": SimConfig(policy="tao-no-readiness", replicas=args.replicas, workers=args.workers,
                                  seed=args.seed),
    }
    rows = []
    for name, config in runs.items():
        started = time.process_time()
        metrics = simulate(trace, config).metrics.to_json()
        rows.append([name, *(metrics[c] for c in COLUMNS), time.process_time() - started])
    print(format_table(rows, ["readiness", *COLUMNS, "cpu_s"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
