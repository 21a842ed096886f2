"""`tao` servers as users run them: the CLI in a process of its own, started until it prints its URL and
stopped by a signal (for tests/cli and the real-vLLM tier's clusters)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

TAO = [sys.executable, "-m", "tao_harness.cli.main"]
LISTENING = re.compile(r"listening on (http://\S+)")
STOP_WAIT_S = 30.0  # a clean stop takes well under a second; a loaded machine gets room


def start(args: list[str], log: Path, preexec_fn: Callable[[], None] | None = None
          ) -> tuple[subprocess.Popen[str], str]:
    """`tao *args` (a server command), its stderr to `log`; the process and the URL its banner names."""
    process = subprocess.Popen([*TAO, *args], stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
                               preexec_fn=preexec_fn)
    assert process.stdout is not None
    line = process.stdout.readline()  # the banner comes first (tao_harness.serving.serve_forever)
    found = LISTENING.search(line)
    if found is None:
        process.kill()
        raise AssertionError(f"tao {args[0]} did not start: {line!r}\n{log.read_text()}")
    return process, found.group(1)


def stop(process: subprocess.Popen[str], signum: signal.Signals = signal.SIGINT) -> int | None:
    """Send `signum` (a clean stop: the coordinator flushes its store); the exit code, or None when the
    process was still running `STOP_WAIT_S` later and had to be killed."""
    process.send_signal(signum)
    try:
        return process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None
