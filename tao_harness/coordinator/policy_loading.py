"""A server's policy while the planner's compiled kernels load: the coordinator serves from its first second.

TAO's exact program runs numba kernels (planner/warm.py). Loading them from numba's cache takes a few
seconds; compiling them, on a first start (a fresh clone, an upgrade), 49-96 s on 2 cores, during which a
coordinator that built its policy first answered nothing (and `make demo` printed nothing for 67 s). So a
server plans with the policy's kernel-free stand-in (the same values packed best-fit-decreasing; its plans
say solver "bfd") until the full policy is built in a background thread, and then with the full policy.

Compiling runs in a child process at low priority, not in that thread: a thread compiling holds the GIL the
event loop needs (loop stalls of up to 330 ms measured) and takes the CPU serving needs at the same priority.
The child leaves the kernels in numba's cache, from which the thread then loads them.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from tao_harness.config import PlannerConfig
from tao_harness.fleet.processes import die_with_parent
from tao_harness.policies.base import Policy
from tao_harness.policies.registry import get_policy, without_kernels
from tao_harness.serving import freeze_startup_objects
from tao_harness.types import Plan, Snapshot

log = logging.getLogger(__name__)

COMPILE_NICENESS = 10  # the compiling child's: serving comes first


class LoadingPolicy:
    """Plans with `interim` until the policy `name` is built (in a background thread started here), then
    with it. `ready` is set once it plans."""

    def __init__(self, name: str, config: PlannerConfig, interim: Policy) -> None:
        self.name = name
        self.admission_control = interim.admission_control
        self.plans_on_timer = interim.plans_on_timer
        self.ready = threading.Event()
        self._current = interim
        threading.Thread(target=self._load, args=(config,), name="planner-kernels", daemon=True).start()

    def plan(self, snapshot: Snapshot) -> Plan:
        return self._current.plan(snapshot)

    def _load(self, config: PlannerConfig) -> None:
        from tao_harness.planner import kernels_cached

        started = time.monotonic()
        compiling = not kernels_cached()
        if compiling:  # what a user sees on a first start, which used to be silence
            log.warning("compiling the planner's kernels (first start: about a minute on 2 cores, at low "
                        "priority); planning best-fit-decreasing until they are ready")
            _compile_in_child()  # if it fails, get_policy compiles what is missing, here
        else:
            log.info("loading the planner's compiled kernels; planning best-fit-decreasing until they are ready")
        try:
            policy = get_policy(self.name, config)
        except Exception:  # the stand-in plans on: admissions must not stop
            log.exception("the planner's kernels did not load: planning best-fit-decreasing from now on")
            return
        self._current = policy
        self.ready.set()
        # what loading left (numba's and HiGHS's objects), out of the collector's way, as the server did with
        # its start-up's: full collections (~50 ms with numba loaded) would land in plans
        freeze_startup_objects()
        log.log(logging.WARNING if compiling else logging.INFO, "planner kernels ready after %.0f s: planning "
                "with the exact program (%s)", time.monotonic() - started, self.name)


def _compile_in_child() -> None:
    def lower_priority() -> None:
        os.nice(COMPILE_NICENESS)
        die_with_parent()  # a stopped server leaves no compiler behind

    done = subprocess.run([sys.executable, "-m", "tao_harness.planner.warm"], stdout=subprocess.DEVNULL,
                          preexec_fn=lower_priority, check=False)
    if done.returncode != 0:
        log.warning("compiling the planner's kernels in a child process failed (exit %d): compiling them here",
                    done.returncode)


def load_in_background(name: str, config: PlannerConfig) -> Policy:
    """The policy `name`, planning at once: a `LoadingPolicy` for one that needs the compiled kernels."""
    interim = without_kernels(name, config)
    return get_policy(name, config) if interim is None else LoadingPolicy(name, config, interim)
