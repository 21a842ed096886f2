"""`tao plan SNAPSHOT.json [--policy NAME] [--json]`: run one policy on one snapshot and show the plan.

The table lists each admission (session, node, value triple), each interrupt, and every waiting session
left out with the reason. The snapshot format is documented in docs/snapshot.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tao_harness.cli.common import UsageError, print_json
from tao_harness.config import PlannerConfig
from tao_harness.policies.registry import get_policy, policy_names
from tao_harness.tables import format_table
from tao_harness.types import SessionView, Snapshot, SnapshotError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", type=Path, help="snapshot JSON file ('-' reads standard input)")
    parser.add_argument("--policy", default="tao", metavar="NAME",
                        help=f"scheduling policy (default tao); one of: {', '.join(policy_names())}")
    parser.add_argument("--state-budget", type=int, default=None, metavar="N",
                        help="most DP states before falling back to BFD (default from the planner config)")
    parser.add_argument("--deadline-ms", type=float, default=None, metavar="MS",
                        help="wall time the exact search may take (default: planner.deadline_ms); past it the "
                             "best plan found is shown with its proven gap")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (docs/snapshot.md)")


def load_snapshot(path: Path) -> Snapshot:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    try:
        return Snapshot.from_json(data)
    except SnapshotError as exc:
        raise UsageError(f"invalid snapshot {path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    snapshot = load_snapshot(args.snapshot)
    if args.state_budget is not None and args.state_budget < 1:
        raise UsageError(f"--state-budget must be at least 1, got {args.state_budget}")
    if args.deadline_ms is not None and not args.deadline_ms > 0:
        raise UsageError(f"--deadline-ms must be positive, got {args.deadline_ms}")
    chosen = {"state_budget": args.state_budget, "deadline_ms": args.deadline_ms}
    config = PlannerConfig(**{name: value for name, value in chosen.items() if value is not None})
    try:
        policy = get_policy(args.policy, config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    plan = policy.plan(snapshot)
    if args.json:
        print_json(plan.to_json(), sys.stdout)  # resolved now, so redirected stdout is honoured
        return 0
    print(f"policy {plan.policy}  solver {plan.solver}  objective (K, R, T, N) = {tuple(plan.objective)}  "
          f"{plan.solve_ms:.2f} ms  states {plan.states}{'  FALLBACK' if plan.fallback else ''}")
    if plan.bound is not None:
        print(f"proven gap {plan.gap_text}  bound (K, R, T, N) <= {tuple(plan.bound)}")
    rows = [("admit", a.session, a.node, *a.value, "") for a in plan.assignments]
    rows += [("interrupt", sid, snapshot.session(sid).node, None, None, None, "release for a ready session")
             for sid in plan.interrupts]
    free_after = {n.id: n.free_tokens for n in snapshot.nodes}
    for sid in plan.interrupts:
        released = snapshot.session(sid)
        node_id = released.node or ""
        free_after[node_id] = free_after.get(node_id, 0) + released.cost(snapshot.params)
    for a in plan.assignments:
        free_after[a.node] -= snapshot.session(a.session).cost(snapshot.params)
    admitted = plan.admitted
    for session in snapshot.waiting:
        if session.id not in admitted:
            reason = _reason(snapshot, session, policy.admission_control, free_after)
            rows.append(("wait", session.id, None, None, session.ready, session.footprint, reason))
    print(format_table(rows, ["action", "session", "node", "k", "r", "t", "why"]))
    return 0


def _reason(
    snapshot: Snapshot, session: SessionView, admission_control: bool, free_after: dict[str, int]
) -> str:
    nodes = [n for n in snapshot.nodes if session.may_use(n.id)]
    if not nodes:
        return "no eligible node"
    if not admission_control and not session.has_request:
        return "request not arrived (request-level router)"
    cost = session.cost(snapshot.params)
    largest = max(n.free_tokens for n in nodes)
    if cost > largest:
        return f"cost {cost} > largest free capacity {largest}"
    room_left = max(free_after[n.id] for n in nodes)
    return f"room taken by higher-value sessions (cost {cost}, most room left {room_left})"
