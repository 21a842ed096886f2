"""The TAO planner: a pure function Problem -> Solution (no I/O), the lexicographic optimum of the
discretized admission problem or, past its deadline, the best plan found with a certified bound.

`solve` (solve.py) is the one entry; docs/planner.md walks the layers a plan passes, in order:

    shared/   the problem in integers, the deadline, the exact 1-D knapsacks every layer builds on
    packing/  exact packings of sessions into rooms (splits, the size-nested bound, bin completion, re-packs)
    bounds/   the certificate and the lexicographic bound every plan carries
    k/        the K level: a proven bound on K and a placement reaching it, on any snapshot
    rest/     the best (R, T, N) around a K placement

Everything below this package is private to it: callers use the names exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Problem, Solution, Value, build_problem, is_feasible, objective
from tao_harness.planner.solve import Method, solve

if TYPE_CHECKING:
    from tao_harness.planner.warm import kernels_cached, warm_up

__all__ = ["Deadline", "Method", "Problem", "Solution", "Value", "build_problem", "is_feasible",
           "kernels_cached", "objective", "solve", "warm_up"]


def __getattr__(name: str) -> object:
    """warm.py's names, imported on first use: a server runs `python -m tao_harness.planner.warm` to compile
    the kernels, and runpy warns when the package has imported that module before running it."""
    if name not in ("kernels_cached", "warm_up"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.warm"), name)
