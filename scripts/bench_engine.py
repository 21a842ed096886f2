"""Engine-model speed: drives EngineCore replicas with an agent-like workload in virtual time.

Workload (the simulator's target case): S sessions, at most W at once, sticky to one of R replicas.
Each session shares a 2k-token system prompt, starts at ~5k tokens, adds a 200-token reply plus ~1k
tokens of tool output per turn and stops past ~40k tokens (≈ 30 turns); tools take 0.1–20 s.
Prints engine steps per CPU second, work tokens (uncached prompt tokens + generated tokens) per CPU
second and CPU milliseconds per LLM turn, with and without macro-steps and caller-kept block hashes.
CPU time rather than wall time, because the machine may be shared.

Usage: `python scripts/bench_engine.py [--sessions 300 --workers 64 --replicas 4]`.
"""

from __future__ import annotations

import argparse
import heapq
import random
import time
from dataclasses import dataclass, field

from tao_harness.engine import EngineConfig, EngineCore, EngineRequest, StepOutput
from tao_harness.engine.hashing import extend_block_hashes
from tao_harness.tables import format_table

SYSTEM_PROMPT = list(range(1, 2001))


@dataclass
class Session:
    name: str
    replica: int
    tokens: list[int]
    rng: random.Random
    hashes: list[int] = field(default_factory=list)
    turns: int = 0


@dataclass
class Totals:
    turns: int = 0
    steps: int = 0
    calls: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    cached_tokens: int = 0
    sim_end_s: float = 0.0


def run(
    sessions: int, workers: int, replicas: int, merge: bool, precompute_hashes: bool, seed: int
) -> tuple[Totals, float]:
    """Simulate the workload; returns the totals and the CPU seconds spent (engines + this event loop).

    The loop is shaped like the simulator's: a step's outputs are handled when they become visible, and
    with macro-steps an arrival for a replica that is mid-run cuts the run with `truncate` first.
    """
    rng = random.Random(seed)
    engines = [EngineCore(EngineConfig(profile="qwen3-32b-2xh100")) for _ in range(replicas)]
    in_flight: list[StepOutput | None] = [None] * replicas
    generation = [0] * replicas  # a "done" event for an older generation was superseded by a cut
    fresh = iter(range(200_000, 10**12, 1 << 20))  # disjoint token-id ranges stand in for new text
    heap: list[tuple[float, int, str, object]] = []
    order = 0
    totals = Totals()
    by_request: dict[str, Session] = {}
    replies: dict[str, list[int]] = {}  # generated ids so far; the next turn's prompt must contain them

    def push(when: float, kind: str, data: object) -> None:
        nonlocal order
        order += 1
        heapq.heappush(heap, (when, order, kind, data))

    def publish(replica: int, step: StepOutput) -> None:
        in_flight[replica] = step
        generation[replica] += 1
        push(step.started_at + step.duration_s, "done", (replica, generation[replica]))

    def kick(replica: int, now: float) -> None:
        step = engines[replica].step(now, until=float("inf") if merge else None)
        totals.calls += 1
        if step.num_steps:
            publish(replica, step)
        else:
            in_flight[replica] = None

    def arrive(session: Session, now: float) -> None:
        replica = session.replica
        cut = engines[replica].truncate(now) if in_flight[replica] is not None else None
        if cut is not None:
            publish(replica, cut)
        session.turns += 1
        request_id = f"{session.name}-{session.turns}"
        by_request[request_id] = session
        hashes = extend_block_hashes(session.tokens, 16, session.hashes) if precompute_hashes else None
        engines[replica].add_request(
            EngineRequest(request_id, session.tokens, 200, session_id=session.name, block_hashes=hashes), now
        )
        if in_flight[replica] is None:
            kick(replica, now)

    def new_session(index: int) -> Session:
        start = next(fresh)
        # A generator per session: draws must not depend on event order, which macro-steps change.
        return Session(
            name=f"s{index}", replica=index % replicas, tokens=[*SYSTEM_PROMPT, *range(start, start + 3000)],
            rng=random.Random(seed * 1_000_003 + index),
        )

    started = 0
    for _ in range(min(workers, sessions)):
        push(rng.uniform(0, 5), "arrive", new_session(started))
        started += 1
    cpu = time.process_time()
    while heap:
        now, _, kind, data = heapq.heappop(heap)
        if kind == "arrive":
            arrive(data, now)  # type: ignore[arg-type]
            continue
        replica, gen = data  # type: ignore[misc]
        step = in_flight[replica]
        if gen != generation[replica] or step is None:
            continue
        totals.steps += step.num_steps
        totals.sim_end_s = now
        for out in step.outputs:
            totals.decode_tokens += len(out.new_token_ids)
            replies.setdefault(out.request_id, []).extend(out.new_token_ids)
            if not out.finished:
                continue
            session = by_request.pop(out.request_id)
            reply = replies.pop(out.request_id)
            totals.turns += 1
            totals.cached_tokens += out.cached_tokens
            totals.prefill_tokens += out.prompt_tokens - out.cached_tokens
            if len(session.tokens) > 40_000:
                engines[replica].end_session(session.name)
                if started < sessions:
                    push(now, "arrive", new_session(started))
                    started += 1
                continue
            start = next(fresh)
            tool_output = list(range(start, start + session.rng.randint(500, 1500)))
            session.tokens = [*session.tokens, *reply, *tool_output]
            push(now + session.rng.uniform(0.1, 20.0), "arrive", session)
        kick(replica, now)
    return totals, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300, help="sessions in total")
    parser.add_argument("--workers", type=int, default=64, help="sessions running at once")
    parser.add_argument("--replicas", type=int, default=4, help="engines (sessions stick to one)")
    parser.add_argument("--seed", type=int, default=1, help="workload random seed")
    args = parser.parse_args()
    rows = []
    for merge, precompute in ((True, True), (True, False), (False, True)):
        totals, cpu = run(args.sessions, args.workers, args.replicas, merge, precompute, args.seed)
        rows.append([
            "yes" if merge else "no",
            "caller" if precompute else "memo",
            totals.turns,
            totals.steps,
            totals.calls,
            round(cpu, 2),
            round(totals.steps / cpu),
            round((totals.prefill_tokens + totals.decode_tokens) / cpu),
            round(1000 * cpu / max(totals.turns, 1), 3), round(totals.sim_end_s, 1),
            round(totals.cached_tokens / max(totals.cached_tokens + totals.prefill_tokens, 1), 3),
        ])
    print(format_table(rows, ["macro", "hashes", "turns", "steps", "step calls", "cpu s", "steps/s",
                              "work tok/s", "ms/turn", "sim s", "hit rate"]))


if __name__ == "__main__":
    main()
