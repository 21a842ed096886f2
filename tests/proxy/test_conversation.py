"""Sessions told apart by their conversation (proxy.conversation)."""

from __future__ import annotations

from typing import Any

from tao_harness.proxy.conversation import Conversations, conversation_messages
from tao_harness.proxy.turns import ToolCall, Turn

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TASK = {"role": "user", "content": "Fix the failing test."}


def _reply(call_id: str) -> Turn:
    return Turn("I will run the tests.", (ToolCall(call_id, "bash", {"command": "pytest"}),))


def _sent_back(call_id: str) -> list[dict[str, Any]]:
    """The reply as a client sends it back, in its own form, and the tool's result."""
    return [{"role": "assistant", "content": " I will run the tests.\n", "reasoning_content": "hmm",
             "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "1 failed"}]


def _turn(book: Conversations, messages: list[dict[str, Any]], reply: Turn) -> str:
    asked, _ = book.begin(messages)
    book.answered(asked, reply)
    return asked.session


def test_interleaved_conversations_with_identical_starts_stay_apart() -> None:
    book = Conversations()
    first = [book.begin([SYSTEM, TASK]) for _ in range(3)]  # three threads send the same first request at once
    sessions = [asked.session for asked, _ in first]
    assert len(set(sessions)) == 3 and all(new for _, new in first)
    for (asked, _), call in zip(first, ("call_a", "call_b", "call_c")):
        book.answered(asked, _reply(call))
        book.end(asked)  # after the answer: nothing more
    histories = {call: [SYSTEM, TASK, *_sent_back(call)] for call in ("call_a", "call_b", "call_c")}
    for round_ in range(3):  # their later requests arrive in any order, over any connection
        for call, session in sorted(zip(("call_a", "call_b", "call_c"), sessions), reverse=round_ % 2 == 1):
            following = f"{call}-{round_}"
            assert _turn(book, histories[call], _reply(following)) == session
            histories[call] = [*histories[call], *_sent_back(following)]


def test_a_reply_sent_back_in_another_form_still_continues_its_session_by_the_request_key() -> None:
    book = Conversations()
    session = _turn(book, [TASK], _reply("call_1"))
    rewritten = [TASK, {"role": "assistant", "content": "(summary of what I did)"}, {"role": "user", "content": "go on"}]
    again, new = book.begin(rewritten)
    assert (again.session, new) == (session, False)


def test_a_retry_stays_in_its_session_and_cache_markers_do_not_matter() -> None:
    book = Conversations()
    marked = {"role": "user", "content": [{"type": "text", "text": "Fix it.", "cache_control": {"type": "ephemeral"}}]}
    asked, _ = book.begin([marked])
    book.end(asked)  # the client gave up on it (an error) and sends it again
    retry, new = book.begin([{"role": "user", "content": [{"type": "text", "text": "Fix it."}]}])
    assert (retry.session, new) == (asked.session, False)


def test_keys_past_the_limit_are_forgotten_oldest_first() -> None:
    book = Conversations(max_keys=2)
    old = _turn(book, [{"role": "user", "content": "one"}], _reply("a"))
    _turn(book, [{"role": "user", "content": "two"}], _reply("b"))
    assert book.begin([{"role": "user", "content": "one"}, *_sent_back("a")])[0].session != old


def test_responses_items_of_one_reply_are_one_message() -> None:
    """A Responses reply's items (message, calls; reasoning left out) are the one message its turn is: two
    sessions with the same first request are told apart by their replies' items."""
    book = Conversations()
    first = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    sessions = []
    asked = [book.begin(conversation_messages({"input": first}, "responses"))[0]  # type: ignore[arg-type]
             for _ in range(2)]  # at once: two sessions
    sessions = [a.session for a in asked]
    for one, call_id in zip(asked, ("call_1", "call_2")):
        book.answered(one, Turn("Running.", (ToolCall(call_id, "exec_command", {}),)))
    assert book.begin(conversation_messages({"input": "else"}, "responses"))[0].session not in sessions  # type: ignore[arg-type]
    following = {"input": [*first, {"type": "reasoning", "encrypted_content": "x"},
                           {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]},
                           {"type": "function_call", "call_id": "call_2", "name": "exec_command", "arguments": "{}"},
                           {"type": "function_call_output", "call_id": "call_2", "output": "done"}]}
    again, new = book.begin(conversation_messages(following, "responses"))  # type: ignore[arg-type]
    assert (again.session, new) == (sessions[1], False)  # by its reply (the request key names both sessions)


def test_a_request_that_comes_before_the_last_one_ended_still_continues_its_session() -> None:
    """A fast client sends its next request the moment it has the reply's last bytes, before the proxy has
    ended the request that carried them: the answered session is no longer in flight."""
    book = Conversations()
    asked, _ = book.begin([TASK])
    book.answered(asked, _reply("call_1"))
    following, new = book.begin([TASK, *_sent_back("call_1")])
    book.end(asked)  # the first request's handler finishes only now
    assert (following.session, new) == (asked.session, False)
