from typing import Any

import pytest

from tao_harness.proxy.shared_prefix import shared_prefix

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _openai(system: Any, user: str = "fix the bug", model: str = "qwen", **extra: Any) -> dict[str, Any]:
    messages = ([] if system is None else [{"role": "system", "content": system}])
    return {"model": model, "messages": [*messages, {"role": "user", "content": user}], **extra}


def test_one_system_prompt_and_tools_is_one_group_whatever_the_conversation_says_after_them() -> None:
    first = shared_prefix(_openai("be careful", tools=TOOLS), "openai")
    later = shared_prefix({**_openai("be careful", "another task", tools=TOOLS),
                           "temperature": 0.2}, "openai")
    assert first is not None and first == later
    assert first.size >= len("be careful") + len("bash")


@pytest.mark.parametrize("other", [
    _openai("be careful!", tools=TOOLS),  # another system prompt
    _openai("be careful"),  # no tools
    _openai("be careful", tools=TOOLS, model="llama"),  # another model: another cache
])
def test_what_the_engine_would_not_share_is_another_group(other: dict[str, Any]) -> None:
    assert shared_prefix(other, "openai") != shared_prefix(_openai("be careful", tools=TOOLS), "openai")


def test_every_leading_instruction_counts_and_only_those() -> None:
    body = {"model": "m", "messages": [{"role": "system", "content": "a"}, {"role": "developer", "content": "b"},
                                       {"role": "user", "content": "c"}, {"role": "system", "content": "d"}]}
    changed_late = {**body, "messages": [*body["messages"][:3], {"role": "system", "content": "e"}]}
    changed_early = {**body, "messages": [body["messages"][0], {"role": "developer", "content": "x"},
                                          *body["messages"][2:]]}
    assert shared_prefix(body, "openai") == shared_prefix(changed_late, "openai")
    assert shared_prefix(body, "openai") != shared_prefix(changed_early, "openai")


def test_anthropic_system_as_text_or_blocks() -> None:
    text = {"model": "claude", "system": "be careful", "messages": [{"role": "user", "content": "hi"}]}
    blocks = {**text, "system": [{"type": "text", "text": "be careful", "cache_control": {"type": "ephemeral"}}]}
    assert shared_prefix(text, "anthropic") is not None and shared_prefix(blocks, "anthropic") is not None
    assert shared_prefix(text, "anthropic") != shared_prefix(blocks, "anthropic")


@pytest.mark.parametrize("body", [None, [], "text", _openai(None), _openai(""), {"messages": "not a list"},
                                  {"model": "m", "system": "", "messages": []}])
def test_no_instructions_and_no_tools_is_no_group(body: Any) -> None:
    assert shared_prefix(body, "anthropic" if isinstance(body, dict) and "system" in body else "openai") is None
