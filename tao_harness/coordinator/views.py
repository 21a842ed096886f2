"""How the state machine's private records look to a policy: `NodeState` and `SessionView` builders."""

from __future__ import annotations

from collections.abc import Set

from tao_harness.config import ReadinessConfig
from tao_harness.coordinator.records import HOLDING_PHASES, NodeLoad, Phase, Session
from tao_harness.readiness.state import snapshot_readiness
from tao_harness.types import NodeState, SessionView


def node_state(node_id: str, capacity: int, used: int, load: NodeLoad) -> NodeState:
    return NodeState(
        id=node_id,
        capacity_tokens=capacity,
        used_tokens=used,
        running_requests=load.running_requests,
        waiting_requests=load.waiting_requests,
        kv_usage=min(1.0, max(0.0, load.kv_usage)),
        active_tokens=load.active_tokens,
    )


def session_ready(session: Session, now: float, config: ReadinessConfig) -> int:
    """r_i: 1 with its request here or its tools done; else every open call must be ready.

    Spends the overdue probe of each open call that offered it (the snapshot is that planning round).
    """
    if session.phase in (Phase.WAITING, Phase.REASONING):
        return 1
    if not session.calls:
        return 1 if session.tool_done_at is not None else 0
    ready = 1
    for call in session.calls.values():
        call_ready, call.execution = snapshot_readiness(call.execution, now, config)
        ready &= call_ready
    return ready


def predicted_return(session: Session, now: float) -> float | None:
    """When a holder is expected back: the end of its running tools, or, for one that reported no tool
    since its reply (a generic OpenAI client, an agent that went quiet), what its quiet time says.

    Quiet holders are judged by what is observable: the reply's end and its own past gaps between a
    reply and its next request. Back by then if that is still ahead; past it, a holder quiet for q
    seconds is expected to stay quiet about q more. Without this a silent holder kept its credit as if
    about to return, and a waiting request could not displace it until that credit rounded to zero.
    """
    if session.calls:
        return max(c.execution.predicted_completion for c in session.calls.values())
    if session.phase is not Phase.ACTING or session.tool_done_at is not None or session.reply_done_at is None:
        return None
    usual = session.reply_done_at + (session.gap_s or 0.0)
    return usual if usual > now else now + (now - session.reply_done_at)


def session_view(session: Session, now: float, config: ReadinessConfig, down: Set[str],
                 nodes: tuple[str, ...], shared_resident: bool = False) -> SessionView:
    """The policy's view of one pool or holding session; evidence about down nodes is left out, and
    nodes that failed its current request are not eligible.

    Views are immutable and validated on construction, so the last one is reused while nothing it was
    built from has changed (most sessions in a snapshot did not change since the previous one).
    """
    ready = session_ready(session, now, config)
    holding = session.phase in HOLDING_PHASES
    returns_at = predicted_return(session, now) if holding else None
    waiting_since = session.request_at if session.phase is Phase.WAITING else None
    key = (ready, session.phase, session.node, session.tokens, session.turn, session.pool_since,
           session.cache_stamp, returns_at, tuple(sorted(down)) if down else (), session.avoid, waiting_since,
           shared_resident)
    if session.view_memo is not None and session.view_memo[0] == key:
        return session.view_memo[1]
    cache = {n: e for n, e in session.cache.items() if n not in down} if down else session.cache
    view = SessionView(
        id=session.id,
        tokens=session.tokens,
        shared_tokens=min(session.shared_tokens, session.tokens),
        ready=ready,
        cache=cache,
        turn=session.turn,
        state=("reasoning" if session.phase is Phase.REASONING else "acting") if holding else "waiting",
        node=session.node if holding else None,
        arrived_at=session.pool_since,
        has_request=session.phase is not Phase.INTERRUPTED,
        prefix_group=session.prefix_group,
        returns_at=returns_at,
        waiting_since=waiting_since,
        eligible=tuple(n for n in nodes if n not in session.avoid) if session.avoid else None,
        shared_resident=shared_resident and session.shared_tokens > 0,
    )
    session.view_memo = (key, view)
    return view
