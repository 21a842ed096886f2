"""The tool-time release rule (policies/tool_time.py) and cache credit for contexts in host memory."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

from tao_harness.policies.registry import get_policy
from tao_harness.policies.tool_time import release_order, reload_s, tool_time_left, worth_releasing
from tao_harness.types import CacheEntry, PlannerParams, Snapshot

from test_policy_tao import Q, acting, cached, tokens

Snap = Callable[..., Snapshot]
# A flat 1000 tokens/s: attention's share of a recompute is left out (it doubles a token's cost at 10^9 tokens).
PRICED = {"tool_time_release": True, "recompute_tokens_per_s": 1000.0, "recompute_attention_tokens": 1e9}


def back_in(holder: dict[str, Any], seconds: float) -> dict[str, Any]:
    return dict(holder, returns_at=1000.0 + seconds)


def test_holders_with_the_most_tool_time_left_are_released_first(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 20 * Q, "used_tokens": 20 * Q}]
    sessions = [
        back_in(acting("soon", 6, cached("r0", 3000, 1)), 30.0),
        back_in(acting("long", 4, cached("r0", 3000, 1)), 600.0),
        back_in(acting("longer", 10, {}), 900.0),
        {"id": "waiting", "tokens": tokens(12), "cache": cached("r0", 100, 5)},
    ]
    snapshot = snap(nodes=nodes, sessions=sessions, **PRICED)
    assert [h.id for h in release_order(snapshot, [s for s in snapshot.sessions if s.state == "acting"])] == [
        "longer", "long", "soon"]
    plan = get_policy("tao").plan(snapshot)
    # 10 + 4 quanta free 14 ≥ 12: the two longest tools go, the one about to return keeps its context,
    # although "longer" has no credit to lose and "soon" the least value of the kept ones by the paper's rule.
    assert plan.interrupts == ("longer", "long") and plan.admitted == {"waiting": "r0"}
    paper = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    assert paper.interrupts != plan.interrupts


def test_a_holder_back_within_a_few_reload_times_is_kept(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    # tokens(10) = 2048 tokens reload in 2.048 s at 1000 tok/s; the rule wants 3 reload times of tool left.
    waiting = {"id": "waiting", "tokens": tokens(4)}
    for left, released in ((6.0, False), (6.2, True)):
        snapshot = snap(nodes=nodes, sessions=[back_in(acting("holder", 10, {}), left), waiting], **PRICED)
        holder = snapshot.sessions[0]
        assert reload_s(snapshot, holder) == pytest.approx(2.048, rel=1e-4)
        assert worth_releasing(snapshot, holder) is released
        assert get_policy("tao").plan(snapshot).interrupts == (("holder",) if released else ())


def test_a_holder_whose_return_nothing_predicts_counts_as_away_indefinitely(snap: Snap) -> None:
    snapshot = snap(nodes=[{"id": "r0", "capacity_tokens": 10 * Q}], sessions=[acting("quiet", 4, {})], **PRICED)
    assert tool_time_left(snapshot, snapshot.sessions[0]) == math.inf


def test_a_recompute_grows_with_attention_over_the_context() -> None:
    params = PlannerParams()  # Qwen3-32B on 2xH100: 19k tokens/s of linear layers, attention doubling at 30k
    assert params.reload_s(30_000) == pytest.approx(30_000 / 19_000 * 1.5)
    assert params.reload_s(200_000) == pytest.approx(200_000 / 19_000 * (1 + 200_000 / 60_000))
    assert params.reload_s(200_000) > 18 * params.reload_s(30_000)  # 45 s against 2.4 s


def test_a_host_tier_makes_releases_cheap_and_keeps_credit_for_host_resident_contexts() -> None:
    gpu_only = PlannerParams(recompute_tokens_per_s=10_000.0, recompute_attention_tokens=1e9)
    host = PlannerParams(recompute_tokens_per_s=10_000.0, recompute_attention_tokens=1e9,
                         host_tokens_per_s=200_000.0, host_half_life_s=600.0)
    assert (gpu_only.reload_s(40_000), host.reload_s(40_000)) == pytest.approx((4.0, 0.2), rel=1e-4)
    assert host.host_saving(40_000) == pytest.approx(0.95, rel=1e-4)
    entry = CacheEntry(tokens=40_000, observed_at=0.0)
    assert entry.value(0.0, host) == 40_000  # still on the GPU: whole
    assert entry.value(120.0, gpu_only) == 10  # 12 GPU half-lives: 40,000 / 4,096
    # In host memory a reload saves 95% of a recompute, halving with the host LRU's turnover.
    assert entry.value(120.0, host) == pytest.approx(0.95 * 40_000 * 2 ** (-120 / 600), abs=2)
    assert entry.value(600.0, host) == pytest.approx(19_000, abs=2)
    # A larger context, whose recompute attention makes dearer, saves more by its reload.
    assert PlannerParams(host_tokens_per_s=200_000.0).host_saving(200_000) > PlannerParams(
        host_tokens_per_s=200_000.0).host_saving(10_000)


def test_host_credit_brings_an_interrupted_session_back_to_its_replica(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q}, {"id": "r1", "capacity_tokens": 10 * Q}]
    # Its context was observed on r1 five minutes ago: long gone from r1's GPU, still in r1's host memory.
    sessions = [{"id": "back", "tokens": tokens(6), "cache": cached("r1", 5000, 300)}]
    without = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    with_host = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions, host_tokens_per_s=200_000.0))
    assert without.assignments[0].value[0] == 0
    assert with_host.admitted == {"back": "r1"} and with_host.assignments[0].value[0] > 3000


def test_the_wait_bound_releases_only_holders_whose_tool_pays_for_their_reload(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    # Waited 25 s of a 30 s bound: holders back within 5 s are spared (aging.py), any other may go.
    overdue = {"id": "overdue", "tokens": tokens(4), "waiting_since": 975.0}
    # 768 tokens each, 0.77 s to reload: worth releasing with 2.3 s of tool left; the longer tool goes.
    sooner, later = back_in(acting("sooner", 5, {}), 6.0), back_in(acting("later", 5, {}), 9.0)
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[sooner, later, overdue], max_wait_s=30.0, **PRICED))
    assert plan.admitted == {"overdue": "r0"} and plan.interrupts == ("later",)
    # 2,048 tokens, 2.05 s to reload, back in 5.5 s: past the spared window but under 3 reload times.
    stay = back_in(acting("stay", 10, {}), 5.5)
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[stay, overdue], max_wait_s=30.0, **PRICED))
    assert plan.interrupts == () and plan.admitted == {}
    paper = get_policy("tao").plan(snap(nodes=nodes, sessions=[stay, overdue], max_wait_s=30.0))
    assert paper.interrupts == ("stay",)  # the paper's order releases it for the overdue request
