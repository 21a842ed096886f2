"""Pieces every policy shares: turning a placement into a `Plan`, and value-ordered assignments."""

from __future__ import annotations

from typing import Iterable, Sequence

from tao_harness.types import Assignment, Plan, SessionView, Snapshot, objective_of


def assignment(snapshot: Snapshot, session: SessionView, node_id: str) -> Assignment:
    """The admission of `session` on `node_id`, carrying its true value triple at the snapshot's time."""
    return Assignment(session=session.id, node=node_id, value=snapshot.value(session, node_id))


def by_value(assignments: Iterable[Assignment]) -> list[Assignment]:
    """Highest value triple first, so applying any prefix of the plan keeps the most valuable admissions."""
    return sorted(assignments, key=lambda a: (-a.value[0], -a.value[1], -a.value[2], a.session))


def make_plan(
    policy: str,
    solver: str,
    assignments: Sequence[Assignment],
    *,
    interrupts: Sequence[str] = (),
    solve_ms: float = 0.0,
    states: int = 0,
    fallback: bool = False,
    bound: tuple[int, int, int, int] | None = None,
    solved: tuple[int, int, int, int] | None = None,
) -> Plan:
    return Plan(
        policy=policy,
        solver=solver,
        objective=objective_of(assignments),
        assignments=tuple(assignments),
        interrupts=tuple(interrupts),
        solve_ms=solve_ms,
        states=states,
        fallback=fallback,
        bound=bound,
        solved=solved,
    )


def arrival_order(sessions: Iterable[SessionView]) -> list[SessionView]:
    """FCFS: earliest arrival first, ties by id (a stable, snapshot-only order)."""
    return sorted(sessions, key=lambda s: (s.arrived_at, s.id))
