"""The proxy's copy of the coordinator's admission leases (see `tao_harness.coordinator.leases`).

Filled by the coordinator channel (`tao_harness.proxy.channel`) and only trusted while that channel is
open: a lost channel clears it, so a proxy cut off from the coordinator never sends requests on leases
it can no longer see revoked (it falls back to admissions, and those fail open).
"""

from __future__ import annotations

from typing import Any

from tao_harness.proxy.messages import Admission


class LeaseTable:
    def __init__(self) -> None:
        self.instance: str | None = None
        self.seq = -1
        self._leases: dict[str, Admission] = {}

    def get(self, session: str) -> Admission | None:
        return self._leases.get(session)

    def drop(self, session: str) -> None:
        """Forget a lease the proxy knows is void (its request failed) before the coordinator says so."""
        self._leases.pop(session, None)

    def clear(self) -> None:
        self.instance, self.seq = None, -1
        self._leases.clear()

    def __len__(self) -> int:
        return len(self._leases)

    def apply(self, update: dict[str, Any]) -> None:
        """Fold one lease update in; a malformed one raises ValueError (the caller clears the table)."""
        try:
            instance, seq, reset = str(update["instance"]), int(update["seq"]), bool(update["reset"])
            changes = [(str(item["session"]), _admission(item)) for item in update["leases"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed lease update: {exc!r}") from None
        if reset or instance != self.instance:
            self._leases.clear()
        for session, admission in changes:
            if admission is None:
                self._leases.pop(session, None)
            else:
                self._leases[session] = admission
        self.instance, self.seq = instance, seq


def _admission(lease: dict[str, Any]) -> Admission | None:
    """Where a lease sends its session's requests; None for a revoked lease."""
    if lease.get("replica") is None:
        return None
    return Admission(str(lease["replica"]), str(lease["base_url"]),
                     {str(k): str(v) for k, v in (lease.get("headers") or {}).items()})
