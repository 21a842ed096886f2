"""Random snapshot shapes for the planner's benchmark and tests (not used by any policy).

`ours` is the original benchmark's draw: credit on at most one node, every node eligible, node rooms
proportional to demand. The other shapes add, one at a time, what live clusters show (issue 15):

- `multi`: credit on up to three nodes (older copies left behind by interrupts and re-placements);
- `ties`: credit observed whole half-lives ago on token counts in whole quanta, so credits tie exactly
  and many placements reach the same K;
- `eligible`: a quarter of the sessions may only use a random subset of the nodes;
- `skewed`: nodes with very different used tokens, some nearly full, and sizes in whole quanta;
- `all`: the four above at once;
- `everywhere`: a long-running fleet, where interrupted and re-placed sessions left cache copies behind on
  most replicas: credit (of different ages) on two to all nodes for nine sessions in ten, with
  eligibility subsets and skewed rooms;
- `copies`: one to four copies of each credited session's cache written together (the same amount and age
  on each, so credit is flat per session but differs between sessions), with eligibility subsets and
  skewed rooms: tight packings whose Lagrangian bound sits well above the optimum;
- `replicated`: `copies` on one to all nodes, for nine credited sessions in ten (a prefix pushed to the
  whole fleet): flat credit shared by most nodes, the hardest shape to prove (even at 32 x 4 HiGHS takes
  up to 1.5 s on the snapshots our 30 ms leave unproven);
- `adversarial`: sizes of a few kinds just over a third / half of the rooms (bin-packing fragmentation),
  equal credits on every node for many sessions, and rooms that differ by one quantum.
- `crowded`: many one-to-three-quantum sessions beside a few that barely fit a room, credit on up to
  four nodes, demand three to six times the free room, some nodes with no room at all;
- `degenerate`: one of the edge cases a live cluster passes through: a single replica, no credit
  anywhere, every session credited equally on every node, or rooms far larger than the demand;
- `forks`: a benchmark's workers forked from a few task templates (SWE-bench: one repository, one system
  prompt): one size per template in whole quanta, the template's prefix cached on its home replicas and
  observed whole half-lives ago (credits tie within and across sessions), two tenant subsets, half the
  replicas nearly full. Many K-optimal placements, and which one is taken decides R (issue 15's
  independent check).
- `templates`: the same, as a live benchmark shows it: each template's prefix cached on one to three home
  replicas, seen there at different times (so its credit is graded from home to home, yet tied between
  the template's workers), workers' own contexts of every size after the prefix, and a quarter of them
  with a longer prefix of their own on the replica they last ran on. Dozens of sessions alike in credit
  but not in size: the Lagrangian bound sits up to half a percent above K*, and only branching closes it.
- `long`: long agent contexts (a third of the sessions 30k-100k tokens, in any token count) with a fresh
  copy on the replica each last ran on and one to three older, shorter ones on replicas it ran on before,
  replicas popular in proportion to 1/rank: sessions large beside the rooms, so the LP relaxation of K sits
  0.5-3.5% above K* (0-0.6% on `multi`) and the Lagrangian's exact knapsacks do the work: the K level
  takes ~10 ms at 160 x 8, against ~1.6 ms on `multi` (a generator written apart from ours found it);
- `fleet`: a SWE-bench fleet: a few repositories of Zipf-like popularity, each with a system prompt that
  every replica one of its sessions ran on still caches (seen at the latest such run, on half-second ticks,
  so the prompt's credit is tied between the repository's sessions on each replica and graded between
  replicas), and each session's own context on the replica it last ran on: credit on nearly every node for
  every session, near-ties everywhere. Like `templates`, it is hard to prove for HiGHS too: 7 s, 22 s and
  over 60 s for K* on three 160 x 8 snapshots, 0.3-1.1 s at 32 x 8.
- `clones`: parallel rollouts (best-of-N sampling, tree search over tool calls): a parent forked into 8 to
  30 children at once, each child an exact copy of its context and of where and when it was cached, beside
  a few lone sessions. Few classes of alike sessions: a search that tells the copies apart branches on
  each of their swaps, where HiGHS counting each class per node proves K in milliseconds (issue 15's
  independent check had such a family; its snapshots are in tests/planner/independent).

- `busy`: an `all` draw as a live cluster under load shows it (a quarter to three quarters of its free room
  left), every replica's used tokens held by sessions: acting ones (a tool running, due back within a minute
  or at an unknown time) and reasoning ones, each with its context cached where it runs. The TAO policy's
  interrupt rule then weighs releasing holders for the ready sessions left out (the other shapes have no
  holders; a second independent generator's snapshots, all with them, took ~6 ms a plan in that rule alone).

Every shape is a function (rng, sessions, nodes) -> Snapshot; `SHAPES` lists them by name.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Callable

from tao_harness.types import CacheEntry, NodeState, PlannerParams, SessionView, Snapshot

NOW = 1000.0


@dataclass(frozen=True, slots=True)
class _Draw:
    """Which live-cluster features a draw has."""

    multi: bool = False
    ties: bool = False
    eligible: bool = False
    skewed: bool = False
    everywhere: bool = False  # credit on two to all nodes for nine sessions in ten (with copies: one to all)
    copies: bool = False  # one to four copies of a session's cache written together: credit flat per session


def _tokens(rng: random.Random, quantum: int, whole: bool) -> int:
    tokens = int(math.exp(rng.uniform(math.log(2000), math.log(40000))))
    return max(quantum, tokens // quantum * quantum) if whole else tokens


def _cache(rng: random.Random, draw: _Draw, tokens: int, node_ids: list[str], params: PlannerParams
           ) -> dict[str, CacheEntry]:
    if rng.random() >= (0.9 if draw.everywhere else 0.6):
        return {}
    if draw.copies:  # written together (a prefix pushed to several replicas at once): one amount and age
        copies = rng.randint(1, len(node_ids) if draw.everywhere else 4)
        cached = rng.choice([1, 2, 3, 4]) * tokens // 4 // params.quantum_tokens * params.quantum_tokens
        together = CacheEntry(cached, NOW - params.half_life_s * rng.choice([0, 0, 0.5, 1, 2, 3]))
        return {node_id: together for node_id in rng.sample(node_ids, min(copies, len(node_ids)))}
    copies = 1
    if draw.everywhere:
        copies = rng.randint(2, max(2, len(node_ids)))
    elif draw.multi:
        copies = rng.choice([1, 1, 2, 3])
    cache = {}
    for node_id in rng.sample(node_ids, min(copies, len(node_ids))):
        if draw.ties:  # whole quanta, observed whole half-lives ago: credits coincide exactly
            cached = rng.choice([4, 8, 16, 32, 64]) * params.quantum_tokens
            observed = NOW - params.half_life_s * rng.randint(0, 3)
        else:
            cached = int(tokens * rng.uniform(0.5, 1.0))
            observed = NOW - rng.uniform(0, 30)
        cache[node_id] = CacheEntry(min(cached, tokens), observed)
    return cache


def _snapshot(rng: random.Random, sessions: int, nodes: int, draw: _Draw) -> Snapshot:
    params = PlannerParams()
    node_ids = [f"r{b}" for b in range(nodes)]
    views = []
    for i in range(sessions):
        # whole quanta: tokens + reserve a multiple of the quantum, as a live engine's blocks make them
        tokens = _tokens(rng, params.quantum_tokens, draw.skewed or draw.ties)
        eligible = None
        if draw.eligible and nodes > 1 and rng.random() < 0.25:
            eligible = tuple(sorted(rng.sample(node_ids, rng.randint(1, nodes - 1))))
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=min(tokens, rng.randint(1500, 3000)),
            ready=int(rng.random() < 0.5), cache=_cache(rng, draw, tokens, node_ids, params),
            eligible=eligible, turn=rng.randint(1, 40), arrived_at=NOW - rng.uniform(0, 60),
        ))
    demand = sum(v.cost(params) for v in views)
    free_total = demand / rng.uniform(0.5, 2.0)
    weights = [rng.uniform(0.7, 1.3) for _ in node_ids]
    if draw.skewed:  # some nodes nearly full, others nearly empty
        weights = [rng.choice([0.02, 0.1, 0.5, 1.0, 2.0]) for _ in node_ids]
    node_states = []
    for node_id, weight in zip(node_ids, weights):
        free = int(free_total * weight / sum(weights))
        used = rng.randint(0, free // 2) if not draw.skewed else rng.randint(0, 400_000)
        node_states.append(NodeState(id=node_id, capacity_tokens=free + used, used_tokens=used))
    return Snapshot(now=NOW, params=params, nodes=tuple(node_states), sessions=tuple(views))


def _adversarial(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Few size kinds just over a third or a half of a room, equal credits on several nodes, rooms one
    quantum apart: fragmentation the merged-room bounds do not see, and K ties everywhere."""
    params = PlannerParams()
    quantum = params.quantum_tokens
    room = rng.randint(60, 200)  # quanta
    kinds = [room // 2 + 1, room // 3 + 1, room // 4 + 1, room // 5]
    node_ids = [f"r{b}" for b in range(nodes)]
    views = []
    for i in range(sessions):
        size = rng.choice(kinds)
        tokens = size * quantum - params.reserve_tokens
        cache = {}
        if rng.random() < 0.5:
            credit = rng.choice([1000, 2000])
            cache = {b: CacheEntry(credit, NOW) for b in rng.sample(node_ids, rng.randint(1, nodes))}
        views.append(SessionView(id=f"s{i}", tokens=tokens, shared_tokens=0, ready=int(rng.random() < 0.5),
                                 cache=cache, turn=2, arrived_at=NOW - i))
    per_node = max(1, round(sessions * sum(kinds) / len(kinds) / nodes / rng.uniform(1.0, 2.5) / room))
    node_states = tuple(
        NodeState(id=node_id, capacity_tokens=(per_node * room + b % 3) * quantum, used_tokens=0)
        for b, node_id in enumerate(node_ids))
    return Snapshot(now=NOW, params=params, nodes=node_states, sessions=tuple(views))


def _crowded(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Tiny sessions and a few huge ones, credit spread over several nodes, little room left."""
    params = PlannerParams()
    quantum = params.quantum_tokens
    node_ids = [f"r{b}" for b in range(nodes)]
    sizes = [rng.randint(1, 3) if rng.random() < 0.8 else 0 for _ in range(sessions)]  # 0: huge, below
    demand = sum(sizes) + 40 * sizes.count(0)
    rooms = [0 if nodes > 1 and rng.random() < 0.15 else max(1, round(demand / rng.uniform(3, 6) / nodes
                                                                        * rng.uniform(0.5, 1.5)))
             for _ in node_ids]
    views = []
    for i, size in enumerate(sizes):
        size = size or max(4, max(rooms) - rng.randint(0, 2))  # barely fits the largest room
        tokens = max(1, size * quantum - params.reserve_tokens - rng.randint(0, quantum - 1))
        cache = {node_id: CacheEntry(rng.randint(1, tokens), NOW - rng.uniform(0, 20))
                 for node_id in rng.sample(node_ids, rng.randint(0, min(4, nodes)))}
        views.append(SessionView(id=f"s{i}", tokens=tokens, shared_tokens=0, ready=int(rng.random() < 0.5),
                                 cache=cache, turn=3, arrived_at=NOW - i))
    node_states = tuple(NodeState(id=node_id, capacity_tokens=room * quantum + 300_000, used_tokens=300_000)
                        for node_id, room in zip(node_ids, rooms))
    return Snapshot(now=NOW, params=params, nodes=node_states, sessions=tuple(views))


def _degenerate(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """An `all` draw pushed to one edge: one replica, no credit, equal credit everywhere, or ample room."""
    case = rng.choice(["one node", "no credit", "equal credit", "ample room"])
    snapshot = _snapshot(rng, sessions, 1 if case == "one node" else nodes,
                         _Draw(multi=True, ties=True, eligible=case != "one node", skewed=True))
    views = snapshot.sessions
    if case == "no credit":
        views = tuple(replace(v, cache={}) for v in views)
    elif case == "equal credit":
        ids = [n.id for n in snapshot.nodes]
        views = tuple(replace(v, cache={b: CacheEntry(v.tokens // 2, NOW) for b in ids}) for v in views)
    nodes_out = snapshot.nodes
    if case == "ample room":
        nodes_out = tuple(replace(n, capacity_tokens=n.capacity_tokens + 10 * sum(v.tokens for v in views))
                          for n in nodes_out)
    return replace(snapshot, sessions=views, nodes=nodes_out)


def _forks(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Sessions of a few task templates: equal sizes and exactly equal credits per template."""
    params = PlannerParams()
    quantum = params.quantum_tokens
    node_ids = [f"r{b}" for b in range(nodes)]
    templates = []
    for _ in range(rng.randint(3, 7)):
        size = rng.randint(8, 234)  # quanta: 2k-60k tokens
        fewest_tokens = size * quantum - params.reserve_tokens - quantum + 1  # a session's context
        credit = rng.choice([c for c in (1024, 2048, 4096, 8192) if c <= fewest_tokens] or [fewest_tokens])
        templates.append((size, credit, rng.sample(node_ids, rng.randint(1, nodes))))
    tenants = [tuple(sorted(rng.sample(node_ids, max(1, nodes // 2)))) for _ in range(2)]
    views = []
    for i in range(sessions):
        size, credit, homes = rng.choice(templates)
        tokens = max(1, size * quantum - params.reserve_tokens - rng.randint(0, quantum - 1))
        cache = {}
        for node_id in homes:  # observed h half-lives ago at 2^h times the credit (at most the tokens)
            if rng.random() < 0.8:
                halvings = rng.randint(0, min(2, (tokens // credit).bit_length() - 1))
                cache[node_id] = CacheEntry(credit * 2 ** halvings, NOW - halvings * params.half_life_s)
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=min(tokens, rng.choice([0, 1000, 2000])),
            ready=int(rng.random() < 0.5), cache=cache,
            eligible=rng.choice(tenants) if nodes > 1 and rng.random() < 0.25 else None,
            turn=rng.randint(1, 30), arrived_at=NOW - rng.uniform(0, 60)))
    demand = sum(v.cost(params) for v in views)
    free_total = demand / rng.uniform(1.4, 2.2)
    full = [nodes > 1 and rng.random() < 0.5 for _ in node_ids]
    if all(full):
        full[rng.randrange(nodes)] = False
    weights = [0.0 if f else rng.uniform(0.3, 1.0) for f in full]
    node_states = []
    for node_id, nearly_full, weight in zip(node_ids, full, weights):
        free = rng.randint(0, 6 * quantum) if nearly_full else int(free_total * weight / sum(weights))
        used = rng.randint(0, 200_000)
        node_states.append(NodeState(id=node_id, capacity_tokens=free + used, used_tokens=used))
    return Snapshot(now=NOW, params=params, nodes=tuple(node_states), sessions=tuple(views))


def _templates(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Workers of a few task templates: the template's credit graded over its homes, sizes all different."""
    params = PlannerParams()
    quantum, half_life = params.quantum_tokens, params.half_life_s
    node_ids = [f"r{b}" for b in range(nodes)]
    templates = []
    for _ in range(rng.randint(3, 6)):
        prefix = rng.randint(6, 48) * quantum
        homes = rng.sample(node_ids, rng.randint(1, min(3, nodes)))
        seen = {b: NOW - half_life * rng.randint(0, 3) - rng.choice([0.0, 0.0, half_life / 4]) for b in homes}
        templates.append((prefix, seen))
    tenants = [tuple(sorted(rng.sample(node_ids, max(1, nodes - 2)))) for _ in range(2)]
    views = []
    for i in range(sessions):
        prefix, seen = rng.choice(templates)
        tokens = prefix + int(math.exp(rng.uniform(math.log(500), math.log(50_000))))
        cache = {b: CacheEntry(prefix, observed) for b, observed in seen.items()}
        if rng.random() < 0.25:  # the replica it last ran on keeps more of its own context
            own = CacheEntry(int(tokens * rng.uniform(0.6, 1.0)), NOW - rng.uniform(0, 30))
            cache[rng.choice(node_ids)] = own
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=prefix, ready=int(rng.random() < 0.5), cache=cache,
            eligible=rng.choice(tenants) if nodes > 2 and rng.random() < 0.2 else None,
            turn=rng.randint(1, 20), arrived_at=NOW - rng.uniform(0, 60)))
    return _sharing(rng, params, node_ids, views, (0.8, 2.5), lambda: rng.choice([0.05, 0.5, 1.0, 1.5]))


def _popular(rng: random.Random, node_ids: list[str]) -> list[float]:
    """Replica weights proportional to 1/rank, in a random order: a few replicas take most sessions."""
    weights = [1.0 / rank for rank in range(1, len(node_ids) + 1)]
    rng.shuffle(weights)
    return weights


def _long(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Long contexts with copies left behind by re-placements, credit graded by age and length."""
    params = PlannerParams()
    node_ids = [f"r{b}" for b in range(nodes)]
    weights = _popular(rng, node_ids)
    views = []
    for i in range(sessions):
        long_context = rng.random() < 0.3
        tokens = rng.randint(30_000, 100_000) if long_context else rng.randint(2_000, 10_000)
        cache = {}
        if rng.random() < 0.8:
            places = list(dict.fromkeys(rng.choices(node_ids, weights, k=rng.randint(2, 4))))
            cached, age = int(tokens * rng.uniform(0.7, 0.95)), rng.expovariate(1 / 6)  # less the last output
            for node_id in places:  # the replica it last ran on first, then older, shorter copies
                cache[node_id] = CacheEntry(cached, NOW - age)
                cached, age = int(cached * rng.uniform(0.3, 0.9)), age + rng.expovariate(1 / 15)
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=min(tokens, rng.choice([0, 1500, 3000])),
            ready=int(rng.random() < 0.5), cache=cache, turn=rng.randint(1, 60),
            arrived_at=NOW - rng.uniform(0, 60)))
    return _sharing(rng, params, node_ids, views, (1.5, 2.5), lambda: rng.gammavariate(4.0, 1.0))


def _fleet(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Sessions of a few repositories, each repository's system prompt cached on most replicas."""
    params = PlannerParams()
    node_ids = [f"r{b}" for b in range(nodes)]
    weights = _popular(rng, node_ids)
    repos = rng.randint(6, 16)
    popularity = [1.0 / rank ** 1.1 for rank in range(1, repos + 1)]
    prompts = [rng.randint(8, 24) * params.quantum_tokens for _ in range(repos)]
    last_seen: dict[tuple[int, str], float] = {}  # (repository, replica) -> its latest run there
    drawn = []
    for _ in range(sessions):
        repo, home = rng.choices(range(repos), popularity)[0], rng.choices(node_ids, weights)[0]
        seen = NOW - round(rng.uniform(0, 30) * 2) / 2  # on half-second ticks
        for node_id in dict.fromkeys([home, *rng.sample(node_ids, rng.randint(0, nodes))]):  # where it ran
            at = seen if node_id == home else seen - 0.5  # its earlier turns, elsewhere
            last_seen[(repo, node_id)] = max(last_seen.get((repo, node_id), at), at)
        drawn.append((repo, home, seen))
    views = []
    for i, (repo, home, seen) in enumerate(drawn):
        prompt = prompts[repo]
        tokens = prompt + sum(rng.randint(400, 2500) for _ in range(1 + int(rng.expovariate(1 / 10))))
        cache = {node_id: CacheEntry(prompt, at) for (r, node_id), at in last_seen.items() if r == repo}
        cache[home] = CacheEntry(tokens - rng.randint(400, 2500) if tokens > prompt + 2500 else prompt, seen)
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=prompt, ready=int(rng.random() < 0.5), cache=cache,
            turn=rng.randint(1, 40), arrived_at=NOW - rng.uniform(0, 60)))
    return _sharing(rng, params, node_ids, views, (1.2, 2.2), lambda: rng.gammavariate(4.0, 1.0))


def _clones(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Bursts of identical children forked from a parent, and lone sessions."""
    params = PlannerParams()
    node_ids = [f"r{b}" for b in range(nodes)]
    views: list[SessionView] = []
    while len(views) < sessions:
        tokens = rng.randint(2_000, 60_000)
        ran_on = rng.sample(node_ids, rng.randint(1, min(3, nodes)))
        cache = {node_id: CacheEntry(min(tokens, rng.randint(tokens // 4, tokens) // 256 * 256 + 256),
                                     NOW - rng.choice([0.0, 0.5, 1.0, 2.0]) * params.half_life_s)
                 for node_id in ran_on}  # in whole blocks, seen whole or half half-lives ago: ties
        children = rng.randint(8, 30) if rng.random() < 0.7 else 1
        for _ in range(min(children, sessions - len(views))):
            views.append(SessionView(
                id=f"s{len(views)}", tokens=tokens, ready=int(rng.random() < 0.5), cache=cache,
                turn=rng.randint(1, 30), arrived_at=NOW - rng.uniform(0, 60)))
    return _sharing(rng, params, node_ids, views, (1.3, 2.5), lambda: rng.uniform(0.2, 1.0))


def _busy(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """An `all` draw whose nodes' used tokens are held by acting and reasoning sessions."""
    snapshot = _snapshot(rng, sessions, nodes, _Draw(multi=True, ties=True, eligible=True, skewed=True))
    params, holders, node_states = snapshot.params, [], []
    load = rng.uniform(0.25, 0.75)
    for node in snapshot.nodes:
        used = 0
        while node.used_tokens - used > params.reserve_tokens + params.quantum_tokens:
            left = node.used_tokens - used - params.reserve_tokens
            tokens = min(_tokens(rng, params.quantum_tokens, False), left)
            acting = rng.random() < 0.7
            returns_at = NOW + rng.uniform(0, 60) if acting and rng.random() < 0.8 else None
            cached = CacheEntry(int(tokens * rng.uniform(0.6, 1.0)), NOW - rng.uniform(0, 20))
            holders.append(SessionView(
                id=f"h{len(holders)}", tokens=tokens, state="acting" if acting else "reasoning", node=node.id,
                cache={node.id: cached}, turn=rng.randint(1, 40), arrived_at=NOW - rng.uniform(30, 600),
                returns_at=returns_at))
            used += tokens + params.reserve_tokens
        # a cluster under load: a quarter to three quarters of the `all` draw's free room left
        capacity = int(node.free_tokens * load) + used
        node_states.append(replace(node, capacity_tokens=capacity, used_tokens=used))
    return replace(snapshot, nodes=tuple(node_states), sessions=snapshot.sessions + tuple(holders))


def _sharing(rng: random.Random, params: PlannerParams, node_ids: list[str], views: list[SessionView],
             demand: tuple[float, float], weight: Callable[[], float]) -> Snapshot:
    """`views` waiting for the nodes, whose free room is their demand over a factor drawn from `demand`, shared
    in proportion to a `weight()` drawn per node (after that factor: the draws stay in the shapes' order)."""
    free_total = sum(v.cost(params) for v in views) / rng.uniform(*demand)
    weights = [weight() for _ in node_ids]
    return Snapshot(now=NOW, params=params, nodes=_rooms(rng, node_ids, free_total, weights),
                    sessions=tuple(views))


def _rooms(rng: random.Random, node_ids: list[str], free_total: float, weights: list[float]
           ) -> tuple[NodeState, ...]:
    """Nodes sharing `free_total` tokens of free room in proportion to `weights`, up to 300,000 used."""
    node_states = []
    for node_id, weight in zip(node_ids, weights):
        free, used = int(free_total * weight / sum(weights)), rng.randint(0, 300_000)
        node_states.append(NodeState(id=node_id, capacity_tokens=free + used, used_tokens=used))
    return tuple(node_states)


def _shape(draw: _Draw) -> Callable[[random.Random, int, int], Snapshot]:
    return lambda rng, sessions, nodes: _snapshot(rng, sessions, nodes, draw)


SHAPES: dict[str, Callable[[random.Random, int, int], Snapshot]] = {
    "ours": _shape(_Draw()),
    "multi": _shape(_Draw(multi=True)),
    "ties": _shape(_Draw(ties=True)),
    "eligible": _shape(_Draw(eligible=True)),
    "skewed": _shape(_Draw(skewed=True)),
    "all": _shape(_Draw(multi=True, ties=True, eligible=True, skewed=True)),
    "everywhere": _shape(_Draw(everywhere=True, eligible=True, skewed=True)),
    "copies": _shape(_Draw(copies=True, eligible=True, skewed=True)),
    "replicated": _shape(_Draw(copies=True, everywhere=True, eligible=True, skewed=True)),
    "adversarial": _adversarial,
    "crowded": _crowded,
    "degenerate": _degenerate,
    "forks": _forks,
    "templates": _templates,
    "long": _long,
    "fleet": _fleet,
    "clones": _clones,
    "busy": _busy,
}
