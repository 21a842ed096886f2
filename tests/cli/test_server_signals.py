"""`tao coordinator` and `tao proxy` stop cleanly on SIGTERM (what process managers send) and on SIGINT, even
when started in the background by a shell, which hands them SIGINT ignored."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest

from tao_processes import start, stop


def _as_from_a_background_shell() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("signum", "ignore_sigint"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigterm", "sigint-while-ignored"])
def test_servers_stop_cleanly_on_a_stop_signal(tmp_path: Path, signum: signal.Signals,
                                               ignore_sigint: bool) -> None:
    db = tmp_path / "history.db"
    replica = ("--replica", "r0=http://127.0.0.1:9")  # never asked: no session here needs a replica
    preexec = _as_from_a_background_shell if ignore_sigint else None
    coordinator, url = start(["coordinator", "--port", "0", "--db", f"sqlite:///{db}", *replica],
                             tmp_path / "coordinator.log", preexec)
    try:
        proxy, _ = start(["proxy", "--port", "0", "--coordinator", url, *replica], tmp_path / "proxy.log",
                         preexec)
        try:
            body = json.dumps({"session": "s1", "harness": "claude_code"}).encode()
            request = urllib.request.Request(url + "/v1/sessions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.load(response) == {"status": "ok"}
        finally:
            proxy_code = stop(proxy, signum)
    finally:
        coordinator_code = stop(coordinator, signum)
    logs = (tmp_path / "coordinator.log").read_text()
    assert (coordinator_code, proxy_code) == (0, 0), logs
    assert f"{signum.name} received: shutting down" in logs
    # the store was closed, not dropped: SQLite folds its write-ahead log back in as its last connection ends
    assert db.exists() and not db.with_name("history.db-wal").exists()
