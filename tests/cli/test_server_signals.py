"""`tao coordinator` and `tao proxy` stop cleanly on SIGTERM (what process managers send) and on SIGINT, even
when started in the background by a shell, which hands them SIGINT ignored."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

LISTENING = re.compile(r"listening on (http://\S+)")
STOP_WAIT_S = 30  # a clean stop takes well under a second; a loaded machine gets room


def _start(args: list[str], log: Path, ignore_sigint: bool) -> tuple[subprocess.Popen[str], str]:
    def as_from_a_background_shell() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    process = subprocess.Popen([sys.executable, "-m", "tao_harness.cli.main", *args], stdout=subprocess.PIPE,
                               stderr=log.open("w"), text=True,
                               preexec_fn=as_from_a_background_shell if ignore_sigint else None)
    assert process.stdout is not None
    found = LISTENING.search(process.stdout.readline())
    if found is None:
        process.kill()
        raise AssertionError(f"{args[0]} did not start:\n{log.read_text()}")
    return process, found.group(1)


def _stopped(process: subprocess.Popen[str], signum: signal.Signals) -> int | None:
    process.send_signal(signum)
    try:
        return process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


@pytest.mark.parametrize(("signum", "ignore_sigint"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigterm", "sigint-while-ignored"])
def test_servers_stop_cleanly_on_a_stop_signal(tmp_path: Path, signum: signal.Signals,
                                               ignore_sigint: bool) -> None:
    db = tmp_path / "history.db"
    replica = ("--replica", "r0=http://127.0.0.1:9")  # never asked: no session here needs a replica
    coordinator, url = _start(["coordinator", "--port", "0", "--db", f"sqlite:///{db}", *replica],
                              tmp_path / "coordinator.log", ignore_sigint)
    try:
        proxy, _ = _start(["proxy", "--port", "0", "--coordinator", url, *replica], tmp_path / "proxy.log",
                          ignore_sigint)
        try:
            body = json.dumps({"session": "s1", "harness": "claude_code"}).encode()
            request = urllib.request.Request(url + "/v1/sessions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.load(response) == {"status": "ok"}
        finally:
            proxy_code = _stopped(proxy, signum)
    finally:
        coordinator_code = _stopped(coordinator, signum)
    logs = (tmp_path / "coordinator.log").read_text()
    assert (coordinator_code, proxy_code) == (0, 0), logs
    assert f"{signum.name} received: shutting down" in logs
    # the store was closed, not dropped: SQLite folds its write-ahead log back in as its last connection ends
    assert db.exists() and not db.with_name("history.db-wal").exists()
