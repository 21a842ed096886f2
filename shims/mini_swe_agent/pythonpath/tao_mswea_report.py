"""Stdlib-only helpers of the mini-SWE-agent launcher: a non-blocking relay poster and a post-import hook."""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import queue
import sys
import threading
import time
import urllib.request
from types import ModuleType
from typing import Any, Callable

POST_TIMEOUT_S = 2.0
EXIT_FLUSH_S = 3.0


class Reporter:
    """Posts JSON to the relay from one daemon thread, in order; `post` never blocks the caller."""

    def __init__(self, relay_url: str) -> None:
        self._base = relay_url.rstrip("/")
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        threading.Thread(target=self._work, name="tao-reporter", daemon=True).start()
        atexit.register(self.flush, EXIT_FLUSH_S)

    def post(self, path: str, body: dict[str, Any]) -> None:
        self._queue.put((path, body))

    def event(self, body: dict[str, Any]) -> None:
        self.post("/v1/events", body)

    def _work(self) -> None:
        while True:
            path, body = self._queue.get()
            request = urllib.request.Request(self._base + path, data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"}, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as response:
                    response.read()
            except Exception:  # noqa: BLE001 - telemetry must never disturb the agent
                pass
            finally:
                self._queue.task_done()

    def flush(self, timeout_s: float) -> bool:
        """Wait (bounded) until everything posted so far was sent; True if it was."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # one-shot: find the real spec without us
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, patch = spec.loader, self.patch
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def after_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Call `patch(module)` once module `name` has been imported (now, if it already is)."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))
