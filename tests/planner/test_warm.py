"""The planner's warm-up: what it leaves ready before the first plan's deadline starts."""

from __future__ import annotations

import gc

from tao_harness.planner.warm import warm_up


def test_warm_up_puts_the_imports_out_of_the_collectors_reach() -> None:
    """The objects alive at warm-up (numba, llvmlite, scipy, HiGHS: ~125,000, ~70 ms for a full collection
    to walk) are frozen, so a full collection falling within a plan walks only what was made since."""
    warm_up()
    assert gc.get_freeze_count() > 10_000
