"""Load the planner's compiled kernels (numba), and start HiGHS's MIP machinery, before the first plan needs
them.

The first call of each kernel in a process compiles it on a new install (all of them: 49-96 s on 2 cores;
numba then caches the machine code beside the source, or in the user's cache when that is read-only) and
loads it after (all of them: ~2 s). Building an exact TAO policy (policies/tao.py) calls `warm_up`, so
that cost never falls within a plan's deadline; a server builds it in the background
(coordinator/policy_loading.py), which runs `python -m tao_harness.planner.warm` to compile what
`kernels_cached` says is missing.

What the imports and kernels leave is for the process's owner to move out of the garbage collector's
reach once it is set up (a server: serving.freeze_startup_objects; the coordinator's background task;
scripts/bench_planner.py), not for this function: tests unfreeze between cases.
"""

from __future__ import annotations

import math
import os
import sys
from functools import cache

import numpy as np
from numba.core.dispatcher import Dispatcher

from tao_harness.planner.k.arrays import OPEN, DualArrays
from tao_harness.planner.k.dual import dual_steps, lagrangian_bound, probe
from tao_harness.planner.k.forced import forced_tables, forced_values
from tao_harness.planner.k.mip import k_branch_and_cut
from tao_harness.planner.k.polish import exchanged_placement, polish_placement
from tao_harness.planner.packing.nested import nested_bound, nested_value
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.int_knapsack import surrogate_knapsack
from tao_harness.planner.shared.knapsack import dembo_hammer, float_slack, knapsack_kernel


@cache
def warm_up() -> None:
    """Call every kernel once on a tiny problem, with the argument types the planner uses (once per
    process)."""
    size, profit = np.array([1, 2], dtype=np.int64), np.array([1.0, 2.0])
    knapsack_kernel(size, profit, 2)
    float_slack(1.0)  # also called from Python (planner/k/lagrange.py): its own dispatch, ~3 ms to load
    forced_tables(size, profit, 2)
    forced_values(size, profit, 2, 2.0, np.array([False, True]), 1.0, 10)
    arrays = DualArrays.of([{0: 1, 1: 2}, {1: 2}], [2, 2], size)
    dual_steps(arrays, np.zeros(2), 1, 0, -1, 1, 1.0, math.inf)
    lagrangian_bound(arrays, np.zeros(2))
    probe(arrays, np.zeros(2), 0, -1, 1)  # a small problem: every node in one call
    large_rooms = DualArrays.of([{0: 1, 1: 2}, {1: 2}], [1 << 20, 1 << 20], size)
    probe(large_rooms, np.zeros(2), 0, -1, 1, Deadline.after(3600.0))  # node by node, from Python
    arrays.restricted(np.array([0, OPEN], dtype=np.int64), np.zeros(3, dtype=np.bool_))
    polish_placement(arrays, {0: 0})
    exchanged_placement(arrays, {0: 0})
    k_branch_and_cut(arrays, {0: 0}, 1, 1.0)  # HiGHS's first MIP in a process starts its scheduler (~40 ms)
    surrogate_knapsack([0, 1], [1, 2], [1, 2], 2)
    dembo_hammer(size, size, 2)  # also called from Python (planner/bounds/credit.py): its own dispatch
    nested_bound([0, 1], [1, 2], [1, 2], [2])  # the compiled table, recording the walk back and not
    nested_value([0, 1], [1, 2], [1, 2], [2])


def kernels_cached() -> bool:
    """Whether numba's cache holds every planner kernel (then `warm_up` loads them, ~2 s; else it compiles
    what is missing). An index left by an older source counts as cached: a developer's edit, not a user's
    first start, whose `warm_up` compiles that kernel again."""
    kernels = [value for name, module in list(sys.modules.items()) if name.startswith("tao_harness.planner.")
               for value in vars(module).values() if isinstance(value, Dispatcher)]
    # numba has no public "is it cached" query: each kernel's cache names its index file
    return all(os.path.exists(kernel._cache._cache_file._index_path) for kernel in kernels)


if __name__ == "__main__":  # a server's background compile (coordinator/policy_loading.py)
    warm_up()
