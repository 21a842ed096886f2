"""The price of a holder's tool time: release the holders whose memory would idle longest, not the cheapest.

An acting holder keeps its context resident for the rest of its tool call, during which that memory
produces nothing. Released, it pays once, on return, to rebuild the context: `PlannerParams.reload_s`
(a reload from the host KV tier where there is one, else a recompute, whose attention grows with the
context: a 200k-token context takes 45 s to rebuild, 19 times a 30k one's 2.4 s). A holder is worth
releasing for a waiting request when its tool has at least `release_after_reloads` such reload times
left (predicted: `returns_at`, the conditional median of what is left of its calls); among those, the
longest tool goes first.
"""

from __future__ import annotations

import math

from tao_harness.types import SessionView, Snapshot


def tool_time_left(snapshot: Snapshot, holder: SessionView) -> float:
    """Predicted seconds until the holder's tools return (infinite when nothing predicts it)."""
    return math.inf if holder.returns_at is None else max(0.0, holder.returns_at - snapshot.now)


def reload_s(snapshot: Snapshot, holder: SessionView) -> float:
    """Seconds to rebuild the holder's context if its cache is lost."""
    return snapshot.params.reload_s(holder.tokens)


def worth_releasing(snapshot: Snapshot, holder: SessionView) -> bool:
    return tool_time_left(snapshot, holder) >= snapshot.params.release_after_reloads * reload_s(snapshot, holder)


def release_order(snapshot: Snapshot, holders: list[SessionView]) -> list[SessionView]:
    """The holders worth releasing, longest tool time left first (ties by id)."""
    return sorted((h for h in holders if worth_releasing(snapshot, h)),
                  key=lambda h: (-tool_time_left(snapshot, h), h.id))
