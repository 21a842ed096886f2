"""One side of scripts/bench_versus.py: plans the snapshots it is sent with the `tao` policy of whichever
tao_harness is first on PYTHONPATH (the tree under test or an exported revision), one JSON line in, one out.

In: `{"snapshot": <docs/snapshot.md>}`. Out: `{"cpu_ms": ..., "objective": [...], "bound": [...] | null,
"solved": [...] | null, "fallback": ...}` (`solved`: the exact program's own objective, null from revisions
before it was reported). Only the package's public API is used, so older revisions run it unchanged.

    PYTHONPATH=TREE python scripts/versus_worker.py DEADLINE_MS CLOCK
"""

from __future__ import annotations

import gc
import json
import sys
from time import process_time

from tao_harness.config import PlannerConfig
from tao_harness.policies.registry import get_policy
from tao_harness.types import Snapshot


def main(argv: list[str]) -> int:
    deadline_ms, clock = float(argv[0]), argv[1]
    policy = get_policy("tao", PlannerConfig(deadline_ms=deadline_ms, deadline_clock=clock))
    gc.collect()  # as bench_planner.py: what the imports left out of the collector's way
    gc.freeze()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        snapshot = Snapshot.from_json(json.loads(line)["snapshot"])
        started = process_time()
        plan = policy.plan(snapshot)
        cpu_ms = (process_time() - started) * 1000
        bound, solved = getattr(plan, "bound", None), getattr(plan, "solved", None)
        print(json.dumps({"cpu_ms": cpu_ms, "objective": list(plan.objective),
                          "bound": None if bound is None else list(bound),
                          "solved": None if solved is None else list(solved), "fallback": plan.fallback}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
