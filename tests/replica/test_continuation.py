"""vLLM's `continue_final_message`: the replica continues a final assistant message, not a new answer."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest

from tao_harness.replica import tokenizer

from .conftest import StartReplica
from .test_openai_api import BASH_TOOL, SYSTEM, _client

MESSAGES: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the bug."}]
CONTINUE = {"continue_final_message": True, "add_generation_prompt": False}


async def test_a_continued_answer_is_the_rest_of_the_whole_answer(start_replica: StartReplica) -> None:
    client = _client((await start_replica("swe-short")).url)
    whole = await client.chat.completions.create(model="m", messages=MESSAGES, tools=[BASH_TOOL],
                                                 max_tokens=500)
    text = whole.choices[0].message.content or ""
    prefix = "".join(tokenizer.pieces(text)[:20])
    rest = await client.chat.completions.create(
        model="m", messages=[*MESSAGES, {"role": "assistant", "content": prefix}], tools=[BASH_TOOL],
        max_tokens=480, extra_body=CONTINUE)
    assert whole.usage is not None and rest.usage is not None
    assert prefix and prefix + (rest.choices[0].message.content or "") == text
    calls = [(c.function.name, json.loads(c.function.arguments))
             for c in rest.choices[0].message.tool_calls or ()]
    assert calls == [("bash", {"command": "ls"})] and rest.choices[0].finish_reason == "tool_calls"
    # The prefill is prompt now: the same tokens, counted on the other side.
    assert rest.usage.prompt_tokens == whole.usage.prompt_tokens + 20
    assert rest.usage.completion_tokens == whole.usage.completion_tokens - 20


async def test_ignore_eos_pads_the_whole_answer_to_the_prefill_plus_max_tokens(
        start_replica: StartReplica) -> None:
    client = _client((await start_replica()).url)
    extra = {"ignore_eos": True}
    whole = await client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=40,
                                                 extra_body=extra)
    text = whole.choices[0].message.content or ""
    prefix = "".join(tokenizer.pieces(text)[:15])
    rest = await client.chat.completions.create(
        model="m", messages=[*MESSAGES, {"role": "assistant", "content": prefix}], max_tokens=25,
        extra_body=extra | CONTINUE)
    assert prefix + (rest.choices[0].message.content or "") == text
    assert rest.usage is not None and rest.usage.completion_tokens == 25


@pytest.mark.parametrize("extra, final", [
    ({"continue_final_message": True}, "assistant"),  # add_generation_prompt defaults to true, as in vLLM
    (CONTINUE, "user"),
])
async def test_impossible_template_flags_are_a_400(start_replica: StartReplica, extra: dict[str, bool],
                                                   final: str) -> None:
    client = _client((await start_replica()).url)
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(
            model="m", messages=[*MESSAGES, {"role": final, "content": "So"}], extra_body=extra)
    expected = "Cannot set both" if final == "assistant" else "final assistant message"
    assert expected in str(raised.value)


async def test_tokenize_counts_like_the_generation(start_replica: StartReplica) -> None:
    replica = await start_replica()
    text = "Let me think about what the next step should be."
    async with aiohttp.ClientSession() as http:
        for special, extra in ((False, 0), (True, 1)):
            body = {"model": "m", "prompt": text, "add_special_tokens": special}
            async with http.post(f"{replica.url}/tokenize", json=body) as response:
                answer = await response.json()
            assert answer["count"] == tokenizer.count(text) + extra == len(answer["tokens"])
            assert answer["max_model_len"] > 0
