"""What the proxy reads from the traffic for the coordinator: tool spans (proxy.tool_spans) and the
identity of sessions that name themselves nowhere (proxy.conversation).

Fails open: every entry point catches what goes wrong in it, logs it once per kind and carries on, so a
malformed body, an unexpected event or a bug here costs the request nothing but its telemetry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from tao_harness.log_summary import SummarizedWarning
from tao_harness.proxy.conversation import Asked, Conversations, conversation_messages
from tao_harness.proxy.coordinator_client import CoordinatorClient
from tao_harness.proxy.identity import SessionIdentity
from tao_harness.proxy.tool_results import read_results
from tao_harness.proxy.tool_spans import ToolSpans
from tao_harness.proxy.turns import TurnReader
from tao_harness.proxy.usage import ApiKind

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Reading:
    """One upstream attempt's response being read."""

    session: str
    request_id: str
    harness: str | None
    # The request, when its session was told by its conversation, else None.
    conversation: Asked | None
    reader: TurnReader
    # Its turn was reported (`Telemetry.response` reports it once).
    reported: bool = False


class Telemetry:
    def __init__(self, coordinator: CoordinatorClient) -> None:
        self._coordinator = coordinator
        self._spans = ToolSpans()
        self._conversations = Conversations()
        # One line a minute at most: a client that sends odd bodies would send them every request. (The
        # summary's "largest value" has no meaning here: `%.0s` prints nothing of it.)
        self._failed = SummarizedWarning(log, "tool telemetry skipped %d request(s) it could not read "
                                              "(the debug log says why)%.0s")

    def _skip(self, exc: Exception) -> None:
        log.debug("tool telemetry skipped a request", exc_info=exc)
        self._failed.occurred(0.0)

    def identify(self, identity: SessionIdentity, body: Any, api: ApiKind) -> tuple[SessionIdentity, Asked | None]:
        """`identity`, or, where no rule named the session, its session by conversation and the request in
        its conversation (to pass to `reading` and `end`)."""
        if identity.source != "connection":
            return identity, None
        try:
            messages = conversation_messages(body, api)
            if messages is None:
                return identity, None
            asked, new = self._conversations.begin(messages)
        except Exception as exc:  # noqa: BLE001 - fail open: the connection's session then
            self._skip(exc)
            return identity, None
        if new:
            log.info("session %s identified by its conversation (no header or body field names it)",
                     asked.session)
        return replace(identity, session=asked.session, source="conversation"), asked

    def end(self, asked: Asked) -> None:
        """The request `identify` found in a conversation is over (answered or not)."""
        self._conversations.end(asked)

    def request(self, session: str, body: Any, api: ApiKind, at: float) -> None:
        """A request of `session` arrived at `at`: the calls whose results it carries have ended."""
        if not self._spans.has_open(session):
            return  # most requests: nothing to end, and the body is not read
        try:
            ends = self._spans.ended(session, read_results(body, api), at)
        except Exception as exc:  # noqa: BLE001 - fail open
            self._skip(exc)
            return
        if ends:
            self._coordinator.events(session, ends)

    def reading(self, session: str, request_id: str, harness: str | None, conversation: Asked | None,
                api: ApiKind) -> Reading:
        return Reading(session, request_id, harness, conversation, TurnReader(api))

    def response(self, reading: Reading, at: float) -> None:
        """The response is whole at `at`: its tool calls have started (reported once per reading)."""
        if reading.reported:
            return
        reading.reported = True
        try:
            turn = reading.reader.turn()
            if turn is None:
                raise ValueError("the response could not be read")
            if reading.conversation is not None:
                self._conversations.answered(reading.conversation, turn)
            starts = self._spans.started(reading.session, reading.request_id, turn, at, reading.harness)
        except Exception as exc:  # noqa: BLE001 - fail open
            self._skip(exc)
            return
        if starts:
            self._coordinator.events(reading.session, starts)
