"""A HiGHS solver that prints nothing: `tao plan --json` and `tao sim --json` write JSON alone on stdout.

highspy 1.16 prints its banner ("Running HiGHS 1.16.0 ...: Copyright ...") from C++ onto file descriptor
1 when the process builds its first solver, before any option can be set; earlier versions print it at
the first run unless output_flag is off. So the first solver is built with descriptor 1 pointed at
/dev/null, and every solver has its output turned off before it is given a model.
"""

from __future__ import annotations

import os
import sys
import threading

import highspy

_first_built = False
_first_lock = threading.Lock()


def quiet_highs() -> highspy.Highs:
    """A fresh `highspy.Highs` with its output off; the process's first one built with stdout muted."""
    global _first_built
    with _first_lock:
        if _first_built:
            solver = highspy.Highs()
        else:
            solver = _built_with_stdout_muted()
            _first_built = True
    solver.setOptionValue("output_flag", False)
    return solver


def _built_with_stdout_muted() -> highspy.Highs:
    sys.stdout.flush()  # what Python has buffered goes out before descriptor 1 is borrowed
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1: nothing to protect
        return highspy.Highs()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
