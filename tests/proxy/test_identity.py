from __future__ import annotations

import pytest

from tao_harness.proxy.identity import identify_session, split_session_path


@pytest.mark.parametrize(
    ("headers", "path", "body", "expected"),
    [
        ({"X-TAO-Session": "t1", "X-Claude-Code-Session-Id": "cc"}, "/s/p1/v1/messages", {}, ("t1", "tao-header", "/v1/messages")),
        ({"X-Claude-Code-Session-Id": "cc"}, "/s/p1/v1/messages", {}, ("p1", "path", "/v1/messages")),
        ({"X-Claude-Code-Session-Id": "cc", "X-Session-ID": "x"}, "/v1/messages", {}, ("cc", "claude-code", "/v1/messages")),
        ({"X-Session-ID": "x", "x-session-affinity": "y"}, "/v1/chat/completions", {}, ("x", "session-header", "/v1/chat/completions")),
        ({"x-session-affinity": "y"}, "/v1/chat/completions", {}, ("y", "session-header", "/v1/chat/completions")),
        ({}, "/v1/chat/completions", {"metadata": {"session_id": "m"}, "user": "u"}, ("m", "body", "/v1/chat/completions")),
        ({}, "/v1/chat/completions", {"program_id": "prog", "user": "u"}, ("prog", "body", "/v1/chat/completions")),
        ({}, "/v1/chat/completions", {"user": "u"}, ("u", "body", "/v1/chat/completions")),
        ({}, "/v1/messages", {"metadata": {"user_id": "anthropic-user"}}, ("anthropic-user", "body", "/v1/messages")),
        ({}, "/v1/messages", {"user": 7, "metadata": "x"}, ("conn-c9", "connection", "/v1/messages")),
        ({"X-TAO-Session": "  "}, "/v1/models", None, ("conn-c9", "connection", "/v1/models")),
    ],
)
def test_first_match_wins(headers, path, body, expected) -> None:
    identity = identify_session(headers, path, body, "c9")
    assert (identity.session, identity.source, identity.path) == expected


def test_split_session_path_needs_a_rest() -> None:
    assert split_session_path("/s/abc/v1/x") == ("abc", "/v1/x")
    assert split_session_path("/s/abc") == (None, "/s/abc")
    assert split_session_path("/s//v1") == (None, "/s//v1")
    assert split_session_path("/v1/s/a/b") == (None, "/v1/s/a/b")
