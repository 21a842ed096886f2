"""fastjson reads every body exactly as the standard library does, including what orjson refuses."""

from __future__ import annotations

import json

import pytest

from tao_harness import fastjson


@pytest.mark.parametrize("text", [
    '{"model": "m", "messages": [{"role": "user", "content": "héllo \\u2603"}], "stream": true}',
    '{"n": NaN, "inf": Infinity}',  # Python's json accepts these; orjson does not
    '{"big": 123456789012345678901234567890}',  # beyond 64 bits
    '[1.5, -0, 1e308, null, false]',
])
def test_loads_agrees_with_the_standard_library(text: str) -> None:
    expected = json.loads(text)
    for form in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        assert repr(fastjson.loads(form)) == repr(expected)


def test_loads_fails_where_the_standard_library_fails() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b'{"unterminated": ')
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(RecursionError):
        fastjson.loads(deep)


def test_dumps_is_compact_json_text() -> None:
    message = {"seq": 3, "type": "done", "body": {"session": "s\u00e9", "ttft_s": 0.25, "usage": None}}
    text = fastjson.dumps(message)
    assert isinstance(text, str) and " " not in text
    assert json.loads(text) == message
