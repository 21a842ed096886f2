"""Who forwards each in-flight request, so no reservation outlives the proxy that would report it.

A request the coordinator admitted (or was told about on a lease) holds its session's reservation
until the proxy reports it done. A proxy that dies (SIGKILL, host gone) never reports, so every request
is owned: by the proxy that sent it (its `proxy` instance id), or by nobody (a client of `/v1/admit`
that gives no id). A proxy is alive while one of its channels is open, or while it was heard from over
HTTP within `grace_s`; once it has been neither for `grace_s` (longer than a channel takes to reconnect),
its requests are lost and the coordinator ends them. An unowned request is lost `unowned_ttl_s` after
it was admitted. Times are wall (monotonic) seconds: liveness is about processes, not emulated time.

Event-loop only. Every operation is O(1) but `gone`, which is O(proxies) plus the requests it returns.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class _Proxy:
    channels: int = 0
    # Monotonic time the proxy was last known alive (a channel closed, an HTTP call).
    heard: float = 0.0
    # session -> id of the session's in-flight main request this proxy forwards.
    requests: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LostRequest:
    session: str
    request_id: str
    # The proxy that forwarded it, or None (an unowned HTTP admission that ran out).
    proxy: str | None


class OwnerBook:
    def __init__(self, grace_s: float, unowned_ttl_s: float) -> None:
        self.grace_s = grace_s
        self.unowned_ttl_s = unowned_ttl_s
        self._proxies: dict[str, _Proxy] = {}
        # session -> (request id, deadline), oldest first: deadlines grow with insertion order.
        self._unowned: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def opened(self, proxy: str, now: float) -> None:
        entry = self._proxies.setdefault(proxy, _Proxy())
        entry.channels += 1
        entry.heard = now

    def closed(self, proxy: str, now: float) -> None:
        entry = self._proxies.get(proxy)
        if entry is not None:
            entry.channels = max(0, entry.channels - 1)
            entry.heard = now

    def heard(self, proxy: str, now: float) -> None:
        self._proxies.setdefault(proxy, _Proxy()).heard = now

    def own(self, proxy: str | None, session: str, request_id: str, now: float) -> None:
        """`request_id` is now `session`'s in-flight main request, forwarded by `proxy` (the caller
        disowns the session's previous main request first)."""
        if proxy is None:
            self._unowned[session] = (request_id, now + self.unowned_ttl_s)
        else:
            self._proxies.setdefault(proxy, _Proxy(heard=now)).requests[session] = request_id

    def disown(self, proxy: str | None, session: str) -> None:
        """The session's main request ended (reported, withdrawn, or the session ended)."""
        if proxy is None:
            self._unowned.pop(session, None)
        elif (entry := self._proxies.get(proxy)) is not None:
            entry.requests.pop(session, None)

    def gone(self, now: float) -> list[LostRequest]:
        """Requests whose owner is gone, or unowned past their deadline; forgets them and the proxies."""
        lost = []
        for proxy, entry in list(self._proxies.items()):
            if entry.channels == 0 and now - entry.heard > self.grace_s:
                lost += [LostRequest(session, request_id, proxy) for session, request_id in entry.requests.items()]
                del self._proxies[proxy]
        while self._unowned:
            session, (request_id, deadline) = next(iter(self._unowned.items()))
            if deadline > now:
                break
            del self._unowned[session]
            lost.append(LostRequest(session, request_id, None))
        return lost
